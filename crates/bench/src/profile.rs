//! Where a measured phase spent its resources, per job: this process's CPU,
//! the rest of the machine's CPU (on a machine given to the benchmark,
//! mostly the database server), and on PostgreSQL the WAL written, the
//! statements executed and the row versions written.
//!
//! CPU times come from `/proc` (Linux; absent elsewhere). WAL bytes are the
//! distance the cluster's WAL position moved, so other databases' writes on
//! the same cluster count too. Statements come from `pg_stat_statements`
//! when the server loads it (its `calls` for this database), and are absent
//! otherwise. Row versions come from `pg_stat_user_tables` for the
//! benchmark's schema, read after the phase's sessions ended.

use serde::Serialize;

/// CPU time in clock ticks (`USER_HZ`, 100 per second on Linux).
const TICKS_PER_SEC: f64 = 100.0;

/// CPU counters at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuTimes {
    /// This process, user + system, in ticks.
    process: u64,
    /// Every CPU of the machine, busy (not idle, not waiting for I/O), in ticks.
    machine: u64,
}

impl CpuTimes {
    /// Reads the counters; `None` where `/proc` is not there.
    pub(crate) fn now() -> Option<CpuTimes> {
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        let all = std::fs::read_to_string("/proc/stat").ok()?;
        Some(CpuTimes {
            process: process_ticks(&own)?,
            machine: machine_busy_ticks(&all)?,
        })
    }
}

/// utime + stime of a `/proc/PID/stat` line (fields 14 and 15; the command
/// name in parentheses may hold spaces, so counting starts after it).
fn process_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state is field 3, so utime (14) is the 12th here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Busy ticks of the `cpu` line of `/proc/stat`: everything but idle and
/// iowait (guest time is already inside user time).
fn machine_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let sum: u64 = v.iter().take(8).sum();
    Some(sum - v.get(3)? - v.get(4)?)
}

/// PostgreSQL counters at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PgActivity {
    /// The cluster's current WAL position, in bytes.
    pub(crate) wal_lsn: u64,
    /// `pg_stat_statements` calls in this database, when it is loaded.
    pub(crate) statements: Option<u64>,
    /// Rows inserted, updated (HOT or not), updated HOT and deleted in the
    /// benchmark's schema.
    pub(crate) inserted: u64,
    pub(crate) updated: u64,
    pub(crate) hot_updated: u64,
    pub(crate) deleted: u64,
}

/// The resources of one measured phase, per job.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Profile {
    /// CPU this process spent (user + system), µs per job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errand_cpu_us: Option<f64>,
    /// CPU every other process of the machine spent (the database server,
    /// on a machine given to the benchmark), µs per job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_cpu_us: Option<f64>,
    /// PostgreSQL: WAL bytes written per job (the whole cluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal_bytes: Option<f64>,
    /// PostgreSQL with `pg_stat_statements`: statements executed per job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statements: Option<f64>,
    /// PostgreSQL: rows inserted per job, in the benchmark's schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_inserted: Option<f64>,
    /// PostgreSQL: row updates per job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_updated: Option<f64>,
    /// PostgreSQL: of those, HOT updates per job (no index entry written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_hot_updated: Option<f64>,
    /// PostgreSQL: rows deleted per job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_deleted: Option<f64>,
}

/// What a phase's start recorded.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Mark {
    pub(crate) cpu: Option<CpuTimes>,
    pub(crate) pg: Option<PgActivity>,
}

impl Profile {
    /// One line for people: the figures that were measured.
    pub fn human(&self) -> String {
        let parts = [
            ("µs CPU here", self.errand_cpu_us),
            ("µs CPU elsewhere", self.other_cpu_us),
            ("WAL bytes", self.wal_bytes),
            ("statements", self.statements),
            ("rows inserted", self.rows_inserted),
            ("row updates", self.rows_updated),
            ("HOT", self.rows_hot_updated),
            ("rows deleted", self.rows_deleted),
        ];
        let shown: Vec<String> = parts
            .iter()
            .filter_map(|(name, v)| v.map(|v| format!("{v:.2} {name}")))
            .collect();
        if shown.is_empty() {
            "not measured here".to_owned()
        } else {
            shown.join(", ")
        }
    }

    /// The resources between two marks, divided by `jobs`.
    pub(crate) fn between(start: &Mark, end: &Mark, jobs: u64) -> Profile {
        if jobs == 0 {
            return Profile::default();
        }
        let n = jobs as f64;
        let per = |a: u64, b: u64| Some(b.saturating_sub(a) as f64 / n);
        let cpu = match (start.cpu, end.cpu) {
            (Some(a), Some(b)) => {
                let own = b.process.saturating_sub(a.process);
                let all = b.machine.saturating_sub(a.machine);
                let us = |ticks: u64| Some(ticks as f64 / TICKS_PER_SEC * 1e6 / n);
                (us(own), us(all.saturating_sub(own)))
            }
            _ => (None, None),
        };
        let mut p = Profile {
            errand_cpu_us: cpu.0,
            other_cpu_us: cpu.1,
            ..Profile::default()
        };
        if let (Some(a), Some(b)) = (start.pg, end.pg) {
            p.wal_bytes = per(a.wal_lsn, b.wal_lsn);
            p.statements = match (a.statements, b.statements) {
                (Some(x), Some(y)) => per(x, y),
                _ => None,
            };
            p.rows_inserted = per(a.inserted, b.inserted);
            p.rows_updated = per(a.updated, b.updated);
            p.rows_hot_updated = per(a.hot_updated, b.hot_updated);
            p.rows_deleted = per(a.deleted, b.deleted);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_ticks_are_read_after_a_name_with_spaces() {
        let line = "4242 (errand bench) S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 5 0";
        assert_eq!(process_ticks(line), Some(281));
    }

    #[test]
    fn machine_busy_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 5 50 1000 40 1 2 3 0 0\ncpu0 50 2 25 500 20 0 1 1 0 0\n";
        assert_eq!(machine_busy_ticks(stat), Some(161));
    }

    #[test]
    fn a_profile_divides_the_differences_by_the_jobs() {
        let start = Mark {
            cpu: Some(CpuTimes {
                process: 100,
                machine: 300,
            }),
            pg: Some(PgActivity {
                wal_lsn: 1_000,
                statements: Some(10),
                inserted: 0,
                updated: 5,
                hot_updated: 1,
                deleted: 0,
            }),
        };
        let end = Mark {
            cpu: Some(CpuTimes {
                process: 200,
                machine: 600,
            }),
            pg: Some(PgActivity {
                wal_lsn: 5_000,
                statements: Some(30),
                inserted: 0,
                updated: 205,
                hot_updated: 101,
                deleted: 0,
            }),
        };
        let p = Profile::between(&start, &end, 100);
        // 100 ticks = 1 s of this process over 100 jobs; 200 ticks elsewhere.
        assert_eq!(p.errand_cpu_us, Some(10_000.0));
        assert_eq!(p.other_cpu_us, Some(20_000.0));
        assert_eq!(p.wal_bytes, Some(40.0));
        assert_eq!(p.statements, Some(0.2));
        assert_eq!(p.rows_updated, Some(2.0));
        assert_eq!(p.rows_hot_updated, Some(1.0));
        assert_eq!(Profile::between(&start, &end, 0), Profile::default());
    }
}
