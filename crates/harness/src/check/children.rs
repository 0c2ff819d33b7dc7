//! The signals plan's steps that add children: each join ran only after
//! every child its step added had finished, and read all of their outputs.

use std::collections::{BTreeSet, HashMap};

use super::{Figures, History, Start};

/// A step that adds children as it completes, and the join that waits
/// for it.
#[derive(Clone, Debug)]
pub struct Adder {
    pub step: String,
    pub children: Vec<String>,
    pub join: String,
}

/// What the children's part of a run recorded.
#[derive(Clone, Debug, Default)]
pub struct ChildHistory {
    pub adders: Vec<Adder>,
    /// The last `end … ok` of each job, in ms (`exec.log`).
    pub ended_ok: HashMap<String, i64>,
    /// Jobs whose `inputs` line read fewer outputs than they expected.
    pub short_inputs: BTreeSet<String>,
    /// Workers SIGKILLed by a step right after it wrote its children.
    pub adders_killed: u64,
}

/// `children_added`, `child_adders_killed` and `joins_released_early`: a
/// join that started before one of its step's children last ended, or
/// that read fewer outputs than its step and children recorded.
pub(super) fn judge_children(h: &History, starts_of: &HashMap<&str, Vec<&Start>>, f: &mut Figures) {
    let c = &h.children;
    f.child_adders_killed = c.adders_killed;
    for adder in &c.adders {
        f.children_added += adder
            .children
            .iter()
            .filter(|id| h.jobs.contains_key(*id))
            .count() as u64;
        let Some(first) = starts_of
            .get(adder.join.as_str())
            .and_then(|s| s.iter().map(|s| s.at).min())
        else {
            continue;
        };
        let early = adder
            .children
            .iter()
            .any(|child| c.ended_ok.get(child).is_none_or(|end| *end > first));
        if early || c.short_inputs.contains(&adder.join) {
            f.joins_released_early += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(id: &str, at: i64) -> Start {
        Start {
            id: id.into(),
            attempt: 1,
            worker: 1,
            at,
        }
    }

    #[test]
    fn a_join_that_starts_before_a_child_ends_or_reads_short_is_early() {
        let mut h = History::default();
        h.children.adders.push(Adder {
            step: "s".into(),
            children: vec!["s.c0".into(), "s.c1".into()],
            join: "s.join".into(),
        });
        h.children.ended_ok.insert("s.c0".into(), 100);
        h.children.ended_ok.insert("s.c1".into(), 200);
        h.children.adders_killed = 1;
        let judge = |h: &History, join_at: i64| {
            let starts = [start("s.join", join_at)];
            let mut of: HashMap<&str, Vec<&Start>> = HashMap::new();
            of.entry("s.join").or_default().extend(starts.iter());
            let mut f = Figures::default();
            judge_children(h, &of, &mut f);
            f
        };
        let f = judge(&h, 300);
        assert_eq!((f.joins_released_early, f.child_adders_killed), (0, 1));
        assert_eq!(judge(&h, 150).joins_released_early, 1, "before s.c1 ended");
        h.children.ended_ok.remove("s.c1");
        assert_eq!(judge(&h, 300).joins_released_early, 1, "s.c1 never ended");
        h.children.ended_ok.insert("s.c1".into(), 200);
        h.children.short_inputs.insert("s.join".into());
        assert_eq!(judge(&h, 300).joins_released_early, 1, "it read too few");
    }
}
