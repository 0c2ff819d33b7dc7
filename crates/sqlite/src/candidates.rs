//! The ready jobs a claim may take, in claim order: read from the due
//! index (every queue), a queue's range of it (one queue, a capped queue),
//! or — when paused or capped queues hold ready jobs — each other queue's
//! ranges merged, so that a claim across every queue does not walk past
//! the jobs it may not take; keyed jobs admitted as their keys allow.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use errand_core::{ClaimRequest, Error, Name, Result, Timestamp};
use rusqlite::{Connection, OptionalExtension, Row, Rows, named_params};

use crate::conn::map_err;
use crate::rows::u32_col;

const CANDIDATES_READY: &str = include_str!("../queries/candidates_ready.sql");
pub(crate) const CANDIDATES_READY_IN: &str = include_str!("../queries/candidates_ready_in.sql");
pub(crate) const CANDIDATES_READY_OF: &str = include_str!("../queries/candidates_ready_of.sql");
const KEY_RUNNING: &str = include_str!("../queries/key_running.sql");
const KEY_NEXT: &str = include_str!("../queries/key_next.sql");
const EXCLUDED_QUEUES: &str = include_str!("../queries/excluded_queues.sql");
const NEXT_RANGE: &str = include_str!("../queries/next_range.sql");
const NEXT_PRIORITY: &str = include_str!("../queries/next_priority.sql");
pub(crate) const RANGE_DUE: &str = include_str!("../queries/range_due.sql");

/// The most ranges (a queue's ready jobs at one priority) a claim across
/// every queue merges; past it, it walks the due index instead.
const MAX_RANGES: usize = 64;

/// One due ready row as the candidate scan reads it.
struct ReadyRow {
    id: String,
    rowid: i64,
    queue: String,
    key: Option<(String, u32, bool)>,
}

/// Reads a candidate statement's row: `id, queue, key_name, key_limit,
/// key_ordered, rowid`, in that order.
fn read_row(r: &Row<'_>) -> rusqlite::Result<ReadyRow> {
    let key = match r.get::<_, Option<String>>(2)? {
        Some(name) => Some((name, u32_col(r, "key_limit")?, r.get(4)?)),
        None => None,
    };
    Ok(ReadyRow {
        id: r.get(0)?,
        queue: r.get(1)?,
        key,
        rowid: r.get(5)?,
    })
}

/// A ready job the claim may take: its id, its row's rowid (the plain
/// claim finds rows by it, one B-tree search instead of the id index's and
/// then the table's) and whether it has a concurrency key.
pub(crate) struct Candidate {
    pub(crate) id: String,
    pub(crate) rowid: i64,
    pub(crate) keyed: bool,
}

/// The ready jobs a claim of `scope` may take, `limit` at most: the capped
/// queues' first, each up to its free slots, then the others' in claim
/// order.
pub(crate) fn due_candidates(
    conn: &Connection,
    req: &ClaimRequest,
    scope: Scope<'_>,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Candidate>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let Excluded {
        queues: excluded,
        capped,
        any_ready,
    } = excluded_queues(conn)?;
    let mut out = capped_candidates(conn, req, &capped, now, limit)?;
    let rest = limit.saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
    if rest == 0 {
        return Ok(out);
    }
    let others = match scope {
        Scope::All if any_ready => merged_candidates(conn, &excluded, now, rest)?,
        // A paused or capped queue named: its range is not read here (it
        // would be read past, row by row).
        Scope::One(q) if excluded.contains(q) => Vec::new(),
        Scope::Some(_) if !excluded.is_empty() => {
            let left: Vec<&str> = req
                .queues
                .iter()
                .map(Name::as_str)
                .filter(|q| !excluded.contains(*q))
                .collect();
            match left.as_slice() {
                [] => Vec::new(),
                [one] => ready_candidates(conn, Scope::One(one), now, rest)?,
                _ => {
                    let list = serde_json::to_string(&left)
                        .map_err(|e| Error::storage(format!("encoding claim queues: {e}")))?;
                    ready_candidates(conn, Scope::Some(&list), now, rest)?
                }
            }
        }
        _ => ready_candidates(conn, scope, now, rest)?,
    };
    out.extend(others);
    Ok(out)
}

/// Up to `limit` due ready jobs of `queues` in claim order, read by one
/// candidate statement.
fn ready_candidates(
    conn: &Connection,
    queues: Scope<'_>,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Candidate>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare_cached(match queues {
            Scope::All => CANDIDATES_READY,
            Scope::One(_) => CANDIDATES_READY_OF,
            Scope::Some(_) => CANDIDATES_READY_IN,
        })
        .map_err(map_err)?;
    let ms = now.as_millis();
    let mut rows = match queues {
        Scope::All => stmt.query(named_params! {":now": ms}),
        Scope::One(q) => stmt.query(named_params! {":now": ms, ":queue": q}),
        Scope::Some(q) => stmt.query(named_params! {":now": ms, ":queues": q}),
    }
    .map_err(map_err)?;
    let read = std::iter::from_fn(|| match rows.next() {
        Ok(Some(row)) => Some(read_row(row).map_err(map_err)),
        Ok(None) => None,
        Err(e) => Some(Err(map_err(e))),
    });
    admit(conn, read, now, limit)
}

/// The rows read, in claim order, up to `limit`, passing over keyed jobs
/// their key does not admit now. Each key met is looked up once (its
/// running count and its earliest ready jobs), so a saturated key's backlog
/// costs one index step per row, not a statement.
fn admit(
    conn: &Connection,
    rows: impl Iterator<Item = Result<ReadyRow>>,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Candidate>> {
    let mut out = Vec::new();
    let mut admitted: HashMap<(String, String), HashSet<String>> = HashMap::new();
    for row in rows {
        let row = row?;
        let keyed = row.key.is_some();
        if let Some((key, key_limit, ordered)) = row.key {
            let ids = match admitted.entry((row.queue, key)) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let (queue, key) = e.key();
                    let ids = admitted_by_key(conn, queue, key, key_limit, ordered, now)?;
                    e.insert(ids)
                }
            };
            if !ids.remove(&row.id) {
                continue;
            }
        }
        out.push(Candidate {
            id: row.id,
            rowid: row.rowid,
            keyed,
        });
        if out.len() >= limit as usize {
            break;
        }
    }
    Ok(out)
}

/// The queues the ordinary candidate statements leave out
/// (`excluded_queues.sql`).
struct Excluded {
    /// The paused and capped queues.
    queues: HashSet<String>,
    /// The capped queues that are not paused, with their free slots, by
    /// name.
    capped: Vec<(String, u32)>,
    /// Whether one of `queues` holds ready jobs (a claim across every
    /// queue then merges the other queues' ranges).
    any_ready: bool,
}

fn excluded_queues(conn: &Connection) -> Result<Excluded> {
    let mut out = Excluded {
        queues: HashSet::new(),
        capped: Vec::new(),
        any_ready: false,
    };
    let mut stmt = conn.prepare_cached(EXCLUDED_QUEUES).map_err(map_err)?;
    let mut rows = stmt.query([]).map_err(map_err)?;
    while let Some(r) = rows.next().map_err(map_err)? {
        let queue: String = r.get(0).map_err(map_err)?;
        if let Some(free) = r.get::<_, Option<i64>>(1).map_err(map_err)? {
            out.capped
                .push((queue.clone(), u32::try_from(free).unwrap_or(0)));
        }
        out.any_ready |= r.get::<_, bool>(2).map_err(map_err)?;
        out.queues.insert(queue);
    }
    Ok(out)
}

/// The ranges of the due index by queue that a claim across every queue
/// reads — each queue's ready jobs at one priority — in index order,
/// leaving out the `excluded` queues: one probe per range, and one per
/// excluded queue. `None` past [`MAX_RANGES`].
fn ranges(conn: &Connection, excluded: &HashSet<String>) -> Result<Option<Vec<(String, i64)>>> {
    let mut next_range = conn.prepare_cached(NEXT_RANGE).map_err(map_err)?;
    let mut next_priority = conn.prepare_cached(NEXT_PRIORITY).map_err(map_err)?;
    let mut out = Vec::new();
    let mut at: Option<(String, i64)> = next_range
        .query_row(named_params! {":after": ""}, |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(map_err)?;
    while let Some((queue, priority)) = at {
        let lower = if excluded.contains(&queue) {
            None
        } else {
            if out.len() == MAX_RANGES {
                return Ok(None);
            }
            out.push((queue.clone(), priority));
            next_priority
                .query_row(
                    named_params! {":queue": queue, ":priority": priority},
                    |r| r.get::<_, i64>(0),
                )
                .optional()
                .map_err(map_err)?
        };
        at = match lower {
            Some(p) => Some((queue, p)),
            None => next_range
                .query_row(named_params! {":after": queue}, |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
                .map_err(map_err)?,
        };
    }
    Ok(Some(out))
}

/// The next due row of one range, with its due time.
fn next_due(rows: &mut Rows<'_>) -> Result<Option<(i64, ReadyRow)>> {
    match rows.next().map_err(map_err)? {
        Some(r) => Ok(Some((
            r.get(6).map_err(map_err)?,
            read_row(r).map_err(map_err)?,
        ))),
        None => Ok(None),
    }
}

/// Up to `limit` due ready jobs of every queue but the `excluded`, in
/// claim order: the queues' ranges of the due index by queue, one cursor
/// each, merged by priority, due time and id. Each range is read no
/// further than the claim takes from it, so the excluded queues' jobs cost
/// nothing however many there are. (Walking the due index instead passed
/// each of them at every claim: 34 ms a claim with 200,000 due jobs of a
/// capped queue ahead of the rest, against 0.3 ms.)
fn merged_candidates(
    conn: &Connection,
    excluded: &HashSet<String>,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Candidate>> {
    let Some(ranges) = ranges(conn, excluded)? else {
        return ready_candidates(conn, Scope::All, now, limit);
    };
    let ms = now.as_millis();
    let mut stmts = Vec::with_capacity(ranges.len());
    for _ in &ranges {
        stmts.push(conn.prepare(RANGE_DUE).map_err(map_err)?);
    }
    let mut cursors = Vec::with_capacity(ranges.len());
    for (stmt, (queue, priority)) in stmts.iter_mut().zip(&ranges) {
        cursors.push(
            stmt.query(named_params! {":queue": queue, ":priority": priority, ":now": ms})
                .map_err(map_err)?,
        );
    }
    let mut heads = Vec::with_capacity(cursors.len());
    for c in &mut cursors {
        heads.push(next_due(c)?);
    }
    let merged = std::iter::from_fn(|| {
        let best = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                h.as_ref()
                    .map(|(due, row)| (i, (Reverse(ranges[i].1), *due, row.id.as_str())))
            })
            .min_by(|a, b| a.1.cmp(&b.1))?
            .0;
        let next = match next_due(&mut cursors[best]) {
            Ok(next) => next,
            Err(e) => return Some(Err(e)),
        };
        std::mem::replace(&mut heads[best], next).map(|(_, row)| Ok(row))
    });
    admit(conn, merged, now, limit)
}

/// The ready jobs of one key that may start now: its earliest-enqueued due
/// jobs up to its free slots; for an ordered key its first ready job, and
/// only if that one is due.
fn admitted_by_key(
    conn: &Connection,
    queue: &str,
    key: &str,
    key_limit: u32,
    ordered: bool,
    now: Timestamp,
) -> Result<HashSet<String>> {
    let running: u32 = conn
        .prepare_cached(KEY_RUNNING)
        .map_err(map_err)?
        .query_row(named_params! {":queue": queue, ":key": key}, |r| {
            u32_col(r, "count(*)")
        })
        .map_err(map_err)?;
    let slots = key_limit.saturating_sub(running);
    if slots == 0 {
        return Ok(HashSet::new());
    }
    let ms = now.as_millis();
    let next = conn
        .prepare_cached(KEY_NEXT)
        .map_err(map_err)?
        .query_map(
            named_params! {
                ":queue": queue, ":key": key, ":ordered": ordered,
                ":now": ms, ":slots": slots,
            },
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
        )
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    Ok(next
        .into_iter()
        .filter(|(_, due)| *due <= ms)
        .map(|(id, _)| id)
        .collect())
}

/// The queues a claim reads ready jobs from.
#[derive(Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// Every queue.
    All,
    /// One queue, read in claim order from its range of the due index.
    One(&'a str),
    /// Several queues: a JSON array of their names.
    Some(&'a str),
}

/// Due ready jobs of the capped queues the claim reads (none named: every
/// queue), each queue's up to its free slots — its cap less its running
/// jobs — in queue order, `limit` at most. The writer's one transaction
/// makes the count and the claim one step.
fn capped_candidates(
    conn: &Connection,
    req: &ClaimRequest,
    capped: &[(String, u32)],
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Candidate>> {
    let mut out = Vec::new();
    for (queue, free) in capped {
        let named = req.queues.is_empty() || req.queues.iter().any(|q| q.as_str() == queue);
        let room = limit.saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
        if named && *free > 0 && room > 0 {
            out.extend(ready_candidates(
                conn,
                Scope::One(queue),
                now,
                (*free).min(room),
            )?);
        }
    }
    Ok(out)
}
