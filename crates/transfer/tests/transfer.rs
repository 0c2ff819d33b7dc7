#![allow(clippy::unwrap_used)]
//! A transfer from SQLite to PostgreSQL, end to end through the library:
//!
//! * a SQLite database holding every kind of row Errand stores — jobs in
//!   every state, attempt history, outputs, dependencies, a workflow with
//!   a child added at run time, a sealed batch, tags and metadata, unique
//!   and concurrency keys, signals delivered and buffered, operator
//!   actions (replay, cancel, copy, a person's signal, pause, queue cap,
//!   schedules), a rate-limit bucket, a worker report, chart minutes and
//!   exact counts — all made through the public API, never by SQL — is
//!   moved into a fresh schema; every table matches, and every job, the
//!   audit log, schedules, paused queues, caps, the batch, the workflow,
//!   the statistics and the charts read the same through `Admin` on both
//!   sides; then a worker on PostgreSQL claims and settles, and new rows
//!   get fresh sequence numbers;
//! * the refusals: a dry run writes nothing, a schema holding Errand's
//!   data or another file's unfinished transfer is refused, so is a live
//!   lease and a batch of 0;
//! * a transfer stopped midway goes on from where it stopped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use errand::core::{DependencyFailure, MinuteCount, Progress, ScheduleZone, Series, minute_of};
use errand::{
    Admin, AuditFilter, AuditStamp, BatchSeal, CancelRequest, ChartWindow, ClaimRequest,
    ClaimedJob, Clock, ConnectOptions, CopyRequest, ErrorClass, Failure, JobFilter, JobId,
    JobState, KeyLimit, ManualClock, Misfire, Name, NewJob, NewSignal, OnAwaitTimeout, Payload,
    QueueAction, QueueLimitRequest, RateBucket, RateLimit, ReplayRequest, RetryAt, Schedule,
    ScheduleAction, ScheduleAdd, ScheduleDefinition, SqliteOptions, SqliteStore, StatsRequest,
    Store, Timestamp, TraceParent, WorkerMetrics, WorkerReport, Workflow, WorkflowId,
};
use errand_testsupport::{PgSchema, postgres_url};
use errand_transfer::{Advance, Report, TransferOptions, transfer};
use serde_json::{Value, json};

/// Every table a report names: the fifteen copied and PostgreSQL's index
/// of workflow steps.
const TABLES: [&str; 16] = [
    "errand_attempts",
    "errand_audit",
    "errand_batches",
    "errand_counts",
    "errand_dependencies",
    "errand_job_meta",
    "errand_job_tags",
    "errand_jobs",
    "errand_minutes",
    "errand_paused_queues",
    "errand_queue_limits",
    "errand_rate_limits",
    "errand_schedules",
    "errand_signals",
    "errand_workers",
    "errand_workflow_steps",
];

const WORKFLOW: &str = "order-7";
const BATCH: &str = "import-3";

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

fn queue(s: &str) -> Name {
    Name::parse("queue", s).unwrap()
}

fn job(job_id: &str, kind: &str, on: &str) -> NewJob {
    NewJob::new(
        kind,
        Payload::from_json_text(format!(r#"{{"job":"{job_id}","n":[1,2.5,"é"]}}"#)).unwrap(),
    )
    .unwrap()
    .with_id(id(job_id))
    .on_queue(on)
    .unwrap()
}

fn stamp(operator: &str, reason: &str) -> AuditStamp {
    AuditStamp {
        operator: operator.to_owned(),
        reason: Some(reason.to_owned()),
    }
}

fn sqlite(path: &Path, clock: Option<&ManualClock>) -> Arc<dyn Store> {
    let mut options = SqliteOptions {
        create: true,
        migrate: true,
        ..SqliteOptions::default()
    };
    if let Some(clock) = clock {
        options.clock = Arc::new(clock.clone());
    }
    Arc::new(SqliteStore::open(path, options).unwrap())
}

async fn postgres(url: &str, schema: &str, create: bool) -> Arc<dyn Store> {
    let options = ConnectOptions {
        schema: Some(schema.to_owned()),
        create_and_migrate: create,
        ..ConnectOptions::default()
    };
    errand::connect(url, &options).await.unwrap()
}

/// Fails `claimed`'s attempt with `error` of `class`.
async fn fail(
    store: &dyn Store,
    claimed: &ClaimedJob,
    error: &str,
    class: ErrorClass,
    retry: Option<RetryAt>,
) -> errand::Job {
    let failure = Failure {
        error: error.into(),
        class,
        retry,
    };
    store.fail(&claimed.lease, failure).await.unwrap()
}

/// Claims the one due job of `on`.
async fn claim(store: &Arc<dyn Store>, on: &str, lease: Duration) -> ClaimedJob {
    let mut claimed = store
        .claim(&ClaimRequest {
            queues: vec![queue(on)],
            limit: 1,
            lease,
            rate: None,
            reclaim: false,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "one job claimed from {on}");
    claimed.pop().unwrap()
}

fn options(from: &Path, url: &str, schema: &str, batch: usize) -> TransferOptions {
    TransferOptions {
        from: from.to_owned(),
        to: url.to_owned(),
        schema: schema.to_owned(),
        allow_public_schema: false,
        dry_run: false,
        batch,
    }
}

/// The jobs of the fixture a test looks at again.
struct Fixture {
    /// The one ready job of the queue `claimable`.
    ready: JobId,
    /// The job waiting for the signal `approval`.
    waiting: JobId,
    /// How many jobs it holds.
    jobs: usize,
}

/// Builds the database at `path`, its clock two hours behind the wall
/// clock and moving a second between steps: the running job's lease ended
/// long ago at real time, while the job scheduled for tomorrow is still
/// due later.
async fn fixture(path: &Path) -> Fixture {
    let t0 = Timestamp::now().minus(Duration::from_secs(2 * 3600));
    let clock = ManualClock::new(t0);
    let tick = || clock.advance(Duration::from_secs(1));
    let store = sqlite(path, Some(&clock));
    let admin = Admin::new(store.clone());
    let tomorrow = Timestamp::now().plus(Duration::from_secs(86_400));

    // Ready, due now, with everything a job may carry.
    let ready = job("ready-1", "deliver", "claimable")
        .with_tag("vip")
        .unwrap()
        .with_tag("region:eu")
        .unwrap()
        .with_meta("customer", "c-42")
        .with_meta("order", "7")
        .with_priority(5)
        .with_deadline(t0.plus(Duration::from_secs(3600)))
        .with_traceparent(
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap(),
        )
        .give_up_after(Duration::from_secs(7 * 86_400))
        .with_max_lease_expiries(4)
        .unwrap();
    store.insert(ready).await.unwrap();
    tick();

    // Scheduled for tomorrow (at real time), under an ordered key; another
    // under a concurrent key; a unique one.
    let later = job("later-1", "mail", "mail")
        .scheduled(Schedule::At(tomorrow))
        .with_key("tenant-1", KeyLimit::Ordered)
        .unwrap();
    let keyed = job("keyed-1", "mail", "mail")
        .with_key("tenant-2", KeyLimit::Concurrent(2))
        .unwrap();
    let unique = job("unique-1", "invoice", "mail")
        .unique_for(Duration::from_secs(3600))
        .with_unique_key("invoice-7");
    store.insert_many(vec![later, keyed]).await.unwrap();
    // A unique job is enqueued on its own.
    assert!(store.insert(unique).await.unwrap().created);
    tick();

    // Done with an output.
    store
        .insert(
            job("done-1", "charge", "work")
                .with_tag("billing")
                .unwrap()
                .with_meta("amount", "12.50"),
        )
        .await
        .unwrap();
    let c = claim(&store, "work", Duration::from_secs(60)).await;
    tick();
    store
        .complete_with_output(
            &c.lease,
            &Payload::output(r#"{"receipt":7,"ok":true}"#).unwrap(),
        )
        .await
        .unwrap();
    tick();

    // Dead after two failed attempts: a retryable one, then a permanent one.
    store
        .insert(
            job("dead-1", "charge", "work")
                .with_max_attempts(2)
                .unwrap(),
        )
        .await
        .unwrap();
    let c = claim(&store, "work", Duration::from_secs(60)).await;
    tick();
    fail(
        store.as_ref(),
        &c,
        "provider busy",
        ErrorClass::Retryable,
        Some(RetryAt::After(Duration::from_secs(1))),
    )
    .await;
    clock.advance(Duration::from_secs(5));
    let c = claim(&store, "work", Duration::from_secs(60)).await;
    tick();
    let dead = fail(
        store.as_ref(),
        &c,
        "no such account",
        ErrorClass::Permanent,
        None,
    )
    .await;
    assert_eq!(dead.state, JobState::Dead);
    tick();

    // Dead too, then replayed by an operator (ready again, audited).
    store
        .insert(
            job("replayed-1", "charge", "work")
                .with_max_attempts(1)
                .unwrap(),
        )
        .await
        .unwrap();
    let c = claim(&store, "work", Duration::from_secs(60)).await;
    tick();
    fail(
        store.as_ref(),
        &c,
        "timed out",
        ErrorClass::Timeout,
        Some(RetryAt::After(Duration::from_secs(1))),
    )
    .await;
    tick();

    // Running, its lease long expired at real time, with a progress report.
    store
        .insert(
            job("running-1", "render", "work")
                .with_max_attempts(3)
                .unwrap(),
        )
        .await
        .unwrap();
    let c = claim(&store, "work", Duration::from_secs(600)).await;
    tick();
    store
        .heartbeat_with_progress(
            &c.lease,
            Duration::from_secs(600),
            &Progress::new(40, Some("halfway".into()), c.lease.attempt),
        )
        .await
        .unwrap();
    tick();

    // An operator replays one dead job, copies the other, and cancels one.
    admin
        .replay_jobs(&ReplayRequest {
            ids: vec![id("replayed-1")],
            operator: "alice".into(),
            reason: Some("the provider is back".into()),
        })
        .await
        .unwrap();
    tick();
    let copies = admin
        .copy_jobs(&CopyRequest {
            ids: vec![id("dead-1")],
            operator: "alice".into(),
            reason: Some("with the account fixed".into()),
        })
        .await
        .unwrap();
    assert_eq!(copies.len(), 1);
    tick();
    store.insert(job("cancel-1", "mail", "mail")).await.unwrap();
    admin
        .cancel_jobs(&CancelRequest {
            ids: vec![id("cancel-1")],
            operator: "bob".into(),
            reason: Some("sent by hand".into()),
        })
        .await
        .unwrap();
    tick();

    // Blocked on a dependency due tomorrow.
    store
        .insert_many(vec![
            job("parent-1", "export", "deps").scheduled(Schedule::At(tomorrow)),
            job("child-1", "notify", "deps")
                .depends_on(id("parent-1"))
                .on_dependency_failure(DependencyFailure::Run),
        ])
        .await
        .unwrap();
    tick();

    // Waiting for a signal, with another signal kept for it (buffered);
    // and one resumed by a person's signal.
    store
        .insert_many(vec![
            job("wait-1", "approve", "signals")
                .awaiting(
                    "approval",
                    Some(Duration::from_secs(30 * 86_400)),
                    OnAwaitTimeout::Fail,
                )
                .unwrap(),
            job("wait-2", "approve", "signals")
                .awaiting("go", None, OnAwaitTimeout::Run)
                .unwrap(),
        ])
        .await
        .unwrap();
    tick();
    let kept = store
        .signal(
            &NewSignal::new(id("wait-1"), "reminder")
                .unwrap()
                .with_payload(&json!({"nudge": 1}))
                .unwrap()
                .buffered(),
        )
        .await
        .unwrap();
    assert!(!kept.delivered);
    tick();
    let delivered = store
        .signal(
            &NewSignal::new(id("wait-2"), "go")
                .unwrap()
                .with_payload(&json!({"approved": true, "by": "carol"}))
                .unwrap()
                .sent_by(stamp("carol", "looks right")),
        )
        .await
        .unwrap();
    assert!(delivered.delivered);
    tick();

    // A workflow: fetch (done, with an output), parse (done, adding a
    // child at run time), report (blocked on parse's child).
    let mut wf = Workflow::with_id(WorkflowId::new(WORKFLOW).unwrap());
    let fetch = wf.step(job("wf-fetch", "fetch", "wf").with_tag("wf").unwrap());
    let parse = wf.step_after(job("wf-parse", "parse", "wf"), &[&fetch]);
    wf.step_after(
        job("wf-report", "report", "wf").with_meta("format", "pdf"),
        &[&parse],
    );
    store.insert_many(wf.into_jobs()).await.unwrap();
    tick();
    let c = claim(&store, "wf", Duration::from_secs(60)).await;
    assert_eq!(c.job.id, fetch);
    tick();
    store
        .complete_with_output(&c.lease, &Payload::output(r#"{"rows":3}"#).unwrap())
        .await
        .unwrap();
    tick();
    let c = claim(&store, "wf", Duration::from_secs(60)).await;
    assert_eq!(c.job.id, parse);
    tick();
    let added = store
        .complete_with_children(
            &c.lease,
            Some(&Payload::output(r#"{"parsed":3}"#).unwrap()),
            &[job("wf-child", "enrich", "wf")],
        )
        .await
        .unwrap();
    assert_eq!(added.children.len(), 1);
    assert_eq!(added.dependents, 1);
    tick();

    // A sealed batch: one job done, one ready, both callbacks blocked.
    let batch = WorkflowId::new(BATCH).unwrap();
    store
        .insert_many(vec![
            job("batch-a", "import", "import").in_batch(batch.clone()),
            job("batch-b", "import", "import").in_batch(batch.clone()),
        ])
        .await
        .unwrap();
    tick();
    store
        .seal_batch(&BatchSeal {
            batch: batch.clone(),
            on_success: Some(job("batch-ok", "import-done", "import")),
            on_finish: Some(job("batch-end", "import-finished", "import")),
        })
        .await
        .unwrap();
    tick();
    let c = claim(&store, "import", Duration::from_secs(60)).await;
    tick();
    store.complete(&c.lease).await.unwrap();
    tick();

    // A paused queue, a capped one, and schedules (one in a time zone,
    // one paused).
    admin
        .pause_queue(&QueueAction {
            queue: queue("mail"),
            operator: "ops".into(),
            reason: Some("provider outage".into()),
        })
        .await
        .unwrap();
    tick();
    admin
        .set_queue_limit(&QueueLimitRequest {
            queue: queue("import"),
            concurrency: Some(3),
            operator: "ops".into(),
            reason: Some("the importer's database is small".into()),
        })
        .await
        .unwrap();
    tick();
    let nightly = ScheduleDefinition::new(
        "nightly-report",
        "30 3 * * *",
        "report",
        Payload::from_json_text(r#"{"format":"pdf","pages":[1,2]}"#).unwrap(),
    )
    .unwrap()
    .on_queue("reports")
    .unwrap()
    .with_max_attempts(4)
    .unwrap()
    .with_misfire(Misfire::Backfill(3))
    .in_zone("Europe/Berlin".parse::<ScheduleZone>().unwrap());
    let hourly =
        ScheduleDefinition::new("hourly-sync", "0 * * * *", "sync", Payload::default()).unwrap();
    for definition in [nightly, hourly] {
        admin
            .add_schedule(&ScheduleAdd {
                definition,
                replace: false,
                operator: "ops".into(),
                reason: Some("reports for the board".into()),
            })
            .await
            .unwrap();
        tick();
    }
    let paused = admin
        .pause_schedule(&ScheduleAction {
            name: Name::parse("schedule", "hourly-sync").unwrap(),
            operator: "ops".into(),
            reason: Some("the sync target moves".into()),
        })
        .await
        .unwrap();
    assert!(paused.changed);
    tick();

    // A rate-limit bucket, a worker's report, chart minutes, exact counts.
    let granted = store
        .take_tokens(
            &RateBucket::queue(&queue("mail")),
            RateLimit {
                per_second: 2.5,
                burst: 10,
            },
            3,
        )
        .await
        .unwrap();
    assert_eq!(granted, 3);
    tick();
    let metrics = WorkerMetrics {
        cycles: 12,
        started: 7,
        on_time: 5,
        late: 1,
        ..WorkerMetrics::default()
    };
    store
        .report_worker(&WorkerReport {
            id: "0190a5c4-worker".into(),
            host: "host-a".into(),
            pid: 4242,
            queues: vec![queue("work"), queue("mail")],
            started_at: t0,
            metrics,
            one_shot: false,
        })
        .await
        .unwrap();
    tick();
    let minute = minute_of(clock.now());
    let minutes: Vec<MinuteCount> = [
        ("work", Series::Finished, 3),
        ("work", Series::Dead, 1),
        ("work", Series::Retry(ErrorClass::Retryable), 1),
        ("work", Series::Depth, 4),
        ("mail", Series::Depth, 2),
        ("mail", Series::OldestDueMs, 1500),
    ]
    .into_iter()
    .map(|(q, series, value)| MinuteCount {
        queue: queue(q),
        minute,
        series,
        value,
    })
    .collect();
    store.record_minutes(&minutes).await.unwrap();
    tick();
    let counted = admin.count_exactly().await.unwrap();
    assert!(!counted.is_empty());

    let jobs = store
        .list(&JobFilter {
            limit: Some(10_000),
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .len();
    Fixture {
        ready: id("ready-1"),
        waiting: id("wait-1"),
        jobs,
    }
}

/// Every job id, sorted.
async fn job_ids(admin: &Admin) -> Vec<JobId> {
    let mut ids: Vec<JobId> = admin
        .list(&JobFilter {
            limit: Some(10_000),
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    ids
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

/// The statistics without what depends on the instant they were read.
async fn stats(admin: &Admin) -> Value {
    let mut stats = to_json(
        &admin
            .stats(&StatsRequest {
                window: Duration::from_secs(86_400),
                cap: 10_000,
            })
            .await
            .unwrap(),
    );
    let object = stats.as_object_mut().unwrap();
    object.remove("at");
    object.remove("since_last_worker_cycle_ms");
    for q in object["queues"].as_array_mut().unwrap() {
        q.as_object_mut().unwrap().remove("oldest_due_age_ms");
    }
    stats
}

/// What `Admin` reads on each side, side by side, as JSON.
async fn assert_same_through_admin(sqlite: &Admin, pg: &Admin) {
    let ids = job_ids(sqlite).await;
    assert_eq!(ids, job_ids(pg).await, "the same jobs");
    for id in &ids {
        let (a, b) = (
            to_json(&sqlite.detail(id).await.unwrap()),
            to_json(&pg.detail(id).await.unwrap()),
        );
        assert_eq!(a, b, "job {id} reads the same on both sides");
        let (a, b) = (
            to_json(&sqlite.jobs().received_signal(id).await.unwrap()),
            to_json(&pg.jobs().received_signal(id).await.unwrap()),
        );
        assert_eq!(a, b, "job {id}'s received signal");
        let outputs = |store: &Arc<dyn errand::JobStore>| {
            let store = store.clone();
            let id = id.clone();
            async move {
                let outputs = store.dependency_outputs(&id).await.unwrap();
                outputs
                    .into_iter()
                    .map(|(dep, out)| (dep.to_string(), out.map(|p| p.as_str().to_owned())))
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            outputs(sqlite.jobs()).await,
            outputs(pg.jobs()).await,
            "job {id}'s dependencies' outputs"
        );
    }

    let all = AuditFilter {
        limit: Some(10_000),
        ..AuditFilter::default()
    };
    let audit = sqlite.audit_log(&all).await.unwrap();
    assert_eq!(to_json(&audit), to_json(&pg.audit_log(&all).await.unwrap()));
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    for action in [
        "replay",
        "copy",
        "cancel",
        "signal",
        "pause",
        "limit",
        "schedule_add",
        "schedule_pause",
    ] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }

    let schedules = sqlite.schedules().await.unwrap();
    assert_eq!(schedules.len(), 2);
    assert_eq!(to_json(&schedules), to_json(&pg.schedules().await.unwrap()));
    let zone = schedules
        .iter()
        .find(|s| s.definition.name.as_str() == "nightly-report")
        .unwrap();
    assert_eq!(zone.definition.tz.name(), "Europe/Berlin");
    assert_eq!(
        to_json(&sqlite.paused_queues().await.unwrap()),
        to_json(&pg.paused_queues().await.unwrap())
    );
    assert_eq!(sqlite.paused_queues().await.unwrap().len(), 1);
    assert_eq!(
        to_json(&sqlite.queue_limits().await.unwrap()),
        to_json(&pg.queue_limits().await.unwrap())
    );
    assert_eq!(sqlite.queue_limits().await.unwrap().len(), 1);

    let batch = WorkflowId::new(BATCH).unwrap();
    let view = sqlite.batch(&batch).await.unwrap();
    assert!(view.batch.sealed_at.is_some());
    assert_eq!(to_json(&view), to_json(&pg.batch(&batch).await.unwrap()));

    let wf = WorkflowId::new(WORKFLOW).unwrap();
    let view = sqlite.workflow(&wf, None, 100).await.unwrap();
    assert_eq!(view.total, 4, "three steps and a child");
    assert_eq!(
        to_json(&view),
        to_json(&pg.workflow(&wf, None, 100).await.unwrap())
    );

    let (a, b) = (stats(sqlite).await, stats(pg).await);
    assert_eq!(a, b, "the statistics");
    assert!(
        !a["workers"].as_array().unwrap().is_empty(),
        "the worker's report"
    );

    let now = Timestamp::now();
    let (a, b) = (
        sqlite.charts(None, ChartWindow::Day, now).await.unwrap(),
        pg.charts(None, ChartWindow::Day, now).await.unwrap(),
    );
    assert_eq!(to_json(&a), to_json(&b), "the charts");
    assert!(a.finished.iter().sum::<u64>() > 0, "the chart minutes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_row_moves_and_reads_the_same_through_admin() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("errand.db");
    let fixture = fixture(&path).await;

    let Some(url) = postgres_url("the transfer of every kind of row to PostgreSQL") else {
        eprintln!("skipped: ERRAND_TEST_POSTGRES_URL is unset");
        return;
    };
    let schema = PgSchema::new(&url, "transfer_all");

    let mut advances: Vec<Advance> = Vec::new();
    let report = transfer(&options(&path, &url, &schema.name, 7), |a| advances.push(a))
        .await
        .unwrap();
    let shown = serde_json::to_string_pretty(&report).unwrap();
    eprintln!("{shown}");
    assert!(report.verified, "{shown}");
    assert!(!report.dry_run && !report.resumed, "{shown}");
    assert_eq!(report.schema, schema.name);
    let mut names: Vec<&str> = report.tables.iter().map(|t| t.table.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, TABLES, "{shown}");
    for t in &report.tables {
        assert!(t.matches, "{} differs: {shown}", t.table);
        assert!(
            t.source_rows > 0,
            "{} has no row: the fixture misses it",
            t.table
        );
        assert_eq!(t.target_rows, Some(t.source_rows), "{}", t.table);
        assert!(t.source_checksum.is_some() && t.source_checksum == t.target_checksum);
    }
    let rows = |name: &str| {
        report
            .tables
            .iter()
            .find(|t| t.table == name)
            .map(|t| t.source_rows)
            .unwrap()
    };
    assert_eq!(rows("errand_jobs"), fixture.jobs as u64);
    assert_eq!(rows("errand_workflow_steps"), 4);
    for state in JobState::ALL {
        let s = report
            .states
            .iter()
            .find(|s| s.state == state.as_str())
            .unwrap_or_else(|| panic!("no job is {state}: {shown}"));
        assert!(s.source > 0 && s.target == Some(s.source), "{shown}");
    }
    // Every copied row was written by this run (the workflow steps go
    // with their jobs), and the progress was told page by page.
    let total: u64 = report
        .tables
        .iter()
        .filter(|t| t.table != "errand_workflow_steps")
        .map(|t| t.source_rows)
        .sum();
    assert_eq!(report.copied, total);
    assert!(advances.len() > 2, "{advances:?}");
    assert!(advances.windows(2).all(|w| w[0].copied <= w[1].copied));
    let last = advances.last().unwrap();
    assert_eq!((last.copied, last.total), (total, total));
    // The progress table is gone once checked.
    assert_eq!(
        schema.psql(&format!(
            "SELECT to_regclass('{}.errand_transfer') IS NULL",
            schema.name
        )),
        "t"
    );

    // Both sides read the same through Admin.
    let source = sqlite(&path, None);
    let target = postgres(&url, &schema.name, false).await;
    let (sa, pa) = (Admin::new(source.clone()), Admin::new(target.clone()));
    assert_same_through_admin(&sa, &pa).await;

    // A worker on PostgreSQL claims the ready job and settles it; new
    // rows of every table with a sequence get fresh numbers.
    let audit_before = pa
        .audit_log(&AuditFilter::default())
        .await
        .unwrap()
        .first()
        .unwrap()
        .seq;
    let c = claim(&target, "claimable", Duration::from_secs(30)).await;
    assert_eq!(c.job.id, fixture.ready);
    assert_eq!(c.job.tags, ["vip", "region:eu"]);
    let failed = fail(
        target.as_ref(),
        &c,
        "the printer is out of paper",
        ErrorClass::Retryable,
        Some(RetryAt::After(Duration::from_secs(3600))),
    )
    .await;
    assert_eq!(failed.state, JobState::Ready);
    let history = pa.detail(&fixture.ready).await.unwrap().history;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].error_class, Some(ErrorClass::Retryable));

    let inserted = target
        .insert(job("after-transfer", "deliver", "claimable"))
        .await
        .unwrap();
    assert!(inserted.created);
    let inserted = target
        .insert(NewJob::new("deliver", Payload::default()).unwrap())
        .await
        .unwrap();
    assert!(inserted.created);

    assert!(
        pa.pause_queue(&QueueAction {
            queue: queue("claimable"),
            operator: "ops".into(),
            reason: Some("after the move".into()),
        })
        .await
        .unwrap()
    );
    let newest = pa.audit_log(&AuditFilter::default()).await.unwrap();
    assert_eq!(newest[0].action, "pause");
    assert!(
        newest[0].seq > audit_before,
        "{} after {audit_before}",
        newest[0].seq
    );

    let signalled = target
        .signal(
            &NewSignal::new(fixture.waiting.clone(), "approval")
                .unwrap()
                .sent_by(stamp("dave", "approved after the move")),
        )
        .await
        .unwrap();
    assert!(signalled.delivered);
    let signals = pa.detail(&fixture.waiting).await.unwrap().signals;
    assert_eq!(signals.len(), 2, "{signals:?}");
    assert!(signals[1].seq > signals[0].seq);
    assert_eq!(
        pa.job(&fixture.waiting).await.unwrap().resumed_by,
        Some(signals[1].seq)
    );
}

/// A database of `n` ready jobs (each with a tag and a metadata entry).
async fn small(path: &Path, n: usize) -> Arc<dyn Store> {
    let store = sqlite(path, None);
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            job(&format!("job-{i:04}"), "t", "default")
                .with_tag("bulk")
                .unwrap()
                .with_meta("i", &i.to_string())
        })
        .collect();
    store.insert_many(jobs).await.unwrap();
    store
}

/// Starts a transfer and aborts it once `after` rows are copied; returns
/// the last count it reported.
async fn interrupt(options: TransferOptions, after: u64) -> u64 {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handle = tokio::spawn(async move {
        transfer(&options, move |a: Advance| {
            let _ = tx.send(a.copied);
        })
        .await
    });
    let mut seen = 0;
    while let Some(copied) = rx.recv().await {
        seen = copied;
        if copied >= after {
            break;
        }
    }
    handle.abort();
    match handle.await {
        Err(e) if e.is_cancelled() => {}
        other => panic!("the transfer was not stopped midway: {other:?}"),
    }
    seen
}

fn error_of(result: errand::Result<Report>) -> String {
    match result {
        Ok(report) => panic!("not refused: {report:?}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_a_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.db");
    drop(small(&path, 20).await);
    let nowhere = "postgres://nobody@127.0.0.1:1/none";

    // A batch of 0 (or above the most) is refused before anything is read.
    for batch in [0, errand_transfer::MAX_BATCH + 1] {
        let e = error_of(transfer(&options(&path, nowhere, "s", batch), |_| {}).await);
        assert!(e.contains("batch"), "{e}");
    }

    // A live lease is refused, naming the job, before the target is looked
    // at.
    let live_path = dir.path().join("live.db");
    let live = small(&live_path, 3).await;
    let c = claim(&live, "default", Duration::from_secs(60)).await;
    let e = error_of(transfer(&options(&live_path, nowhere, "s", 10), |_| {}).await);
    assert!(e.contains(c.job.id.as_str()), "{e}");
    assert!(e.contains("lease"), "{e}");
    drop(live);

    let Some(url) = postgres_url("the transfer's refusals on PostgreSQL") else {
        eprintln!("skipped: ERRAND_TEST_POSTGRES_URL is unset");
        return;
    };

    // A dry run counts the source and writes nothing: the schema is not
    // even created.
    let dry = PgSchema::new(&url, "transfer_dry");
    let mut dry_options = options(&path, &url, &dry.name, 10);
    dry_options.dry_run = true;
    let report = transfer(&dry_options, |_| {}).await.unwrap();
    assert!(report.dry_run && !report.verified && !report.resumed);
    assert_eq!(report.copied, 0);
    let rows = |name: &str| report.tables.iter().find(|t| t.table == name).unwrap();
    assert_eq!(rows("errand_jobs").source_rows, 20);
    assert_eq!(rows("errand_job_tags").source_rows, 20);
    assert_eq!(rows("errand_job_meta").source_rows, 20);
    assert_eq!(rows("errand_audit").source_rows, 0);
    assert!(report.tables.iter().all(|t| t.target_rows.is_none()));
    let ready = report.states.iter().find(|s| s.state == "ready").unwrap();
    assert_eq!((ready.source, ready.target), (20, None));
    assert_eq!(
        dry.psql(&format!(
            "SELECT count(*) FROM pg_namespace WHERE nspname = '{}'",
            dry.name
        )),
        "0",
        "a dry run created the schema"
    );

    // `public` is refused unless allowed, before anything is written, by
    // a dry run too.
    let e = error_of(transfer(&options(&path, &url, "public", 10), |_| {}).await);
    assert!(e.contains("public"), "{e}");
    let public_dry = TransferOptions {
        dry_run: true,
        ..options(&path, &url, "public", 10)
    };
    let e = error_of(transfer(&public_dry, |_| {}).await);
    assert!(
        e.contains("--allow-public-schema") || e.contains("public"),
        "{e}"
    );

    // A schema with Errand's tables and no row (`errand migrate` made it)
    // is taken.
    let migrated = PgSchema::new(&url, "transfer_migrated");
    drop(postgres(&url, &migrated.name, true).await);
    let report = transfer(&options(&path, &url, &migrated.name, 10), |_| {})
        .await
        .unwrap();
    assert!(report.verified && !report.resumed);

    // A schema holding Errand's data is refused, by name.
    let full = PgSchema::new(&url, "transfer_full");
    let store = postgres(&url, &full.name, true).await;
    store.insert(job("theirs", "t", "default")).await.unwrap();
    drop(store);
    let e = error_of(transfer(&options(&path, &url, &full.name, 10), |_| {}).await);
    assert!(e.contains(&full.name), "{e}");
    assert!(e.contains("already holds"), "{e}");
    // ... and left as it was.
    assert_eq!(
        full.psql(&format!("SELECT count(*) FROM {}.errand_jobs", full.name)),
        "1"
    );

    // A schema holding another file's unfinished transfer is refused,
    // naming that file; the file it came from goes on with it.
    let other = dir.path().join("other.db");
    drop(small(&other, 200).await);
    let unfinished = PgSchema::new(&url, "transfer_unfinished");
    interrupt(options(&other, &url, &unfinished.name, 1), 30).await;
    let e = error_of(transfer(&options(&path, &url, &unfinished.name, 10), |_| {}).await);
    assert!(e.contains(&unfinished.name), "{e}");
    assert!(e.contains("unfinished transfer"), "{e}");
    assert!(e.contains("other.db"), "{e}");
    let report = transfer(&options(&other, &url, &unfinished.name, 100), |_| {})
        .await
        .unwrap();
    assert!(report.resumed && report.verified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_transfer_goes_on_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("many.db");
    drop(small(&path, 300).await);
    let Some(url) = postgres_url("a resumed transfer to PostgreSQL") else {
        eprintln!("skipped: ERRAND_TEST_POSTGRES_URL is unset");
        return;
    };
    let schema = PgSchema::new(&url, "transfer_resume");

    // 300 jobs, 300 tags and 300 metadata entries, a row a page: stopped
    // after 100.
    let seen = interrupt(options(&path, &url, &schema.name, 1), 100).await;
    assert!(seen >= 100);
    assert_eq!(
        schema.psql(&format!(
            "SELECT to_regclass('{}.errand_transfer') IS NOT NULL",
            schema.name
        )),
        "t",
        "the progress is kept"
    );
    let written: u64 = schema
        .psql(&format!("SELECT count(*) FROM {}.errand_jobs", schema.name))
        .parse()
        .unwrap();
    assert!((100..300).contains(&written), "{written} jobs written");

    // A dry run sees the unfinished transfer.
    let mut dry = options(&path, &url, &schema.name, 50);
    dry.dry_run = true;
    assert!(transfer(&dry, |_| {}).await.unwrap().resumed);

    let mut advances = Vec::new();
    let report = transfer(&options(&path, &url, &schema.name, 50), |a| {
        advances.push(a)
    })
    .await
    .unwrap();
    let shown = serde_json::to_string_pretty(&report).unwrap();
    assert!(report.resumed && report.verified, "{shown}");
    let total: u64 = report
        .tables
        .iter()
        .filter(|t| t.table != "errand_workflow_steps")
        .map(|t| t.source_rows)
        .sum();
    assert_eq!(total, 900, "{shown}");
    assert!(report.copied < total, "{shown}");
    assert!(report.copied + seen >= total, "{shown}");
    assert!(advances[0].copied >= seen, "{advances:?} after {seen}");
    assert_eq!(advances.last().unwrap().copied, total);
    assert!(report.tables.iter().all(|t| t.matches), "{shown}");
    assert_eq!(
        schema.psql(&format!(
            "SELECT to_regclass('{}.errand_transfer') IS NULL",
            schema.name
        )),
        "t",
        "the progress is dropped once checked"
    );

    // A third run finds Errand's data and refuses.
    let e = error_of(transfer(&options(&path, &url, &schema.name, 50), |_| {}).await);
    assert!(e.contains("already holds"), "{e}");

    // What moved reads the same through Admin.
    let (sa, pa) = (
        Admin::new(sqlite(&path, None)),
        Admin::new(postgres(&url, &schema.name, false).await),
    );
    let ids = job_ids(&sa).await;
    assert_eq!(ids.len(), 300);
    assert_eq!(ids, job_ids(&pa).await);
    for id in ids.iter().step_by(37) {
        assert_eq!(
            to_json(&sa.detail(id).await.unwrap()),
            to_json(&pa.detail(id).await.unwrap())
        );
    }
    let counts = |a: &Admin| {
        let a = a.clone();
        async move {
            let s = stats(&a).await;
            s["queues"].clone()
        }
    };
    assert_eq!(counts(&sa).await, counts(&pa).await);
}
