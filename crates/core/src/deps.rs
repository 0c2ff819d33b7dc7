//! Dependencies between jobs: the policy a dependent follows when one of
//! its dependencies fails, and the checks a set of new jobs must pass.
//!
//! A job with dependencies is inserted `blocked` and counts the
//! dependencies it still waits for. Whatever ends a dependency — its
//! acknowledgment, its last failure, its final lease expiry, a cancel —
//! releases its dependents in the same transaction, by one rule:
//!
//! | the dependency ends | `wait` (default) | `cancel`  | `run`     |
//! |---------------------|------------------|-----------|-----------|
//! | `done`              | met              | met       | met       |
//! | `dead`              | still waiting    | cancelled | met       |
//! | `cancelled`         | cancelled        | cancelled | met       |
//!
//! A dependent whose last dependency is met becomes `ready`. A dependent
//! cancelled this way ends like any cancelled job, so its own dependents
//! follow the same rule in turn (a cascade). A `wait` dependent of a dead
//! dependency resumes if an operator replays the dependency and it
//! succeeds.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::Serialize;

use crate::error::Error;
use crate::ids::JobId;
use crate::new_job::{NewJob, check_one};
use crate::state::JobState;

/// Checks the dependencies of jobs inserted together: each job's list is
/// within [`MAX_DEPENDENCIES`](crate::MAX_DEPENDENCIES), names no job twice and not the job itself,
/// and the jobs of the call that depend on one another form no cycle.
/// Dependencies outside the call must already be stored; the store checks
/// that (a stored job cannot depend on one not yet inserted, so no cycle
/// can pass through it).
pub fn check_dependencies(jobs: &[NewJob]) -> Result<(), Error> {
    let mut named: HashMap<&str, &[JobId]> = HashMap::new();
    for job in jobs {
        check_one(job)?;
        if let Some(id) = &job.id
            && !job.depends_on.is_empty()
        {
            // A repeated id is created once, from its first occurrence.
            named.entry(id.as_str()).or_insert(&job.depends_on);
        }
    }
    if named.is_empty() {
        return Ok(());
    }
    // Depth-first search with an explicit stack: 0 unseen, 1 on the path,
    // 2 finished.
    let mut mark: HashMap<&str, u8> = HashMap::with_capacity(named.len());
    for &start in named.keys() {
        if mark.get(start).copied().unwrap_or(0) != 0 {
            continue;
        }
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        mark.insert(start, 1);
        while let Some((node, next)) = stack.last_mut() {
            let deps = named.get(*node).copied().unwrap_or(&[]);
            if let Some(dep) = deps.get(*next) {
                *next += 1;
                let dep = dep.as_str();
                match mark.get(dep).copied().unwrap_or(0) {
                    1 => {
                        let mut path: Vec<&str> = stack.iter().map(|(n, _)| *n).collect();
                        let from = path.iter().position(|n| *n == dep).unwrap_or(0);
                        path.drain(..from);
                        path.push(dep);
                        if path.len() > 12 {
                            path.drain(5..path.len() - 5);
                            path.insert(5, "…");
                        }
                        return Err(Error::invalid(format!(
                            "the dependencies form a cycle ({}); a job cannot wait, directly or \
                             through others, for itself",
                            path.join(" → ")
                        )));
                    }
                    0 if named.contains_key(dep) => {
                        mark.insert(dep, 1);
                        stack.push((dep, 0));
                    }
                    _ => {}
                }
            } else {
                mark.insert(*node, 2);
                stack.pop();
            }
        }
    }
    Ok(())
}

/// The dependencies named by new jobs' edges (`(job, its dependencies)`),
/// each once and sorted: the rows a store locks or reads, in that order,
/// before linking.
#[must_use]
pub fn wanted_dependencies<'a>(edges: &[(&'a str, &'a [JobId])]) -> Vec<&'a str> {
    let mut wanted: Vec<&str> = edges
        .iter()
        .flat_map(|(_, deps)| deps.iter().map(JobId::as_str))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    wanted
}

/// One edge to store: `job` waits for `depends_on`, named at `position`
/// in its list; `met` when the dependency is already done.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edge<'a> {
    /// The new job.
    pub job: &'a str,
    /// The job it waits for.
    pub depends_on: &'a str,
    /// Where the dependency stands in the job's list.
    pub position: u32,
    /// Whether the dependency is already done.
    pub met: bool,
}

/// What an enqueue stores for the dependencies of its new jobs, decided
/// from the stored states of those dependencies ([`plan_links`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkPlan<'a> {
    /// Every edge, in the jobs' order and each job's list order.
    pub edges: Vec<Edge<'a>>,
    /// New jobs some of whose dependencies are already done, and how many:
    /// their counts drop by as many (a job waiting for nothing more is
    /// ready as inserted).
    pub met_at_insert: Vec<(&'a str, u32)>,
    /// Dependencies that already ended dead or cancelled: the store
    /// releases their dependents at once by the rule a settlement follows
    /// (a `run` dependent counts them met, a `cancel` one is cancelled).
    pub failed: Vec<&'a str>,
}

/// Plans the edges of new jobs (`(job, its dependencies)`) from `states`,
/// the stored state of every dependency found. A dependency without a
/// state is not stored: the call is refused, naming it.
///
/// # Errors
/// [`Error::Invalid`] for a dependency that is not stored.
pub fn plan_links<'a>(
    edges: &[(&'a str, &'a [JobId])],
    states: &HashMap<String, JobState>,
) -> Result<LinkPlan<'a>, Error> {
    let mut plan = LinkPlan::default();
    let mut failed: HashSet<&str> = HashSet::new();
    for &(job, deps) in edges {
        let mut done = 0u32;
        for (i, dep) in deps.iter().enumerate() {
            let Some(&state) = states.get(dep.as_str()) else {
                return Err(Error::invalid(format!(
                    "job {job} depends on job {dep}, which is not stored: enqueue it first or \
                     in the same call"
                )));
            };
            let met = state == JobState::Done;
            done += u32::from(met);
            if matches!(state, JobState::Dead | JobState::Cancelled) && failed.insert(dep.as_str())
            {
                plan.failed.push(dep.as_str());
            }
            plan.edges.push(Edge {
                job,
                depends_on: dep.as_str(),
                position: u32::try_from(i).unwrap_or(u32::MAX),
                met,
            });
        }
        if done > 0 {
            plan.met_at_insert.push((job, done));
        }
    }
    plan.failed.sort_unstable();
    Ok(plan)
}

/// The order in which a store that updates rows where they lie (SQLite)
/// writes the rows of one insert call: each job after the jobs of the call
/// it depends on, one depth together (a job's depth: 0 when it waits for
/// no other job of the call, else one more than its deepest such
/// dependency), in the order given within a depth. `ids` are the jobs'
/// ids, given or generated, one per job.
///
/// Jobs that depend on each other run wave by wave — the first ones, then
/// the ones they release, each claimed behind older ready jobs — so stored
/// this way the rows each wave of claims and acknowledgments rewrites sit
/// side by side, instead of one in every few rows of a graph built, say,
/// one chain at a time. Only where the rows are written changes: ids, and
/// what the call answers, stay as given.
///
/// `None` means "write them as given": no job of the call depends on
/// another of it; the order is not defined (a cycle, which the store
/// refuses, or an id given twice, whose first occurrence is the one
/// created); or the new order would put a job before one given earlier on
/// the same concurrency key, whose jobs start in the order they were
/// enqueued.
pub fn storage_order(ids: &[JobId], jobs: &[NewJob]) -> Option<Vec<usize>> {
    if ids.len() != jobs.len() || jobs.iter().all(|j| j.depends_on.is_empty()) {
        return None;
    }
    let depth = depths(ids, jobs)?;
    if depth.iter().all(|&d| d == 0) {
        return None;
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    // A stable sort: one depth keeps the order given.
    order.sort_by_key(|&i| depth[i]);
    let mut last_on_key: HashMap<(&str, &str), usize> = HashMap::new();
    for &i in &order {
        if let Some(key) = &jobs[i].key {
            let before = last_on_key.insert((jobs[i].queue.as_str(), key.name.as_str()), i);
            if before.is_some_and(|b| b > i) {
                return None;
            }
        }
    }
    Some(order)
}

/// Each job's depth (see [`storage_order`]), or `None` for a cycle or an
/// id given twice.
fn depths(ids: &[JobId], jobs: &[NewJob]) -> Option<Vec<usize>> {
    let mut index: HashMap<&JobId, usize> = HashMap::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        if index.insert(id, i).is_some() {
            return None;
        }
    }
    // Kahn's algorithm: a job's depth is final once every dependency of it
    // in the call has been taken.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); jobs.len()];
    let mut waiting: Vec<usize> = vec![0; jobs.len()];
    for (i, job) in jobs.iter().enumerate() {
        let mut named = HashSet::new();
        for dep in &job.depends_on {
            if let Some(&d) = index.get(dep)
                && named.insert(d)
            {
                dependents[d].push(i);
                waiting[i] += 1;
            }
        }
    }
    let mut depth = vec![0; jobs.len()];
    let mut free: VecDeque<usize> = (0..jobs.len()).filter(|&i| waiting[i] == 0).collect();
    let mut taken = 0;
    while let Some(d) = free.pop_front() {
        taken += 1;
        for &i in &dependents[d] {
            depth[i] = depth[i].max(depth[d] + 1);
            waiting[i] -= 1;
            if waiting[i] == 0 {
                free.push_back(i);
            }
        }
    }
    (taken == jobs.len()).then_some(depth)
}

/// Why purging the job of `detail` would leave a blocked job waiting for
/// good (one of its dependents waits for it, unmet), if it would.
pub(crate) fn purge_would_strand(detail: &crate::job::JobDetail) -> Option<Error> {
    let mut waiting = detail
        .dependents
        .iter()
        .filter(|d| d.state == Some(JobState::Blocked) && !d.met);
    let first = waiting.next()?;
    Some(Error::InvalidState {
        id: detail.job.id.to_string(),
        state: detail.job.state.to_string(),
        hint: format!(
            "blocked jobs wait for it ({first}{}): replay it, or cancel them, before purging it",
            if waiting.next().is_some() {
                " and others"
            } else {
                ""
            },
            first = first.id
        ),
    })
}

/// Why replaying the job of `detail` (with the jobs `with`, replayed in
/// the same action) would put it back to wait for a dependency that can
/// no longer release it ([`DependencyFailure::may_wait_for`]), if it would.
pub(crate) fn replay_would_strand(detail: &crate::job::JobDetail, with: &[JobId]) -> Option<Error> {
    let policy = detail.job.on_dependency_failure.unwrap_or_default();
    let stuck = detail
        .dependencies
        .iter()
        .find(|d| !d.met && !with.contains(&d.id) && !policy.may_wait_for(d.state))?;
    let dep = &stuck.id;
    let hint = match stuck.state {
        None => format!(
            "it depends on job {dep}, which is gone (purged or pruned), so nothing could ever \
             release it: enqueue the work again as a new job"
        ),
        Some(JobState::Dead) => format!(
            "it depends on job {dep}, which is dead, and its policy `{policy}` would cancel it \
             again: replay {dep} first, or with it"
        ),
        Some(state) => format!(
            "it depends on job {dep}, which is {state}, and its policy `{policy}` would cancel \
             it again: replay {dep} first, or with it"
        ),
    };
    Some(Error::InvalidState {
        id: detail.job.id.to_string(),
        state: detail.job.state.to_string(),
        hint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::DependencyFailure;
    use crate::payload::Payload;

    fn job(id: &str, deps: &[&str]) -> NewJob {
        let mut j = NewJob::new("k", Payload::default())
            .expect("kind")
            .with_id(JobId::new(id).expect("id"));
        for d in deps {
            j = j.depends_on(JobId::new(*d).expect("id"));
        }
        j
    }

    #[test]
    fn a_dag_passes() {
        let jobs = [
            job("a", &[]),
            job("b", &["a"]),
            job("c", &["a"]),
            job("d", &["b", "c", "stored-elsewhere"]),
        ];
        check_dependencies(&jobs).expect("a diamond is no cycle");
    }

    #[test]
    fn a_cycle_is_refused_and_named() {
        let jobs = [job("a", &["c"]), job("b", &["a"]), job("c", &["b"])];
        let e = check_dependencies(&jobs).expect_err("cycle").to_string();
        assert!(e.contains("cycle"), "{e}");
        for id in ["a", "b", "c"] {
            assert!(e.contains(id), "{e}");
        }
    }

    #[test]
    fn self_and_repeated_dependencies_are_refused() {
        let e = check_dependencies(&[job("a", &["a"])]).expect_err("self");
        assert!(e.to_string().contains("itself"), "{e}");
        let mut twice = job("b", &["x"]);
        twice.depends_on.push(JobId::new("x").expect("id"));
        let e = check_dependencies(&[twice]).expect_err("twice");
        assert!(e.to_string().contains("twice"), "{e}");
    }

    #[test]
    fn the_builder_names_a_dependency_once() {
        let j = job("b", &["x", "x"]);
        assert_eq!(j.depends_on.len(), 1);
    }

    #[test]
    fn a_long_chain_is_checked_without_recursion() {
        let ids: Vec<String> = (0..50_000).map(|i| format!("j{i}")).collect();
        let mut jobs: Vec<NewJob> = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let deps: Vec<&str> = if i == 0 { vec![] } else { vec![&ids[i - 1]] };
            jobs.push(job(id, &deps));
        }
        check_dependencies(&jobs).expect("a chain is no cycle");
        jobs[0] = job("j0", &["j49999"]);
        assert!(check_dependencies(&jobs).is_err());
    }

    #[test]
    fn a_dependent_may_wait_only_for_what_can_still_release_it() {
        use DependencyFailure::{Cancel, Run, Wait};
        let open = [JobState::Blocked, JobState::Ready, JobState::Running];
        for policy in DependencyFailure::ALL {
            assert!(!policy.may_wait_for(None), "{policy}: gone");
            assert!(policy.may_wait_for(Some(JobState::Done)), "{policy}: done");
            for state in open {
                assert!(policy.may_wait_for(Some(state)), "{policy}: {state}");
            }
        }
        let ended = |p: DependencyFailure| {
            (
                p.may_wait_for(Some(JobState::Dead)),
                p.may_wait_for(Some(JobState::Cancelled)),
            )
        };
        assert_eq!(ended(Wait), (true, false));
        assert_eq!(ended(Cancel), (false, false));
        assert_eq!(ended(Run), (true, true));
    }

    #[test]
    fn policies_round_trip_and_unknown_ones_say_what_to_use() {
        for p in DependencyFailure::ALL {
            assert_eq!(p.as_str().parse::<DependencyFailure>().expect("known"), p);
        }
        let e = "later".parse::<DependencyFailure>().expect_err("unknown");
        assert!(e.to_string().contains("wait, cancel or run"), "{e}");
    }
}

#[cfg(test)]
mod storage_order_tests {
    use super::*;
    use crate::payload::Payload;
    use crate::state::KeyLimit;
    use crate::workflow::Workflow;

    fn job(kind: &str) -> NewJob {
        NewJob::new(kind, Payload::from_json_text("{}").unwrap()).unwrap()
    }

    fn kinds(steps: &[NewJob]) -> Vec<&str> {
        steps.iter().map(|s| s.kind.as_str()).collect()
    }

    /// The steps in the order storage_order writes them.
    fn stored(steps: Vec<NewJob>) -> Vec<NewJob> {
        let ids: Vec<JobId> = steps.iter().filter_map(|s| s.id.clone()).collect();
        match storage_order(&ids, &steps) {
            Some(order) => order.into_iter().map(|i| steps[i].clone()).collect(),
            None => steps,
        }
    }

    #[test]
    fn jobs_that_depend_on_none_of_the_call_are_written_as_given() {
        let mut wf = Workflow::new();
        let stored_before = JobId::new("stored-before").unwrap();
        wf.step(job("a"));
        wf.step_after(job("b"), &[&stored_before]);
        let steps = wf.into_jobs();
        let ids: Vec<JobId> = steps.iter().filter_map(|s| s.id.clone()).collect();
        assert_eq!(
            storage_order(&ids, &steps),
            None,
            "depends on none of the call"
        );
        let plain = vec![job("x"), job("y")];
        let plain_ids = vec![JobId::new("x").unwrap(), JobId::new("y").unwrap()];
        assert_eq!(storage_order(&plain_ids, &plain), None);
    }

    #[test]
    fn chains_built_one_at_a_time_are_written_depth_by_depth() {
        let mut wf = Workflow::new();
        for chain in ["a", "b", "c"] {
            let mut before = wf.step(job(&format!("{chain}0")));
            for n in 1..3 {
                before = wf.step_after(job(&format!("{chain}{n}")), &[&before]);
            }
        }
        let added: Vec<JobId> = wf.steps().iter().filter_map(|s| s.id.clone()).collect();
        let stored = stored(wf.into_jobs());
        assert_eq!(
            kinds(&stored),
            ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]
        );
        // The ids are the ones handed out; only the order changed.
        let mut ids: Vec<JobId> = stored.iter().filter_map(|s| s.id.clone()).collect();
        ids.sort();
        let mut added = added;
        added.sort();
        assert_eq!(ids, added);
    }

    #[test]
    fn a_step_goes_one_deeper_than_its_deepest_dependency() {
        let mut wf = Workflow::new();
        let root = wf.step(job("root"));
        let long = wf.step_after(job("long"), &[&root]);
        let longer = wf.step_after(job("longer"), &[&long]);
        let stored_elsewhere = JobId::new("stored-before").unwrap();
        // Waits for the root (depth 0) and `longer` (depth 2): depth 3.
        wf.step_after(job("join"), &[&root, &longer, &stored_elsewhere]);
        // Waits only for a job outside the workflow: depth 0.
        wf.step_after(job("outside"), &[&stored_elsewhere]);
        assert_eq!(
            kinds(&stored(wf.into_jobs())),
            ["root", "outside", "long", "longer", "join"]
        );
    }

    #[test]
    fn a_dependency_given_after_its_dependent_is_written_before_it() {
        let mut wf = Workflow::new();
        let later = JobId::new("added-later").unwrap();
        wf.step_after(job("first-added"), &[&later]);
        wf.step(job("second-added").with_id(later));
        assert_eq!(
            kinds(&stored(wf.into_jobs())),
            ["second-added", "first-added"]
        );
    }

    #[test]
    fn jobs_that_cannot_be_ordered_are_written_as_given() {
        let (x, y) = (JobId::new("x").unwrap(), JobId::new("y").unwrap());
        let mut cycle = Workflow::new();
        cycle.step(job("free"));
        cycle.step_after(job("x").with_id(x.clone()), &[&y]);
        cycle.step_after(job("y").with_id(y.clone()), &[&x]);
        assert_eq!(kinds(&stored(cycle.into_jobs())), ["free", "x", "y"]);

        let mut twice = Workflow::new();
        twice.step_after(job("after"), &[&x]);
        twice.step(job("x").with_id(x.clone()));
        twice.step(job("x-again").with_id(x));
        assert_eq!(kinds(&stored(twice.into_jobs())), ["after", "x", "x-again"]);
    }

    #[test]
    fn a_keys_jobs_are_never_written_out_of_the_order_given() {
        let keyed = |kind: &str| job(kind).with_key("tenant-1", KeyLimit::Ordered).unwrap();
        let p = JobId::new("p").unwrap();
        let in_order = |jobs: Vec<NewJob>| {
            let ids: Vec<JobId> = jobs.iter().filter_map(|s| s.id.clone()).collect();
            storage_order(&ids, &jobs)
        };
        // The keyed job at depth 1 was given before the keyed one at depth
        // 0: sorting by depth would swap them, so nothing moves.
        let swapped = vec![
            job("p").with_id(p.clone()),
            keyed("c")
                .with_id(JobId::new("c").unwrap())
                .depends_on(p.clone()),
            keyed("a").with_id(JobId::new("a").unwrap()),
        ];
        assert_eq!(in_order(swapped), None);
        // Keyed jobs already in depth order, or on another key or queue,
        // do not stop the rest from moving.
        let kept = vec![
            keyed("a").with_id(JobId::new("a").unwrap()),
            job("c")
                .with_id(JobId::new("c").unwrap())
                .depends_on(p.clone()),
            job("p").with_id(p.clone()),
            keyed("d")
                .with_id(JobId::new("d").unwrap())
                .depends_on(p.clone()),
            job("e")
                .with_key("tenant-2", KeyLimit::Ordered)
                .unwrap()
                .with_id(JobId::new("e").unwrap()),
            keyed("f")
                .on_queue("other")
                .unwrap()
                .with_id(JobId::new("f").unwrap()),
        ];
        assert_eq!(in_order(kept), Some(vec![0, 2, 4, 5, 1, 3]));
    }

    proptest::proptest! {
        // Any acyclic workflow: the same steps come out, each after every
        // step of the workflow it depends on.
        #[test]
        fn every_job_is_written_after_its_dependencies(
            edges in proptest::collection::vec(proptest::collection::vec(0usize..64, 0..4), 1..64),
        ) {
            let mut wf = Workflow::new();
            let ids: Vec<JobId> = (0..edges.len()).map(|i| JobId::new(format!("s{i}")).unwrap()).collect();
            // A step waits only for steps numbered before it (no cycle);
            // they are added in reverse, so that most dependencies are
            // added after the steps that wait for them.
            let mut built: Vec<NewJob> = Vec::new();
            for (i, deps) in edges.iter().enumerate() {
                let mut step = job("k").with_id(ids[i].clone());
                for &d in deps.iter().filter(|&&d| d < i) {
                    step = step.depends_on(ids[d].clone());
                }
                built.push(step);
            }
            for step in built.into_iter().rev() {
                wf.step(step);
            }
            let stored = stored(wf.into_jobs());
            proptest::prop_assert_eq!(stored.len(), edges.len());
            let position: HashMap<JobId, usize> = stored
                .iter()
                .enumerate()
                .filter_map(|(p, s)| s.id.clone().map(|id| (id, p)))
                .collect();
            proptest::prop_assert_eq!(position.len(), edges.len());
            for (p, step) in stored.iter().enumerate() {
                for dep in &step.depends_on {
                    proptest::prop_assert!(position[dep] < p, "{dep} stored after a step that waits for it");
                }
            }
        }
    }
}
