BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SET LOCAL enable_sort = off;
SET LOCAL jit = off;
WITH ready AS (
    SELECT d.seq, d.priority, d.available_at AS due FROM __S__.due d
    WHERE d.lease_until IS NULL AND d.available_at <= now()
      AND d.priority = 0 AND (d.available_at, d.seq) > (:due::timestamptz, :cur::bigint)
      AND d.queue <> ALL (ARRAY(SELECT p.queue FROM __S__.errand_paused_queues p))
    ORDER BY d.priority DESC, d.available_at, d.seq
    LIMIT 100 FOR UPDATE OF d SKIP LOCKED),
leased AS (
    UPDATE __S__.due d SET lease_until = now() + interval '30 seconds'
    FROM ready r WHERE d.seq = r.seq RETURNING d.seq, r.priority, r.due),
picked AS (
    SELECT r.seq, r.n, ('{2ed18a6db27e4beab05fec325b1481a0,5725744a60144efaaef1588d098c267b,411e82019130471d9e0c8178f181ccc7,304307db20e042fcb9b01a5fc79b08ea,b5c3220d688448da8faf4d1fe2e0a7e0,8f83d114d8724b8dac715b63389151e1,6a6ae8c77d3a4089955efc86a347d8c0,1ba88d2e5c7b4ffab2bc458b0d1684d1,34676d66f3734289a33e7718f298a315,764e409e31fe44de83d8de7b887fb58c,0f676c0b432648afaf99b11076e44b89,f38169b34f4c4f88b089a3a90f5a084a,a4478790a09649ee9d9a9ee03b45e67e,4eca5db3f4e84d8195ca6b3e2042c1a8,a9553d697ed343d09a7f825e5ca1069f,2b9a257814ab473786997964416738b7,4bcd07ab84f34af39be8e402c2b073d0,d8cc0c3a50434c3f9c0580f4418b5109,573805bb446a44639c8bb7b7e1b8af1d,7d4be0709f884d2a8e1600e74a619143,1a9838be52ce46f8b850769521c933e9,40f70af6c52c4b8c8489ef74a3e3d341,ea51eb079d384c178c8bf7919ce248c6,7441b0bc5e1d4bc385fe77f1eee425d2,dcc7cac14e8f4f4ca8e6da3b06a351ea,dea1521d4bbd4730ba67dbfa724e225c,36fa8d04dc734355831d218e156fff6f,01f6c80f57804cdda3db0c959af7c28f,f6cc48aa12d04157bd765471cc753cab,02714b629bf547f398d968eef12cc83f,c491c11de4dc4b69a158b368fc4db64c,4e732683ced64454adb35c1247df7038,19b10f841e2342d58b76704d1f46bb8d,b23dfb6ceb5148bea792a18fd52e1f05,1bb0da396f664db1838c5294eb5395cc,51b3b06465834d40bcf1c213a5664efd,2b3bbfbac04d426eac9737c71fb16683,e2f023e0777a48cf938302987a15715d,59567837e8a54c579a0a15b5b2561411,7420c8a217ed42e7bd97bc7323aadf9a,43bf588f8575456ab0be003d7e1c92af,e1b2308483204908b889ef474381ca0e,e2f504cb6f024175801c66aa5af837c4,272c1481c62849cb9010d17e6094e950,efcc87f2a589477daaa249bbc78616e9,d150c86a38144dc1bae56ad849637252,cb0de2d9eeb3462998e5515d17ad5d3c,6657657436e241d1b7edfc9604e1e409,0d1366ea97554bedb1948ffaac449ee0,7375637f21a54056aa0b11fbdac17954,571b9c549bec4171add9db0a258a3f81,dc7d99d5b891499ebb1eb1f3222a5e36,944c7828202843bda8fc579f85b375ad,c8e2ce7fcfb741ad8a714e7464adcf61,0a646709f391417d9990d691d0a8ebd1,5d0cf5c64e39457d89a307532d37f562,6fccb68ba2df47df9927c55d30cad253,7de0ffd776e94169b4be896ec5ca0c20,a1f33af7d126421184fd3249c87b8c59,a37d0e09feee4277bb5cf189b501b15c,66e2191280e8412c9c9a3463d96632e3,8b291f5e848d4ae48e375968b8a5f868,156b313e41744b2ab363f3f5fd745054,cd2796282eb64cc58e68b5861dc0114a,1f916a0f064141479342fe72db2dee39,b1025c1952a8463a9b2720820e1657d7,9e3b0325aa3a4e77a0bbc6de4000acb0,3c2386c93bf540aea016f6a88445de26,2c9242fed3ea4028ac3c4446b522d70a,b65857f313174abb8f0df5ee5b58861b,08a03a3036a149cb8d74474cb61b0409,3bbc726c1c71434a8d7a30e939a819be,f9f69c47c37a459d86994946959656ed,26ff82ec75c3422aaa1c622a73837873,f00d8fd3287548af88c46b1a625171cb,12e3b926e6884ba98afbd594d45d998f,d879694fa7b849f881a13984e5b265e2,45ca97a3a2344567853497a079aa6cf8,81442be6c561478ca63cfbbe4a0582d9,b5994bd34773459d82fe867e037749a2,bbe5ff79ff7143eba7ae8a849d2ca5d8,93078f96534142c3b45e579b532a84e0,baccf9e5ec5948fa9ec886663a50e6f0,0da32e380d574c9c83e25e28c75cbf4e,db9e3c0bb8da4664bf6bd22a3953cb66,e559379a549243fa94d6fc8157d8f11b,0aa991e73aa9496ebbfc923a54043d20,2236acd79ff540c4a0e6f620503291d9,b8e5f1ed128146dc8620b2066ec35446,85b8e05e03b9483682019b2207790eea,2d05ad97851741129f1f89b70175ebd7,fb6c8a5d3e1e4f1da7c0417e68eb8f95,b67026bd3afd49069f321cf93b63312d,7b9e73235d0b401b9a22407dca78441b,2d9ad6cb03b34371ac71eede1fe57127,8674e942f91e419e902bf9a186225088,a9607ee29e50462a89d15999b791578a,dfae463d9c1a43d4b76e5fc404f3fd51,9f480afd5bd74b3da0cf965913e8ec3e,82fcca3c15a5465eb62a25cad22eb0e0}'::text[])[r.n] AS token
    FROM (SELECT seq, row_number() OVER (ORDER BY priority DESC, due, seq) AS n FROM leased) r),
claimed AS (
    UPDATE __S__.errand_jobs j
    SET state = 'running', attempts = j.attempts + 1, lease_token = p.token,
        lease_until = now() + interval '30 seconds', attempt_started_at = now(), updated_at = now()
    FROM picked p
    WHERE j.seq = p.seq AND j.attempts < j.max_attempts AND j.state = 'ready' AND j.available_at <= now()
    RETURNING j.*, p.n)
SELECT coalesce(array_agg(seq ORDER BY n), '{}') AS seqs, coalesce(array_agg(lease_token ORDER BY n), '{}') AS toks,
       coalesce(sum(length(payload::text) + length(kind) + length(queue)), 0) AS bytes,
       coalesce(max(available_at), :due::timestamptz) AS due, coalesce(max(seq), :cur::bigint) AS cur FROM claimed \gset
COMMIT;
WITH acked AS (
    UPDATE __S__.errand_jobs j
    SET state = 'done', lease_token = NULL, lease_until = NULL, last_error = NULL, last_error_class = NULL,
        finished_at = now(), updated_at = now()
    FROM unnest(:seqs::bigint[], :toks::text[]) AS i (seq, token)
    WHERE j.seq = i.seq AND j.lease_token = i.token AND j.lease_until > now() AND NOT j.has_dependents
    RETURNING j.seq)
DELETE FROM __S__.due d USING acked a WHERE d.seq = a.seq;
