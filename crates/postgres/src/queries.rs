//! The registry of every statement the store runs ([`Queries`]): the
//! files of `queries/`, with the schema name filled in.

/// The store's SQL with the schema name filled in.
#[derive(Debug)]
pub struct Queries {
    /// The quoted schema name, for the operator's rarer statements.
    pub(crate) schema: String,
    pub(crate) insert: String,
    pub(crate) insert_many: String,
    /// insert_many.sql that also writes the jobs' tag and workflow-step
    /// rows (`side_rows`), for batches where a job has either.
    pub(crate) insert_many_side_rows: String,
    /// insert_many.sql without its `ON CONFLICT`, and its side-rows form,
    /// for a batch whose ids the store generates ([`fresh`]).
    pub(crate) insert_fresh: String,
    pub(crate) insert_fresh_side_rows: String,
    pub(crate) get_many: String,
    pub(crate) get: String,
    pub(crate) mark_awaited: String,
    pub(crate) expire_final: String,
    pub(crate) claim: String,
    pub(crate) claim_ready: String,
    /// The locks a claim takes before it claims, in its first round
    /// trip: `key_lock.sql`'s row, then `cap_lock.sql`'s, as one
    /// statement (an Append runs its branches in order, so the key lock
    /// is always taken first). One statement rather than two: each costs
    /// every claim its parse, bind and execution.
    pub(crate) claim_locks: String,
    pub(crate) counts: String,
    pub(crate) complete: String,
    pub(crate) complete_many: String,
    pub(crate) fail: String,
    pub(crate) fail_many: String,
    pub(crate) snooze: String,
    pub(crate) cancel_running: String,
    pub(crate) heartbeat: String,
    pub(crate) replay: String,
    pub(crate) cancel: String,
    pub(crate) purge: String,
    pub(crate) lock_jobs: String,
    pub(crate) lock_unmet_dependencies: String,
    pub(crate) lock_copied_dependencies: String,
    pub(crate) reschedule: String,
    pub(crate) copy_check: String,
    pub(crate) copy_audit: String,
    pub(crate) history: String,
    pub(crate) audit_of: String,
    pub(crate) list: String,
    pub(crate) list_workflow: String,
    pub(crate) list_tag: String,
    pub(crate) list_meta: String,
    pub(crate) workflow_counts: String,
    pub(crate) dependency_edges: String,
    pub(crate) find_unique: String,
    pub(crate) debounce: String,
    pub(crate) unique_lock: String,
    pub(crate) batch_open: String,
    pub(crate) batch_lock: String,
    pub(crate) batch_row: String,
    pub(crate) batch_members: String,
    pub(crate) batch_counts: String,
    pub(crate) batch_seal: String,
    pub(crate) prune: String,
    pub(crate) take_tokens: String,
    pub(crate) give_back_tokens: String,
    pub(crate) audit: String,
    pub(crate) stats_sample: String,
    pub(crate) stats_window: String,
    pub(crate) report_worker: String,
    pub(crate) release: String,
    pub(crate) release_done: String,
    pub(crate) lock_dependencies: String,
    pub(crate) link_dependencies: String,
    pub(crate) met_at_insert: String,
    pub(crate) dependency_outputs: String,
    pub(crate) dependency_outputs_after: String,
    pub(crate) dependencies_of: String,
    pub(crate) dependents_of: String,
    pub(crate) signal: String,
    pub(crate) suspend: String,
    pub(crate) expire_waits: String,
    pub(crate) received_signal: String,
    pub(crate) signals_of: String,
    pub(crate) lock_step_dependents: String,
    pub(crate) child_edges: String,
    pub(crate) job_states: String,
}

/// The end both release statements share (the wake-up and the answer).
const RELEASE_WAKE: &str = include_str!("../queries/release_wake.sql");

/// The text of release.sql, whole (its shared end appended), schema unfilled.
pub(crate) fn release_text() -> String {
    [include_str!("../queries/release.sql"), RELEASE_WAKE].concat()
}

/// The text of release_done.sql, whole, schema unfilled: the release of
/// jobs the caller has just acknowledged.
pub(crate) fn release_done_text() -> String {
    [include_str!("../queries/release_done.sql"), RELEASE_WAKE].concat()
}

/// The conflict clause of insert_many.sql: an id already stored is
/// skipped (and answered with the stored job).
const ON_ID_CONFLICT: &str = "ON CONFLICT (id) DO NOTHING\n";

/// insert_many.sql (unfilled) without its conflict clause, for a batch
/// whose every id the store generates: a new UUIDv7 cannot be stored
/// already, and the speculative insertion the clause costs (a second heap
/// record per row, about a sixth of the insert's server CPU:
/// scripts/profile/design-study/README.md) buys nothing.
pub(crate) fn fresh(insert_many: &str) -> String {
    debug_assert!(insert_many.contains(ON_ID_CONFLICT));
    insert_many.replacen(ON_ID_CONFLICT, "", 1)
}

/// `insert` (insert.sql or insert_many.sql, unfilled) wrapped so that the
/// same statement also writes the created jobs' rows in errand_job_tags,
/// errand_job_meta and errand_workflow_steps (insert_tags.sql,
/// insert_meta.sql, insert_steps.sql); it
/// answers with the jobs, as `insert` does.
pub(crate) fn side_rows(insert: &str) -> String {
    format!(
        "WITH ins AS (\n{insert}\n)\n{}{}{}SELECT * FROM ins",
        include_str!("../queries/insert_tags.sql"),
        include_str!("../queries/insert_meta.sql"),
        include_str!("../queries/insert_steps.sql")
    )
}

impl Queries {
    /// Fills `quoted_schema` into one query's text.
    pub(crate) fn fill(quoted_schema: &str, sql: &str) -> String {
        sql.replace("__SCHEMA__", quoted_schema)
    }

    /// Fills `quoted_schema` into every query.
    pub fn new(quoted_schema: &str) -> Self {
        let q = |sql: &str| Self::fill(quoted_schema, sql);
        Queries {
            schema: quoted_schema.to_owned(),
            insert: q(include_str!("../queries/insert.sql")),
            insert_many: q(include_str!("../queries/insert_many.sql")),
            insert_many_side_rows: q(&side_rows(include_str!("../queries/insert_many.sql"))),
            insert_fresh: q(&fresh(include_str!("../queries/insert_many.sql"))),
            insert_fresh_side_rows: q(&side_rows(&fresh(include_str!(
                "../queries/insert_many.sql"
            )))),
            get_many: q(include_str!("../queries/get_many.sql")),
            get: q(include_str!("../queries/get.sql")),
            mark_awaited: q(include_str!("../queries/mark_awaited.sql")),
            expire_final: q(include_str!("../queries/expire_final.sql")),
            claim: q(include_str!("../queries/claim.sql")),
            claim_ready: q(include_str!("../queries/claim_ready.sql")),
            claim_locks: q(&format!(
                "({}\n)\nUNION ALL\n({}\n)",
                include_str!("../queries/key_lock.sql"),
                include_str!("../queries/cap_lock.sql")
            )),
            counts: q(include_str!("../queries/counts.sql")),
            complete: q(include_str!("../queries/complete.sql")),
            complete_many: q(include_str!("../queries/complete_many.sql")),
            fail: q(include_str!("../queries/fail.sql")),
            fail_many: q(include_str!("../queries/fail_many.sql")),
            snooze: q(include_str!("../queries/snooze.sql")),
            cancel_running: q(include_str!("../queries/cancel_running.sql")),
            heartbeat: q(include_str!("../queries/heartbeat.sql")),
            replay: q(include_str!("../queries/replay.sql")),
            cancel: q(include_str!("../queries/cancel.sql")),
            purge: q(include_str!("../queries/purge.sql")),
            lock_jobs: q(include_str!("../queries/lock_jobs.sql")),
            lock_unmet_dependencies: q(include_str!("../queries/lock_unmet_dependencies.sql")),
            lock_copied_dependencies: q(include_str!("../queries/lock_copied_dependencies.sql")),
            reschedule: q(include_str!("../queries/reschedule.sql")),
            copy_check: q(include_str!("../queries/copy_check.sql")),
            copy_audit: q(include_str!("../queries/copy_audit.sql")),
            history: q(include_str!("../queries/history.sql")),
            audit_of: q(include_str!("../queries/audit_of.sql")),
            list: q(include_str!("../queries/list.sql")),
            list_workflow: q(include_str!("../queries/list_workflow.sql")),
            list_tag: q(include_str!("../queries/list_tag.sql")),
            list_meta: q(include_str!("../queries/list_meta.sql")),
            workflow_counts: q(include_str!("../queries/workflow_counts.sql")),
            dependency_edges: q(include_str!("../queries/dependency_edges.sql")),
            find_unique: q(include_str!("../queries/find_unique.sql")),
            debounce: q(include_str!("../queries/debounce.sql")),
            unique_lock: q(include_str!("../queries/unique_lock.sql")),
            batch_open: q(include_str!("../queries/batch_open.sql")),
            batch_lock: q(include_str!("../queries/batch_lock.sql")),
            batch_row: q(include_str!("../queries/batch_row.sql")),
            batch_members: q(include_str!("../queries/batch_members.sql")),
            batch_counts: q(include_str!("../queries/batch_counts.sql")),
            batch_seal: q(include_str!("../queries/batch_seal.sql")),
            prune: q(include_str!("../queries/prune.sql")),
            take_tokens: q(include_str!("../queries/take_tokens.sql")),
            give_back_tokens: q(include_str!("../queries/give_back_tokens.sql")),
            audit: q(include_str!("../queries/audit.sql")),
            stats_sample: q(include_str!("../queries/stats_sample.sql")),
            stats_window: q(include_str!("../queries/stats_window.sql")),
            report_worker: q(include_str!("../queries/report_worker.sql")),
            release: q(&release_text()),
            release_done: q(&release_done_text()),
            lock_dependencies: q(include_str!("../queries/lock_dependencies.sql")),
            link_dependencies: q(include_str!("../queries/link_dependencies.sql")),
            met_at_insert: q(include_str!("../queries/met_at_insert.sql")),
            dependency_outputs: q(include_str!("../queries/dependency_outputs.sql")),
            dependency_outputs_after: q(include_str!("../queries/dependency_outputs_after.sql")),
            dependencies_of: q(include_str!("../queries/dependencies_of.sql")),
            dependents_of: q(include_str!("../queries/dependents_of.sql")),
            signal: q(include_str!("../queries/signal.sql")),
            suspend: q(include_str!("../queries/suspend.sql")),
            expire_waits: q(include_str!("../queries/expire_waits.sql")),
            received_signal: q(include_str!("../queries/received_signal.sql")),
            signals_of: q(include_str!("../queries/signals_of.sql")),
            lock_step_dependents: q(include_str!("../queries/lock_step_dependents.sql")),
            child_edges: q(include_str!("../queries/child_edges.sql")),
            job_states: q(include_str!("../queries/job_states.sql")),
        }
    }

    /// Every statement, named.
    #[cfg(test)]
    pub(crate) fn all(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("insert", &self.insert),
            ("insert_many", &self.insert_many),
            ("insert_many_side_rows", &self.insert_many_side_rows),
            ("insert_fresh", &self.insert_fresh),
            ("insert_fresh_side_rows", &self.insert_fresh_side_rows),
            ("get_many", &self.get_many),
            ("get", &self.get),
            ("mark_awaited", &self.mark_awaited),
            ("expire_final", &self.expire_final),
            ("claim", &self.claim),
            ("claim_ready", &self.claim_ready),
            ("claim_locks", &self.claim_locks),
            ("counts", &self.counts),
            ("complete", &self.complete),
            ("complete_many", &self.complete_many),
            ("fail", &self.fail),
            ("fail_many", &self.fail_many),
            ("snooze", &self.snooze),
            ("cancel_running", &self.cancel_running),
            ("heartbeat", &self.heartbeat),
            ("replay", &self.replay),
            ("cancel", &self.cancel),
            ("purge", &self.purge),
            ("lock_jobs", &self.lock_jobs),
            ("lock_unmet_dependencies", &self.lock_unmet_dependencies),
            ("lock_copied_dependencies", &self.lock_copied_dependencies),
            ("reschedule", &self.reschedule),
            ("copy_check", &self.copy_check),
            ("copy_audit", &self.copy_audit),
            ("history", &self.history),
            ("audit_of", &self.audit_of),
            ("list", &self.list),
            ("list_workflow", &self.list_workflow),
            ("list_tag", &self.list_tag),
            ("list_meta", &self.list_meta),
            ("workflow_counts", &self.workflow_counts),
            ("dependency_edges", &self.dependency_edges),
            ("find_unique", &self.find_unique),
            ("debounce", &self.debounce),
            ("unique_lock", &self.unique_lock),
            ("batch_open", &self.batch_open),
            ("batch_lock", &self.batch_lock),
            ("batch_row", &self.batch_row),
            ("batch_members", &self.batch_members),
            ("batch_counts", &self.batch_counts),
            ("batch_seal", &self.batch_seal),
            ("prune", &self.prune),
            ("take_tokens", &self.take_tokens),
            ("give_back_tokens", &self.give_back_tokens),
            ("audit", &self.audit),
            ("stats_sample", &self.stats_sample),
            ("stats_window", &self.stats_window),
            ("report_worker", &self.report_worker),
            ("release", &self.release),
            ("release_done", &self.release_done),
            ("lock_dependencies", &self.lock_dependencies),
            ("link_dependencies", &self.link_dependencies),
            ("met_at_insert", &self.met_at_insert),
            ("dependency_outputs", &self.dependency_outputs),
            ("dependency_outputs_after", &self.dependency_outputs_after),
            ("dependencies_of", &self.dependencies_of),
            ("dependents_of", &self.dependents_of),
            ("lock_step_dependents", &self.lock_step_dependents),
            ("child_edges", &self.child_edges),
            ("job_states", &self.job_states),
        ]
    }
}

#[cfg(test)]
mod tests {
    /// A batch of generated ids runs insert_many.sql without its conflict
    /// clause and nothing else changed.
    #[test]
    fn the_fresh_form_is_insert_many_without_its_conflict_clause() {
        let many = include_str!("../queries/insert_many.sql");
        let fresh = super::fresh(many);
        assert!(many.contains(super::ON_ID_CONFLICT));
        assert!(!fresh.contains("ON CONFLICT"), "{fresh}");
        assert_eq!(many.replacen(super::ON_ID_CONFLICT, "", 1), fresh);
        assert!(fresh.trim_end().ends_with("RETURNING *"));
    }
}
