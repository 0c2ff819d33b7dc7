//! What a run leaves behind, gathered for the checker once the fault
//! phase is over: the final jobs, the workers' and handlers' logs in the
//! run directory, and what the nemesis and the load recorded.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use errand::{JobFilter, JobId, Store};

use super::load::LoadShared;
use super::nemesis::Nemesis;
use crate::check::{Adder, ChildHistory, Enqueue, FinalJob, History, Intent, Report, Start};

/// Gathers what the checker judges once the fault phase is over (writing outages.log).
pub(super) fn collect_history(
    nemesis: &mut Nemesis<'_>,
    shared: &LoadShared,
    listed: Vec<String>,
    finals: HashMap<String, FinalJob>,
) -> Result<History> {
    let (opts, dir, backend) = (nemesis.opts, nemesis.dir, nemesis.backend);
    let integrity = backend.integrity()?;
    let crash_points = parse_crash_points(dir)?;
    let storage_full =
        shared.full.load(Ordering::Relaxed) + count_worker_lines(dir, "storage is full")?;
    if let Some(d) = &backend.disk
        && opts.keep
    {
        d.copy_out(dir);
    }
    // Kept for re-checking a run offline: `PID MS` per nemesis kill/pause.
    let outages = std::mem::take(&mut nemesis.outages);
    let outage_lines: String = outages.iter().map(|(p, t)| format!("{p} {t}\n")).collect();
    std::fs::write(dir.join("outages.log"), outage_lines).context("write outages.log")?;
    let mut deaths = outages;
    deaths.extend(parse_poison_deaths(dir));
    deaths.extend(crash_points.iter().map(|(_, pid, ms)| (*pid, *ms)));
    let intents = shared
        .intents
        .lock()
        .map_err(|_| anyhow::anyhow!("the load generator panicked"))?
        .clone();
    let http = shared
        .http_stats
        .lock()
        .map(|s| (s.requests_failed, s.found_existing))
        .unwrap_or((0, 0));
    Ok(History {
        intents,
        listed,
        jobs: finals,
        starts: parse_starts(dir),
        effects: parse_effects(dir),
        reports: parse_reports(dir)?,
        deaths,
        crash_points,
        storage_full,
        forward_steps_over_leases: nemesis.forward_steps_over_leases,
        http_requests_failed: http.0,
        http_found_existing: http.1,
        http_kills_mid_request: nemesis.kills_mid_request,
        lease_ms: opts.lease_ms,
        integrity,
        signals: Default::default(),
        children: Default::default(),
    })
}

/// Every job of the final database, page by page (keyset pagination),
/// whatever its state: the ids as listed, and each job's final record.
pub(super) async fn read_finals(
    store: &dyn Store,
) -> Result<(Vec<String>, HashMap<String, FinalJob>)> {
    let mut listed = Vec::new();
    let mut after: Option<JobId> = None;
    loop {
        let filter = JobFilter {
            limit: Some(10_000),
            after: after.clone(),
            ..JobFilter::default()
        };
        let page = store.list(&filter).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        listed.extend(page.into_iter().map(|j| j.id.to_string()));
    }
    let mut finals: HashMap<String, FinalJob> = HashMap::new();
    for id in &listed {
        if finals.contains_key(id) {
            continue;
        }
        let d = store.detail(&JobId::new(id.clone())?).await?;
        let history = d
            .history
            .iter()
            .map(|a| {
                (
                    a.attempt,
                    a.started_at.as_millis(),
                    a.finished_at.map(|t| t.as_millis()),
                    a.outcome.clone(),
                )
            })
            .collect();
        finals.insert(
            id.clone(),
            FinalJob {
                state: d.job.state.as_str().to_owned(),
                attempts: d.job.attempts,
                max_attempts: d.job.max_attempts,
                last_error_class: d.job.last_error_class.map(|c| c.as_str().to_owned()),
                history,
            },
        );
    }
    Ok((listed, finals))
}

fn parse_starts(dir: &Path) -> Vec<Start> {
    let text = std::fs::read_to_string(dir.join("exec.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            if w.len() != 6 || w.first() != Some(&"start") {
                return None;
            }
            Some(Start {
                id: (*w.get(1)?).to_owned(),
                attempt: w.get(2)?.parse().ok()?,
                worker: w.get(3)?.parse().ok()?,
                at: w.get(5)?.parse().ok()?,
            })
        })
        .collect()
}

fn parse_effects(dir: &Path) -> Vec<(String, bool)> {
    let text = std::fs::read_to_string(dir.join("effects.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut w = l.split(' ');
            let word = w.next()?;
            let id = w.next()?.to_owned();
            Some((id, word == "applied"))
        })
        .collect()
}

fn parse_reports(dir: &Path) -> Result<Vec<Report>> {
    let mut reports = Vec::new();
    for entry in std::fs::read_dir(dir).context("read the run directory")? {
        let path = entry.context("read the run directory")?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix("worker-")
            .and_then(|n| n.strip_suffix(".out"))
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            // A SIGKILL may cut the last line short: skip what does not parse.
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let outcome = v["outcome"].as_str().unwrap_or_default().to_owned();
            let Some(id) = v["job_id"].as_str() else {
                continue;
            };
            reports.push(Report {
                worker: pid,
                id: id.to_owned(),
                attempt: v["attempt"]
                    .as_u64()
                    .and_then(|a| u32::try_from(a).ok())
                    .unwrap_or(0),
                acknowledged: v["acknowledged"].as_bool().unwrap_or(false),
                outcome,
            });
        }
    }
    Ok(reports)
}

/// Lines of the workers' stderr files that contain `needle`.
fn count_worker_lines(dir: &Path, needle: &str) -> Result<u64> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).context("read the run directory")? {
        let path = entry.context("read the run directory")?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("worker-") && n.ends_with(".err"))
        {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            n += text.lines().filter(|l| l.contains(needle)).count() as u64;
        }
    }
    Ok(n)
}

/// `errand failpoint POINT: SIGKILL pid PID at MS` lines of the workers'
/// stderr files: (point, pid, ms).
fn parse_crash_points(dir: &Path) -> Result<Vec<(String, i32, i64)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).context("read the run directory")? {
        let path = entry.context("read the run directory")?.path();
        if !path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("worker-") && n.ends_with(".err"))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("errand failpoint ") else {
                continue;
            };
            let w: Vec<&str> = rest.split(' ').collect();
            if let (Some(point), Some(pid), Some(ms)) = (w.first(), w.get(3), w.get(5))
                && let (Ok(pid), Ok(ms)) = (pid.parse(), ms.parse())
            {
                out.push((point.trim_end_matches(':').to_owned(), pid, ms));
            }
        }
    }
    Ok(out)
}

fn parse_poison_deaths(dir: &Path) -> Vec<(i32, i64)> {
    let text = std::fs::read_to_string(dir.join("deaths.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            Some((w.get(1)?.parse().ok()?, w.get(2)?.parse().ok()?))
        })
        .collect()
}

/// The children's part of the history (signals plan): each step that adds
/// children, the last `ok` end of every job, the joins that read short
/// inputs, and the workers such steps killed. The children join the jobs
/// the checker expects: they must exist exactly when their step is done
/// (a step that is not done added none, whatever its attempts wrote).
pub(super) fn add_children(dir: &Path, adders: Vec<Adder>, h: &mut History) {
    let text = std::fs::read_to_string(dir.join("exec.log")).unwrap_or_default();
    let mut c = ChildHistory::default();
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w.as_slice() {
            ["end", id, _, _, _, ms, "ok"] => {
                if let Ok(ms) = ms.parse::<i64>() {
                    let last = c.ended_ok.entry((*id).to_owned()).or_insert(ms);
                    *last = (*last).max(ms);
                }
            }
            ["inputs", id, _, seen, "of", expect] if seen != expect => {
                c.short_inputs.insert((*id).to_owned());
            }
            _ => {}
        }
    }
    let deaths = std::fs::read_to_string(dir.join("deaths.log")).unwrap_or_default();
    c.adders_killed = deaths.lines().filter(|l| l.starts_with("adder ")).count() as u64;
    for adder in &adders {
        let done = h.jobs.get(&adder.step).is_some_and(|j| j.state == "done");
        let status = if done { Enqueue::Ok } else { Enqueue::Failed };
        for child in &adder.children {
            h.intents.insert(
                child.clone(),
                Intent {
                    status,
                    poison: false,
                },
            );
        }
    }
    c.adders = adders;
    h.children = c;
}
