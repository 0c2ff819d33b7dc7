//! The operator's surface: pausing queues across every process, purging
//! dead jobs with an audit trail that outlives them, the audit log, the
//! queue statistics and the workers' reports.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    AuditFilter, CancelRequest, ClaimRequest, Clock, CopyRequest, Error, ErrorClass, Failure,
    JobId, JobState, KeyLimit, ManualClock, Name, PurgeRequest, QueueAction, ReplayRequest,
    RescheduleRequest, Schedule, StatsRequest, Store, TraceParent, WorkerMetrics, WorkerReport,
};

use crate::{admin, claim_one, claim_req, get, job, retry_after};

const LEASE: Duration = Duration::from_secs(10);
const MS: Duration = Duration::from_millis(1);

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

fn queue(s: &str) -> Name {
    Name::parse("queue", s).unwrap()
}

fn on(q: &str, name: &str) -> errand_core::NewJob {
    job(name).on_queue(q).unwrap()
}

fn action(q: &str, reason: Option<&str>) -> QueueAction {
    QueueAction {
        queue: queue(q),
        operator: "ops@example".into(),
        reason: reason.map(str::to_owned),
    }
}

/// A W3C trace context for the tests.
pub fn trace() -> TraceParent {
    TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap()
}

fn ids(jobs: &[errand_core::ClaimedJob]) -> Vec<&str> {
    let mut v: Vec<&str> = jobs.iter().map(|c| c.job.id.as_str()).collect();
    v.sort_unstable();
    v
}

async fn kill(store: &dyn Store, name: &str) {
    // Claims until it holds `name`, completing the others (so the loop
    // cannot take the same job again and again).
    let c = loop {
        let c = claim_one(store, LEASE).await;
        if c.job.id.as_str() == name {
            break c;
        }
        store.complete(&c.lease).await.unwrap();
    };
    let failure = Failure {
        error: format!("{name} cannot work"),
        class: ErrorClass::Permanent,
        retry: None,
    };
    store.fail(&c.lease, failure).await.unwrap();
}

/// A paused queue gives nothing to any claim — neither due jobs nor
/// expired leases, whether the claim names the queue or takes every queue —
/// until it is resumed; other queues carry on. Pausing twice or resuming a
/// queue that is not paused changes nothing. Both actions are audited.
pub async fn a_paused_queue_gives_nothing_to_claims_until_resumed(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    for (q, n) in [("mail", "m1"), ("mail", "m2"), ("bulk", "b1")] {
        store.insert(on(q, n)).await.unwrap();
    }
    // m1 runs; its worker will vanish.
    let lost = store
        .claim(&ClaimRequest {
            queues: vec![queue("mail")],
            limit: 1,
            lease: LEASE,
            rate: None,
            reclaim: true,
        })
        .await
        .unwrap();
    assert_eq!(lost.len(), 1);
    assert!(
        admin(&store)
            .pause_queue(&action("mail", Some("provider down")))
            .await
            .unwrap()
    );
    // A second pause, by someone else, changes nothing: the first
    // operator and reason stand.
    let mut again = action("mail", None);
    again.operator = "someone-else".into();
    assert!(
        !admin(&store).pause_queue(&again).await.unwrap(),
        "already paused: nothing changes"
    );
    let paused = store.paused_queues().await.unwrap();
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0].queue, queue("mail"));
    assert_eq!(paused[0].operator, "ops@example");
    assert_eq!(paused[0].reason.as_deref(), Some("provider down"));
    assert_eq!(paused[0].paused_at, clock.now());

    clock.advance(LEASE + MS); // m1's lease has expired
    let got = store.claim(&claim_req(10, LEASE)).await.unwrap();
    assert_eq!(ids(&got), ["b1"], "only the queue that is not paused");
    let named = ClaimRequest {
        queues: vec![queue("mail")],
        limit: 10,
        lease: LEASE,
        rate: None,
        reclaim: true,
    };
    assert!(store.claim(&named).await.unwrap().is_empty());
    assert_eq!(
        get(store.as_ref(), "m1").await.state,
        JobState::Running,
        "an expired lease in a paused queue is not reclaimed"
    );

    assert!(
        admin(&store)
            .resume_queue(&action("mail", Some("back")))
            .await
            .unwrap()
    );
    assert!(
        !admin(&store)
            .resume_queue(&action("mail", None))
            .await
            .unwrap()
    );
    assert!(store.paused_queues().await.unwrap().is_empty());
    let got = store.claim(&named).await.unwrap();
    assert_eq!(ids(&got), ["m1", "m2"]);

    let log = store
        .audit_log(&AuditFilter {
            queue: Some(queue("mail")),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let actions: Vec<(&str, Option<&JobId>, Option<&str>)> = log
        .iter()
        .map(|e| (e.action.as_str(), e.job_id.as_ref(), e.reason.as_deref()))
        .collect();
    assert_eq!(
        actions,
        [
            ("resume", None, Some("back")),
            ("pause", None, Some("provider down"))
        ],
        "one entry per change, newest first"
    );
    // Bad input is refused before anything is written.
    let mut bad = action("mail", None);
    bad.operator = String::new();
    assert!(matches!(
        admin(&store).pause_queue(&bad).await,
        Err(Error::Invalid(_))
    ));
    assert!(store.paused_queues().await.unwrap().is_empty());
}

/// A purge deletes dead jobs and their history, all or none, refusing any
/// job that is not dead (with [`PurgeRequest::REFUSED`]); each purge leaves
/// an audit entry that outlives the job.
pub async fn purge_deletes_only_dead_jobs_and_its_audit_outlives_them(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    for n in ["d1", "d2", "live"] {
        store.insert(on("mail", n)).await.unwrap();
    }
    kill(store.as_ref(), "d1").await;
    kill(store.as_ref(), "d2").await;
    let purge = |names: &[&str], reason: &str| PurgeRequest {
        ids: names.iter().map(|n| id(n)).collect(),
        operator: "ops@example".into(),
        reason: reason.into(),
    };
    let err = admin(&store)
        .purge_jobs(&purge(&["d1", "live"], "cleanup"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidState { id, state, hint }
            if id == "live" && state == "ready" && hint == PurgeRequest::REFUSED),
        "{err}"
    );
    assert_eq!(
        get(store.as_ref(), "d1").await.state,
        JobState::Dead,
        "all or none"
    );
    assert!(matches!(
        admin(&store).purge_jobs(&purge(&["d1"], "")).await,
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        admin(&store).purge_jobs(&purge(&["nope"], "cleanup")).await,
        Err(Error::NotFound(_))
    ));

    let gone = admin(&store)
        .purge_jobs(&purge(&["d1", "d2", "d1"], "poison payloads"))
        .await
        .unwrap();
    assert_eq!(
        gone,
        [id("d1"), id("d2")],
        "a job named twice is purged once"
    );
    assert!(matches!(
        store.get(&id("d1")).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        store.detail(&id("d2")).await,
        Err(Error::NotFound(_))
    ));
    assert_eq!(get(store.as_ref(), "live").await.state, JobState::Ready);
    let log = store
        .audit_log(&AuditFilter {
            job: Some(id("d1")),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].action, "purge");
    assert_eq!(log[0].queue, Some(queue("mail")));
    assert_eq!(log[0].operator, "ops@example");
    assert_eq!(log[0].reason.as_deref(), Some("poison payloads"));
    // The id is free again: a new job may take it.
    assert!(store.insert(on("mail", "d1")).await.unwrap().created);
}

/// `replay --new-key`: a copy of a dead or cancelled job goes in under a
/// new id, due now, with a fresh history and the original's queue, kind,
/// payload, priority, budgets, key, deadline and trace context; the
/// original is not touched; one `copy` audit entry names both jobs and
/// shows in both histories. All or none (a job that is neither dead nor
/// cancelled is refused with [`CopyRequest::REFUSED`]); one named twice is
/// copied once.
pub async fn a_copy_takes_a_new_id_leaves_the_original_and_is_audited(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let original = on("mail", "orig")
        .with_priority(3)
        .with_max_attempts(2)
        .unwrap()
        .with_max_lease_expiries(4)
        .unwrap()
        .give_up_after(Duration::from_secs(3600))
        .with_key("acct", KeyLimit::Concurrent(2))
        .unwrap()
        .with_deadline(crate::T0.plus(Duration::from_secs(86_400)))
        .with_traceparent(trace());
    store.insert(original).await.unwrap();
    store.insert(on("mail", "live")).await.unwrap();
    store.insert(on("bulk", "gone")).await.unwrap();
    admin(&store)
        .cancel_jobs(&CancelRequest {
            ids: vec![id("gone")],
            operator: "alice".into(),
            reason: None,
        })
        .await
        .unwrap();
    kill(store.as_ref(), "orig").await;
    let copy = |names: &[&str], operator: &str| CopyRequest {
        ids: names.iter().map(|n| id(n)).collect(),
        operator: operator.into(),
        reason: Some("provider fixed".into()),
    };
    let s: &dyn Store = store.as_ref();
    let entries = || async move { s.audit_log(&AuditFilter::default()).await.unwrap().len() };
    let before = entries().await;

    let err = admin(&store)
        .copy_jobs(&copy(&["orig", "live"], "ops"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidState { id, state, hint }
            if id == "live" && state == "ready" && hint == CopyRequest::REFUSED),
        "{err}"
    );
    assert!(matches!(
        admin(&store)
            .copy_jobs(&copy(&["orig", "nope"], "ops"))
            .await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        admin(&store).copy_jobs(&copy(&["orig"], "")).await,
        Err(Error::Invalid(_))
    ));
    let all = |state| async move {
        s.list(&errand_core::JobFilter {
            state: Some(state),
            ..errand_core::JobFilter::default()
        })
        .await
        .unwrap()
        .len()
    };
    assert_eq!(
        all(JobState::Ready).await,
        1,
        "a refused copy inserts nothing"
    );
    assert_eq!(entries().await, before, "a refused copy audits nothing");

    clock.advance(Duration::from_secs(60));
    let copied = admin(&store)
        .copy_jobs(&copy(&["orig", "gone", "orig"], "ops"))
        .await
        .unwrap();
    let from: Vec<&str> = copied.iter().map(|c| c.from.as_str()).collect();
    assert_eq!(
        from,
        ["orig", "gone"],
        "in order; one named twice is copied once"
    );
    let dead = get(store.as_ref(), "orig").await;
    assert_eq!(
        (dead.state, dead.replays, dead.attempts),
        (JobState::Dead, 0, 1),
        "the original is not touched"
    );
    assert_eq!(get(store.as_ref(), "gone").await.state, JobState::Cancelled);

    let new = &copied[0].job;
    assert!(new.id != dead.id && new.id != copied[1].job.id);
    assert_eq!(
        (new.state, new.attempts, new.replays, new.lease_expiries),
        (JobState::Ready, 0, 0, 0)
    );
    assert_eq!(new.available_at, clock.now(), "due now");
    assert_eq!(
        (&new.queue, &new.kind, &new.payload),
        (&dead.queue, &dead.kind, &dead.payload)
    );
    assert_eq!(
        (new.priority, new.max_attempts, new.max_lease_expiries),
        (3, 2, 4)
    );
    assert_eq!(new.key, dead.key);
    assert_eq!(new.deadline, dead.deadline);
    assert_eq!(new.traceparent, Some(trace()));
    assert_eq!(
        new.give_up_at,
        Some(new.created_at.plus(Duration::from_secs(3600))),
        "the elapsed-time budget counts again from the copy"
    );
    assert_eq!(store.get(&new.id).await.unwrap(), *new);
    let history = store.detail(&new.id).await.unwrap();
    assert!(history.history.is_empty());

    // One entry per copy, on both jobs' histories and in the log by either id.
    assert_eq!(entries().await, before + 2);
    let by_new = store
        .audit_log(&AuditFilter {
            job: Some(new.id.clone()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let by_original = store
        .audit_log(&AuditFilter {
            job: Some(id("orig")),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(by_new, by_original);
    assert_eq!(by_new.len(), 1);
    let e = &by_new[0];
    assert_eq!(
        (
            e.action.as_str(),
            e.job_id.as_ref(),
            e.copy_id.as_ref(),
            e.queue.as_ref(),
            e.operator.as_str(),
            e.reason.as_deref()
        ),
        (
            "copy",
            Some(&id("orig")),
            Some(&new.id),
            Some(&queue("mail")),
            "ops",
            Some("provider fixed")
        )
    );
    assert_eq!(e.at, clock.now());
    let told = store.detail(&id("orig")).await.unwrap().audit;
    assert_eq!(told.len(), 1);
    assert_eq!(
        (told[0].copied_to.as_ref(), told[0].copied_from.as_ref()),
        (Some(&new.id), None)
    );
    assert_eq!(
        (
            history.audit.len(),
            history.audit.first().and_then(|a| a.copied_from.as_ref()),
            history.audit.first().and_then(|a| a.copied_to.as_ref()),
        ),
        (1, Some(&id("orig")), None)
    );

    // The copy runs like any job.
    let mine = claim_one(store.as_ref(), LEASE).await;
    assert!(
        mine.job.id == new.id || mine.job.id.as_str() == "live" || mine.job.id == copied[1].job.id
    );
}

/// The audit log lists every operator action newest first, pages by
/// sequence number and filters by job and by queue.
pub async fn the_audit_log_pages_newest_first_and_filters(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    for (q, n) in [("mail", "a"), ("mail", "b"), ("bulk", "c")] {
        store.insert(on(q, n)).await.unwrap();
    }
    let cancel = |n: &str| CancelRequest {
        ids: vec![id(n)],
        operator: "alice".into(),
        reason: Some(format!("cancel {n}")),
    };
    for n in ["a", "b", "c"] {
        admin(&store).cancel_jobs(&cancel(n)).await.unwrap();
        clock.advance(MS);
    }
    admin(&store)
        .replay_jobs(&ReplayRequest {
            ids: vec![id("a")],
            operator: "bob".into(),
            reason: None,
        })
        .await
        .unwrap();
    admin(&store)
        .pause_queue(&action("bulk", None))
        .await
        .unwrap();

    let all = store.audit_log(&AuditFilter::default()).await.unwrap();
    let seen: Vec<(&str, Option<&str>)> = all
        .iter()
        .map(|e| (e.action.as_str(), e.job_id.as_ref().map(JobId::as_str)))
        .collect();
    assert_eq!(
        seen,
        [
            ("pause", None),
            ("replay", Some("a")),
            ("cancel", Some("c")),
            ("cancel", Some("b")),
            ("cancel", Some("a")),
        ]
    );
    assert!(all.windows(2).all(|w| w[0].seq > w[1].seq));
    assert_eq!(all[1].operator, "bob");
    assert_eq!(all[4].at, crate::T0);

    // Pages of two, each after the last sequence number of the one before.
    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .audit_log(&AuditFilter {
                before,
                limit: Some(2),
                ..AuditFilter::default()
            })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        before = page.last().map(|e| e.seq);
        pages.push(page.iter().map(|e| e.seq).collect::<Vec<_>>());
    }
    let flat: Vec<u64> = pages.concat();
    assert_eq!(flat, all.iter().map(|e| e.seq).collect::<Vec<_>>());
    assert_eq!(pages.len(), 3);

    let of_a = store
        .audit_log(&AuditFilter {
            job: Some(id("a")),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        of_a.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        ["replay", "cancel"]
    );
    let bulk = store
        .audit_log(&AuditFilter {
            queue: Some(queue("bulk")),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        bulk.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        ["pause", "cancel"],
        "a job action carries its job's queue"
    );
}

/// Statistics count each queue's due, scheduled, running (live and
/// expired leases) and dead jobs, its oldest due age, and the window's
/// retries and dead letters by error class; a state past the cap is
/// marked truncated.
pub async fn stats_count_each_queue_with_leases_age_and_window(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let t0 = clock.now();
    for n in ["m1", "m2", "m3", "m4", "m5"] {
        store
            .insert(on("mail", n).with_max_attempts(3).unwrap())
            .await
            .unwrap();
    }
    store
        .insert(on("mail", "later").scheduled(Schedule::After(Duration::from_secs(3600))))
        .await
        .unwrap();
    store.insert(on("bulk", "b1")).await.unwrap();
    clock.advance(Duration::from_secs(1));
    // m1 retries (due in 10 minutes: scheduled), m2 goes dead, m3 runs with
    // a short lease that will expire, m4 runs with a long one, m5 waits.
    let claim = |lease| ClaimRequest {
        queues: vec![queue("mail")],
        limit: 1,
        lease,
        rate: None,
        reclaim: true,
    };
    let take = |name: &'static str, lease: Duration| {
        let store = store.clone();
        async move {
            let mut c = store.claim(&claim(lease)).await.unwrap();
            assert_eq!(c.len(), 1);
            let c = c.remove(0);
            assert_eq!(c.job.id.as_str(), name, "claims go oldest first");
            c
        }
    };
    let c1 = take("m1", LEASE).await;
    store
        .fail(
            &c1.lease,
            retry_after("try later", Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let c2 = take("m2", LEASE).await;
    store
        .fail(
            &c2.lease,
            Failure {
                error: "bad payload".into(),
                class: ErrorClass::Permanent,
                retry: None,
            },
        )
        .await
        .unwrap();
    let _c3 = take("m3", Duration::from_secs(2)).await;
    let _c4 = take("m4", Duration::from_secs(600)).await;
    clock.advance(Duration::from_secs(5));

    let req = StatsRequest {
        window: Duration::from_secs(60),
        cap: 1000,
    };
    let stats = store.stats(&req).await.unwrap();
    assert_eq!(stats.at, clock.now());
    assert!(stats.truncated.is_empty());
    let names: Vec<&str> = stats.queues.iter().map(|q| q.queue.as_str()).collect();
    assert_eq!(names, ["bulk", "mail"]);
    let mail = &stats.queues[1].counts;
    assert_eq!(
        (mail.ready, mail.scheduled),
        (1, 2),
        "m5 due; m1 and `later` not"
    );
    assert_eq!(
        (mail.running, mail.active_leases, mail.expired_leases),
        (2, 1, 1)
    );
    assert_eq!(mail.dead, 1);
    assert_eq!(mail.oldest_due_at, Some(t0));
    assert_eq!(mail.oldest_due_age_ms, Some(6_000));
    assert_eq!(mail.retries.get("retryable"), Some(&1));
    assert_eq!(mail.dead_letters.get("permanent"), Some(&1));
    let bulk = &stats.queues[0].counts;
    assert_eq!((bulk.ready, bulk.running, bulk.dead), (1, 0, 0));
    assert!(bulk.retries.is_empty() && bulk.dead_letters.is_empty());

    // Past the window the retries and dead letters are no longer counted;
    // the states still are.
    clock.advance(Duration::from_secs(120));
    let later = store.stats(&req).await.unwrap();
    let mail = &later.queues[1].counts;
    assert!(mail.retries.is_empty() && mail.dead_letters.is_empty());
    assert_eq!(mail.dead, 1);

    // A cap below a queue's rows in a state marks the state truncated; a
    // queue at the cap is not.
    let capped = store
        .stats(&StatsRequest {
            window: req.window,
            cap: 2,
        })
        .await
        .unwrap();
    assert_eq!(
        capped.truncated,
        ["ready"],
        "mail: 3 ready rows, 2 running, 1 dead"
    );
    let bulk = &capped.queues[0].counts;
    assert_eq!(bulk.ready, 1, "the other queue is counted in full");
    // Two failed attempts in an hour: a cap of one leaves one out and says
    // so; a cap of two reads them all.
    let window = |cap| StatsRequest {
        window: Duration::from_secs(3600),
        cap,
    };
    let recent = store.stats(&window(1)).await.unwrap();
    assert!(
        recent.truncated.iter().any(|t| t == "window"),
        "{:?}",
        recent.truncated
    );
    let recent = store.stats(&window(2)).await.unwrap();
    assert!(
        !recent.truncated.iter().any(|t| t == "window"),
        "{:?}",
        recent.truncated
    );
    let mail = &recent.queues[1].counts;
    assert_eq!((mail.retries.len(), mail.dead_letters.len()), (1, 1));
}

/// A worker's report is kept by id (the latest wins) and tells when any
/// worker last completed a claim cycle.
pub async fn worker_reports_keep_the_latest_per_worker(store: Arc<dyn Store>, clock: ManualClock) {
    let mut report = WorkerReport {
        id: "w-1".into(),
        host: "host-a".into(),
        pid: 4242,
        queues: vec![queue("mail")],
        started_at: clock.now(),
        metrics: WorkerMetrics::default(),
        one_shot: false,
    };
    store.report_worker(&report).await.unwrap();
    clock.advance(Duration::from_secs(3));
    report.metrics.cycles = 7;
    report
        .metrics
        .start_latency
        .observe(Duration::from_millis(20));
    store.report_worker(&report).await.unwrap();
    let reported = clock.now();
    clock.advance(Duration::from_secs(2));
    let stats = store.stats(&StatsRequest::default()).await.unwrap();
    assert_eq!(stats.workers.len(), 1);
    let w = &stats.workers[0];
    assert_eq!(
        (w.id.as_str(), w.host.as_str(), w.pid),
        ("w-1", "host-a", 4242)
    );
    assert_eq!(w.queues, [queue("mail")]);
    assert_eq!(w.metrics, report.metrics);
    assert_eq!(w.last_cycle_at, reported);
    assert_eq!(stats.last_worker_cycle_at, Some(reported));
    assert_eq!(stats.since_last_worker_cycle_ms, Some(2_000));
    let mut bad = report.clone();
    bad.id = String::new();
    assert!(matches!(
        store.report_worker(&bad).await,
        Err(Error::Invalid(_))
    ));
}

/// One-shot runs (`errand work --once`) report under a shared id and their
/// counts add up, histograms included; each run moves the last cycle
/// forward. A long-running worker's report still replaces its own.
pub async fn one_shot_reports_add_up_under_their_id(store: Arc<dyn Store>, clock: ManualClock) {
    let run = |latency_ms: u64| {
        let mut metrics = WorkerMetrics {
            cycles: 1,
            started: 1,
            ..WorkerMetrics::default()
        };
        metrics
            .start_latency
            .observe(Duration::from_millis(latency_ms));
        WorkerReport {
            id: "once@host-a/mail".into(),
            host: "host-a".into(),
            pid: 100,
            queues: vec![queue("mail")],
            started_at: clock.now(),
            metrics,
            one_shot: true,
        }
    };
    store.report_worker(&run(3)).await.unwrap();
    clock.advance(Duration::from_secs(60));
    let mut idle = run(0);
    idle.metrics = WorkerMetrics {
        cycles: 1,
        ..WorkerMetrics::default()
    };
    idle.pid = 101;
    store.report_worker(&idle).await.unwrap();
    clock.advance(Duration::from_secs(60));
    let mut third = run(2_000);
    third.pid = 102;
    third.metrics.record_success(Some(clock.now()), clock.now());
    store.report_worker(&third).await.unwrap();
    let last = clock.now();

    let stats = store.stats(&StatsRequest::default()).await.unwrap();
    assert_eq!(stats.workers.len(), 1, "one row for every run");
    let w = &stats.workers[0];
    assert_eq!((w.id.as_str(), w.pid), ("once@host-a/mail", 102));
    assert_eq!(w.last_cycle_at, last);
    assert_eq!((w.metrics.cycles, w.metrics.started), (3, 2));
    assert_eq!(w.metrics.start_latency.count(), 2);
    assert_eq!(w.metrics.start_latency.sum_ms, 2_003);
    assert_eq!((w.metrics.on_time, w.metrics.late), (1, 0));
    assert_eq!(w.metrics.lateness.count(), 1);

    // A long-running worker's totals replace what it reported before.
    let mut long = run(5);
    long.id = "w-long".into();
    long.one_shot = false;
    store.report_worker(&long).await.unwrap();
    store.report_worker(&long).await.unwrap();
    let stats = store.stats(&StatsRequest::default()).await.unwrap();
    let w = stats.workers.iter().find(|w| w.id == "w-long").unwrap();
    assert_eq!(w.metrics, long.metrics);
}

/// A job's business deadline and trace context are stored as given and
/// come with the job to every attempt, through retries and a replay.
pub async fn a_job_carries_its_deadline_and_trace_context_to_every_attempt(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let deadline = clock.now().plus(Duration::from_secs(90));
    let new = job("traced")
        .with_max_attempts(1)
        .unwrap()
        .with_deadline(deadline)
        .with_traceparent(trace());
    let stored = store.insert(new).await.unwrap().job;
    assert_eq!(stored.deadline, Some(deadline));
    assert_eq!(stored.traceparent, Some(trace()));
    store.insert(job("plain")).await.unwrap();
    assert_eq!(get(store.as_ref(), "plain").await.traceparent, None);
    assert_eq!(get(store.as_ref(), "plain").await.deadline, None);

    let c = loop {
        let c = claim_one(store.as_ref(), LEASE).await;
        if c.job.id.as_str() == "traced" {
            break c;
        }
        store.complete(&c.lease).await.unwrap();
    };
    assert_eq!(c.job.traceparent, Some(trace()));
    assert_eq!(c.job.deadline, Some(deadline));
    store.fail(&c.lease, retry_after("once", MS)).await.unwrap();
    admin(&store)
        .replay_jobs(&ReplayRequest {
            ids: vec![id("traced")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    let again = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(again.job.id, id("traced"));
    assert_eq!(again.job.traceparent, Some(trace()));
    assert_eq!(again.job.deadline, Some(deadline));
}

/// A queue is counted however many rows other queues hold: each queue's
/// counts read its own rows, so a small queue behind a large backlog (of
/// any state) is neither left out nor undercounted, and only the large
/// queue's counts are lower bounds.
pub async fn stats_count_every_queue_even_behind_a_larger_backlog(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let later = Schedule::After(Duration::from_secs(3600));
    for i in 0..5 {
        store
            .insert(on("big", &format!("b{i}")).scheduled(later))
            .await
            .unwrap();
    }
    for i in 0..4 {
        store.insert(on("bigdead", &format!("x{i}"))).await.unwrap();
        kill(store.as_ref(), &format!("x{i}")).await;
    }
    clock.advance(MS);
    store.insert(on("smalldead", "y1")).await.unwrap();
    kill(store.as_ref(), "y1").await;
    store.insert(on("small", "s1")).await.unwrap();
    store.insert(on("small", "s2")).await.unwrap();
    let stats = store
        .stats(&StatsRequest {
            window: Duration::from_secs(60),
            cap: 3,
        })
        .await
        .unwrap();
    let of = |name: &str| {
        stats
            .queues
            .iter()
            .find(|q| q.queue.as_str() == name)
            .unwrap_or_else(|| panic!("queue {name} is missing: {stats:?}"))
            .counts
            .clone()
    };
    assert_eq!((of("small").ready, of("small").scheduled), (2, 0));
    assert_eq!(of("smalldead").dead, 1);
    assert!(of("big").scheduled >= 3, "{:?}", of("big"));
    assert!(of("bigdead").dead >= 3, "{:?}", of("bigdead"));
    assert!(
        stats.truncated.iter().any(|t| t == "ready"),
        "{:?}",
        stats.truncated
    );
    assert!(
        stats.truncated.iter().any(|t| t == "dead"),
        "{:?}",
        stats.truncated
    );
}

fn reschedule(ids: &[&str], run: Option<Schedule>, priority: Option<i16>) -> RescheduleRequest {
    RescheduleRequest {
        ids: ids.iter().map(|s| id(s)).collect(),
        run,
        priority,
        operator: "ops@example".into(),
        reason: Some("customer waiting".into()),
    }
}

/// A waiting job moves to a new due time and/or priority and nothing else
/// changes; one named twice moves once; a request naming a job that is not
/// waiting changes none of them (refused with
/// [`RescheduleRequest::REFUSED`]); each move is audited with the change.
pub async fn a_waiting_job_is_rescheduled_all_or_none_and_audited(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let hour = Duration::from_secs(3600);
    let parked = job("r1").scheduled(Schedule::After(hour));
    store.insert(parked).await.unwrap();
    store.insert(job("r2")).await.unwrap();
    // r2 runs once and is given back: a waiting job with an attempt spent.
    let claimed = store.claim(&claim_req(1, LEASE)).await.unwrap();
    assert_eq!(claimed[0].job.id, id("r2"));
    store.release(&claimed[0].lease).await.unwrap();

    // Brought forward to now, named twice: moved once, nothing else changed.
    clock.advance(Duration::from_secs(5));
    let moved = admin(&store)
        .reschedule_jobs(&reschedule(&["r1", "r1"], Some(Schedule::Now), None))
        .await
        .unwrap();
    assert_eq!(moved.len(), 1);
    let r1 = &moved[0];
    assert_eq!(r1.id, id("r1"));
    assert_eq!(
        (r1.state, r1.attempts, r1.priority),
        (JobState::Ready, 0, 0)
    );
    assert_eq!(r1.available_at, clock.now());
    assert_eq!(get(store.as_ref(), "r1").await.available_at, clock.now());

    // A new priority alone keeps the due time, and decides the next claim.
    let before = get(store.as_ref(), "r2").await;
    let moved = admin(&store)
        .reschedule_jobs(&reschedule(&["r2"], None, Some(7)))
        .await
        .unwrap();
    assert_eq!(moved[0].priority, 7);
    assert_eq!(moved[0].available_at, before.available_at);
    assert_eq!(moved[0].attempts, before.attempts);
    let next = store.claim(&claim_req(1, LEASE)).await.unwrap();
    assert_eq!(next[0].job.id, id("r2"));

    // r2 is running: a request naming r1 and r2 is refused whole.
    let later = clock.now().plus(hour);
    let err = admin(&store)
        .reschedule_jobs(&reschedule(&["r1", "r2"], Some(Schedule::At(later)), None))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidState { id, state, hint }
            if id == "r2" && state == "running" && hint == RescheduleRequest::REFUSED),
        "{err}"
    );
    assert_eq!(get(store.as_ref(), "r1").await.available_at, clock.now());

    // Moved to a given time: not claimable before it, claimable at it.
    let moved = admin(&store)
        .reschedule_jobs(&reschedule(&["r1"], Some(Schedule::At(later)), Some(-3)))
        .await
        .unwrap();
    assert_eq!((moved[0].available_at, moved[0].priority), (later, -3));
    assert!(store.claim(&claim_req(1, LEASE)).await.unwrap().is_empty());
    clock.advance(hour);
    let due = store.claim(&claim_req(1, LEASE)).await.unwrap();
    assert_eq!(due[0].job.id, id("r1"));

    // Each move is in the audit, the change written before the reason.
    let audit = store.detail(&id("r1")).await.unwrap().audit;
    let entries: Vec<_> = audit
        .iter()
        .map(|a| (a.action.as_str(), a.operator.as_str(), a.reason.clone()))
        .collect();
    assert_eq!(
        entries,
        [
            (
                "reschedule",
                "ops@example",
                Some("run now: customer waiting".to_owned())
            ),
            (
                "reschedule",
                "ops@example",
                Some(format!(
                    "run at {}, priority -3: customer waiting",
                    later.to_rfc3339()
                ))
            ),
        ]
    );
    let r2_audit = store.detail(&id("r2")).await.unwrap().audit;
    assert_eq!(r2_audit.len(), 1, "the refused request wrote nothing");

    // Refused before anything is looked at: no change asked for, an
    // unknown job, a nameless operator.
    let err = admin(&store)
        .reschedule_jobs(&reschedule(&["r1"], None, None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    let err = admin(&store)
        .reschedule_jobs(&reschedule(&["nope"], Some(Schedule::Now), None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
    let mut nameless = reschedule(&["r1"], Some(Schedule::Now), None);
    nameless.operator = " ".into();
    let err = admin(&store).reschedule_jobs(&nameless).await.unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");

    // Finished jobs are not waiting: a done one and a cancelled one are
    // refused, naming their state.
    store.complete(&due[0].lease).await.unwrap();
    let err = admin(&store)
        .reschedule_jobs(&reschedule(&["r1"], Some(Schedule::Now), None))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidState { id, state, .. } if id == "r1" && state == "done"),
        "{err}"
    );
    let cancel = CancelRequest {
        ids: vec![id("r2")],
        operator: "ops".into(),
        reason: None,
    };
    admin(&store).cancel_jobs(&cancel).await.unwrap();
    let err = admin(&store)
        .reschedule_jobs(&reschedule(&["r2"], Some(Schedule::Now), None))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidState { id, state, .. } if id == "r2" && state == "cancelled"),
        "{err}"
    );
}

/// A blocked job can be rescheduled: it keeps waiting for its
/// dependencies, and once they are met it is due at the time it was
/// given (or at once if that has passed), at its new priority.
pub async fn a_blocked_job_is_rescheduled_and_keeps_waiting(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let hour = Duration::from_secs(3600);
    store.insert(job("first")).await.unwrap();
    store
        .insert(job("then").depends_on(id("first")))
        .await
        .unwrap();
    let later = clock.now().plus(hour);
    let moved = admin(&store)
        .reschedule_jobs(&reschedule(&["then"], Some(Schedule::At(later)), Some(4)))
        .await
        .unwrap();
    assert_eq!(
        (moved[0].state, moved[0].available_at, moved[0].priority),
        (JobState::Blocked, later, 4)
    );
    let first = store.claim(&claim_req(5, LEASE)).await.unwrap();
    assert_eq!(first.len(), 1, "only its dependency runs");
    store.complete(&first[0].lease).await.unwrap();
    assert_eq!(get(store.as_ref(), "then").await.state, JobState::Ready);
    assert!(
        store.claim(&claim_req(5, LEASE)).await.unwrap().is_empty(),
        "released, it is due at the time it was given"
    );
    clock.advance(hour);
    let due = store.claim(&claim_req(5, LEASE)).await.unwrap();
    assert_eq!(due[0].job.id, id("then"));
}

/// A bulk action's selection by filter reads the matching jobs a page at
/// a time within the listings' byte budget and keeps only their briefs, so
/// it finds every one up to its limit, oldest first, whatever their
/// payloads weigh (here six of about 1 MiB against a 4 MiB page).
pub async fn bulk_selection_reads_past_the_page_byte_budget(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let heavy = format!(r#""{}""#, "x".repeat(errand_core::MAX_PAYLOAD_BYTES - 16));
    let names = ["h1", "h2", "h3", "h4", "h5", "h6"];
    for name in names {
        let new = errand_core::NewJob {
            payload: errand_core::Payload::from_json_text(&heavy).unwrap(),
            ..on("heavy", name)
        };
        store.insert(new).await.unwrap();
        kill(store.as_ref(), name).await;
        clock.advance(Duration::from_millis(1));
    }
    let filter = |limit: u32| errand_core::BulkFilter {
        state: JobState::Dead,
        queue: Some(queue("heavy")),
        kind: None,
        error_contains: None,
        since: None,
        until: None,
        limit,
    };
    let all = admin(&store).matching(&filter(10_000)).await.unwrap();
    let found: Vec<&str> = all.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(found, names, "every one, oldest first");
    assert!(all.iter().all(|b| b.payload_bytes == heavy.len()));
    let five = admin(&store).matching(&filter(5)).await.unwrap();
    assert_eq!(five.len(), 5, "the limit holds across pages");
}
