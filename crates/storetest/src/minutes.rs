//! The per-minute counts behind the charts: counters add up, gauges keep
//! their peak, reads add queues together, old minutes are pruned, and no
//! count is lost when several workers add to the same minute at once.

use std::sync::Arc;

use errand_core::{
    ChartWindow, Charts, Error, ErrorClass, ManualClock, MinuteCount, MinuteQuery, MinuteRow, Name,
    Series, Store, Timestamp,
};

fn count(queue: &str, minute: i64, series: Series, value: u64) -> MinuteCount {
    MinuteCount {
        queue: Name::parse("queue", queue).unwrap(),
        minute,
        series,
        value,
    }
}

async fn read_slots(
    store: &dyn Store,
    queue: Option<&str>,
    from: i64,
    until: i64,
    slot: i64,
) -> Vec<MinuteRow> {
    store
        .minutes(&MinuteQuery {
            queue: queue.map(|q| Name::parse("queue", q).unwrap()),
            from,
            until,
            slot,
        })
        .await
        .unwrap()
}

async fn read(store: &dyn Store, queue: Option<&str>, from: i64, until: i64) -> Vec<MinuteRow> {
    read_slots(store, queue, from, until, 1).await
}

/// A minute's (or slot's) sum and largest value.
fn find(rows: &[MinuteRow], minute: i64, series: Series) -> Option<(u64, u64)> {
    let name = series.to_string();
    rows.iter()
        .find(|r| r.minute == minute && r.series == name)
        .map(|r| (r.sum, r.max))
}

/// Counters add to what is stored, gauges keep the larger value; a read
/// of one queue sees only its rows, a read of all adds the queues (sum)
/// and keeps the largest (max), in `from..until`.
pub async fn minute_counts_add_up_and_gauges_keep_their_peak(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let m = 29_000_000;
    store
        .record_minutes(&[
            count("mail", m, Series::Finished, 3),
            count("mail", m, Series::Retry(ErrorClass::Timeout), 1),
            count("mail", m, Series::Depth, 40),
            count("mail", m, Series::OldestDueMs, 9_000),
            count("sms", m, Series::Finished, 2),
            count("sms", m, Series::Depth, 7),
            count("sms", m, Series::OldestDueMs, 12_000),
            count("mail", m + 1, Series::Late(3), 5),
        ])
        .await
        .unwrap();
    store
        .record_minutes(&[
            count("mail", m, Series::Finished, 4),
            count("mail", m, Series::Depth, 25),
            count("sms", m, Series::Depth, 11),
        ])
        .await
        .unwrap();
    store.record_minutes(&[]).await.unwrap();

    let mail = read(store.as_ref(), Some("mail"), m, m + 2).await;
    assert_eq!(find(&mail, m, Series::Finished), Some((7, 7)));
    assert_eq!(
        find(&mail, m, Series::Retry(ErrorClass::Timeout)),
        Some((1, 1))
    );
    assert_eq!(find(&mail, m, Series::Depth), Some((40, 40)), "peak kept");
    assert_eq!(find(&mail, m + 1, Series::Late(3)), Some((5, 5)));
    assert_eq!(mail.len(), 5, "only mail's rows: {mail:?}");

    let all = read(store.as_ref(), None, m, m + 1).await;
    assert_eq!(find(&all, m, Series::Finished), Some((9, 7)));
    assert_eq!(find(&all, m, Series::Depth), Some((51, 40)));
    assert_eq!(find(&all, m, Series::OldestDueMs), Some((21_000, 12_000)));
    assert_eq!(
        find(&all, m + 1, Series::Late(3)),
        None,
        "until is exclusive"
    );
    let minutes: Vec<(i64, &str)> = all.iter().map(|r| (r.minute, r.series.as_str())).collect();
    let mut sorted = minutes.clone();
    sorted.sort_unstable();
    assert_eq!(minutes, sorted, "ordered by minute, then series");

    assert!(
        read(store.as_ref(), Some("push"), m, m + 2)
            .await
            .is_empty()
    );
    assert!(read(store.as_ref(), None, m + 2, m + 60).await.is_empty());

    // The library reads them into a chart: the hour ending with minute m+1.
    let now = Timestamp::from_millis((m + 1) * 60_000 + 1_000);
    let query = Charts::query(None, ChartWindow::Hour, now);
    let charts = Charts::from_minutes(
        None,
        ChartWindow::Hour,
        now,
        &store.minutes(&query).await.unwrap(),
    );
    assert_eq!(charts.finished[58], 9);
    assert_eq!(charts.depth[58], Some(51));
    assert_eq!(charts.oldest_due_ms[58], Some(12_000));
    assert_eq!(charts.lateness[3], 5);
}

/// A read in slots adds each slot's minutes: counters summed over queues
/// and minutes, the peak of the per-minute totals over queues (a depth of
/// every queue), and the largest single value (the oldest job of any
/// queue). Slots start at `from`.
pub async fn minutes_add_up_into_slots(store: Arc<dyn Store>, _clock: ManualClock) {
    let from = 29_000_010;
    let mut rows = Vec::new();
    for k in 0..45 {
        rows.push(count("mail", from + k, Series::Finished, 1));
        rows.push(count("sms", from + k, Series::Finished, 2));
        rows.push(count(
            "mail",
            from + k,
            Series::Depth,
            u64::try_from(k).unwrap(),
        ));
        rows.push(count(
            "sms",
            from + k,
            Series::Depth,
            100 - u64::try_from(k).unwrap(),
        ));
        rows.push(count(
            "sms",
            from + k,
            Series::OldestDueMs,
            1_000 * u64::try_from(k).unwrap(),
        ));
    }
    // Before the window: not read.
    rows.push(count("mail", from - 1, Series::Finished, 1_000));
    store.record_minutes(&rows).await.unwrap();
    let slots = read_slots(store.as_ref(), None, from, from + 45, 15).await;
    let at = |minute: i64, s: Series| {
        let name = s.to_string();
        slots
            .iter()
            .find(|r| r.minute == minute && r.series == name)
            .map(|r| (r.sum, r.peak_sum, r.max))
    };
    assert_eq!(slots.len(), 9, "three slots of three series: {slots:?}");
    assert_eq!(at(from, Series::Finished), Some((45, 3, 2)));
    assert_eq!(at(from + 30, Series::Finished), Some((45, 3, 2)));
    // Every minute's depths add to 100; the largest single one is sms's
    // first (100), then 85 and 70 as its backlog drains.
    assert_eq!(
        at(from, Series::Depth).map(|d| (d.1, d.2)),
        Some((100, 100))
    );
    assert_eq!(at(from + 15, Series::Depth).map(|d| d.2), Some(85));
    assert_eq!(
        at(from + 30, Series::OldestDueMs).map(|d| d.2),
        Some(44_000)
    );
    let mail = read_slots(store.as_ref(), Some("mail"), from, from + 45, 15).await;
    let mail_finished: Vec<u64> = mail
        .iter()
        .filter(|r| r.series == "finished")
        .map(|r| r.sum)
        .collect();
    assert_eq!(mail_finished, [15, 15, 15]);
    assert!(
        mail.iter().all(|r| r.series != "oldest_due_ms"),
        "sms's rows only in its own reads: {mail:?}"
    );
}

/// A counter that would pass the largest value a store keeps stays at it,
/// and reads of it (added over queues too) saturate instead of failing.
pub async fn a_counter_saturates_instead_of_overflowing(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let m = 29_000_000;
    let big = u64::try_from(i64::MAX).unwrap() - 5;
    store
        .record_minutes(&[
            count("mail", m, Series::Finished, big),
            count("sms", m, Series::Finished, big),
        ])
        .await
        .unwrap();
    store
        .record_minutes(&[count("mail", m, Series::Finished, 10)])
        .await
        .unwrap();
    let mail = read(store.as_ref(), Some("mail"), m, m + 1).await;
    assert_eq!(
        find(&mail, m, Series::Finished),
        Some((
            u64::try_from(i64::MAX).unwrap(),
            u64::try_from(i64::MAX).unwrap()
        ))
    );
    let all = read(store.as_ref(), None, m, m + 1).await;
    let (sum, max) = find(&all, m, Series::Finished).unwrap();
    assert!(sum >= u64::try_from(i64::MAX).unwrap(), "{sum}");
    assert_eq!(max, u64::try_from(i64::MAX).unwrap());
}

/// Pruning deletes the minutes before the one given, and only those.
pub async fn old_minutes_are_pruned(store: Arc<dyn Store>, _clock: ManualClock) {
    let m = 29_000_000;
    store
        .record_minutes(&[
            count("mail", m - 3000, Series::Finished, 1),
            count("sms", m - 2881, Series::Dead, 1),
            count("mail", m - 2880, Series::Finished, 1),
            count("mail", m, Series::Depth, 2),
        ])
        .await
        .unwrap();
    assert_eq!(store.prune_minutes(m - 2880).await.unwrap(), 2);
    assert_eq!(store.prune_minutes(m - 2880).await.unwrap(), 0);
    let left = read(store.as_ref(), None, m - 10_000, m + 1).await;
    let minutes: Vec<i64> = left.iter().map(|r| r.minute).collect();
    assert_eq!(minutes, [m - 2880, m]);
}

/// A count too large to store is refused, and nothing of the call is
/// written.
pub async fn an_oversized_minute_count_writes_nothing(store: Arc<dyn Store>, _clock: ManualClock) {
    let m = 29_000_000;
    let err = store
        .record_minutes(&[
            count("mail", m, Series::Finished, 1),
            count("mail", m, Series::Dead, u64::MAX),
        ])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
    assert!(read(store.as_ref(), None, m, m + 1).await.is_empty());
}

/// Eight writers adding to the same minutes at once (overlapping but
/// different keys: each writes its own minute besides the shared ones)
/// lose no count and fail none of their writes.
pub async fn concurrent_minute_writers_lose_no_count(store: Arc<dyn Store>, _clock: ManualClock) {
    let m = 29_000_000;
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25u64 {
                let own = m + 10 + i64::try_from(w).unwrap();
                let rows = vec![
                    count("mail", m, Series::Finished, 1),
                    count("sms", m, Series::Finished, 2),
                    count("mail", m + 1, Series::Retry(ErrorClass::Retryable), 1),
                    count("mail", m, Series::Depth, w * 100 + i),
                    count("mail", own, Series::Finished, 1),
                    count("sms", own, Series::Dead, 1),
                ];
                store.record_minutes(&rows).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mail = read(store.as_ref(), Some("mail"), m, m + 2).await;
    assert_eq!(find(&mail, m, Series::Finished), Some((200, 200)));
    assert_eq!(
        find(&mail, m + 1, Series::Retry(ErrorClass::Retryable)),
        Some((200, 200))
    );
    assert_eq!(find(&mail, m, Series::Depth), Some((724, 724)));
    let sms = read(store.as_ref(), Some("sms"), m, m + 2).await;
    assert_eq!(find(&sms, m, Series::Finished), Some((400, 400)));
    let own = read(store.as_ref(), None, m + 10, m + 18).await;
    assert_eq!(own.len(), 16, "{own:?}");
    assert!(own.iter().all(|r| r.sum == 25), "{own:?}");
}
