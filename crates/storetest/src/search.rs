//! Conformance cases for searching jobs by metadata and payload fields: a
//! search returns exactly the listing's jobs meeting every term, in the
//! listing's order, page by page; it stops at its scan bound and says
//! where, and going on from there finds the rest.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    Error, JobFilter, JobId, JobSearch, JobState, ManualClock, Meta, NewJob, Payload, PayloadTerm,
    SearchPage, Store,
};

use crate::{admin, claim_req};

fn order(n: u32) -> NewJob {
    let payload = format!(
        r#"{{"customer":{},"items":[{{"sku":"S-{}"}}],"note":"n {n}"}}"#,
        n % 3,
        n % 2
    );
    let tenant = if n.is_multiple_of(4) {
        "acme"
    } else {
        "globex"
    };
    NewJob::new("order", Payload::from_json_text(payload).unwrap())
        .unwrap()
        .with_id(JobId::new(format!("o{n:02}")).unwrap())
        .with_meta("tenant", tenant)
        .with_meta("region", if n < 12 { "eu" } else { "us" })
}

/// Inserts 24 orders one millisecond apart (so the listing's order is
/// theirs) and a job with no metadata, and kills o00 and o08.
async fn orders(store: &Arc<dyn Store>, clock: &ManualClock) {
    for n in 0..24 {
        let job = if n == 5 {
            order(n).with_tag("rush").unwrap()
        } else {
            order(n)
        };
        store.insert(job).await.unwrap();
        clock.advance(Duration::from_millis(1));
    }
    store.insert(crate::job("plain")).await.unwrap();
    admin(store)
        .cancel_jobs(&errand_core::CancelRequest {
            ids: vec![JobId::new("o00").unwrap(), JobId::new("o08").unwrap()],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
}

fn search(meta: &[(&str, &str)], payload: &[&str], limit: u32) -> JobSearch {
    JobSearch {
        filter: JobFilter {
            limit: Some(limit),
            ..JobFilter::default()
        },
        meta: meta
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Meta>(),
        payload: payload
            .iter()
            .map(|t| PayloadTerm::parse(t).unwrap())
            .collect(),
        scan: None,
    }
}

/// Every page of `s`, following `next`, with the pages' ids.
async fn all_pages(store: &Arc<dyn Store>, mut s: JobSearch) -> (Vec<String>, Vec<SearchPage>) {
    let mut ids = Vec::new();
    let mut pages = Vec::new();
    for _ in 0..100 {
        let page = admin(store).search(&s).await.unwrap();
        ids.extend(page.jobs.iter().map(|j| j.id.as_str().to_owned()));
        let next = page.next.clone();
        pages.push(page);
        match next {
            Some(next) => s.filter.after = Some(next),
            None => return (ids, pages),
        }
    }
    panic!("the search did not end in 100 pages");
}

fn ids(ns: &[u32]) -> Vec<String> {
    ns.iter().map(|n| format!("o{n:02}")).collect()
}

/// Metadata terms, payload terms and the listing's own filters combine:
/// each page holds only jobs meeting all of them, in the listing's order,
/// and the pages together hold every such job once.
pub async fn a_search_returns_exactly_the_jobs_meeting_every_term(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    orders(&store, &clock).await;
    let acme = all_pages(&store, search(&[("tenant", "acme")], &[], 2)).await;
    assert_eq!(acme.0, ids(&[0, 4, 8, 12, 16, 20]));
    assert!(acme.1.iter().all(|p| !p.stopped));
    assert!(acme.1.iter().all(|p| p.jobs.len() <= 2));

    let both = search(&[("tenant", "acme"), ("region", "us")], &[], 100);
    assert_eq!(all_pages(&store, both).await.0, ids(&[12, 16, 20]));

    let customer = search(&[], &["payload.customer=1"], 3);
    assert_eq!(
        all_pages(&store, customer).await.0,
        ids(&[1, 4, 7, 10, 13, 16, 19, 22])
    );
    let mixed = search(
        &[("region", "eu")],
        &["payload.customer=2", r#"payload.items[0].sku="S-1""#],
        100,
    );
    assert_eq!(all_pages(&store, mixed).await.0, ids(&[5, 11]));
    let text = search(&[], &[r#"payload.note="n 7""#], 100);
    assert_eq!(all_pages(&store, text).await.0, ids(&[7]));
    let none = search(&[("tenant", "initech")], &[], 100);
    assert_eq!(all_pages(&store, none).await.0, Vec::<String>::new());

    // The listing's filters still apply: a state, a tag, a queue.
    let mut dead_acme = search(&[("tenant", "acme")], &[], 100);
    dead_acme.filter.state = Some(JobState::Cancelled);
    assert_eq!(all_pages(&store, dead_acme).await.0, ids(&[0, 8]));
    let mut ready_acme = search(&[("tenant", "acme")], &[], 100);
    ready_acme.filter.state = Some(JobState::Ready);
    assert_eq!(all_pages(&store, ready_acme).await.0, ids(&[4, 12, 16, 20]));
    let mut rush = search(&[("region", "eu")], &["payload.customer=2"], 100);
    rush.filter.tag = Some("rush".into());
    assert_eq!(all_pages(&store, rush).await.0, ids(&[5]));
    let mut other_queue = search(&[("tenant", "acme")], &[], 100);
    other_queue.filter.queue = Some(errand_core::Name::parse("queue", "elsewhere").unwrap());
    assert_eq!(all_pages(&store, other_queue).await.0, Vec::<String>::new());

    // Jobs enqueued together and a copy are found by their metadata too.
    clock.advance(Duration::from_millis(1));
    store.insert_many(vec![order(32), order(36)]).await.unwrap();
    clock.advance(Duration::from_millis(1));
    let copied = admin(&store)
        .copy_jobs(&errand_core::CopyRequest {
            ids: vec![JobId::new("o00").unwrap()],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    let copy = copied[0].job.id.as_str().to_owned();
    let mut ready_acme = search(&[("tenant", "acme")], &[], 2);
    ready_acme.filter.state = Some(JobState::Ready);
    let mut want = ids(&[4, 12, 16, 20, 32, 36]);
    want.push(copy);
    assert_eq!(all_pages(&store, ready_acme).await.0, want);

    // A claimed job is still found, in its place.
    let claimed = store
        .claim(&claim_req(1, Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(claimed[0].job.id.as_str(), "o01");
    let running = search(&[("region", "eu")], &["payload.customer=1"], 100);
    assert_eq!(all_pages(&store, running).await.0, ids(&[1, 4, 7, 10]));
}

/// A search reads at most its scan bound of candidates a call: a page that
/// reaches it ends there, marked stopped, naming the last job read; going
/// on from it reads further and finds the rest; a search that reaches the
/// listing's end is not marked stopped and names no next page.
pub async fn a_search_stops_at_its_scan_bound_and_goes_on_from_there(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    orders(&store, &clock).await;
    // The one match is o22, near the listing's end.
    let mut s = search(&[("tenant", "globex")], &["payload.note=\"n 22\""], 10);
    s.scan = Some(5);
    let first = admin(&store).search(&s).await.unwrap();
    assert!(first.stopped, "{first:?}");
    assert!(first.jobs.is_empty());
    assert!(first.scanned <= 5 && first.scanned > 0, "{first:?}");
    let next = first
        .next
        .clone()
        .expect("a stopped page names where it stopped");
    // Going on from there, page by page, finds the match once.
    s.filter.after = Some(next);
    let (found, pages) = all_pages(&store, s).await;
    assert_eq!(found, ids(&[22]));
    assert!(pages.iter().any(|p| p.stopped));
    let last = pages.last().unwrap();
    assert!(!last.stopped && last.next.is_none(), "{last:?}");

    // A bound large enough reads to the end in one call.
    let mut whole = search(&[], &["payload.customer=0"], 100);
    whole.scan = Some(1_000);
    let page = admin(&store).search(&whole).await.unwrap();
    assert!(!page.stopped && page.next.is_none());
    assert_eq!(page.jobs.len(), 8);
    // A full page names its last job, read or not further.
    whole.filter.limit = Some(3);
    let page = admin(&store).search(&whole).await.unwrap();
    assert_eq!(page.next.as_ref().map(JobId::as_str), Some("o06"));
    assert!(!page.stopped);
}

/// Bad input is refused with what is wrong: a scan bound of 0 or past the
/// most, a metadata key that no job could carry.
pub async fn a_search_with_bad_terms_is_refused(store: Arc<dyn Store>, clock: ManualClock) {
    orders(&store, &clock).await;
    for scan in [0, errand_core::MAX_SCAN + 1] {
        let mut s = search(&[("tenant", "acme")], &[], 10);
        s.scan = Some(scan);
        let err = admin(&store).search(&s).await.unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err}");
        assert!(err.to_string().contains("from 1 to"), "{err}");
    }
    let bad_key = search(&[("no spaces allowed", "x")], &[], 10);
    let err = admin(&store).search(&bad_key).await.unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
}
