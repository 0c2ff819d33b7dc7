//! Stored periodic schedules: each change is conditional, answers with the
//! schedule as changed, and writes its audit entry in the same
//! transaction; a change whose condition does not hold writes nothing.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    AuditEntry, AuditFilter, Clock, Error, ManualClock, Misfire, Name, Payload, ScheduleAction,
    ScheduleAdd, ScheduleAddOutcome, ScheduleChange, ScheduleDefinition, Store,
};

use crate::admin;

fn definition(name: &str, cron: &str, payload: &str) -> ScheduleDefinition {
    ScheduleDefinition::new(
        name,
        cron,
        "report",
        Payload::from_json_text(payload).unwrap(),
    )
    .unwrap()
}

fn add(def: ScheduleDefinition, replace: bool, reason: Option<&str>) -> ScheduleAdd {
    ScheduleAdd {
        definition: def,
        replace,
        operator: "ops".into(),
        reason: reason.map(str::to_owned),
    }
}

fn act(name: &str, reason: Option<&str>) -> ScheduleAction {
    ScheduleAction {
        name: Name::parse("schedule", name).unwrap(),
        operator: "oncall".into(),
        reason: reason.map(str::to_owned),
    }
}

async fn log_of(store: &dyn Store, name: &str) -> Vec<AuditEntry> {
    store
        .audit_log(&AuditFilter {
            schedule: Some(Name::parse("schedule", name).unwrap()),
            ..AuditFilter::default()
        })
        .await
        .unwrap()
}

/// A schedule is stored with the store's time; the same definition again
/// (however its payload is spelled) writes nothing; another definition
/// under the name is refused unless replaced, and a replacement starts it
/// again from now. Each write has its audit entry naming the schedule and
/// its queue, the definition before the reason.
pub async fn a_stored_schedule_is_added_once_and_replaced_only_when_asked(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let admin = admin(&store);
    let hourly = definition("hourly", "0 * * * *", r#"{"a":1,"b":[2]}"#)
        .on_queue("reports")
        .unwrap()
        .with_misfire(Misfire::Backfill(3));
    let added = admin
        .add_schedule(&add(hourly.clone(), false, Some("new report")))
        .await
        .unwrap();
    assert_eq!(added.outcome, ScheduleAddOutcome::Added);
    let t0 = clock.now();
    assert_eq!(added.schedule.definition, hourly);
    assert_eq!(
        (added.schedule.created_at, added.schedule.updated_at),
        (t0, t0)
    );
    assert_eq!(added.schedule.active_since, t0);
    assert!(added.schedule.paused.is_none());
    assert_eq!(
        admin.schedules().await.unwrap(),
        vec![added.schedule.clone()]
    );

    clock.advance(Duration::from_secs(60));
    let respelled = ScheduleDefinition {
        payload: Payload::from_json_text(r#"{ "b": [2], "a": 1 }"#).unwrap(),
        ..hourly.clone()
    };
    let again = admin
        .add_schedule(&add(respelled, false, None))
        .await
        .unwrap();
    assert_eq!(again.outcome, ScheduleAddOutcome::Unchanged);
    assert_eq!(again.schedule, added.schedule, "nothing was written");

    let daily = definition("hourly", "0 3 * * *", "{}")
        .on_queue("reports")
        .unwrap();
    let refused = admin.add_schedule(&add(daily.clone(), false, None)).await;
    match refused {
        Err(Error::Invalid(m)) => {
            assert!(m.contains("--replace"), "{m}");
            assert!(
                m.contains(r#"cron "0 * * * *""#),
                "names what is stored: {m}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        admin.schedules().await.unwrap(),
        vec![added.schedule.clone()]
    );

    clock.advance(Duration::from_secs(60));
    let replaced = admin
        .add_schedule(&add(daily.clone(), true, Some("nightly is enough")))
        .await
        .unwrap();
    assert_eq!(replaced.outcome, ScheduleAddOutcome::Replaced);
    assert_eq!(replaced.schedule.definition, daily);
    assert_eq!(replaced.schedule.created_at, t0);
    assert_eq!(replaced.schedule.updated_at, clock.now());
    assert_eq!(replaced.schedule.active_since, clock.now());

    // A second schedule lists after it, by name.
    let other = definition("a-first", "*/5 * * * *", "{}");
    admin.add_schedule(&add(other, false, None)).await.unwrap();
    let names: Vec<String> = admin
        .schedules()
        .await
        .unwrap()
        .iter()
        .map(|s| s.definition.name.to_string())
        .collect();
    assert_eq!(names, ["a-first", "hourly"]);

    let log = log_of(&*store, "hourly").await;
    type Seen<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);
    let seen: Vec<Seen<'_>> = log
        .iter()
        .map(|e| {
            (
                e.action.as_str(),
                e.schedule.as_ref().map(Name::as_str),
                e.queue.as_ref().map(Name::as_str),
                e.reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "schedule_replace",
                Some("hourly"),
                Some("reports"),
                Some(
                    r#"cron "0 3 * * *", kind report, queue reports, max attempts 25, misfire skip: nightly is enough"#
                )
            ),
            (
                "schedule_add",
                Some("hourly"),
                Some("reports"),
                Some(
                    r#"cron "0 * * * *", kind report, queue reports, max attempts 25, misfire backfill:3: new report"#
                )
            ),
        ]
    );
    assert!(
        log.iter()
            .all(|e| e.job_id.is_none() && e.operator == "ops")
    );
    // The queue's log shows them too; a job's never does.
    let by_queue = store
        .audit_log(&AuditFilter {
            queue: Some(Name::parse("queue", "reports").unwrap()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(by_queue.len(), 2);
}

/// Pause and resume change a schedule only when it is running or paused,
/// each with its audit entry; a paused schedule has no next tick, and a
/// resume starts it again from now. Removal answers with the schedule as
/// it was (paused, here) and records its definition; the name may then be
/// added again, as a new running schedule. An unknown schedule is named
/// as such. Bad requests write nothing.
pub async fn a_stored_schedule_pauses_resumes_and_goes_with_audit(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let admin = admin(&store);
    let def = definition("sweep", "*/10 * * * * *", "{}");
    let added = admin
        .add_schedule(&add(def.clone(), false, None))
        .await
        .unwrap();
    assert!(added.schedule.next_tick(clock.now()).is_some());

    clock.advance(Duration::from_secs(5));
    let paused = admin
        .pause_schedule(&act("sweep", Some("provider down")))
        .await
        .unwrap();
    assert!(paused.changed);
    let p = paused.schedule.paused.clone().unwrap();
    assert_eq!(
        (p.at, p.operator.as_str(), p.reason.as_deref()),
        (clock.now(), "oncall", Some("provider down"))
    );
    assert_eq!(
        paused.schedule.clone().view(clock.now()).next_tick,
        None,
        "a paused schedule has no next tick"
    );
    let twice = admin.pause_schedule(&act("sweep", None)).await.unwrap();
    assert!(!twice.changed);
    assert_eq!(twice.schedule.paused, Some(p), "the first pause stands");

    clock.advance(Duration::from_secs(5));
    let resumed = admin.resume_schedule(&act("sweep", None)).await.unwrap();
    assert!(resumed.changed);
    assert!(resumed.schedule.paused.is_none());
    assert_eq!(resumed.schedule.active_since, clock.now());
    assert!(
        resumed.schedule.next_tick(clock.now()).is_some(),
        "resumed, it ticks again"
    );
    assert!(
        !admin
            .resume_schedule(&act("sweep", None))
            .await
            .unwrap()
            .changed
    );

    for unknown in [
        admin.pause_schedule(&act("nope", None)).await.err(),
        admin.resume_schedule(&act("nope", None)).await.err(),
        admin.remove_schedule(&act("nope", None)).await.err(),
    ] {
        assert!(
            matches!(&unknown, Some(Error::NoSuchSchedule(n)) if n == "nope"),
            "{unknown:?}"
        );
    }
    // A bad operator is refused before anything is written.
    let bad = ScheduleAction {
        operator: String::new(),
        ..act("sweep", None)
    };
    assert!(matches!(
        admin.pause_schedule(&bad).await,
        Err(Error::Invalid(_))
    ));

    // Paused again, then removed: the answer is the schedule as it was.
    admin
        .pause_schedule(&act("sweep", Some("retiring")))
        .await
        .unwrap();
    let removed = admin
        .remove_schedule(&act("sweep", Some("retired")))
        .await
        .unwrap();
    assert_eq!(removed.definition, def);
    assert_eq!(
        removed.paused.as_ref().map(|p| p.reason.as_deref()),
        Some(Some("retiring")),
        "removed as it was: paused"
    );
    assert!(admin.schedules().await.unwrap().is_empty());
    assert!(matches!(
        admin.remove_schedule(&act("sweep", None)).await,
        Err(Error::NoSuchSchedule(_))
    ));

    let log = log_of(&*store, "sweep").await;
    let actions: Vec<&str> = log.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "schedule_remove",
            "schedule_pause",
            "schedule_resume",
            "schedule_pause",
            "schedule_add"
        ]
    );
    assert_eq!(
        log[0].reason.as_deref(),
        Some(
            r#"removed cron "*/10 * * * * *", kind report, queue default, max attempts 25, misfire skip: retired"#
        )
    );
    assert_eq!(log[3].reason.as_deref(), Some("provider down"));

    // The name is free again: added anew, the schedule is new and running
    // (the pause went with the removal), and its entries follow the old ones.
    clock.advance(Duration::from_secs(5));
    let again = admin
        .add_schedule(&add(def.clone(), false, None))
        .await
        .unwrap();
    assert_eq!(again.outcome, ScheduleAddOutcome::Added);
    assert_eq!(
        (again.schedule.created_at, again.schedule.active_since),
        (clock.now(), clock.now())
    );
    assert!(again.schedule.paused.is_none());
    assert_eq!(admin.schedules().await.unwrap(), vec![again.schedule]);
    let log = log_of(&*store, "sweep").await;
    assert_eq!(log.len(), 6);
    assert_eq!(log[0].action, "schedule_add");
}

/// The store's step alone: a change whose condition does not hold answers
/// `None` and writes no audit entry.
pub async fn a_schedule_change_that_does_not_apply_writes_nothing(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let by = errand_core::AuditStamp {
        operator: "ops".into(),
        reason: None,
    };
    let def = definition("s", "* * * * *", "{}");
    let name = def.name.clone();
    let none = [
        ScheduleChange::Replace(def.clone()),
        ScheduleChange::Remove(def.clone()),
        ScheduleChange::Pause(name.clone()),
        ScheduleChange::Resume(name.clone()),
    ];
    for change in &none {
        assert!(store.change_schedule(change, &by).await.unwrap().is_none());
    }
    assert!(
        store
            .change_schedule(&ScheduleChange::Add(def.clone()), &by)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .change_schedule(&ScheduleChange::Add(def.clone()), &by)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .change_schedule(&ScheduleChange::Resume(name), &by)
            .await
            .unwrap()
            .is_none()
    );
    // A removal names the definition it removes: another one under the
    // name (replaced meanwhile) stays.
    let stale = ScheduleDefinition {
        cron: "0 * * * *".into(),
        ..def.clone()
    };
    assert!(
        store
            .change_schedule(&ScheduleChange::Remove(stale), &by)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.schedules().await.unwrap().len(), 1);
    assert_eq!(log_of(&*store, "s").await.len(), 1, "only the add wrote");
    assert!(
        store
            .change_schedule(&ScheduleChange::Remove(def), &by)
            .await
            .unwrap()
            .is_some()
    );
    assert!(store.schedules().await.unwrap().is_empty());
}
