//! Conformance cases for a queue's concurrency cap: however many claims
//! run, at most the cap of its jobs run at once; a change counts from the
//! next claim; each change is audited and bad input writes nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    AuditFilter, ClaimRequest, ClaimedJob, Clock, Error, KeyLimit, ManualClock, Name, NewJob,
    QueueAction, QueueLimitRequest, StatsRequest, Store,
};

use crate::{admin, claim_req, job, reclaim_req};

const LEASE: Duration = Duration::from_secs(10);

fn queue(s: &str) -> Name {
    Name::parse("queue", s).unwrap()
}

fn on(q: &str, id: &str) -> NewJob {
    job(id).on_queue(q).unwrap()
}

fn cap(q: &str, concurrency: Option<u32>, reason: Option<&str>) -> QueueLimitRequest {
    QueueLimitRequest {
        queue: queue(q),
        concurrency,
        operator: "ops@example".into(),
        reason: reason.map(str::to_owned),
    }
}

async fn set(store: &Arc<dyn Store>, q: &str, concurrency: Option<u32>) -> bool {
    admin(store)
        .set_queue_limit(&cap(q, concurrency, None))
        .await
        .unwrap()
}

fn in_queue<'a>(got: &'a [ClaimedJob], q: &str) -> Vec<&'a ClaimedJob> {
    got.iter().filter(|c| c.job.queue.as_str() == q).collect()
}

fn named(q: &str, limit: u32) -> ClaimRequest {
    ClaimRequest {
        queues: vec![queue(q)],
        ..claim_req(limit, LEASE)
    }
}

/// A capped queue starts no more than its cap: claims across every queue
/// and claims naming it alike, however large; other queues are not held
/// back; a finished job frees its slot at the next claim; an expired lease
/// holds its slot until reclaimed, and reclaiming it starts nothing new; a
/// raised cap, a lowered one and a cleared one count from the next claim.
pub async fn a_capped_queue_starts_no_more_than_its_cap(store: Arc<dyn Store>, clock: ManualClock) {
    let jobs: Vec<NewJob> = (0..10)
        .map(|n| on("mail", &format!("m{n}")))
        .chain((0..4).map(|n| on("bulk", &format!("b{n}"))))
        .collect();
    store.insert_many(jobs).await.unwrap();
    assert!(set(&store, "mail", Some(3)).await);

    let first = store.claim(&claim_req(100, LEASE)).await.unwrap();
    assert_eq!(in_queue(&first, "mail").len(), 3, "the cap, across queues");
    assert_eq!(
        in_queue(&first, "bulk").len(),
        4,
        "others are not held back"
    );
    assert!(store.claim(&named("mail", 100)).await.unwrap().is_empty());
    assert!(
        store
            .claim(&claim_req(100, LEASE))
            .await
            .unwrap()
            .is_empty()
    );

    // A finished job frees one slot.
    let mail = in_queue(&first, "mail");
    store.complete(&mail[0].lease).await.unwrap();
    let next = store.claim(&named("mail", 100)).await.unwrap();
    assert_eq!(next.len(), 1);
    let mut held: Vec<String> = mail[1..]
        .iter()
        .chain(next.iter().collect::<Vec<_>>().iter())
        .map(|c| c.job.id.to_string())
        .collect();
    held.sort();

    // Leases expire: they hold their slots; reclaiming them starts nothing
    // new (the count of running jobs stays at the cap).
    clock.advance(LEASE + Duration::from_millis(1));
    assert!(
        store
            .claim(&claim_req(100, LEASE))
            .await
            .unwrap()
            .is_empty()
    );
    let reclaimed = store.claim(&reclaim_req(100, LEASE)).await.unwrap();
    let mut taken: Vec<String> = in_queue(&reclaimed, "mail")
        .iter()
        .map(|c| c.job.id.to_string())
        .collect();
    taken.sort();
    assert_eq!(taken, held, "only the expired leases were taken back");
    assert_eq!(running(&store, "mail").await, 3);

    // Raised: two more start at the next claim.
    assert!(set(&store, "mail", Some(5)).await);
    assert_eq!(store.claim(&claim_req(100, LEASE)).await.unwrap().len(), 2);
    // Lowered below the running count: the running go on, none starts.
    assert!(set(&store, "mail", Some(2)).await);
    assert!(
        store
            .claim(&claim_req(100, LEASE))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(running(&store, "mail").await, 5);
    // Cleared: the rest start.
    assert!(set(&store, "mail", None).await);
    let rest = store.claim(&claim_req(100, LEASE)).await.unwrap();
    assert_eq!(in_queue(&rest, "mail").len(), 4, "{rest:?}");
}

async fn running(store: &Arc<dyn Store>, q: &str) -> u64 {
    let stats = store.stats(&StatsRequest::default()).await.unwrap();
    stats
        .queues
        .iter()
        .find(|s| s.queue.as_str() == q)
        .map_or(0, |s| s.counts.running)
}

/// A capped queue's keyed jobs count against the cap and still keep their
/// key's limit; a paused capped queue gives nothing.
pub async fn keyed_jobs_count_against_the_cap_and_a_pause_still_wins(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let jobs: Vec<NewJob> = (0..6)
        .map(|n| {
            on("mail", &format!("k{n}"))
                .with_key("tenant", KeyLimit::Concurrent(2))
                .unwrap()
        })
        .chain((0..6).map(|n| on("mail", &format!("p{n}"))))
        .collect();
    store.insert_many(jobs).await.unwrap();
    assert!(set(&store, "mail", Some(4)).await);
    let by = QueueAction {
        queue: queue("mail"),
        operator: "ops@example".into(),
        reason: None,
    };
    assert!(admin(&store).pause_queue(&by).await.unwrap());
    assert!(
        store
            .claim(&reclaim_req(100, LEASE))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(admin(&store).resume_queue(&by).await.unwrap());

    let got = store.claim(&reclaim_req(100, LEASE)).await.unwrap();
    let keyed = got.iter().filter(|c| c.job.key.is_some()).count();
    assert_eq!(got.len(), 4, "the cap holds keyed and plain jobs: {got:?}");
    assert!(keyed <= 2, "the key's limit holds too: {got:?}");
    assert!(
        store
            .claim(&reclaim_req(100, LEASE))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Claims running at once never start more of a capped queue's jobs than
/// its cap, round after round.
pub async fn concurrent_claims_never_exceed_a_queue_cap(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let jobs: Vec<NewJob> = (0..60).map(|n| on("mail", &format!("j{n:02}"))).collect();
    store.insert_many(jobs).await.unwrap();
    assert!(set(&store, "mail", Some(5)).await);
    let mut seen = HashSet::new();
    for round in 0..4 {
        let mut tasks = Vec::new();
        for n in 0..8 {
            let store = Arc::clone(&store);
            // Half of the claims name the queue, half take every queue.
            let req = if n % 2 == 0 {
                named("mail", 4)
            } else {
                claim_req(4, LEASE)
            };
            tasks.push(tokio::spawn(
                async move { store.claim(&req).await.unwrap() },
            ));
        }
        let mut claimed = Vec::new();
        for t in tasks {
            claimed.extend(t.await.unwrap());
        }
        assert_eq!(claimed.len(), 5, "round {round}: {claimed:?}");
        for c in &claimed {
            assert!(
                seen.insert(c.job.id.to_string()),
                "claimed twice: {}",
                c.job.id
            );
            store.complete(&c.lease).await.unwrap();
        }
    }
}

/// Setting, changing and clearing a cap are audited, one entry per change;
/// a change that changes nothing writes nothing; the caps are listed and
/// shown in the statistics; a cap of 0 or above the maximum is refused and
/// writes nothing.
pub async fn a_cap_change_is_audited_and_bad_input_writes_nothing(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let a = admin(&store);
    assert!(
        a.set_queue_limit(&cap("mail", Some(5), Some("provider allows 5")))
            .await
            .unwrap()
    );
    assert!(!set(&store, "mail", Some(5)).await, "the same cap again");
    assert!(set(&store, "mail", Some(8)).await);
    let limits = a.queue_limits().await.unwrap();
    assert_eq!(limits.len(), 1);
    assert_eq!(
        (limits[0].queue.as_str(), limits[0].concurrency),
        ("mail", 8)
    );
    assert_eq!(limits[0].operator, "ops@example");
    assert_eq!(limits[0].set_at, clock.now());
    let stats = store.stats(&StatsRequest::default()).await.unwrap();
    let shown: Vec<(&str, Option<u32>)> = stats
        .queues
        .iter()
        .map(|q| (q.queue.as_str(), q.concurrency_limit))
        .collect();
    assert_eq!(shown, [("mail", Some(8))], "a capped queue is listed");

    for bad in [0, errand_core::MAX_QUEUE_CONCURRENCY + 1, 1_000_000_000] {
        let refused = a.set_queue_limit(&cap("mail", Some(bad), None)).await;
        assert!(
            matches!(refused, Err(Error::Invalid(_))),
            "{bad}: {refused:?}"
        );
    }
    let mut nobody = cap("mail", None, None);
    nobody.operator = String::new();
    assert!(matches!(
        a.set_queue_limit(&nobody).await,
        Err(Error::Invalid(_))
    ));
    assert_eq!(a.queue_limits().await.unwrap()[0].concurrency, 8);

    assert!(
        a.set_queue_limit(&cap("mail", None, Some("done")))
            .await
            .unwrap()
    );
    assert!(!set(&store, "mail", None).await, "nothing to clear");
    assert!(a.queue_limits().await.unwrap().is_empty());
    let log = store
        .audit_log(&AuditFilter {
            queue: Some(queue("mail")),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let actions: Vec<(&str, Option<&str>)> = log
        .iter()
        .map(|e| (e.action.as_str(), e.reason.as_deref()))
        .collect();
    assert_eq!(
        actions,
        [
            (QueueLimitRequest::CLEAR, Some("done")),
            (QueueLimitRequest::SET, None),
            (QueueLimitRequest::SET, Some("provider allows 5")),
        ],
        "one entry per change, newest first"
    );
}

/// 48 jobs over queues `a`, `b`, `c` and `held`, three priorities and five
/// seconds of due times from now (every seventh a minute later); with the
/// ids of those not in `held` and due within the five seconds, in claim
/// order: priority, then due time, then id.
fn mix(prefix: &str, now: errand_core::Timestamp) -> (Vec<NewJob>, Vec<String>) {
    let mut jobs = Vec::new();
    let mut expected = Vec::new();
    let mut x: u64 = 7;
    for n in 0..48u64 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let queue = ["a", "b", "c", "held"][usize::try_from(x >> 62).unwrap()];
        let priority = [-1i16, 0, 3][usize::try_from((x >> 40) % 3).unwrap()];
        let later = if n % 7 == 0 { 60_000 } else { 0 };
        let at = now.plus(Duration::from_millis((x >> 20) % 5_000 + later));
        let id = format!("{prefix}{n:02}");
        jobs.push(
            on(queue, &id)
                .with_priority(priority)
                .scheduled(errand_core::Schedule::At(at)),
        );
        if queue != "held" && later == 0 {
            expected.push((std::cmp::Reverse(priority), at, id));
        }
    }
    expected.sort();
    (jobs, expected.into_iter().map(|(_, _, id)| id).collect())
}

fn claimed_ids(got: &[ClaimedJob]) -> Vec<String> {
    got.iter().map(|c| c.job.id.to_string()).collect()
}

/// A claim across every queue takes jobs in claim order — priority, then
/// due time, then id — across queues and priorities while a paused or a
/// capped queue holds ready jobs (SQLite then reads each other queue's
/// ranges of the due index and merges them, rather than walking the due
/// index past the jobs it may not take) just as when none does.
pub async fn claim_order_holds_across_queues_beside_a_paused_or_capped_queue(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let by = QueueAction {
        queue: queue("held"),
        operator: "ops@example".into(),
        reason: None,
    };
    let (jobs, expected) = mix("p", clock.now());
    store.insert_many(jobs).await.unwrap();
    assert!(admin(&store).pause_queue(&by).await.unwrap());
    clock.advance(Duration::from_secs(6));
    let got = store.claim(&claim_req(100, LEASE)).await.unwrap();
    assert_eq!(claimed_ids(&got), expected, "beside a paused queue");
    for c in &got {
        store.complete(&c.lease).await.unwrap();
    }
    // A smaller claim takes the head of the same order.
    let (jobs, expected) = mix("q", clock.now());
    store.insert_many(jobs).await.unwrap();
    clock.advance(Duration::from_secs(6));
    let got = store.claim(&claim_req(5, LEASE)).await.unwrap();
    assert_eq!(claimed_ids(&got), expected[..5], "the first five");
    for c in &got {
        store.complete(&c.lease).await.unwrap();
    }
    let got = store.claim(&claim_req(100, LEASE)).await.unwrap();
    assert_eq!(claimed_ids(&got), expected[5..], "the rest");
    for c in &got {
        store.complete(&c.lease).await.unwrap();
    }

    // Capped instead: the held queue gives its two slots' worth, the
    // others come in claim order.
    assert!(admin(&store).resume_queue(&by).await.unwrap());
    assert!(set(&store, "held", Some(2)).await);
    let got = store.claim(&claim_req(100, LEASE)).await.unwrap();
    let held: Vec<&ClaimedJob> = in_queue(&got, "held");
    assert_eq!(held.len(), 2, "{got:?}");
    let others: Vec<String> = got
        .iter()
        .filter(|c| c.job.queue.as_str() != "held")
        .map(|c| c.job.id.to_string())
        .collect();
    assert!(
        others.is_empty(),
        "the other queues were drained: {others:?}"
    );
    let (jobs, expected) = mix("r", clock.now());
    store.insert_many(jobs).await.unwrap();
    clock.advance(Duration::from_secs(6));
    let got = store.claim(&claim_req(100, LEASE)).await.unwrap();
    assert!(in_queue(&got, "held").is_empty(), "the cap is full");
    assert_eq!(claimed_ids(&got), expected, "beside a capped queue");
}
