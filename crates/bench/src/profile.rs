//! Where a measured phase spent its resources, per job: this process's CPU,
//! the rest of the machine's CPU (on a machine given to the benchmark,
//! mostly the database server), on SQLite the bytes this process wrote,
//! and on PostgreSQL the server's own CPU (when it runs on this machine),
//! the WAL written, the statements executed, their execution time and the
//! row versions written.
//!
//! CPU times and bytes written come from `/proc` (Linux; absent elsewhere).
//! The server's CPU is its postmaster's and every child process's, found
//! through the benchmark session's backend; children that exited during
//! the phase count through the postmaster's reaped-children time. WAL bytes
//! are the distance the cluster's WAL position moved, so other databases'
//! writes on the same cluster count too; the two positions are reported,
//! so that `pg_waldump` can break the phase's WAL down. Statements come
//! from `pg_stat_statements` when the server loads it (its `calls` for this
//! database), and are absent otherwise: every call, top-level or nested
//! (nested ones are counted when `pg_stat_statements.track = all`), the
//! top-level calls alone (round trips), the top-level execution time and
//! the statements that took most of it. Row versions come from
//! `pg_stat_user_tables` for the benchmark's schema, read after the
//! phase's sessions ended.

use std::collections::HashMap;

use serde::Serialize;

/// CPU time in clock ticks (`USER_HZ`, 100 per second on Linux).
const TICKS_PER_SEC: f64 = 100.0;
/// How many statements a profile lists, by execution time.
const TOP_STATEMENTS: usize = 8;
/// How much of a statement's text a profile keeps, in characters.
const QUERY_CHARS: usize = 240;

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

/// The fields of a `/proc/PID/stat` line after the command name: the
/// first is the state (field 3 of the line).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace().collect())
}

/// The parent of a process, from its `/proc/PID/stat` line (field 4).
fn parent_pid(stat: &str) -> Option<u32> {
    stat_fields(stat)?.get(1)?.parse().ok()
}

/// utime + stime + cutime + cstime of a `/proc/PID/stat` line (fields 14
/// to 17): the process's CPU and that of its children it has reaped.
fn ticks_with_reaped_children(stat: &str) -> Option<u64> {
    let f = stat_fields(stat)?;
    (11..15).map(|i| f.get(i)?.parse::<u64>().ok()).sum()
}

/// When a process started, in ticks since boot (field 22).
fn start_ticks(stat: &str) -> Option<u64> {
    stat_fields(stat)?.get(19)?.parse().ok()
}

/// The boot time from `/proc/stat`, in seconds since the epoch.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

fn read_stat(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()
}

/// The postmaster of the PostgreSQL server whose backend has process id
/// `backend`, if that server runs on this machine: the backend's parent,
/// when the backend's command line is a PostgreSQL backend's and the
/// parent started when the server says it did (`started`, seconds since
/// the epoch; within 5 s). `None` for a server elsewhere.
pub(crate) fn local_postmaster(backend: u32, started: f64) -> Option<u32> {
    let cmdline = std::fs::read(format!("/proc/{backend}/cmdline")).ok()?;
    if !cmdline.starts_with(b"postgres:") {
        return None;
    }
    let parent = parent_pid(&read_stat(backend)?)?;
    let boot = boot_time(&std::fs::read_to_string("/proc/stat").ok()?)?;
    let began = boot as f64 + start_ticks(&read_stat(parent)?)? as f64 / TICKS_PER_SEC;
    ((began - started).abs() <= 5.0).then_some(parent)
}

/// The CPU a PostgreSQL server has spent, in ticks: its postmaster's own,
/// that of the children it has reaped (ended sessions, autovacuum
/// workers), and that of every child still running. The difference of two
/// readings is the server's CPU in between, whichever children came and
/// went.
pub(crate) fn server_ticks(postmaster: u32) -> Option<u64> {
    let mut total = ticks_with_reaped_children(&read_stat(postmaster)?)?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may end between the listing and the read.
        if let Some(stat) = read_stat(pid)
            && parent_pid(&stat) == Some(postmaster)
        {
            total += process_ticks(&stat).unwrap_or(0);
        }
    }
    Some(total)
}

/// Bytes this process wrote: passed to `write` and its kin (`wchar`), and
/// sent towards the storage device (`write_bytes`), from `/proc/self/io`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct IoCounters {
    written: u64,
    to_storage: u64,
}

impl IoCounters {
    /// Reads the counters; `None` where `/proc/self/io` is not there.
    pub(crate) fn now() -> Option<IoCounters> {
        parse_io(&std::fs::read_to_string("/proc/self/io").ok()?)
    }
}

fn parse_io(text: &str) -> Option<IoCounters> {
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(IoCounters {
        written: field("wchar")?,
        to_storage: field("write_bytes")?,
    })
}

/// One `pg_stat_statements` entry at one moment.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StatementStat {
    pub(crate) queryid: i64,
    pub(crate) toplevel: bool,
    pub(crate) calls: u64,
    pub(crate) total_ms: f64,
    pub(crate) rows: u64,
    pub(crate) query: String,
}

/// A statement's share of a phase.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StatementCost {
    /// Its text as `pg_stat_statements` keeps it (constants replaced by
    /// `$n`), whitespace collapsed, cut at 240 characters.
    pub query: String,
    /// `pg_stat_statements`' id of the statement.
    pub queryid: i64,
    /// Sent by a client (`true`) or run inside a function or trigger.
    pub toplevel: bool,
    /// Calls during the phase.
    pub calls: u64,
    /// Calls per job.
    pub calls_per_job: f64,
    /// Execution time during the phase, ms.
    pub total_ms: f64,
    /// Mean execution time of one call, µs.
    pub mean_us: f64,
    /// Rows the calls returned or wrote.
    pub rows: u64,
}

/// What changed between two readings of `pg_stat_statements`: every
/// statement called in between, the most expensive first.
fn statement_costs(
    start: &[StatementStat],
    end: &[StatementStat],
    jobs: f64,
) -> Vec<StatementCost> {
    let before: HashMap<(i64, bool), &StatementStat> =
        start.iter().map(|s| ((s.queryid, s.toplevel), s)).collect();
    let mut out: Vec<StatementCost> = end
        .iter()
        .filter_map(|s| {
            let (calls0, ms0, rows0) = before
                .get(&(s.queryid, s.toplevel))
                .map_or((0, 0.0, 0), |b| (b.calls, b.total_ms, b.rows));
            let calls = s.calls.checked_sub(calls0).filter(|&c| c > 0)?;
            let total_ms = (s.total_ms - ms0).max(0.0);
            Some(StatementCost {
                query: statement_text(&s.query),
                queryid: s.queryid,
                toplevel: s.toplevel,
                calls,
                calls_per_job: calls as f64 / jobs,
                total_ms,
                mean_us: total_ms * 1000.0 / calls as f64,
                rows: s.rows.saturating_sub(rows0),
            })
        })
        .collect();
    out.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    out
}

/// A statement's text without the comment lines it starts with, its
/// whitespace collapsed, cut at [`QUERY_CHARS`] characters.
fn statement_text(query: &str) -> String {
    let body = query
        .lines()
        .skip_while(|l| l.trim().is_empty() || l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join(" ");
    body.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(QUERY_CHARS)
        .collect()
}

/// A WAL position as PostgreSQL writes it (`16/B374D848`).
fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// PostgreSQL counters at one moment.
#[derive(Clone, Debug, Default)]
pub(crate) struct PgActivity {
    /// The cluster's current WAL position, in bytes.
    pub(crate) wal_lsn: u64,
    /// `pg_stat_statements` calls in this database, when it is loaded.
    pub(crate) statements: Option<u64>,
    /// `pg_stat_statements`, entry by entry, for this database (when it is
    /// loaded and has the `toplevel` column, PostgreSQL 14 on).
    pub(crate) by_statement: Option<Vec<StatementStat>>,
    /// The server's CPU, in ticks, when it runs on this machine.
    pub(crate) server_ticks: Option<u64>,
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
    /// PostgreSQL on this machine: the server's CPU (its postmaster and
    /// every child: sessions, WAL writer, checkpointer, autovacuum), µs per
    /// job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us: Option<f64>,
    /// PostgreSQL with `pg_stat_statements`: execution time of the
    /// statements clients sent (nested ones are inside it), µs per job.
    /// Wall time in the executor, waits included (locks, I/O, the commit's
    /// WAL flush); planning and the network are not in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_exec_us: Option<f64>,
    /// PostgreSQL with `pg_stat_statements`: statements clients sent
    /// (`BEGIN` and `COMMIT` included), per job: the round trips, when
    /// each is sent on its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trips: Option<f64>,
    /// PostgreSQL with `pg_stat_statements`: the statements that took the
    /// most execution time (top-level and nested alike), at most 8.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top_statements: Vec<StatementCost>,
    /// PostgreSQL: the cluster's WAL position when the phase began, for
    /// `pg_waldump -s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal_start: Option<String>,
    /// PostgreSQL: the WAL position when it ended, for `pg_waldump -e`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal_end: Option<String>,
    /// SQLite: bytes this process handed to `write` calls (the WAL's
    /// frames and the checkpoints' copies into the database file), per job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_written: Option<f64>,
    /// SQLite: bytes this process sent towards the storage device, per
    /// job (`write_bytes` of `/proc/self/io`: dirtied pages, counted when
    /// they are written to the page cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_bytes: Option<f64>,
}

/// What a phase's start recorded.
#[derive(Clone, Debug, Default)]
pub(crate) struct Mark {
    pub(crate) cpu: Option<CpuTimes>,
    pub(crate) pg: Option<PgActivity>,
    pub(crate) io: Option<IoCounters>,
}

impl Profile {
    /// One line for people: the figures that were measured.
    pub fn human(&self) -> String {
        let parts = [
            ("µs CPU here", self.errand_cpu_us),
            ("µs CPU elsewhere", self.other_cpu_us),
            ("µs server CPU", self.server_cpu_us),
            ("µs executing statements", self.db_exec_us),
            ("WAL bytes", self.wal_bytes),
            ("bytes written", self.bytes_written),
            ("statements", self.statements),
            ("round trips", self.round_trips),
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
        if let (Some(a), Some(b)) = (&start.pg, &end.pg) {
            p.wal_bytes = per(a.wal_lsn, b.wal_lsn);
            p.wal_start = Some(lsn_text(a.wal_lsn));
            p.wal_end = Some(lsn_text(b.wal_lsn));
            p.statements = match (a.statements, b.statements) {
                (Some(x), Some(y)) => per(x, y),
                _ => None,
            };
            p.rows_inserted = per(a.inserted, b.inserted);
            p.rows_updated = per(a.updated, b.updated);
            p.rows_hot_updated = per(a.hot_updated, b.hot_updated);
            p.rows_deleted = per(a.deleted, b.deleted);
            p.server_cpu_us = match (a.server_ticks, b.server_ticks) {
                (Some(x), Some(y)) => Some(y.saturating_sub(x) as f64 / TICKS_PER_SEC * 1e6 / n),
                _ => None,
            };
            if let (Some(x), Some(y)) = (&a.by_statement, &b.by_statement) {
                let costs = statement_costs(x, y, n);
                let top: Vec<&StatementCost> = costs.iter().filter(|c| c.toplevel).collect();
                p.db_exec_us = Some(top.iter().map(|c| c.total_ms).sum::<f64>() * 1000.0 / n);
                p.round_trips = Some(top.iter().map(|c| c.calls).sum::<u64>() as f64 / n);
                p.top_statements = costs.into_iter().take(TOP_STATEMENTS).collect();
            }
        }
        if let (Some(a), Some(b)) = (start.io, end.io) {
            p.bytes_written = per(a.written, b.written);
            p.storage_bytes = per(a.to_storage, b.to_storage);
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
                by_statement: Some(vec![stat(1, true, 4, 2.0, "BEGIN")]),
                server_ticks: Some(1_000),
                inserted: 0,
                updated: 5,
                hot_updated: 1,
                deleted: 0,
            }),
            io: Some(IoCounters {
                written: 1_000,
                to_storage: 0,
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
                by_statement: Some(vec![
                    stat(1, true, 14, 3.0, "BEGIN"),
                    stat(2, true, 10, 50.0, "UPDATE jobs"),
                    stat(3, false, 5, 20.0, "INSERT INTO log"),
                ]),
                server_ticks: Some(1_050),
                inserted: 0,
                updated: 205,
                hot_updated: 101,
                deleted: 0,
            }),
            io: Some(IoCounters {
                written: 401_000,
                to_storage: 8_192,
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
        // 50 ticks = 0.5 s of the server over 100 jobs.
        assert_eq!(p.server_cpu_us, Some(5_000.0));
        // Top-level only: 1 ms of BEGIN and 50 ms of UPDATE; the nested
        // INSERT ran inside one of them.
        assert_eq!(p.db_exec_us, Some(510.0));
        assert_eq!(p.round_trips, Some(0.2));
        let top: Vec<(&str, u64, bool)> = p
            .top_statements
            .iter()
            .map(|c| (c.query.as_str(), c.calls, c.toplevel))
            .collect();
        assert_eq!(
            top,
            [
                ("UPDATE jobs", 10, true),
                ("INSERT INTO log", 5, false),
                ("BEGIN", 10, true)
            ]
        );
        assert_eq!(p.top_statements[0].mean_us, 5_000.0);
        assert_eq!(p.wal_start.as_deref(), Some("0/3E8"));
        assert_eq!(p.wal_end.as_deref(), Some("0/1388"));
        assert_eq!(p.bytes_written, Some(4_000.0));
        assert_eq!(p.storage_bytes, Some(81.92));
        assert_eq!(Profile::between(&start, &end, 0), Profile::default());
    }

    fn stat(queryid: i64, toplevel: bool, calls: u64, total_ms: f64, query: &str) -> StatementStat {
        StatementStat {
            queryid,
            toplevel,
            calls,
            total_ms,
            rows: calls,
            query: query.to_owned(),
        }
    }

    #[test]
    fn statements_not_called_in_the_phase_are_left_out_and_texts_are_cut() {
        let long = format!("SELECT\n   {}", "x, ".repeat(200));
        let start = [stat(7, true, 3, 1.0, "SELECT 1")];
        let end = [
            stat(7, true, 3, 1.0, "SELECT 1"),
            stat(8, true, 2, 4.0, &long),
        ];
        let costs = statement_costs(&start, &end, 4.0);
        assert_eq!(costs.len(), 1);
        assert_eq!(costs[0].calls_per_job, 0.5);
        assert_eq!(costs[0].query.chars().count(), QUERY_CHARS);
        assert!(costs[0].query.starts_with("SELECT x, x,"));
    }

    #[test]
    fn leading_comment_lines_are_left_out_of_statement_texts() {
        let q = "-- Claims up to $2 jobs.\n  -- More words.\n\nWITH due AS (\n  SELECT id -- the key\n)";
        assert_eq!(statement_text(q), "WITH due AS ( SELECT id -- the key )");
        assert_eq!(statement_text("BEGIN"), "BEGIN");
    }

    #[test]
    fn stat_lines_give_parent_start_and_reaped_children() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
        // majflt cmajflt utime stime cutime cstime priority nice threads
        // itrealvalue starttime
        let line = "77 (postgres: x) S 42 77 77 0 -1 0 0 0 0 0 10 5 300 20 20 0 1 0 9000 0";
        assert_eq!(parent_pid(line), Some(42));
        assert_eq!(process_ticks(line), Some(15));
        assert_eq!(ticks_with_reaped_children(line), Some(335));
        assert_eq!(start_ticks(line), Some(9000));
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn io_counters_are_read_by_name() {
        let io = "rchar: 10\nwchar: 2048\nsyscr: 1\nsyscw: 2\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        assert_eq!(
            parse_io(io),
            Some(IoCounters {
                written: 2048,
                to_storage: 4096
            })
        );
        assert_eq!(parse_io("rchar: 10\n"), None);
    }
}
