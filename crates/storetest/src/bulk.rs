//! Operator actions over a selection: jobs named by id, or chosen by a
//! filter with a bound, and the one call that judges and acts on them
//! (`Admin::act_on_selection`) for the CLI, the API and the dashboard.

use std::sync::Arc;
use std::time::Duration;

use errand_core::Error;
use errand_core::{
    AuditFilter, BulkAction, BulkFilter, BulkOutcome, BulkRequest, Clock, ErrorClass, Failure,
    JobId, JobState, ManualClock, Name, NewJob, Payload, PurgeRequest, ReplayRequest, Selection,
    Store, Timestamp,
};

use crate::{admin, claim_one, get, job, retry_after};

const LEASE: Duration = Duration::from_secs(10);

fn on(q: &str, name: &str) -> errand_core::NewJob {
    job(name).on_queue(q).unwrap()
}

fn queue(s: &str) -> Name {
    Name::parse("queue", s).unwrap()
}

fn ids(names: &[&str]) -> Selection {
    Selection::Ids(names.iter().map(|n| JobId::new(*n).unwrap()).collect())
}

fn dead_in(q: &str, limit: u32) -> Selection {
    Selection::Filter(BulkFilter {
        state: JobState::Dead,
        queue: Some(queue(q)),
        kind: None,
        error_contains: None,
        since: None,
        until: None,
        limit,
    })
}

/// Claims each job named in turn and ends it: dead (a permanent failure)
/// or done.
async fn end(store: &dyn Store, name: &str, dead: bool) {
    let c = claim_one(store, LEASE).await;
    assert_eq!(c.job.id.as_str(), name, "jobs are claimed in enqueue order");
    if dead {
        let failure = Failure {
            error: format!("{name} cannot work"),
            class: ErrorClass::Permanent,
            retry: None,
        };
        store.fail(&c.lease, failure).await.unwrap();
    } else {
        store.complete(&c.lease).await.unwrap();
    }
}

fn bulk(action: BulkAction, jobs: Selection, reason: Option<&str>, dry_run: bool) -> BulkRequest {
    BulkRequest {
        action,
        jobs,
        operator: "ops".to_owned(),
        reason: reason.map(str::to_owned),
        dry_run,
    }
}

fn names(briefs: impl IntoIterator<Item = JobId>) -> Vec<String> {
    briefs.into_iter().map(|id| id.to_string()).collect()
}

/// A selection names jobs by id, in the order named, each of which must
/// exist (the first missing one is named), or by filter, oldest first, at
/// most its limit: one resolution for every surface.
pub async fn a_selection_names_jobs_by_id_or_by_filter(store: Arc<dyn Store>, clock: ManualClock) {
    for name in ["s1", "s2", "s3"] {
        store.insert(on("sel", name)).await.unwrap();
        end(store.as_ref(), name, true).await;
        clock.advance(Duration::from_millis(1));
    }
    let ids = |names: &[&str]| {
        errand_core::Selection::Ids(names.iter().map(|n| JobId::new(*n).unwrap()).collect())
    };
    let named = admin(&store).selected(&ids(&["s3", "s1"])).await.unwrap();
    let found: Vec<&str> = named.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(found, ["s3", "s1"], "in the order named");
    match admin(&store).selected(&ids(&["s2", "gone"])).await {
        Err(Error::NotFound(m)) => assert!(m.contains("gone"), "{m}"),
        other => panic!("a missing job must be named, got {other:?}"),
    }
    let filter = errand_core::Selection::Filter(errand_core::BulkFilter {
        state: JobState::Dead,
        queue: Some(queue("sel")),
        kind: None,
        error_contains: None,
        since: None,
        until: None,
        limit: 2,
    });
    let matched = admin(&store).selected(&filter).await.unwrap();
    let found: Vec<&str> = matched.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(found, ["s1", "s2"], "oldest first, at most the limit");
}

/// A filter names the jobs in its state that match every filter given: a
/// kind, a text the last error contains, and when the job ended (at or
/// after `since`, before `until`); a job in another state never matches,
/// whatever its last error. The CLI's `--kind`, `--error`, `--since` and
/// `--until` and the API's filter fields all come to this.
pub async fn a_filter_selects_by_kind_error_text_and_when_the_job_ended(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    for (kind, name) in [
        ("mail", "e1"),
        ("mail", "e2"),
        ("mail", "r1"),
        ("mail", "e3"),
        ("sms", "s1"),
    ] {
        let new = NewJob::new(kind, Payload::from_json_text("{}").unwrap())
            .unwrap()
            .with_id(JobId::new(name).unwrap())
            .with_max_attempts(3)
            .unwrap();
        store.insert(new).await.unwrap();
        clock.advance(Duration::from_millis(1));
    }
    // Each claim takes the oldest due job: e1, e2, r1, e3, s1.
    let fail = |name: &'static str, error: &'static str, dead: bool| {
        let store = Arc::clone(&store);
        async move {
            let c = claim_one(store.as_ref(), LEASE).await;
            assert_eq!(c.job.id.as_str(), name, "claims go oldest first");
            let failure = if dead {
                Failure {
                    error: error.to_owned(),
                    class: ErrorClass::Permanent,
                    retry: None,
                }
            } else {
                retry_after(error, Duration::from_secs(3600))
            };
            store.fail(&c.lease, failure).await.unwrap();
        }
    };
    let mut ended = Vec::new();
    for (name, error, dead) in [
        ("e1", "smtp refused", true),
        ("e2", "bad payload", true),
        ("r1", "smtp refused", false),
        ("e3", "smtp timeout", true),
        ("s1", "smtp gateway down", true),
    ] {
        if name != "r1" {
            clock.advance(Duration::from_secs(1));
        }
        fail(name, error, dead).await;
        ended.push(clock.now());
    }
    assert_eq!(get(store.as_ref(), "r1").await.state, JobState::Ready);
    let (t2, t3) = (ended[1], ended[3]);

    let select = |kind: Option<&str>,
                  error: Option<&str>,
                  since: Option<Timestamp>,
                  until: Option<Timestamp>| {
        let filter = Selection::Filter(BulkFilter {
            state: JobState::Dead,
            queue: None,
            kind: kind.map(|k| Name::parse("kind", k).unwrap()),
            error_contains: error.map(str::to_owned),
            since,
            until,
            limit: 100,
        });
        let admin = admin(&store);
        async move {
            let found = admin.selected(&filter).await.unwrap();
            found
                .iter()
                .map(|b| b.id.to_string())
                .collect::<Vec<String>>()
        }
    };
    assert_eq!(
        select(None, Some("smtp"), None, None).await,
        ["e1", "e3", "s1"],
        "the error text; r1 is not dead"
    );
    assert_eq!(
        select(Some("mail"), Some("smtp"), None, None).await,
        ["e1", "e3"],
        "and the kind"
    );
    assert_eq!(
        select(None, None, Some(t2), None).await,
        ["e2", "e3", "s1"],
        "ended at or after `since`"
    );
    assert_eq!(
        select(None, None, None, Some(t3)).await,
        ["e1", "e2"],
        "ended before `until`"
    );
    assert_eq!(select(None, None, Some(t2), Some(t3)).await, ["e2"]);
    assert_eq!(
        select(Some("mail"), Some("smtp"), Some(t2), None).await,
        ["e3"],
        "every filter given"
    );
    assert!(select(None, Some("relay"), None, None).await.is_empty());
}

/// One call acts on a selection, all or none: a dry run names each job
/// with the action's verdict and changes nothing; a filter takes at most
/// its limit, oldest first; one job the action refuses stops it, named;
/// the operator and reason are checked before anything is read, dry runs
/// included; a selection that matches nothing changes nothing; a purge
/// answers with the jobs as they were, and a copy with each original and
/// its new job.
pub async fn an_action_over_a_selection_is_judged_and_taken_in_one_call(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    for (name, dead) in [
        ("b1", true),
        ("b2", true),
        ("b3", true),
        ("b4", true),
        ("bd", false),
    ] {
        store.insert(on("bulk", name)).await.unwrap();
        clock.advance(Duration::from_millis(1));
        end(store.as_ref(), name, dead).await;
    }
    let admin = admin(&store);

    let planned = admin
        .act_on_selection(&bulk(BulkAction::Replay, ids(&["b1", "bd"]), None, true))
        .await
        .unwrap();
    let BulkOutcome::Planned(planned) = planned else {
        panic!("a dry run answers with its plan, got {planned:?}")
    };
    let verdicts: Vec<(&str, Option<&str>)> = planned
        .iter()
        .map(|p| (p.job.id.as_str(), p.refused))
        .collect();
    assert_eq!(
        verdicts,
        [("b1", None), ("bd", Some(ReplayRequest::REFUSED))],
        "each job with the action's own verdict, in the order named"
    );
    assert_eq!(
        get(store.as_ref(), "b1").await.state,
        JobState::Dead,
        "a dry run changes nothing"
    );

    let replayed = admin
        .act_on_selection(&bulk(BulkAction::Replay, dead_in("bulk", 2), None, false))
        .await
        .unwrap();
    let BulkOutcome::Replayed(replayed) = replayed else {
        panic!("a replay answers with the jobs replayed, got {replayed:?}")
    };
    assert_eq!(
        names(replayed.iter().map(|j| j.id.clone())),
        ["b1", "b2"],
        "oldest first, at most the limit"
    );
    assert!(replayed.iter().all(|j| j.state == JobState::Ready));
    assert_eq!(
        get(store.as_ref(), "b3").await.state,
        JobState::Dead,
        "beyond the limit: untouched"
    );
    let audited = admin
        .audit_log(&AuditFilter {
            job: Some(JobId::new("b2").unwrap()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        audited.len(),
        1,
        "each job acted on is audited: {audited:?}"
    );
    assert_eq!(audited[0].operator, "ops");

    match admin
        .act_on_selection(&bulk(BulkAction::Replay, ids(&["b3", "bd"]), None, false))
        .await
    {
        Err(Error::InvalidState { id, state, hint }) => {
            assert_eq!((id.as_str(), state.as_str()), ("bd", "done"));
            assert_eq!(hint, ReplayRequest::REFUSED);
        }
        other => panic!("the job that stops the action must be named, got {other:?}"),
    }
    assert_eq!(
        get(store.as_ref(), "b3").await.state,
        JobState::Dead,
        "all or none"
    );

    match admin
        .act_on_selection(&bulk(BulkAction::Purge, ids(&["b3"]), None, true))
        .await
    {
        Err(Error::Invalid(m)) => assert!(m.contains("reason"), "{m}"),
        other => panic!("a purge without a reason is refused, dry run or not, got {other:?}"),
    }

    let nothing = admin
        .act_on_selection(&bulk(
            BulkAction::Purge,
            dead_in("elsewhere", 10),
            Some("tidy"),
            false,
        ))
        .await
        .unwrap();
    assert!(
        nothing.is_empty(),
        "a selection that matches nothing: {nothing:?}"
    );

    let purged = admin
        .act_on_selection(&bulk(BulkAction::Purge, ids(&["b3"]), Some("tidy"), false))
        .await
        .unwrap();
    let BulkOutcome::Purged(purged) = purged else {
        panic!("a purge answers with the jobs purged, got {purged:?}")
    };
    assert_eq!(purged.len(), 1);
    assert_eq!(
        (purged[0].id.as_str(), purged[0].queue.as_str()),
        ("b3", "bulk"),
        "as it was"
    );
    assert!(matches!(
        store.get(&JobId::new("b3").unwrap()).await,
        Err(Error::NotFound(_))
    ));
    assert!(PurgeRequest::accepts(purged[0].state));

    let copied = admin
        .act_on_selection(&bulk(BulkAction::Copy, ids(&["b4"]), None, false))
        .await
        .unwrap();
    let BulkOutcome::Copied(copied) = copied else {
        panic!("a copy answers with the copies, got {copied:?}")
    };
    assert_eq!(copied.len(), 1);
    assert_eq!(copied[0].from.as_str(), "b4");
    assert_ne!(copied[0].job.id.as_str(), "b4", "a copy takes a new id");
    assert_eq!(
        get(store.as_ref(), "b4").await.state,
        JobState::Dead,
        "the original stays"
    );
}
