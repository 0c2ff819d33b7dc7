BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL enable_sort = off;
SET LOCAL jit = off;
WITH ready AS (
    SELECT r.pk, r.priority, r.available_at AS due FROM __S__.runs r
    WHERE r.state = 'ready' AND r.key_name IS NULL AND r.available_at <= now()
      AND r.priority = 0 AND (r.available_at, r.pk) > (:due::timestamptz, :cur::bigint)
      AND r.queue <> ALL (ARRAY(SELECT p.queue FROM __S__.errand_paused_queues p))
    ORDER BY r.priority DESC, r.available_at, r.pk
    LIMIT 100 FOR UPDATE OF r SKIP LOCKED),
picked AS (
    SELECT x.pk, x.n, ('{4fe80ae6-2ebf-4e19-9d63-4b34c2534e9f,0e07acbd-c158-47bf-a0e0-bd14fdce97c4,d991f7e4-f1c5-4037-8bce-2ebb1c0eb008,53001a22-31ed-46eb-aeeb-d9975a269698,946c0a59-2c0a-45e2-9397-a883a8983945,e666aa63-a830-40fe-a449-e856a8a03c55,07173b4e-984d-4917-aeb9-8b333e94a45a,7f739128-1bbc-4991-b8ad-fb0c735a2773,14a78f05-c240-440d-b1e9-f20026725dc8,916ccaf2-dad0-49e7-ace8-8e640d64d5d8,040ebeaa-f619-46d9-8f37-9aa8ca031a0a,cb5fe887-5636-4eff-99e3-1a8d1fe677d1,c4497782-8561-45be-93ea-fd9402dd1cce,6326760f-45f0-41af-b30a-46cf4b14dbcc,872a78c4-2395-4d6b-802e-254293ac81d5,34b24348-588c-40a3-846c-3b1edd10e55a,6b2d8fde-3c06-4512-ae7a-ca1f0fb1e372,a5e08fdc-1254-4d97-965a-fa1fc06ffe74,25c02ac1-1130-4dcc-8a89-00b3d6f56fc2,b75dd1be-1b2e-4aa2-a9a0-fa2289abdbc1,a2ca6af6-7799-414a-ae04-95e2ee744c53,342386fe-9c47-4add-adb7-de68531503d6,ef25634b-c7d7-4719-839d-db9811fb2cb9,89d5a987-0ec6-4255-a82c-e7baca97ce07,93fdff68-55f5-4893-93f4-67a52de13d00,683052f5-3eed-4fb3-ae54-01236d029041,7576b8c8-1ea6-4328-8667-a2d676d86b10,0e5e61ae-dfa3-425e-9544-6882bb0a03bf,e3cc1dbe-3b36-4b3a-a2c4-3940b6fd2e2a,2d0759c2-d7ca-4640-b04f-aca5846f5516,06aa5370-b738-47ec-8ef2-429344ba2a7e,a5d9c9d2-fbb7-4aff-bbea-4a71cbe1ee84,bc3fdc26-e5a7-4a9b-87b2-0cf0aea04e90,ba06067b-8925-4054-ab52-6b555122e72c,8c1b6b25-1e2d-41b2-9905-3bf8dd60f0c3,1767dbd9-e322-43c9-9db0-c587302fd2ee,403dd1bd-f10e-426e-9e09-99909f9b1d7c,be3ffecf-10ef-42d4-ab57-fbb068bb9353,129b587c-5e49-45a4-af80-ff82efac7684,29f8d812-ae8a-4127-aa80-784c4dd56239,054eec94-d212-4525-b368-908858c7a998,b83cc34f-84e5-4271-8274-46df94bd77b4,ca04bafb-f6d9-47f9-98a6-f669cd73a326,965e2f10-9f12-40db-a3d1-8d52220c4e50,2c62efab-4e94-4f06-b7b1-10edd0236a15,b071883b-31a9-414a-b588-488ea83eadff,b35571cd-6b32-481a-b3ce-98e5e9870658,d751907d-139c-4923-a8be-e717a7b55b98,9d6216ef-1d0a-4190-b9fc-0ec1bd944014,1e2cfb1c-6156-4242-8f77-3501ef18741d,786ec657-d32e-49e2-a814-9f3ea10d93d1,f39316f8-b70e-4d9c-8516-a7605472ffaf,9f906e81-497f-449f-b281-28783c27bb7d,ce672737-9e64-4cf4-a5a0-966f3cda567a,308dbbc8-70a9-4a45-a1c4-e86a93119a91,5470b679-cd27-4af1-929e-c2e757e9a7d0,18aa9093-7c1a-4ece-b573-51686458d9ec,dfb80241-9c6c-4624-ac7f-a63e9ae43b8e,1d75bb6f-aaf8-4de5-8734-619e6660b6d8,161a6749-5b3e-44e8-93b2-d16c0cd3dccd,c60d5bf4-908b-47a4-ac5f-14ad95c2527a,17b4fd5c-f071-42c9-a234-76c28d1ba38d,ac6f08da-51ef-4b8c-acc5-f12145d63891,58f3ed0d-cdf9-4738-a2d6-0384abda3dc6,1bc94503-c64b-44ab-bc39-a87b4fdb5760,4b534453-5058-4551-94cc-fff652899345,e43018fc-e1f3-45ff-815e-942e2e85a4d3,83f5ecdf-ca1d-48c2-8c52-2b98656c7a78,b63f0961-88ad-4926-8515-afd9dff4e532,0f226bb7-ac3b-4222-bbc9-80b5c6de552c,1466c890-69eb-45bf-a0ac-98a6119deb5a,3035fbd5-b55d-4770-8afb-7e22ee6637bd,a921b6d9-c7d8-46cd-9971-20c05ec8fce0,d3ac4462-ce50-454a-b1c0-dc172b017a58,9e5d365d-97ce-44e3-b4a7-5470d49a0662,a003f499-e9b5-4b65-ab1f-23f318a890ab,e26baa6e-5bd2-4e95-8a7e-78a0de6bb2cf,6454542a-0724-4776-ac8f-aafff0f2e7c6,82162bb0-1bd6-44d2-8ab7-f701e225d210,d292d152-28be-4cdf-a339-02328f69c4a9,8642c8c9-fb73-4fad-bc84-8c7256c0c8ae,c4d23af0-37a0-4f76-9cdd-4a4c19d87bba,e000eb6f-92e5-40fc-8ea3-9e6371ab7724,88b026c5-5b86-4742-bd3b-ae8f4861c3c1,c061b77a-52e4-4406-a814-e5eb265674d0,965e8b03-a950-47ce-bf9b-2820038d6259,317be719-f4f0-4810-9097-f17edc4e0a61,ae664208-9d59-4834-a4e8-7e985edbb32d,79c4a329-41b4-4b44-b519-af6ca8097b0f,44bf6eb6-8a84-4294-bc4a-a5573f27b735,ca75a66e-a752-4df2-8801-a19867b8ca14,86286359-3cb0-4526-a74b-42b8fa073373,5feb37f5-3f1f-47c8-b8c9-ce977de77de9,4539281f-ec76-4403-9f7f-651b10967441,47e3dd98-905d-4386-a9d9-09605636a187,1add92b9-4aeb-422f-a91c-ba4770af632f,8bef61af-0856-4012-b432-705eeeb5a3ea,b4eb6ff3-ae87-49c7-b47b-23c4357ee8d0,6fbeaa59-4310-4ac3-8cda-7319067bd980,ecec24c3-8687-4539-951c-3d7054c8c6c0}'::uuid[])[x.n] AS token
    FROM (SELECT pk, row_number() OVER (ORDER BY priority DESC, due, pk) AS n FROM ready) x),
claimed AS (
    UPDATE __S__.runs r
    SET state = 'running', attempts = r.attempts + 1, lease_token = p.token,
        lease_until = now() + interval '30 seconds', attempt_started_at = now(), updated_at = now()
    FROM picked p
    WHERE r.pk = p.pk AND r.attempts < r.max_attempts AND r.state = 'ready' AND r.available_at <= now()
    RETURNING r.*, p.n),
full_rows AS (SELECT c.*, j.id, j.kind, j.payload FROM claimed c JOIN __S__.jobs j ON j.pk = c.pk)
SELECT coalesce(array_agg(pk ORDER BY n), '{}') AS pks, coalesce(array_agg(lease_token ORDER BY n), '{}') AS toks,
       coalesce(sum(length(payload::text) + length(kind) + length(queue)), 0) AS bytes,
       coalesce(max(available_at), :due::timestamptz) AS due, coalesce(max(pk), :cur::bigint) AS cur FROM full_rows \gset
COMMIT;
UPDATE __S__.runs r
SET state = 'done', lease_token = NULL, lease_until = NULL, last_error = NULL, last_error_class = NULL,
    finished_at = now(), updated_at = now()
FROM unnest(:pks::bigint[], :toks::uuid[]) AS i (pk, token)
WHERE r.pk = i.pk AND r.lease_token = i.token AND r.lease_until > now() AND NOT r.has_dependents;
