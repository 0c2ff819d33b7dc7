#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::claim::RESUME_FOR;
use errand_core::{
    AdminStore, ClaimRequest, ClaimedJob, JobFilter, JobId, JobState, JobStore, LeaseToken,
    TraceParent,
};

/// A schema of its own with Errand's tables, to write rows into
/// directly and then open a store on.
struct Old {
    url: String,
    schema: String,
    quoted: String,
    client: tokio_postgres::Client,
}

impl Old {
    /// `None` (the test says it was skipped) without a PostgreSQL URL.
    async fn at(test: &str) -> Option<Old> {
        let old = Old::empty(test).await?;
        let mut client = old.client;
        migrate(&mut client, &old.schema, &old.quoted)
            .await
            .unwrap();
        Some(Old { client, ..old })
    }

    /// A schema of its own with nothing in it yet.
    async fn empty(test: &str) -> Option<Old> {
        let url = errand_testsupport::postgres_url(test)?;
        // One schema per test: tests of one process run at the same time.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let schema = format!("errand_schema_{}_{n}", std::process::id());
        let quoted = quote_schema(&schema).unwrap();
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {quoted} CASCADE"))
            .await
            .unwrap();
        Some(Old {
            url,
            schema,
            quoted,
            client,
        })
    }

    /// Migrates (nothing is left to apply) and opens a store on the schema.
    async fn upgrade(&mut self) -> PgStore {
        migrate(&mut self.client, &self.schema, &self.quoted)
            .await
            .unwrap();
        PgStore::connect(
            &self.url,
            PgOptions {
                schema: self.schema.clone(),
                ..PgOptions::default()
            },
        )
        .await
        .unwrap()
    }

    /// Runs `sql`, which must be refused by a check (SQLSTATE 23514).
    async fn assert_check_refuses(&self, what: &str, sql: &str) {
        let err = self.client.batch_execute(sql).await.expect_err(what);
        let code = err.as_db_error().map(|d| d.code().code().to_owned());
        assert_eq!(code.as_deref(), Some("23514"), "{what}: {err}");
    }

    async fn drop_schema(self) {
        self.client
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.quoted))
            .await
            .unwrap();
    }
}

/// Jobs in each state written directly in SQL are read back: every job
/// keeps its fields and can be listed, the running one settles with
/// its token, a paused queue holds its jobs back, and the name and
/// trace-context rules refuse bad values written directly.
#[tokio::test]
async fn jobs_written_in_sql_are_read_back_and_the_name_rules_hold() {
    let Some(mut old) = Old::at("jobs_written_in_sql_are_read_back_and_the_name_rules_hold").await
    else {
        return;
    };
    let quoted = old.quoted.clone();
    let at = "2026-11-30 10:00:00+00";
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at, finished_at, lease_token, lease_until,
                 attempt_started_at, traceparent)
             VALUES ('a-ready', 'mail', 'k', 'ready', '{{}}', 0, 3, '{at}', '{at}', '{at}', NULL, NULL, NULL, NULL, NULL),
                    ('b-running', 'mail', 'k', 'running', '{{}}', 1, 3, '{at}', '{at}', '{at}', NULL,
                     'tok-1', '2999-01-01 00:00:00+00', '{at}', '{tp}'),
                    ('c-done', 'mail', 'k', 'done', '{{\"n\": 1}}', 1, 3, '{at}', '{at}', '{at}', '{at}', NULL, NULL, '{at}', NULL),
                    ('d-dead', 'mail', 'k', 'dead', '{{}}', 3, 3, '{at}', '{at}', '{at}', '{at}', NULL, NULL, '{at}', '{tp}'),
                    ('e-paused', 'held', 'k', 'ready', '{{}}', 0, 3, '{at}', '{at}', '{at}', NULL, NULL, NULL, NULL, NULL);
             INSERT INTO {quoted}.errand_attempts (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
             VALUES ('d-dead', 0, 1, '{at}', '{at}', 'retry', 'boom', 'retryable');
             INSERT INTO {quoted}.errand_paused_queues (queue, operator, reason, paused_at)
             VALUES ('held', 'alice', 'deploy', '{at}');"
        ))
        .await
        .unwrap();
    let store = old.upgrade().await;
    let all = store.list(&JobFilter::default()).await.unwrap();
    let ids: Vec<&str> = all.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(
        ids,
        ["a-ready", "b-running", "c-done", "d-dead", "e-paused"]
    );
    let running = store
        .list(&JobFilter {
            state: Some(JobState::Running),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(
        running[0].traceparent,
        Some(TraceParent::parse(tp).unwrap())
    );
    let dead = store.detail(&JobId::new("d-dead").unwrap()).await.unwrap();
    assert!(!dead.history.is_empty(), "the history is kept");
    // The paused queue's job is not claimed; the other ready one is.
    let claimed = store
        .claim(&ClaimRequest {
            queues: Vec::new(),
            limit: 10,
            lease: Duration::from_secs(30),
            rate: None,
            reclaim: true,
        })
        .await
        .unwrap();
    let claimed: Vec<&str> = claimed.iter().map(|c| c.job.id.as_str()).collect();
    assert_eq!(claimed, ["a-ready"]);
    let lease = Lease {
        id: JobId::new("b-running").unwrap(),
        token: LeaseToken::from_string("tok-1".into()),
        attempt: 1,
    };
    let done = store.complete(&lease).await.unwrap();
    assert_eq!(done.state, JobState::Done);
    for (what, sql) in [
        (
            "a queue name with a space",
            format!("UPDATE {quoted}.errand_jobs SET queue = 'bad queue' WHERE id = 'c-done'"),
        ),
        (
            "a kind too long",
            format!("UPDATE {quoted}.errand_jobs SET kind = repeat('k', 101) WHERE id = 'c-done'"),
        ),
        (
            "an id with a space",
            format!("UPDATE {quoted}.errand_jobs SET id = 'c done' WHERE id = 'c-done'"),
        ),
        (
            "a malformed trace context",
            format!("UPDATE {quoted}.errand_jobs SET traceparent = '00-zz' WHERE id = 'c-done'"),
        ),
    ] {
        old.assert_check_refuses(what, &sql).await;
    }
    old.drop_schema().await;
}

/// The rules of the columns written only at the insert live in domains:
/// jobs written in SQL are read back, every rule refuses a bad value
/// (SQLSTATE 23514), NULL is allowed where it should be, and the text
/// columns compare bytewise.
#[tokio::test]
async fn the_columns_written_once_keep_their_rules_in_domains() {
    let Some(mut old) = Old::at("the_columns_written_once_keep_their_rules_in_domains").await
    else {
        return;
    };
    let quoted = old.quoted.clone();
    let at = "2026-12-04 10:00:00+00";
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 max_lease_expiries, available_at, created_at, updated_at, key_name, key_limit,
                 on_dependency_failure, workflow, tags, meta, unique_key, batch)
             VALUES ('a-full', 'mail', 'k', 'ready', '{{}}', 0, 3, 5, '{at}', '{at}', '{at}',
                     'tenant-1', 2, 'cancel', 'wf-1', '[\"x\"]', '{{\"m\": \"v\"}}', 'u-1', NULL),
                    ('b-bare', 'mail', 'k', 'ready', '{{}}', 0, 1000, 1000, '{at}', '{at}', '{at}',
                     NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);"
        ))
        .await
        .unwrap();
    let store = old.upgrade().await;
    let full = store.get(&JobId::new("a-full").unwrap()).await.unwrap();
    assert_eq!(full.max_attempts, 3);
    assert_eq!(full.key.as_ref().map(|k| k.name.as_str()), Some("tenant-1"));
    assert_eq!(full.workflow.as_ref().map(|w| w.as_str()), Some("wf-1"));
    let bare = store.get(&JobId::new("b-bare").unwrap()).await.unwrap();
    assert_eq!((bare.max_attempts, bare.key.is_none()), (1000, true));
    let update = |set: &str| format!("UPDATE {quoted}.errand_jobs SET {set} WHERE id = 'a-full'");
    for (what, set) in [
        ("a batch too long", "batch = repeat('b', 201)"),
        ("an empty workflow", "workflow = ''"),
        ("a key name too long", "key_name = repeat('k', 201)"),
        ("a unique key too long", "unique_key = repeat('u', 301)"),
        ("a key limit of 0", "key_limit = 0"),
        ("a key limit above 10,000", "key_limit = 10001"),
        ("no attempts", "max_attempts = 0"),
        (
            "a lost-lease budget above 1,000",
            "max_lease_expiries = 1001",
        ),
        (
            "an unknown dependency policy",
            "on_dependency_failure = 'retry'",
        ),
        ("tags that are not an array", "tags = '{}'"),
        ("metadata that is not an object", "meta = '[]'"),
    ] {
        old.assert_check_refuses(what, &update(set)).await;
    }
    old.client
        .batch_execute(&update(
            "batch = NULL, workflow = NULL, unique_key = NULL, tags = NULL, meta = NULL",
        ))
        .await
        .expect("NULL is allowed");
    let collations: Vec<(String, String)> = old
        .client
        .query(
            "SELECT a.attname::text, c.collname::text FROM pg_attribute a
             JOIN pg_collation c ON c.oid = a.attcollation
             WHERE a.attrelid = ($1 || '.errand_jobs')::regclass
               AND a.attname IN ('batch', 'workflow', 'key_name', 'unique_key')
             ORDER BY 1",
            &[&quoted],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let c = |col: &str| (col.to_owned(), "C".to_owned());
    assert_eq!(
        collations,
        [c("batch"), c("key_name"), c("unique_key"), c("workflow")]
    );
    old.drop_schema().await;
}

/// Parameters are declared as plain types, never as the schema's
/// domains: a driver asked to send a string for a parameter PostgreSQL
/// inferred as `errand_job_id` refuses it ("error serializing
/// parameter"), so every statement casts what it compares with a
/// domain column.
#[tokio::test]
async fn no_statement_takes_a_domain_typed_parameter() {
    let Some(old) = Old::at("no_statement_takes_a_domain_typed_parameter").await else {
        return;
    };
    let queries = Queries::new(&old.quoted);
    for (name, sql) in queries.all() {
        let stmt = old.client.prepare(sql).await.expect(name);
        for (i, ty) in stmt.params().iter().enumerate() {
            let plain = match ty.kind() {
                tokio_postgres::types::Kind::Array(inner) => {
                    matches!(inner.kind(), tokio_postgres::types::Kind::Simple)
                }
                kind => matches!(kind, tokio_postgres::types::Kind::Simple),
            };
            assert!(
                plain,
                "{name}: parameter ${} is of type {}",
                i + 1,
                ty.name()
            );
        }
    }
    old.drop_schema().await;
}

/// A statement planned as a claim's transaction plans it: prepared after
/// `begin`, explained with `args`, rolled back.
struct Probe<'a> {
    begin: &'a str,
    types: &'a str,
    sql: &'a str,
    explain: &'a str,
    args: &'a str,
}

impl Probe<'_> {
    /// The plan's lines.
    async fn plan(&self, client: &tokio_postgres::Client) -> Vec<String> {
        let Probe {
            begin,
            types,
            sql,
            explain,
            args,
        } = self;
        client
            .batch_execute(&format!("{begin}; PREPARE probe ({types}) AS {sql}"))
            .await
            .unwrap();
        let rows = client
            .query(&format!("{explain} EXECUTE probe ({args})"), &[])
            .await
            .unwrap();
        client
            .batch_execute("ROLLBACK; DEALLOCATE probe")
            .await
            .unwrap();
        rows.iter().map(|r| r.get::<_, String>(0)).collect()
    }
}

/// A claim across every queue reads the due index in claim order however
/// the table's statistics look: with a backlog of 20,000 ready jobs
/// analyzed, both claim statements, planned as the claim's transaction
/// plans them, walk `errand_jobs_due` and never read the whole table
/// (left to its estimates, PostgreSQL 15 read and sorted the backlog at
/// every claim).
#[tokio::test]
async fn an_all_queue_claim_reads_the_due_index_once_the_table_is_analyzed() {
    let Some(old) =
        Old::at("an_all_queue_claim_reads_the_due_index_once_the_table_is_analyzed").await
    else {
        return;
    };
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at)
             SELECT 'j' || i, 'default', 'k', 'ready', '{{}}', 0, 3,
                    now() - interval '1 hour' + i * interval '1 millisecond', now(), now()
             FROM generate_series(1, 20000) i;
             ANALYZE {quoted}.errand_jobs;"
        ))
        .await
        .unwrap();
    let queries = Queries::new(&quoted);
    let tokens = claim_tokens();
    for (name, sql, types, args) in [
        (
            "claim_ready from the start",
            &queries.claim_ready,
            "timestamptz, bigint, text[], text[], bigint, smallint, timestamptz, text",
            format!("NULL, 256, NULL, {tokens}, 30000, NULL, NULL, NULL"),
        ),
        (
            "claim_ready resuming",
            &queries.claim_ready,
            "timestamptz, bigint, text[], text[], bigint, smallint, timestamptz, text",
            format!("NULL, 256, NULL, {tokens}, 30000, 0, now() - interval '30 minutes', 'j9'"),
        ),
        (
            "claim",
            &queries.claim,
            "timestamptz, bigint, text[], text[], bigint, boolean, boolean, text[], boolean, text[]",
            format!("NULL, 256, NULL, {tokens}, 30000, false, true, NULL, false, NULL"),
        ),
        (
            "claim holding a capped queue's lock",
            &queries.claim,
            "timestamptz, bigint, text[], text[], bigint, boolean, boolean, text[], boolean, text[]",
            format!("NULL, 256, NULL, {tokens}, 30000, false, false, '{{capped}}', false, NULL"),
        ),
    ] {
        let probe = Probe {
            begin: claim::ALL_QUEUES_CLAIM,
            types,
            sql,
            explain: "EXPLAIN",
            args: &args,
        };
        let plan = probe.plan(&old.client).await.join("\n");
        assert!(
            plan.contains("Index Scan using errand_jobs_due on errand_jobs"),
            "{name}: {plan}"
        );
        assert!(!plan.contains("Seq Scan on errand_jobs"), "{name}: {plan}");
    }
    old.drop_schema().await;
}

/// While a capped (or paused) queue's due jobs stand ahead of the others'
/// in the due index, a claim across every queue reads the other queues'
/// ranges instead of walking past them, and the capped queues are probed,
/// not read: with 20,000 due jobs of a capped queue ahead, neither the
/// claim nor its locks (`key_lock.sql` and `cap_lock.sql`, one statement)
/// read them (no step of either plan passes over 1,000 rows by filter).
#[tokio::test]
async fn a_claim_beside_a_capped_backlog_does_not_read_it() {
    let Some(old) = Old::at("a_claim_beside_a_capped_backlog_does_not_read_it").await else {
        return;
    };
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at)
             SELECT 'b' || i, 'big', 'k', 'ready', '{{}}'::json, 0, 3,
                    now() - interval '2 hours' + i * interval '1 millisecond', now(), now()
             FROM generate_series(1, 20000) i
             UNION ALL
             SELECT q || i, q, 'k', 'ready', '{{}}'::json, 0, 3,
                    now() - interval '1 hour' + i * interval '1 millisecond', now(), now()
             FROM generate_series(1, 500) i, (VALUES ('other'), ('third')) v(q);
             INSERT INTO {quoted}.errand_queue_limits VALUES ('big', 5, 'test', NULL, now());
             ANALYZE {quoted}.errand_jobs;"
        ))
        .await
        .unwrap();
    let queries = Queries::new(&quoted);
    let tokens = claim_tokens();
    for (name, sql, types, args) in [
        (
            "claim holding the capped queue's lock",
            &queries.claim,
            "timestamptz, bigint, text[], text[], bigint, boolean, boolean, text[], boolean, text[]",
            format!("NULL, 256, NULL, {tokens}, 30000, false, false, '{{big}}', true, NULL"),
        ),
        (
            "claim beside a full capped queue",
            &queries.claim,
            "timestamptz, bigint, text[], text[], bigint, boolean, boolean, text[], boolean, text[]",
            format!("NULL, 256, NULL, {tokens}, 30000, false, false, '{{}}', true, NULL"),
        ),
        (
            "claim of the capped queue by name",
            &queries.claim,
            "timestamptz, bigint, text[], text[], bigint, boolean, boolean, text[], boolean, text[]",
            format!(
                "NULL, 256, '{{big,other}}', {tokens}, 30000, false, true, '{{big}}', false, '{{other}}'"
            ),
        ),
        (
            "the locks (key_lock.sql, cap_lock.sql)",
            &queries.claim_locks,
            "timestamptz, text[]",
            "NULL, NULL".to_owned(),
        ),
    ] {
        // A claim of named queues runs in a plain transaction, planned for
        // its queues; one across every queue as the claim plans it.
        let begin = if name.contains("by name") {
            "BEGIN"
        } else {
            claim::ALL_QUEUES_CLAIM
        };
        let probe = Probe {
            begin,
            types,
            sql,
            explain: "EXPLAIN (ANALYZE, TIMING OFF)",
            args: &args,
        };
        let plan = probe.plan(&old.client).await;
        assert!(
            most_passed_over(&plan) < 1_000,
            "{name}: {}",
            plan.join("\n")
        );
        if name.starts_with("claim") && !name.contains("by name") {
            assert!(
                plan.iter()
                    .any(|l| l.contains("rows=256 loops=1") && l.contains("Update on errand_jobs")),
                "{name} claims 256 jobs: {}",
                plan.join("\n")
            );
        }
    }
    old.drop_schema().await;
}

/// 256 lease tokens as a text-array literal, for a claim of 256.
fn claim_tokens() -> String {
    let tokens: Vec<String> = (0..256).map(|i| format!("t{i}")).collect();
    format!("'{{{}}}'", tokens.join(","))
}

/// The most rows any step of an analyzed plan passed over by filter.
fn most_passed_over(plan: &[String]) -> u64 {
    plan.iter()
        .filter_map(|l| l.trim().strip_prefix("Rows Removed by Filter: "))
        .filter_map(|n| n.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// A worker's generic plans are made at its first claims, often before
/// the table has statistics (a backlog inserted and drained at once): the
/// claim that takes back expired leases, whether or not it reads queue
/// ranges, must not walk the backlog then either. With 20,000 due jobs
/// and no statistics, no step passes over 1,000 rows. (The ranges' ids,
/// looked up as one `id = ANY (…)`, were found by walking the due index:
/// 0.4 s a claim at 1,000,000 jobs, once a second per worker.)
#[tokio::test]
async fn a_claim_planned_before_statistics_does_not_walk_the_backlog() {
    let Some(old) = Old::at("a_claim_planned_before_statistics_does_not_walk_the_backlog").await
    else {
        return;
    };
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "ALTER TABLE {quoted}.errand_jobs SET (autovacuum_enabled = false);
             INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at)
             SELECT 'j' || i, 'default', 'k', 'ready', '{{}}', 0, 3,
                    now() - interval '1 hour' + i * interval '1 millisecond', now(), now()
             FROM generate_series(1, 20000) i;"
        ))
        .await
        .unwrap();
    let queries = Queries::new(&quoted);
    let tokens = claim_tokens();
    for (name, ranged) in [("reclaiming", "false"), ("reclaiming, by ranges", "true")] {
        let args = format!("NULL, 256, NULL, {tokens}, 30000, false, true, '{{}}', {ranged}, NULL");
        let probe = Probe {
            begin: claim::ALL_QUEUES_CLAIM,
            types: "timestamptz, bigint, text[], text[], bigint, boolean, boolean, text[], boolean, text[]",
            sql: &queries.claim,
            explain: "EXPLAIN (ANALYZE, TIMING OFF)",
            args: &args,
        };
        let plan = probe.plan(&old.client).await;
        assert!(
            most_passed_over(&plan) < 1_000,
            "{name}: {}",
            plan.join("\n")
        );
        assert!(
            plan.iter()
                .any(|l| l.contains("rows=256 loops=1") && l.contains("Update on errand_jobs")),
            "{name} claims 256 jobs: {}",
            plan.join("\n")
        );
    }
    old.drop_schema().await;
}

/// A search for a metadata entry reads the jobs carrying it through
/// errand_job_meta, not the table: with 20,000 jobs, 20 carrying the entry
/// and 10,000 another value of its key, a page reads those 20.
#[tokio::test]
async fn a_metadata_search_reads_the_jobs_carrying_the_entry() {
    let Some(old) = Old::at("a_metadata_search_reads_the_jobs_carrying_the_entry").await else {
        return;
    };
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at, meta)
             SELECT 'j' || i, 'q', 'k', 'ready', '{{}}'::json, 0, 3, now(),
                    now() + i * interval '1 millisecond', now(),
                    CASE WHEN i % 1000 = 0 THEN '{{\"tenant\": \"rare\"}}'::jsonb
                         WHEN i % 2 = 0 THEN '{{\"tenant\": \"common\"}}'::jsonb END
             FROM generate_series(1, 20000) i;
             INSERT INTO {quoted}.errand_job_meta (key, value, created_at, job_id)
             SELECT 'tenant', meta->>'tenant', created_at, id FROM {quoted}.errand_jobs
             WHERE meta IS NOT NULL;
             ANALYZE {quoted}.errand_jobs;
             ANALYZE {quoted}.errand_job_meta;"
        ))
        .await
        .unwrap();
    let queries = Queries::new(&quoted);
    let probe = Probe {
        begin: "BEGIN",
        types: "text, text, text, text, timestamptz, timestamptz, bigint, text, text, text",
        sql: &queries.list_meta,
        explain: "EXPLAIN (ANALYZE, TIMING OFF)",
        args: "NULL, NULL, NULL, NULL, NULL, NULL, 100, NULL, 'tenant', 'rare'",
    };
    let plan = probe.plan(&old.client).await;
    let text = plan.join("\n");
    assert!(text.contains("errand_job_meta_pkey"), "{text}");
    assert!(!text.contains("Seq Scan"), "{text}");
    let passed_over = plan
        .iter()
        .filter_map(|l| l.trim().strip_prefix("Rows Removed by "))
        .filter_map(|l| l.split(": ").nth(1)?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    assert!(passed_over < 100, "{text}");
    assert!(
        plan.iter()
            .any(|l| l.contains("Limit") && l.contains("rows=20 loops=1")),
        "{text}"
    );
    old.drop_schema().await;
}

/// A busy claimer's claims resume where the last one stopped; a job
/// written through the store that sorts before that point is claimed
/// next all the same, one written from elsewhere once the listener
/// hears its insert, and one nothing announces within a second.
#[tokio::test]
async fn claims_resume_where_the_last_stopped_and_forget_the_point_when_told() {
    let Some(mut old) =
        Old::at("claims_resume_where_the_last_stopped_and_forget_the_point_when_told").await
    else {
        return;
    };
    let store = old.upgrade().await;
    let job = |id: &str, priority: i16| {
        NewJob::new("k", errand_core::Payload::default())
            .unwrap()
            .with_id(JobId::new(id).unwrap())
            .with_priority(priority)
    };
    for i in 0..30 {
        store.insert(job(&format!("j{i:02}"), 0)).await.unwrap();
    }
    let busy = ClaimRequest {
        queues: Vec::new(),
        limit: 5,
        lease: Duration::from_secs(30),
        rate: None,
        reclaim: false,
    };
    let ids = |claimed: Vec<ClaimedJob>| -> Vec<String> {
        claimed.into_iter().map(|c| c.job.id.to_string()).collect()
    };
    assert_eq!(
        ids(store.claim(&busy).await.unwrap()),
        ["j00", "j01", "j02", "j03", "j04"]
    );
    // Written through the store: the next claim starts from the top.
    store.insert(job("urgent", 5)).await.unwrap();
    assert_eq!(
        ids(store.claim(&busy).await.unwrap()),
        ["urgent", "j05", "j06", "j07", "j08"]
    );
    assert_eq!(
        ids(store.claim(&busy).await.unwrap()),
        ["j09", "j10", "j11", "j12", "j13"]
    );
    // Written from elsewhere, unannounced (no listener runs yet): the
    // claims resume past it ...
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, priority, attempts,
                 max_attempts, available_at, created_at, updated_at)
             VALUES ('early', 'default', 'k', 'ready', '{{}}', 0, 0, 3,
                     now() - interval '1 day', now(), now())"
        ))
        .await
        .unwrap();
    assert_eq!(
        ids(store.claim(&busy).await.unwrap()),
        ["j14", "j15", "j16", "j17", "j18"]
    );
    // ... for a second at most.
    tokio::time::sleep(RESUME_FOR + Duration::from_millis(100)).await;
    assert_eq!(
        ids(store.claim(&busy).await.unwrap()),
        ["early", "j19", "j20", "j21", "j22"]
    );
    // With the listener running, an insert from elsewhere is heard.
    let mut signal = store.work_signal();
    let mut heard = false;
    for _ in 0..50 {
        if store.listener().healthy() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, priority, attempts,
                 max_attempts, available_at, created_at, updated_at)
             VALUES ('late-urgent', 'default', 'k', 'ready', '{{}}', 9, 0, 3, now(), now(), now())"
        ))
        .await
        .unwrap();
    for _ in 0..50 {
        if signal.wait(Duration::from_millis(100)).await {
            heard = true;
            break;
        }
    }
    assert!(heard, "the listener heard the insert");
    assert_eq!(
        ids(store.claim(&busy).await.unwrap()),
        ["late-urgent", "j23", "j24", "j25", "j26"]
    );
    // A claim that comes up short forgets the point.
    let rest = ids(store
        .claim(&ClaimRequest {
            limit: 100,
            ..busy.clone()
        })
        .await
        .unwrap());
    assert_eq!(rest, ["j27", "j28", "j29"]);
    assert!(store.claim(&busy).await.unwrap().is_empty());
    old.drop_schema().await;
}

/// A schema a development build left (its history begins with another
/// first migration) is refused by `migrate`, which changes nothing in
/// it, and by `connect`.
#[tokio::test]
async fn a_development_build_schema_is_refused_and_left_as_it_was() {
    let Some(mut old) =
        Old::empty("a_development_build_schema_is_refused_and_left_as_it_was").await
    else {
        return;
    };
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "CREATE SCHEMA {quoted};
             CREATE TABLE {quoted}.errand_schema_history (version int4 PRIMARY KEY,
                 name varchar(255), applied_on varchar(255), checksum varchar(255));
             INSERT INTO {quoted}.errand_schema_history VALUES
                 (1, 'jobs', '2026-09-01', '1'), (22, 'json_stored_as_given', '2026-12-05', '22');
             CREATE TABLE {quoted}.errand_jobs (id text PRIMARY KEY, state text);
             INSERT INTO {quoted}.errand_jobs VALUES ('kept', 'ready');"
        ))
        .await
        .unwrap();
    let before = objects(&old.client, &old.schema).await;
    let err = migrate(&mut old.client, &old.schema, &old.quoted)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SchemaUnreleased(_)), "{err}");
    let message = err.to_string();
    for part in [
        format!("schema {}", old.schema),
        "development version 22".into(),
        "before release 0.1".into(),
        "DROP SCHEMA".into(),
    ] {
        assert!(message.contains(&part), "{part:?} missing in: {message}");
    }
    assert_eq!(objects(&old.client, &old.schema).await, before);
    let refused = PgStore::connect(
        &old.url,
        PgOptions {
            schema: old.schema.clone(),
            ..PgOptions::default()
        },
    )
    .await
    .expect_err("a development build's schema is refused");
    assert!(matches!(refused, Error::SchemaUnreleased(_)), "{refused}");
    old.drop_schema().await;
}

/// Each fenced settlement of one job, and a heartbeat, finds the job by
/// its primary key even when planned for its actual parameters, as an
/// application's own client and the first runs of a cached statement
/// plan it. With the lease index small (five running jobs beside
/// 20,000 done ones, analyzed), a statement naming `state = 'running'`
/// was planned on the partial lease index, whose entries of settled
/// jobs are dead until vacuum, so after a busy minute it read them all.
#[tokio::test]
async fn a_settlement_finds_its_job_by_primary_key() {
    let Some(old) = Old::at("a_settlement_finds_its_job_by_primary_key").await else {
        return;
    };
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, attempts,
                 max_attempts, available_at, created_at, updated_at, finished_at,
                 attempt_started_at)
             SELECT 'd' || i, 'default', 'k', 'done', '{{}}', 1, 3, now(), now(), now(), now(), now()
             FROM generate_series(1, 20000) i;
             INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, attempts,
                 max_attempts, available_at, created_at, updated_at, lease_token, lease_until,
                 attempt_started_at)
             SELECT 'r' || i, 'default', 'k', 'running', '{{}}', 1, 3, now(), now(), now(),
                    't' || i, now() + interval '1 hour', now()
             FROM generate_series(1, 5) i;
             ANALYZE {quoted}.errand_jobs;"
        ))
        .await
        .unwrap();
    let queries = Queries::new(&quoted);
    for (name, sql, args) in [
        (
            "complete",
            &queries.complete,
            "NULL, 'r1', 't1', NULL, false",
        ),
        (
            "heartbeat",
            &queries.heartbeat,
            "NULL, 'r1', 't1', 30000, NULL",
        ),
        (
            "fail",
            &queries.fail,
            "NULL, 'r1', 't1', 'boom', 'retryable', NULL, 1000, false",
        ),
        (
            "snooze",
            &queries.snooze,
            "NULL, 'r1', 't1', 1000, 'snoozed'",
        ),
        (
            "cancel_running",
            &queries.cancel_running,
            "NULL, 'r1', 't1', 'stop', false",
        ),
    ] {
        let types: Vec<String> = old
            .client
            .prepare(sql)
            .await
            .expect(name)
            .params()
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        old.client
            .batch_execute(&format!(
                "SET plan_cache_mode = force_custom_plan; PREPARE probe ({}) AS {sql}",
                types.join(", ")
            ))
            .await
            .expect(name);
        let plan: Vec<String> = old
            .client
            .query(&format!("EXPLAIN EXECUTE probe ({args})"), &[])
            .await
            .expect(name)
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect();
        old.client
            .batch_execute("DEALLOCATE probe; RESET plan_cache_mode")
            .await
            .unwrap();
        let plan = plan.join("\n");
        assert!(plan.contains("errand_jobs_pkey"), "{name}: {plan}");
        assert!(!plan.contains("errand_jobs_leases"), "{name}: {plan}");
    }
    old.drop_schema().await;
}

/// The names of everything in `schema`.
async fn objects(client: &tokio_postgres::Client, schema: &str) -> String {
    let objects: Vec<String> = client
        .query(
            "SELECT relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    objects.join(",")
}

/// The job states are the schema's; the words the library defines
/// (actions, failure classes, outcomes) are checked only for their
/// shape, so a new one needs no migration.
#[tokio::test]
async fn the_schema_knows_the_states_and_the_shape_of_the_library_words() {
    let Some(old) = Old::at("the_schema_knows_the_states_and_the_shape_of_the_library_words").await
    else {
        return;
    };
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, max_attempts,
                 available_at, created_at, updated_at)
             VALUES ('r', 'q', 'k', 'ready', '{{}}', 3, now(), now(), now());
             UPDATE {quoted}.errand_jobs SET last_error_class = 'a_new_class';
             INSERT INTO {quoted}.errand_audit (job_id, queue, action, operator, at)
             VALUES ('r', 'q', 'a_new_action', 'alice', now()),
                    (NULL, 'q', 'pause', 'alice', now());
             INSERT INTO {quoted}.errand_audit (schedule, action, operator, at)
             VALUES ('nightly', 'schedule_add', 'alice', now());"
        ))
        .await
        .unwrap();
    let audit = |values: &str| {
        format!(
            "INSERT INTO {quoted}.errand_audit (job_id, queue, schedule, action, operator, reason, at)
             VALUES ({values}, now())"
        )
    };
    for (what, sql) in [
        (
            "an unknown state",
            format!("UPDATE {quoted}.errand_jobs SET state = 'paused'"),
        ),
        (
            "a failure class of another shape",
            format!("UPDATE {quoted}.errand_jobs SET last_error_class = 'Bad Class'"),
        ),
        (
            "an action of another shape",
            audit("'r', 'q', NULL, 'Not-A-Word', 'alice', NULL"),
        ),
        (
            "an entry naming nothing",
            audit("NULL, NULL, NULL, 'pause', 'alice', NULL"),
        ),
        (
            "an entry naming a job and a schedule",
            audit("'r', 'q', 'nightly', 'cancel', 'alice', NULL"),
        ),
        (
            "a purge without a reason",
            audit("'r', 'q', NULL, 'purge', 'alice', NULL"),
        ),
    ] {
        old.assert_check_refuses(what, &sql).await;
    }
    old.drop_schema().await;
}

/// The look for waits that timed out, which every worker and server makes
/// once a second, reads only the timed-out range of its index, with the
/// prepared statement's generic plan: with 10,000 jobs waiting far into
/// the future it reads no entry. (Its bound read from a CTE was no index
/// condition, and each look read every waiting job's entry.)
#[tokio::test]
async fn the_look_for_timed_out_waits_reads_only_their_range() {
    let Some(old) = Old::at("the_look_for_timed_out_waits_reads_only_their_range").await else {
        return;
    };
    let quoted = old.quoted.clone();
    old.client
        .batch_execute(&format!(
            "INSERT INTO {quoted}.errand_jobs (id, queue, kind, state, payload, max_attempts,
                 available_at, created_at, updated_at, await_signal, await_until, on_await_timeout)
             SELECT 'w' || i, 'default', 'k', 'waiting', '{{}}', 3, now(), now(), now(),
                    'paid', now() + interval '1 day', 'run'
             FROM generate_series(1, 10000) i;
             ANALYZE {quoted}.errand_jobs;
             SET plan_cache_mode = force_generic_plan;"
        ))
        .await
        .unwrap();
    let queries = Queries::new(&quoted);
    old.client
        .batch_execute(&format!(
            "PREPARE look (timestamptz, bigint) AS {}",
            queries.expire_waits
        ))
        .await
        .unwrap();
    let plan: Vec<String> = old
        .client
        .query(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE look (NULL, 500)",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect();
    let plan = plan.join("\n");
    let scan = plan
        .lines()
        .find(|l| l.contains("errand_jobs_await_timeouts"))
        .unwrap_or_else(|| panic!("the look reads its index: {plan}"));
    assert!(scan.contains("rows=0"), "it reads no entry: {plan}");
    assert!(
        plan.contains("await_until <= COALESCE"),
        "the bound is an index condition: {plan}"
    );
    old.client
        .batch_execute("DEALLOCATE look; RESET plan_cache_mode")
        .await
        .unwrap();
    old.drop_schema().await;
}
