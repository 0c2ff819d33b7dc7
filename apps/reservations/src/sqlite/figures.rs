//! The figures the statistics are made from, read on SQLite: the recent
//! lateness and overdue holds, and the lateness, outcome and status counts.

use std::time::Duration;

use errand::sqlite::rusqlite;

use super::Sqlite;
use crate::error::Result;
use crate::model::{Figures, RecentLateness, Status};

impl Sqlite {
    pub(crate) async fn recent_lateness(&self, window: Duration) -> Result<RecentLateness> {
        let now = self.store.now();
        self.read(move |c| {
            let since = now.minus(window);
            let (expired, max_expired_ms): (i64, Option<i64>) = c
                .prepare_cached(
                    "SELECT count(*), max(lateness_ms) FROM expirations WHERE expired_at >= ?1",
                )?
                .query_row([since.as_millis()], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let (overdue, oldest): (i64, Option<i64>) = c
                .prepare_cached(
                    "SELECT count(*), min(hold_until) FROM reservations
                     WHERE status = 'held' AND hold_until <= ?1",
                )?
                .query_row([now.as_millis()], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(RecentLateness {
                at: now,
                window,
                expired: u64::try_from(expired).unwrap_or(0),
                max_expired_ms,
                overdue: u64::try_from(overdue).unwrap_or(0),
                max_overdue_ms: oldest.map(|t| now.as_millis().saturating_sub(t)),
            })
        })
        .await
    }
    pub(crate) async fn figures(&self) -> Result<Figures> {
        self.read(|c| {
            let lateness_ms = c
                .prepare_cached("SELECT lateness_ms FROM expirations ORDER BY lateness_ms")?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<i64>>>()?;
            let outcomes = c
                .prepare_cached(
                    "SELECT outcome, count(*) FROM expiry_outcomes GROUP BY outcome ORDER BY outcome",
                )?
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
                .map(|r| r.map(|(o, n)| (o, u64::try_from(n).unwrap_or(0))))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let statuses = c
                .prepare_cached("SELECT status, count(*) FROM reservations GROUP BY status")?
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?
                .into_iter()
                .map(|(s, n)| Ok((Status::parse(&s)?, u64::try_from(n).unwrap_or(0))))
                .collect::<Result<Vec<_>>>()?;
            Ok(Figures {
                lateness_ms,
                outcomes,
                statuses,
                dead_jobs: 0,
            })
        })
        .await
    }
}
