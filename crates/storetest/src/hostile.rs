//! Input a careless or hostile caller can send: every store refuses it
//! alike, before anything is written, and keeps the job as it was.

use std::sync::Arc;
use std::time::Duration;

use errand_core::bounds::{LATEST_TIME_MS, MAX_DELAY, MAX_LEASE};
use errand_core::{
    Clock, Error, ErrorClass, Failure, JobFilter, JobState, ManualClock, Payload, RetryAt,
    Schedule, Store, Timestamp,
};

use crate::{claim_one, claim_req, get, job};

const LEASE: Duration = Duration::from_secs(1);

#[track_caller]
fn assert_invalid<T: std::fmt::Debug>(result: errand_core::Result<T>, needle: &str) {
    match result {
        Err(Error::Invalid(msg)) => assert!(msg.contains(needle), "{needle:?} not in {msg:?}"),
        other => panic!("expected Invalid mentioning {needle:?}, got {other:?}"),
    }
}

/// Times and durations out of range — a delay, an elapsed-time budget, a
/// run-at time, a deadline, a lease, a renewal, a snooze, a retry delay or
/// time — are refused with `Invalid` by every store, and nothing changes:
/// the same bounds on every backend (at most 100 years ahead, 1970 to the
/// end of 9999, leases up to a day), so nothing is stored that a reader
/// cannot parse back. The bounds themselves are accepted.
pub async fn out_of_range_times_and_durations_are_refused_alike(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let too_long = MAX_DELAY + Duration::from_millis(1);
    let after_9999 = Timestamp::from_millis(LATEST_TIME_MS + 1);
    let before_1970 = Timestamp::from_millis(-1);
    assert_invalid(
        store
            .insert(job("a").scheduled(Schedule::After(too_long)))
            .await,
        "a delay",
    );
    assert_invalid(
        store
            .insert(job("a").scheduled(Schedule::After(Duration::MAX)))
            .await,
        "a delay",
    );
    assert_invalid(
        store.insert(job("a").give_up_after(too_long)).await,
        "elapsed-time budget",
    );
    for t in [after_9999, before_1970] {
        assert_invalid(
            store.insert(job("a").scheduled(Schedule::At(t))).await,
            "run-at",
        );
        assert_invalid(store.insert(job("a").with_deadline(t)).await, "deadline");
    }
    assert_invalid(
        store
            .insert_many(vec![
                job("b"),
                job("a").scheduled(Schedule::After(too_long)),
            ])
            .await,
        "a delay",
    );
    let none = store.list(&JobFilter::default()).await.unwrap();
    assert!(none.is_empty(), "a refused insert wrote {none:?}");

    // The bounds themselves are stored exactly.
    let far = store
        .insert(
            job("far")
                .scheduled(Schedule::After(MAX_DELAY))
                .give_up_after(MAX_DELAY),
        )
        .await
        .unwrap()
        .job;
    assert_eq!(far.available_at, clock.now().plus(MAX_DELAY));
    assert_eq!(far.give_up_at, Some(clock.now().plus(MAX_DELAY)));
    let last = Timestamp::from_millis(LATEST_TIME_MS);
    let at_end = store
        .insert(job("end").scheduled(Schedule::At(last)).with_deadline(last))
        .await
        .unwrap()
        .job;
    assert_eq!((at_end.available_at, at_end.deadline), (last, Some(last)));

    // Leases.
    store.insert(job("a")).await.unwrap();
    for lease in [Duration::ZERO, MAX_LEASE + Duration::from_millis(1)] {
        assert_invalid(store.claim(&claim_req(1, lease)).await, "lease");
        assert_invalid(
            store.complete_and_claim(&[], &claim_req(1, lease)).await,
            "lease",
        );
    }
    assert_eq!(
        get(store.as_ref(), "a").await.attempts,
        0,
        "nothing claimed"
    );
    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c.job.id.as_str(), "a");
    let held = get(store.as_ref(), "a").await;
    assert_invalid(
        store.heartbeat(&c.lease, MAX_LEASE * 2).await,
        "lease renewal",
    );
    assert_invalid(store.snooze(&c.lease, too_long).await, "snooze");
    for retry in [
        RetryAt::After(too_long),
        RetryAt::At(after_9999),
        RetryAt::At(before_1970),
    ] {
        let failure = Failure {
            error: "busy".into(),
            class: ErrorClass::Retryable,
            retry: Some(retry),
        };
        assert_invalid(store.fail(&c.lease, failure).await, "retry");
    }
    // A NUL character: PostgreSQL's text cannot hold it, so no store takes it.
    let nul = Failure {
        error: "a\0b".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    assert_invalid(store.fail(&c.lease, nul).await, "NUL");
    assert_invalid(store.cancel_running(&c.lease, "a\0b").await, "NUL");
    assert_eq!(
        get(store.as_ref(), "a").await,
        held,
        "every refusal left the job as it was"
    );
    // The lease still holds: the bounds are accepted.
    store.heartbeat(&c.lease, MAX_LEASE).await.unwrap();
    let j = store.snooze(&c.lease, MAX_DELAY).await.unwrap();
    assert_eq!(
        (j.state, j.available_at),
        (JobState::Ready, clock.now().plus(MAX_DELAY))
    );
}

/// Payloads that every store can hold round-trip through each of them with
/// the same meaning (and as the same text:
/// [`stored_json_reads_back_as_the_text_given`]).
pub async fn storable_payloads_round_trip_with_the_same_meaning(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let payloads = [
        r#"{"emoji":"\ud83d\ude00","accents":"é","escapes":"\n\t\u0001"}"#,
        "[1.7976931348623157e308,-1.5,1e-400,18446744073709551615,-9223372036854775808,0.1]",
        "null",
        r#""just a string""#,
    ];
    for (n, text) in payloads.iter().enumerate() {
        let id = format!("p{n}");
        let payload = Payload::from_json_text(*text).unwrap();
        let new = errand_core::NewJob {
            payload,
            ..job(&id)
        };
        let stored = store.insert(new).await.unwrap().job;
        let read = get(store.as_ref(), &id).await;
        assert_eq!(stored.payload, read.payload);
        let meaning = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
        assert_eq!(meaning(read.payload.as_str()), meaning(text), "{text}");
    }
}

/// A listing with a byte budget ends its page after the job that spends
/// the budget — however high the row limit — and the next page, started
/// after that job, goes on: every job is listed exactly once, and no page
/// passes the budget by more than one job. Without a budget the row limit
/// alone applies.
pub async fn a_byte_budget_ends_a_page_and_the_next_page_resumes(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    // Twelve jobs with 300 KiB payloads, a few small ones between them.
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(300 * 1024));
    for n in 0..16 {
        clock.advance(Duration::from_millis(1));
        let payload = if n % 4 == 3 {
            "{}".to_owned()
        } else {
            big.clone()
        };
        let new = errand_core::NewJob {
            payload: Payload::from_json_text(payload).unwrap(),
            ..job(&format!("j{n:02}"))
        };
        store.insert(new).await.unwrap();
    }
    let budget = 1024 * 1024;
    let mut filter = JobFilter {
        limit: Some(10_000),
        max_bytes: Some(budget),
        ..JobFilter::default()
    };
    let (mut seen, mut pages) = (Vec::new(), 0);
    loop {
        let page = store.list(&filter).await.unwrap();
        pages += 1;
        let bytes: usize = page.iter().map(errand_core::listed_bytes).sum();
        let last = page.last().map(errand_core::listed_bytes).unwrap_or(0);
        assert!(
            bytes - last < budget,
            "page {pages} went on after its budget was spent: {bytes} bytes"
        );
        seen.extend(page.iter().map(|j| j.id.to_string()));
        match filter.next_after(&page) {
            Some(next) => filter.after = Some(next.clone()),
            None => break,
        }
        assert!(pages < 20, "paging does not end");
    }
    let all: Vec<String> = (0..16).map(|n| format!("j{n:02}")).collect();
    assert_eq!(seen, all, "every job once, in order");
    // Each page ends after its fourth 300 KiB job; the last holds one.
    assert_eq!(pages, 4);
    // Without a budget, the row limit alone.
    let rows = store
        .list(&JobFilter {
            limit: Some(10_000),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 16);
    // A budget smaller than one job still lists one job per page.
    let one = store
        .list(&JobFilter {
            max_bytes: Some(1),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
}

/// A payload and an output read back as the very text given, byte for
/// byte: the size limits hold for what a reader gets. (A store that
/// re-rendered numbers in full digits turned a 1 MB payload of `1e308`
/// into 53 MB on every read.)
pub async fn stored_json_reads_back_as_the_text_given(store: Arc<dyn Store>, _clock: ManualClock) {
    let many = format!("[{}]", vec!["1e308"; 2000].join(","));
    let texts = [
        "[1e308, 1E+308,  2.50 , -0.0, 1e-300]",
        r#"{"b": 1, "a": [ ]}"#,
        many.as_str(),
    ];
    for (n, text) in texts.iter().enumerate() {
        let id = format!("g{n}");
        let new = errand_core::NewJob {
            payload: Payload::from_json_text(*text).unwrap(),
            ..job(&id)
        };
        store.insert(new).await.unwrap();
        let read = get(store.as_ref(), &id).await;
        assert_eq!(
            read.payload.as_str().len(),
            text.len(),
            "payload {n} grew or shrank on the way back"
        );
        assert_eq!(read.payload.as_str(), *text);
    }
    let listed = store
        .list(&JobFilter {
            limit: Some(10),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert!(listed.iter().any(|j| j.payload.as_str() == many));

    let claimed = claim_one(store.as_ref(), LEASE).await;
    let output = Payload::output(&many).unwrap();
    let done = store
        .complete_with_output(&claimed.lease, &output)
        .await
        .unwrap();
    assert_eq!(
        done.output.as_ref().map(Payload::as_str),
        Some(many.as_str())
    );
    let read = get(store.as_ref(), claimed.job.id.as_str()).await;
    assert_eq!(
        read.output.as_ref().map(Payload::as_str),
        Some(many.as_str())
    );
}
