#![allow(clippy::unwrap_used)]
//! Stored schedules run by the cron enqueuer, on SQLite and PostgreSQL:
//! one job per tick however many enqueuers pass at once, nothing while
//! paused, nothing from before a schedule was added, replaced or resumed,
//! nothing once removed; a stored row that no longer makes a job is left
//! out without stopping the others. The clock is the test's: each pass is
//! given its `now`, and the store stamps its rows with the same clock.

use std::sync::Arc;
use std::time::Duration;

use errand::core::{Clock, JobFilter, ManualClock, Store, Timestamp};
use errand::{
    Admin, CronEnqueuer, Misfire, Name, Payload, ScheduleAction, ScheduleAdd, ScheduleDefinition,
};
use errand_testsupport::{PgSchema, postgres_url};

/// 2026-11-30T10:00:30Z: half a minute past a whole minute.
fn t0() -> Timestamp {
    Timestamp::parse_rfc3339("2026-11-30T10:00:30Z").unwrap()
}

fn sqlite(clock: &ManualClock) -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let options = errand::SqliteOptions {
        create: true,
        migrate: true,
        clock: Arc::new(clock.clone()),
        ..errand::SqliteOptions::default()
    };
    let store = errand::SqliteStore::open(dir.path().join("e.db"), options).unwrap();
    (dir, Arc::new(store))
}

async fn postgres(clock: &ManualClock, tag: &str) -> Option<(PgSchema, Arc<dyn Store>)> {
    let url = postgres_url("stored schedules on PostgreSQL")?;
    let schema = PgSchema::new(&url, tag);
    let options = errand::PgOptions {
        schema: schema.name.clone(),
        migrate: true,
        pool_size: 8,
        clock: Some(Arc::new(clock.clone())),
        ..errand::PgOptions::default()
    };
    let store = errand::PgStore::connect(&url, options).await.unwrap();
    Some((schema, Arc::new(store)))
}

fn add(def: ScheduleDefinition) -> ScheduleAdd {
    ScheduleAdd {
        definition: def,
        replace: true,
        operator: "test".into(),
        reason: None,
    }
}

fn act(name: &str) -> ScheduleAction {
    ScheduleAction {
        name: Name::parse("schedule", name).unwrap(),
        operator: "test".into(),
        reason: None,
    }
}

/// Every minute, backfilling up to 5 missed ticks.
fn minutely(name: &str) -> ScheduleDefinition {
    ScheduleDefinition::new(name, "* * * * *", "report", Payload::default())
        .unwrap()
        .with_misfire(Misfire::Backfill(5))
}

async fn ids(store: &Arc<dyn Store>) -> Vec<String> {
    let mut ids: Vec<String> = store
        .list(&JobFilter {
            limit: Some(1000),
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id.to_string())
        .collect();
    ids.sort();
    ids
}

fn enqueuer(store: &Arc<dyn Store>) -> CronEnqueuer {
    CronEnqueuer::new(store.clone(), Vec::new()).with_stored_schedules(store.clone())
}

async fn stored_schedules_run_as_the_store_says(store: Arc<dyn Store>, clock: ManualClock) {
    let admin = Admin::new(store.clone());
    admin.add_schedule(&add(minutely("m"))).await.unwrap();

    // Added at 10:00:30: the 10:00 tick is before it, so even a backfill
    // enqueues nothing yet.
    assert!(
        enqueuer(&store)
            .run_once(clock.now())
            .await
            .unwrap()
            .is_empty()
    );

    // 10:03:10: ticks 10:01, 10:02 and 10:03 are due; ten enqueuers
    // passing at once make one job each.
    clock.set(Timestamp::parse_rfc3339("2026-11-30T10:03:10Z").unwrap());
    let now = clock.now();
    let passes: Vec<_> = (0..10)
        .map(|_| {
            let e = enqueuer(&store);
            tokio::spawn(async move { e.run_once(now).await })
        })
        .collect();
    let mut created = 0;
    for p in passes {
        created += p
            .await
            .unwrap()
            .unwrap()
            .iter()
            .filter(|i| i.created)
            .count();
    }
    assert_eq!(created, 3, "each tick created by exactly one enqueuer");
    assert_eq!(
        ids(&store).await,
        [
            "cron:m:2026-11-30T10:01:00.000Z",
            "cron:m:2026-11-30T10:02:00.000Z",
            "cron:m:2026-11-30T10:03:00.000Z"
        ]
    );
    let job = store
        .get(&errand::JobId::new("cron:m:2026-11-30T10:02:00.000Z").unwrap())
        .await
        .unwrap();
    assert_eq!(job.kind.as_str(), "report");
    assert_eq!(
        job.available_at,
        Timestamp::parse_rfc3339("2026-11-30T10:02:00Z").unwrap(),
        "due at its tick"
    );

    // Paused at 10:03:20: nothing through 10:06.
    clock.advance(Duration::from_secs(10));
    assert!(admin.pause_schedule(&act("m")).await.unwrap().changed);
    clock.set(Timestamp::parse_rfc3339("2026-11-30T10:06:05Z").unwrap());
    assert!(
        enqueuer(&store)
            .run_once(clock.now())
            .await
            .unwrap()
            .is_empty()
    );

    // Resumed at 10:06:05: the ticks missed while paused stay missed,
    // backfill or not; 10:07 comes.
    assert!(admin.resume_schedule(&act("m")).await.unwrap().changed);
    assert!(
        enqueuer(&store)
            .run_once(clock.now())
            .await
            .unwrap()
            .is_empty()
    );
    clock.set(Timestamp::parse_rfc3339("2026-11-30T10:07:01Z").unwrap());
    let e = enqueuer(&store);
    let made = e.run_once(clock.now()).await.unwrap();
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].job.id.as_str(), "cron:m:2026-11-30T10:07:00.000Z");
    // The pass knows the next tick.
    assert_eq!(
        e.next_wake(clock.now()),
        Some(Timestamp::parse_rfc3339("2026-11-30T10:07:11Z").unwrap()).min(Some(
            Timestamp::parse_rfc3339("2026-11-30T10:08:00Z").unwrap()
        )),
        "no later than the refresh (10 s), and the next tick"
    );

    // Replaced at 10:07:30 by an hourly one: it starts from now.
    clock.set(Timestamp::parse_rfc3339("2026-11-30T10:07:30Z").unwrap());
    let hourly = ScheduleDefinition::new("m", "0 * * * *", "report", Payload::default())
        .unwrap()
        .with_misfire(Misfire::Backfill(5));
    admin.add_schedule(&add(hourly)).await.unwrap();
    clock.set(Timestamp::parse_rfc3339("2026-11-30T11:00:02Z").unwrap());
    let made = enqueuer(&store).run_once(clock.now()).await.unwrap();
    let made: Vec<&str> = made.iter().map(|i| i.job.id.as_str()).collect();
    assert_eq!(made, ["cron:m:2026-11-30T11:00:00.000Z"]);

    // Removed: nothing more.
    admin.remove_schedule(&act("m")).await.unwrap();
    clock.set(Timestamp::parse_rfc3339("2026-11-30T12:00:02Z").unwrap());
    assert!(
        enqueuer(&store)
            .run_once(clock.now())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(ids(&store).await.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_schedules_run_as_the_store_says_on_sqlite() {
    let clock = ManualClock::new(t0());
    let (_dir, store) = sqlite(&clock);
    stored_schedules_run_as_the_store_says(store, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_schedules_run_as_the_store_says_on_postgres() {
    let clock = ManualClock::new(t0());
    let Some((_schema, store)) = postgres(&clock, "stored_sched").await else {
        return;
    };
    stored_schedules_run_as_the_store_says(store, clock).await;
}

/// A row that no longer makes a valid job (written behind the library's
/// back) is left out; the other schedules still run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_stored_schedule_does_not_stop_the_others() {
    let clock = ManualClock::new(t0());
    let (dir, store) = sqlite(&clock);
    let admin = Admin::new(store.clone());
    admin.add_schedule(&add(minutely("good"))).await.unwrap();
    admin.add_schedule(&add(minutely("bad"))).await.unwrap();
    let conn = errand::sqlite::rusqlite::Connection::open(dir.path().join("e.db")).unwrap();
    conn.execute(
        "UPDATE errand_schedules SET cron = 'every blue moon' WHERE name = 'bad'",
        [],
    )
    .unwrap();
    drop(conn);
    // The listing still reads it (the pattern is text), so an operator
    // sees it and can replace or remove it.
    assert_eq!(admin.schedules().await.unwrap().len(), 2);
    clock.set(Timestamp::parse_rfc3339("2026-11-30T10:01:05Z").unwrap());
    let made = enqueuer(&store).run_once(clock.now()).await.unwrap();
    let made: Vec<&str> = made.iter().map(|i| i.job.id.as_str()).collect();
    assert_eq!(made, ["cron:good:2026-11-30T10:01:00.000Z"]);
    admin.remove_schedule(&act("bad")).await.unwrap();
}

/// A stored schedule in a time zone, across both of its daylight-saving
/// transitions: `30 2 * * *` in Europe/Berlin runs once on the night the
/// clocks jump from 02:00 to 03:00, at 03:00 (01:00 UTC), and once on the
/// night 02:00–03:00 repeats, at the first 02:30 (00:30 UTC); the zone is
/// stored and read back with the schedule.
async fn a_stored_schedule_follows_its_time_zone_across_dst(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let admin = Admin::new(store.clone());
    let berlin = "Europe/Berlin".parse().unwrap();
    let nightly = ScheduleDefinition::new("nightly", "30 2 * * *", "report", Payload::default())
        .unwrap()
        .in_zone(berlin);
    let added = admin.add_schedule(&add(nightly.clone())).await.unwrap();
    assert_eq!(added.schedule.definition.tz, berlin);
    assert_eq!(admin.schedules().await.unwrap()[0].definition, nightly);
    let enqueuer = enqueuer(&store);
    let mut seen = Vec::new();
    // Every ten minutes through both transition nights.
    for (start, end) in [
        ("2026-03-28T22:00:00Z", "2026-03-29T04:00:00Z"),
        ("2026-10-24T22:00:00Z", "2026-10-25T04:00:00Z"),
    ] {
        let end = Timestamp::parse_rfc3339(end).unwrap();
        clock.set(Timestamp::parse_rfc3339(start).unwrap());
        while clock.now() <= end {
            for i in enqueuer.run_once(clock.now()).await.unwrap() {
                if i.created {
                    seen.push(i.job.id.to_string());
                }
            }
            clock.advance(Duration::from_secs(600));
        }
    }
    assert_eq!(
        seen,
        [
            "cron:nightly:2026-03-29T01:00:00.000Z",
            "cron:nightly:2026-10-25T00:30:00.000Z"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_schedule_follows_its_time_zone_across_dst_on_sqlite() {
    let clock = ManualClock::new(Timestamp::parse_rfc3339("2026-03-28T12:00:00Z").unwrap());
    let (_dir, store) = sqlite(&clock);
    a_stored_schedule_follows_its_time_zone_across_dst(store, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_schedule_follows_its_time_zone_across_dst_on_postgres() {
    let clock = ManualClock::new(Timestamp::parse_rfc3339("2026-03-28T12:00:00Z").unwrap());
    let Some((_schema, store)) = postgres(&clock, "sched_tz").await else {
        return;
    };
    a_stored_schedule_follows_its_time_zone_across_dst(store, clock).await;
}
