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

async fn read(store: &dyn Store, queue: Option<&str>, from: i64, until: i64) -> Vec<MinuteRow> {
    store
        .minutes(&MinuteQuery {
            queue: queue.map(|q| Name::parse("queue", q).unwrap()),
            from,
            until,
        })
        .await
        .unwrap()
}

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
    let charts = Charts::from_minutes(
        None,
        ChartWindow::Hour,
        now,
        &read(
            store.as_ref(),
            None,
            Charts::query(None, ChartWindow::Hour, now).from,
            m + 2,
        )
        .await,
    );
    assert_eq!(charts.finished[58], 9);
    assert_eq!(charts.depth[58], Some(51));
    assert_eq!(charts.oldest_due_ms[58], Some(12_000));
    assert_eq!(charts.lateness[3], 5);
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

/// Eight writers adding to the same minutes at once (the same keys, in
/// different orders) lose no count and fail none of their writes.
pub async fn concurrent_minute_writers_lose_no_count(store: Arc<dyn Store>, _clock: ManualClock) {
    let m = 29_000_000;
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25u64 {
                let mut rows = vec![
                    count("mail", m, Series::Finished, 1),
                    count("sms", m, Series::Finished, 2),
                    count("mail", m + 1, Series::Retry(ErrorClass::Retryable), 1),
                    count("mail", m, Series::Depth, w * 100 + i),
                ];
                if w % 2 == 1 {
                    rows.reverse();
                }
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
}
