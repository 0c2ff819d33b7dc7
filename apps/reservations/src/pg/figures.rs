//! The figures the statistics are made from, read on PostgreSQL: the
//! recent lateness and overdue holds, and the lateness, outcome and status
//! counts.

use std::time::Duration;

use super::{Pg, millis, ts};
use crate::error::Result;
use crate::model::{Figures, RecentLateness, Status};

impl Pg {
    pub(crate) async fn recent_lateness(&self, window: Duration) -> Result<RecentLateness> {
        let client = self.client().await?;
        let window_ms = millis(window);
        let row = client
            .query_one(
                "SELECT date_trunc('milliseconds', now()),
                        (SELECT count(*) FROM reservations.expirations
                          WHERE expired_at >= now() - $1::bigint * interval '1 millisecond'),
                        (SELECT max(lateness_ms) FROM reservations.expirations
                          WHERE expired_at >= now() - $1::bigint * interval '1 millisecond'),
                        (SELECT count(*) FROM reservations.reservations
                          WHERE status = 'held' AND hold_until <= now()),
                        (SELECT (extract(epoch FROM (now() - min(hold_until))) * 1000)::bigint
                           FROM reservations.reservations
                          WHERE status = 'held' AND hold_until <= now())",
                &[&window_ms],
            )
            .await?;
        let count = |i: usize| -> Result<u64> {
            let n: i64 = row.try_get(i)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(RecentLateness {
            at: ts(row.try_get(0)?),
            window,
            expired: count(1)?,
            max_expired_ms: row.try_get(2)?,
            overdue: count(3)?,
            max_overdue_ms: row.try_get(4)?,
        })
    }
    pub(crate) async fn figures(&self) -> Result<Figures> {
        let client = self.client().await?;
        let lateness_ms = client
            .query(
                "SELECT lateness_ms FROM reservations.expirations ORDER BY lateness_ms",
                &[],
            )
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<std::result::Result<Vec<i64>, _>>()?;
        let outcomes = client
            .query(
                "SELECT outcome, count(*) FROM reservations.expiry_outcomes GROUP BY outcome ORDER BY outcome",
                &[],
            )
            .await?
            .iter()
            .map(|r| {
                let n: i64 = r.try_get(1)?;
                Ok((r.try_get(0)?, u64::try_from(n).unwrap_or(0)))
            })
            .collect::<Result<Vec<(String, u64)>>>()?;
        let statuses = client
            .query(
                "SELECT status, count(*) FROM reservations.reservations GROUP BY status",
                &[],
            )
            .await?
            .iter()
            .map(|r| {
                let n: i64 = r.try_get(1)?;
                Ok((Status::parse(r.try_get(0)?)?, u64::try_from(n).unwrap_or(0)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Figures {
            lateness_ms,
            outcomes,
            statuses,
            dead_jobs: 0,
        })
    }
}
