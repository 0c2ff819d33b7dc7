//! Conformance cases for rate-limited claims: a claim spends one token of
//! its queue's bucket per job it claims, in its own transaction, so a
//! claimer that finds nothing due keeps the bucket's burst for later.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    ClaimRate, ClaimRequest, ClaimedJob, Error, JobFilter, JobState, ManualClock, Name, NewJob,
    RateBucket, RateLimit, Store,
};

use crate::job;

/// Longer than any case runs on its clock: claimed jobs stay claimed.
const LEASE: Duration = errand_core::bounds::MAX_LEASE;

fn mail_rate(per_second: f64, burst: u32) -> ClaimRate {
    ClaimRate {
        bucket: RateBucket::queue(&Name::parse("queue", "mail").unwrap()),
        limit: RateLimit { per_second, burst },
    }
}

fn mail_claim(limit: u32, rate: &ClaimRate) -> ClaimRequest {
    ClaimRequest {
        queues: vec![Name::parse("queue", "mail").unwrap()],
        limit,
        lease: LEASE,
        rate: Some(rate.clone()),
        reclaim: true,
    }
}

fn mail_jobs(prefix: &str, n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| job(&format!("{prefix}{i:03}")).on_queue("mail").unwrap())
        .collect()
}

async fn claim(store: &dyn Store, limit: u32, rate: &ClaimRate) -> Vec<ClaimedJob> {
    store.claim(&mail_claim(limit, rate)).await.unwrap()
}

/// A rate-limited claim that finds nothing due spends no tokens — however
/// often it looks, and through `complete_and_claim` too — so after a quiet
/// spell a burst of due jobs is claimed at once; a claim takes no more
/// jobs than the bucket holds whole tokens, and what it does not claim
/// stays in the bucket.
pub async fn an_idle_rate_limited_claim_keeps_the_burst(store: Arc<dyn Store>, clock: ManualClock) {
    let rate = mail_rate(1.0, 5);
    // A worker idles: many claims, nothing due, the clock moving.
    for _ in 0..20 {
        assert!(claim(store.as_ref(), 8, &rate).await.is_empty());
        let (acked, claimed) = store
            .complete_and_claim(&[], &mail_claim(8, &rate))
            .await
            .unwrap();
        assert!(acked.is_empty());
        assert!(claimed.unwrap().is_empty());
        clock.advance(Duration::from_millis(400));
    }
    // Jobs of another queue do not spend the mail queue's tokens either.
    store.insert(job("elsewhere")).await.unwrap();
    assert!(claim(store.as_ref(), 8, &rate).await.is_empty());
    // Eight jobs arrive: the whole burst starts at once, then the bucket is
    // dry until the clock moves.
    store.insert_many(mail_jobs("a", 8)).await.unwrap();
    assert_eq!(
        claim(store.as_ref(), 8, &rate).await.len(),
        5,
        "after idling, the whole burst is claimed at once"
    );
    assert!(claim(store.as_ref(), 8, &rate).await.is_empty());
    clock.advance(Duration::from_millis(999));
    assert!(
        claim(store.as_ref(), 8, &rate).await.is_empty(),
        "0.999 tokens are not one"
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(claim(store.as_ref(), 8, &rate).await.len(), 1);
    // Two due, five tokens: two claimed, three left for later.
    clock.advance(Duration::from_secs(3600));
    assert_eq!(claim(store.as_ref(), 8, &rate).await.len(), 2);
    store.insert_many(mail_jobs("b", 8)).await.unwrap();
    assert_eq!(
        claim(store.as_ref(), 8, &rate).await.len(),
        3,
        "the tokens a short claim did not spend stay in the bucket"
    );
    // A claim asking for fewer jobs than the bucket holds spends only
    // those.
    clock.advance(Duration::from_secs(3600));
    assert_eq!(claim(store.as_ref(), 2, &rate).await.len(), 2);
    assert_eq!(claim(store.as_ref(), 8, &rate).await.len(), 3);
    // Nothing is due any more: an idle claim, and the bucket (the one
    // `take_tokens` sees) is full.
    clock.advance(Duration::from_secs(3600));
    assert!(claim(store.as_ref(), 8, &rate).await.is_empty());
    assert_eq!(
        store
            .take_tokens(&rate.bucket, rate.limit, 10)
            .await
            .unwrap(),
        5,
        "idle claims left the bucket full"
    );
}

/// Claims with a rate never take more than `burst + rate · elapsed` jobs
/// in total, whatever their sizes and the idle claims between them; each
/// claims exactly what a token bucket holds (whole tokens, refilled at the
/// rate up to the burst, minus what earlier claims took), so no token is
/// lost to a claim that did not use it.
pub async fn rate_limited_claims_never_exceed_rate_times_elapsed_plus_burst(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let (per_second, burst) = (2.5, 4);
    let rate = mail_rate(per_second, burst);
    let quiet = ClaimRequest {
        queues: vec![Name::parse("queue", "quiet").unwrap()],
        limit: 8,
        lease: LEASE,
        rate: Some(rate.clone()),
        reclaim: true,
    };
    store.insert_many(mail_jobs("j", 300)).await.unwrap();
    let mut claimed = 0usize;
    let mut elapsed_ms = 0u64;
    // The bucket as the test expects it. Steps are multiples of 1/8 s, so
    // every token count is exact in binary floating point.
    let mut tokens = f64::from(burst);
    let steps = [
        125u64, 0, 375, 125, 1_000, 250, 0, 375, 2_500, 125, 750, 125,
    ];
    for round in 0..60usize {
        let step = steps[round % steps.len()];
        clock.advance(Duration::from_millis(step));
        elapsed_ms += step;
        tokens = (tokens + per_second * step as f64 / 1000.0).min(f64::from(burst));
        // An idle claim on the same bucket (its queue has nothing due).
        assert!(store.claim(&quiet).await.unwrap().is_empty());
        let limit = 1 + (round * 7 % 9) as u32;
        let got = claim(store.as_ref(), limit, &rate).await.len();
        let expected = tokens.floor().min(f64::from(limit));
        assert_eq!(
            got as f64, expected,
            "round {round}: {tokens} tokens, limit {limit}"
        );
        tokens -= expected;
        claimed += got;
        let bound = f64::from(burst) + per_second * elapsed_ms as f64 / 1000.0;
        assert!(
            claimed as f64 <= bound,
            "{claimed} claims after {elapsed_ms} ms exceed the bound {bound}"
        );
    }
    assert!(claimed < 300, "the backlog outlasted the test");
}

/// Concurrent rate-limited claims share one bucket: with the clock
/// standing still, together they claim exactly the burst, each job once.
pub async fn concurrent_rate_limited_claims_share_one_burst(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let rate = mail_rate(1.0, 5);
    store.insert_many(mail_jobs("c", 60)).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        let rate = rate.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..3 {
                got.extend(claim(store.as_ref(), 4, &rate).await);
            }
            got
        }));
    }
    let mut ids = HashSet::new();
    for t in tasks {
        for c in t.await.unwrap() {
            assert!(
                ids.insert(c.job.id.to_string()),
                "claimed twice: {}",
                c.job.id
            );
        }
    }
    assert_eq!(ids.len(), 5, "claimed {ids:?}");
    let running = store
        .list(&JobFilter {
            state: Some(JobState::Running),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(running.len(), 5);
}

/// A claim with an invalid rate is refused, claiming nothing.
pub async fn a_claim_with_an_invalid_rate_is_refused(store: Arc<dyn Store>, _clock: ManualClock) {
    store.insert_many(mail_jobs("x", 2)).await.unwrap();
    for (per_second, burst) in [
        (0.0, 1),
        (-1.0, 1),
        (f64::NAN, 1),
        (f64::INFINITY, 1),
        (1.0, 0),
    ] {
        let rate = mail_rate(per_second, burst);
        match store.claim(&mail_claim(2, &rate)).await {
            Err(Error::Invalid(msg)) => assert!(msg.contains("rate limit"), "{msg}"),
            other => panic!("{per_second}/s burst {burst}: expected Invalid, got {other:?}"),
        }
    }
    let running = store
        .list(&JobFilter {
            state: Some(JobState::Running),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(running.is_empty());
}
