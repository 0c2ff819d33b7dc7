//! Conformance cases for exact counts past the statistics' cap: counted
//! whole on demand, stored, and shown where the live read stops.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{Clock, ErrorClass, Failure, ManualClock, NewJob, Schedule, StatsRequest, Store};

use crate::{claim_req, job};

fn named_req(q: &str, limit: u32) -> errand_core::ClaimRequest {
    errand_core::ClaimRequest {
        queues: vec![errand_core::Name::parse("queue", q).unwrap()],
        ..claim_req(limit, LEASE)
    }
}

const LEASE: Duration = Duration::from_secs(30);

fn on(q: &str, id: &str) -> NewJob {
    job(id).on_queue(q).unwrap()
}

/// `count_exactly` counts every queue's jobs per state whole and stores
/// them; past the cap the statistics then show those counts, named
/// `counted` with their time, instead of the cap's lower bound; a state
/// that was not counted stays `truncated`, and one back under the cap is
/// read live again.
pub async fn past_the_cap_the_statistics_show_the_stored_exact_count(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let later = clock.now().plus(Duration::from_secs(3600));
    let mut jobs: Vec<NewJob> = (0..25).map(|n| on("mail", &format!("m{n:02}"))).collect();
    jobs.extend((0..5).map(|n| on("mail", &format!("s{n}")).scheduled(Schedule::At(later))));
    jobs.extend((0..3).map(|n| on("small", &format!("x{n}"))));
    store.insert_many(jobs).await.unwrap();
    let req = StatsRequest {
        cap: 10,
        ..StatsRequest::default()
    };
    let before = store.stats(&req).await.unwrap();
    assert_eq!(before.queues[0].truncated, ["ready"]);
    assert!(before.queues[0].counted.is_empty());

    let counted = store.count_exactly().await.unwrap();
    let mut got: Vec<(&str, &str, u64)> = counted
        .iter()
        .map(|c| (c.queue.as_str(), c.state.as_str(), c.n))
        .collect();
    got.sort_unstable();
    assert_eq!(
        got,
        [
            ("mail", "ready", 25),
            ("mail", "scheduled", 5),
            ("small", "ready", 3)
        ]
    );
    assert!(counted.iter().all(|c| c.counted_at == clock.now()));

    let stats = store.stats(&req).await.unwrap();
    let mail = &stats.queues[0];
    assert_eq!((mail.counts.ready, mail.counts.scheduled), (25, 5));
    assert_eq!(mail.counted, ["ready"]);
    assert!(mail.truncated.is_empty(), "{:?}", mail.truncated);
    assert_eq!(mail.counted_at, Some(clock.now()));
    assert!(stats.truncated.is_empty(), "{:?}", stats.truncated);
    let small = &stats.queues[1];
    assert_eq!((small.counts.ready, small.counted.len()), (3, 0));

    // Twenty-one start and die: the dead pass the cap uncounted, the
    // ready fall back under it and are read live again.
    clock.advance(Duration::from_secs(5));
    let claimed = store.claim(&named_req("mail", 21)).await.unwrap();
    assert_eq!(claimed.len(), 21);
    for c in &claimed {
        let failure = Failure {
            error: "no".into(),
            class: ErrorClass::Permanent,
            retry: None,
        };
        store.fail(&c.lease, failure).await.unwrap();
    }
    let stats = store.stats(&req).await.unwrap();
    let mail = stats
        .queues
        .iter()
        .find(|q| q.queue.as_str() == "mail")
        .unwrap();
    assert_eq!(mail.truncated, ["dead"], "{mail:?}");
    assert_eq!(mail.counts.dead, 11, "the cap plus the row that proves it");
    assert!(mail.counted.is_empty(), "{mail:?}");
    store.count_exactly().await.unwrap();
    let stats = store.stats(&req).await.unwrap();
    let mail = stats
        .queues
        .iter()
        .find(|q| q.queue.as_str() == "mail")
        .unwrap();
    assert_eq!(mail.counts.dead + mail.counts.ready, 25, "{mail:?}");
    assert_eq!(mail.counted, ["dead"]);
}
