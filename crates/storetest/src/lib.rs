//! # errand-storetest
//!
//! One body of tests that every [`Store`] must pass. A backend's test file
//! invokes [`conformance_tests!`] with an async function that builds a fresh,
//! empty store driven by the given [`ManualClock`](errand_core::ManualClock):
//!
//! ```ignore
//! async fn make(clock: ManualClock) -> Option<Arc<dyn Store>> { /* … */ }
//! errand_storetest::conformance_tests!(make);
//! ```
//!
//! Each case states one rule of the delivery contract (docs/guarantees.md)
//! and fails if the store breaks it. Time never passes by itself: cases move the clock.
#![deny(missing_docs)]
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed rule.

pub mod admin;
pub mod bulk;
pub mod cases;
pub mod children;
pub mod counts;
pub mod dedup;
pub mod deps;
pub mod history;
pub mod hostile;
pub mod keys;
pub mod limits;
pub mod minutes;
pub mod model;
pub mod rates;
pub mod schedules;
pub mod search;
pub mod signals;
pub mod unique;
pub mod waits;
pub mod workflows;

pub use proptest;
pub use tokio;

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    Admin, ClaimRequest, ClaimedJob, ErrorClass, Failure, Job, JobId, Lease, NewJob, Payload,
    RetryAt, Store, Timestamp,
};

/// The operator's actions on `store`: cases act as an operator does,
/// through [`Admin`], so the rules it keeps (each job once, a refusal
/// explained, all or none) are tested on every backend with the
/// backend's own step underneath.
pub fn admin(store: &Arc<dyn Store>) -> Admin {
    Admin::new(Arc::clone(store))
}

/// The instant every case starts at (2026-11-30T00:00:00Z).
pub const T0: Timestamp = Timestamp::from_millis(1_795_996_800_000);

/// Generates one `#[tokio::test]` per conformance case. `$make` is an async
/// function `fn(ManualClock) -> Option<Arc<dyn Store>>` returning a fresh,
/// empty store, or `None` when the backend is not configured here (the case
/// then prints that it was skipped and passes).
#[macro_export]
macro_rules! conformance_tests {
    ($make:path) => {
        $crate::conformance_tests!(@in cases $make;
            insert_returns_a_ready_job_with_a_stable_id,
            a_renewal_carries_the_handlers_progress,
            inserting_an_existing_id_returns_the_existing_job_and_creates_nothing,
            insert_many_is_all_or_nothing_per_call,
            insert_many_keeps_each_job_in_input_order,
            a_keys_jobs_keep_input_order_across_dependencies,
            a_large_insert_many_spans_statements_in_input_order,
            claim_increments_attempts_and_writes_a_fresh_token_and_lease,
            a_job_not_yet_due_is_never_claimed,
            claim_never_returns_more_than_its_limit,
            two_concurrent_claims_never_hold_the_same_attempt,
            claims_respect_queues_and_priority,
            ack_with_the_old_token_after_a_reclaim_at_exactly_the_lease_end_is_refused,
            a_matching_token_whose_lease_expired_unreclaimed_is_refused,
            a_stale_fail_is_refused,
            heartbeat_extends_a_live_lease_and_refuses_an_expired_one,
            an_expired_final_attempt_dies_at_the_next_claim,
            only_a_reclaiming_claim_takes_back_an_expired_lease,
            the_sweep_kills_expired_final_attempts_and_nothing_else,
            the_sweep_reports_dead_jobs_in_id_order,
            a_job_that_keeps_losing_its_lease_is_quarantined,
            the_sweep_quarantines_a_job_out_of_lease_budget,
            the_elapsed_time_budget_stops_retries,
            retention_prunes_old_finished_jobs_and_keeps_dead_ones,
            complete_many_fences_each_job_individually,
            complete_many_with_a_job_listed_twice_acknowledges_it_once,
            complete_and_claim_settles_one_batch_and_claims_the_next,
            the_rate_limit_bucket_refills_at_its_rate_up_to_its_burst,
            a_retryable_failure_persists_its_due_time,
            failures_recorded_together_are_judged_one_by_one,
            exhaustion_goes_dead_with_the_last_error,
            a_permanent_failure_goes_dead_at_once,
            retry_at_a_given_time_counts_an_attempt,
            snooze_spends_no_attempt,
            release_gives_the_attempt_back_and_is_due_at_once,
            a_cancelled_running_job_is_terminal_and_refuses_its_ack,
            replay_only_from_dead_or_cancelled_and_is_audited,
            replay_of_several_jobs_is_all_or_nothing,
            operator_cancel_refuses_finished_jobs_and_fences_the_worker,
            unknown_ids_are_not_found,
            history_records_every_attempt,
            list_filters_by_state_queue_and_kind,
            list_pages_by_cursor_visit_every_job_once,
        );
        $crate::conformance_tests!(@in history $make;
            history_times_every_attempt_and_shows_the_running_one,
            history_records_releases_cancels_expiry_and_replay_cycles,
        );
        $crate::conformance_tests!(@in admin $make;
            a_paused_queue_gives_nothing_to_claims_until_resumed,
            purge_deletes_only_dead_jobs_and_its_audit_outlives_them,
            a_copy_takes_a_new_id_leaves_the_original_and_is_audited,
            a_waiting_job_is_rescheduled_all_or_none_and_audited,
            a_blocked_job_is_rescheduled_and_keeps_waiting,
            bulk_selection_reads_past_the_page_byte_budget,
            the_audit_log_pages_newest_first_and_filters,
            stats_count_each_queue_with_leases_age_and_window,
            stats_count_every_queue_even_behind_a_larger_backlog,
            worker_reports_keep_the_latest_per_worker,
            one_shot_reports_add_up_under_their_id,
            a_job_carries_its_deadline_and_trace_context_to_every_attempt,
        );
        $crate::conformance_tests!(@in hostile $make;
            out_of_range_times_and_durations_are_refused_alike,
            storable_payloads_round_trip_with_the_same_meaning,
            stored_json_reads_back_as_the_text_given,
            a_byte_budget_ends_a_page_and_the_next_page_resumes,
        );
        $crate::conformance_tests!(@in rates $make;
            an_idle_rate_limited_claim_keeps_the_burst,
            rate_limited_claims_never_exceed_rate_times_elapsed_plus_burst,
            concurrent_rate_limited_claims_share_one_burst,
            a_claim_with_an_invalid_rate_is_refused,
        );
        $crate::conformance_tests!(@in dedup $make;
            an_id_deduplicates_until_its_job_is_pruned_or_purged,
        );
        $crate::conformance_tests!(@in deps $make;
            a_dependent_waits_blocked_until_every_dependency_is_done,
            dependencies_are_checked_when_jobs_are_inserted,
            a_waiting_dependent_resumes_when_its_dead_dependency_is_replayed,
            a_failed_dependency_cancels_or_releases_by_policy_and_cascades,
            a_run_dependent_is_met_once_even_if_its_dependency_is_replayed,
            a_cancelled_dependency_cancels_its_waiting_dependents,
            the_sweep_releases_the_dependents_of_a_job_it_kills,
            failures_recorded_together_release_the_dependents_of_the_dead,
            a_pruned_dependency_still_reads_as_it_ended,
            an_output_is_kept_with_its_job_and_read_by_its_dependents,
            dependency_outputs_come_in_pages_by_id,
            acknowledgments_sent_with_a_claim_release_the_dependents_it_takes,
            a_purge_never_strands_a_job_that_waits_for_it,
            a_replay_never_leaves_a_job_waiting_for_what_cannot_release_it,
            a_copy_depends_on_what_its_original_depends_on,
        );
        $crate::conformance_tests!(@in bulk $make;
            a_selection_names_jobs_by_id_or_by_filter,
            a_filter_selects_by_kind_error_text_and_when_the_job_ended,
            an_action_over_a_selection_is_judged_and_taken_in_one_call,
        );
        $crate::conformance_tests!(@in signals $make;
            a_waiting_job_runs_only_once_its_signal_arrives,
            a_signal_is_delivered_once_when_two_are_sent_at_once,
            a_timed_out_wait_follows_its_policy,
            a_suspended_job_resumes_with_the_signals_payload,
        );
        $crate::conformance_tests!(@in children $make;
            a_join_waits_for_the_children_its_step_added,
            a_child_added_by_a_step_that_loses_its_lease_never_exists,
            children_follow_each_dependents_failure_policy,
            refused_children_leave_the_step_running_and_write_nothing,
            concurrent_completions_adding_children_count_every_child,
        );
        $crate::conformance_tests!(@in waits $make;
            a_waiter_hears_when_its_job_ends,
        );
        $crate::conformance_tests!(@in workflows $make;
            a_workflow_is_enqueued_whole_and_shown_step_by_step,
            a_workflow_shows_steps_enqueued_one_by_one_until_they_are_removed,
            cancelling_or_replaying_a_workflow_acts_on_its_steps_with_audit,
            tags_find_their_jobs_and_go_with_them,
            a_batch_runs_its_callbacks_once_its_jobs_have_ended,
            a_sealed_batch_takes_no_more_jobs,
            a_workflow_page_counts_its_edges_in_its_byte_budget,
        );
        $crate::conformance_tests!(@in unique $make;
            unique_for_returns_the_job_created_within_the_period,
            unique_while_stands_in_only_in_the_states_named,
            a_debounced_job_is_pushed_later_with_the_new_payload,
            concurrent_unique_enqueues_create_one_job,
            unique_settings_are_checked_and_refusals_write_nothing,
            a_job_found_in_its_place_must_be_in_the_batch_named,
        );
        $crate::conformance_tests!(@in schedules $make;
            a_stored_schedule_is_added_once_and_replaced_only_when_asked,
            a_stored_schedule_pauses_resumes_and_goes_with_audit,
            a_schedule_change_that_does_not_apply_writes_nothing,
        );
        $crate::conformance_tests!(@in minutes $make;
            minute_counts_add_up_and_gauges_keep_their_peak,
            minutes_add_up_into_slots,
            a_counter_saturates_instead_of_overflowing,
            old_minutes_are_pruned,
            an_oversized_minute_count_writes_nothing,
            concurrent_minute_writers_lose_no_count,
        );
        $crate::conformance_tests!(@in keys $make;
            a_job_keeps_its_concurrency_key,
            an_ordered_key_runs_one_job_at_a_time_in_enqueue_order,
            a_key_never_runs_more_than_its_limit,
            a_saturated_key_does_not_hold_back_other_keys,
            concurrent_claims_never_exceed_a_key_limit,
        );
        $crate::conformance_tests!(@in counts $make;
            past_the_cap_the_statistics_show_the_stored_exact_count,
        );
        $crate::conformance_tests!(@in limits $make;
            a_capped_queue_starts_no_more_than_its_cap,
            keyed_jobs_count_against_the_cap_and_a_pause_still_wins,
            concurrent_claims_never_exceed_a_queue_cap,
            a_cap_change_is_audited_and_bad_input_writes_nothing,
            claim_order_holds_across_queues_beside_a_paused_or_capped_queue,
        );
        $crate::conformance_tests!(@in search $make;
            a_search_returns_exactly_the_jobs_meeting_every_term,
            a_search_stops_at_its_scan_bound_and_goes_on_from_there,
            a_search_with_bad_terms_is_refused,
        );
    };
    (@in $module:ident $make:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let clock = ::errand_core::ManualClock::new($crate::T0);
                let Some(store) = $make(clock.clone()).await else {
                    eprintln!("SKIPPED {}: backend not configured", stringify!($case));
                    return;
                };
                $crate::$module::$case(store, clock).await;
            }
        )*
    };
}

/// Generates the model-based property test: `$cases` random operation
/// sequences, each on a fresh store from `$make`, compared step by step with
/// the reference model in [`model`].
#[macro_export]
macro_rules! model_test {
    ($make:path, $cases:expr) => {
        #[test]
        fn random_operation_sequences_match_the_reference_model() {
            use $crate::proptest::test_runner::{Config, TestCaseError, TestRunner};
            let rt = $crate::tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            let probe = rt.block_on($make(::errand_core::ManualClock::new($crate::T0)));
            if probe.is_none() {
                eprintln!("SKIPPED random_operation_sequences_match_the_reference_model: backend not configured");
                return;
            }
            let mut runner = TestRunner::new(Config {
                cases: $cases,
                failure_persistence: None,
                ..Config::default()
            });
            let strategy = $crate::proptest::collection::vec($crate::model::op_strategy(), 1..60);
            let result = runner.run(&strategy, |ops| {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    rt.block_on(async {
                        let clock = ::errand_core::ManualClock::new($crate::T0);
                        let store = $make(clock.clone()).await.expect("store");
                        $crate::model::check(store, clock, ops).await;
                    })
                }));
                outcome.map_err(|e| {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_default();
                    TestCaseError::fail(msg)
                })
            });
            if let Err(e) = result {
                panic!("{e}");
            }
        }
    };
}

/// A job of kind `test` with a small payload.
pub fn job(id: &str) -> NewJob {
    NewJob::new(
        "test",
        Payload::from_json_text(format!(r#"{{"n":"{id}"}}"#)).unwrap(),
    )
    .unwrap()
    .with_id(JobId::new(id).unwrap())
}

/// A claim of up to `limit` ready jobs from every queue with the given
/// lease; it does not look for expired leases.
pub fn claim_req(limit: u32, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        queues: Vec::new(),
        limit,
        lease,
        rate: None,
        reclaim: false,
    }
}

/// Like [`claim_req`], and expired leases are taken back first.
pub fn reclaim_req(limit: u32, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        reclaim: true,
        ..claim_req(limit, lease)
    }
}

/// Claims exactly one job (panics otherwise).
pub async fn claim_one(store: &dyn Store, lease: Duration) -> ClaimedJob {
    let mut got = store.claim(&reclaim_req(1, lease)).await.unwrap();
    assert_eq!(got.len(), 1, "expected exactly one claimed job");
    got.remove(0)
}

/// A retryable failure due after `d`.
pub fn retry_after(error: &str, d: Duration) -> Failure {
    Failure {
        error: error.to_owned(),
        class: ErrorClass::Retryable,
        retry: Some(RetryAt::After(d)),
    }
}

/// Asserts that `result` is a lease-lost error.
pub fn assert_lease_lost<T: std::fmt::Debug>(result: errand_core::Result<T>) {
    match result {
        Err(errand_core::Error::LeaseLost { .. }) => {}
        other => panic!("expected LeaseLost, got {other:?}"),
    }
}

/// Fetches a job.
pub async fn get(store: &dyn Store, id: &str) -> Job {
    store.get(&JobId::new(id).unwrap()).await.unwrap()
}

/// A lease with a wrong token for `id`.
pub fn forged(lease: &Lease) -> Lease {
    Lease {
        id: lease.id.clone(),
        token: errand_core::LeaseToken::generate(),
        attempt: lease.attempt,
    }
}
