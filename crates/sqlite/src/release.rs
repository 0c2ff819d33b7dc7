//! Releasing the dependents of jobs that ended (release.sql), inside the
//! transaction that ended them, and the count by which the store knows a
//! release made work due.

use errand_core::{Result, Timestamp};
use rusqlite::{Connection, named_params};

use crate::conn::{json_list, map_err};

const RELEASE: &str = include_str!("../queries/release.sql");

thread_local! {
    /// Bumped on this (writer) thread whenever a release made jobs ready:
    /// the store wakes its idle workers after such an operation commits.
    static RELEASED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Notes that an operation on this thread made jobs ready other than by a
/// release (a signal, a wait that timed out): the store wakes its idle
/// workers once it commits.
pub(crate) fn note_ready() {
    RELEASED.with(|n| n.set(n.get().wrapping_add(1)));
}

/// How many releases on this thread made jobs ready so far.
pub(crate) fn releases_so_far() -> u64 {
    RELEASED.with(std::cell::Cell::get)
}

/// The statements of release.sql: `release`, `mark` and `cancel` with the
/// general selection, then `release` with the selection for acknowledged
/// jobs.
pub(crate) fn release_statements() -> &'static [String; 4] {
    static STATEMENTS: std::sync::OnceLock<[String; 4]> = std::sync::OnceLock::new();
    STATEMENTS.get_or_init(|| {
        let part = |text: &'static str, from: &str, to: &str| -> &'static str {
            let start = text.find(from).map_or(text.len(), |i| i + from.len());
            let end = text[start..].find(to).map_or(text.len(), |i| start + i);
            &text[start..end]
        };
        let general = part(RELEASE, "-- @general", "-- @done");
        let done = part(RELEASE, "-- @done", "-- @release");
        let release = part(RELEASE, "-- @release", "-- @mark");
        let mark = part(RELEASE, "-- @mark", "-- @cancel");
        let cancel = part(RELEASE, "-- @cancel", "\u{0}");
        [
            format!("{general}{release}"),
            format!("{general}{mark}"),
            format!("{general}{cancel}"),
            format!("{done}{release}"),
        ]
    })
}

/// How the jobs a release starts from ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// Just acknowledged by the caller's own statement, each once: their
    /// dependents are only ever released, and the jobs are not read again
    /// to check.
    Done,
    /// Dead or cancelled: dependents may be cancelled too.
    Failed,
}

/// Releases the dependents of `ended` — jobs just acknowledged (`Done`),
/// or that are dead or cancelled (`Failed`: just now, or before a new job
/// named them) — inside the caller's transaction, by release.sql. Answers
/// how many dependents became ready.
pub(crate) fn release_dependents(
    conn: &Connection,
    ended: &[&str],
    how: Release,
    now: Timestamp,
) -> Result<usize> {
    let ids = json_list(ended)?;
    let [release, mark, cancel, release_done] = release_statements();
    let release = match how {
        Release::Done => release_done,
        Release::Failed => release,
    };
    let mut ready = 0;
    {
        let mut stmt = conn.prepare_cached(release).map_err(map_err)?;
        let mut rows = stmt
            .query(named_params! {":ids": ids, ":now": now.as_millis()})
            .map_err(map_err)?;
        while let Some(row) = rows.next().map_err(map_err)? {
            if row.get::<_, bool>(0).map_err(map_err)? {
                ready += 1;
            }
        }
    }
    if ready > 0 {
        RELEASED.with(|n| n.set(n.get().wrapping_add(1)));
    }
    if how == Release::Failed {
        conn.prepare_cached(mark)
            .map_err(map_err)?
            .execute(named_params! {":ids": ids})
            .map_err(map_err)?;
        conn.prepare_cached(cancel)
            .map_err(map_err)?
            .execute(named_params! {":ids": ids, ":now": now.as_millis()})
            .map_err(map_err)?;
    }
    Ok(ready)
}
