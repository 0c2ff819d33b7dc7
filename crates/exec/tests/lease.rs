#![allow(clippy::unwrap_used)]
//! The exec handler's command when its attempt's lease is lost without
//! anybody cancelling the job: the lease expires on the store's clock,
//! another worker claims the job, this worker's next renewal is refused,
//! and the command is stopped (SIGTERM to its process group, SIGKILL after
//! the grace) instead of running on beside the new owner.

#[path = "../../errand/tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use errand::{
    ClaimRequest, JobId, JobState, NewJob, Payload, Store, WorkOutcome, Worker, WorkerConfig,
};
use errand_exec::ExecHandler;

async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_stops_the_command_and_its_settlement_is_refused() {
    let f = common::fixture();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    let job = NewJob::new("receipt", Payload::from_json_text("{}").unwrap())
        .unwrap()
        .with_id(JobId::new("job-1").unwrap());
    store.insert(job).await.unwrap();
    let dir = f.path.parent().unwrap();
    let (started, got, effect) = (dir.join("started"), dir.join("got"), dir.join("effect"));
    // The command records the SIGTERM and carries on; only the SIGKILL
    // after the grace keeps it from writing its effect.
    let cmd = format!(
        "trap 'echo TERM >> {got}' TERM; echo up > {started}; \
         i=0; while [ $i -lt 40 ]; do sleep 0.1; i=$((i+1)); done; touch {effect}",
        got = got.display(),
        started = started.display(),
        effect = effect.display()
    );
    let handler = Arc::new(ExecHandler::new(cmd).stop_grace(Duration::from_millis(500)));
    // Renewed every 200 ms on real time; it expires only when the test
    // moves the store's clock.
    let config = WorkerConfig {
        lease: Duration::from_millis(600),
        heartbeat: true,
        ..WorkerConfig::default()
    };
    let worker = Worker::new(store.clone(), config);
    let run = tokio::spawn(async move { worker.run_once(handler).await });
    wait_for("the command to start", || started.exists()).await;
    let start = Instant::now();

    f.clock.advance(Duration::from_secs(3600));
    let req = ClaimRequest {
        queues: Vec::new(),
        limit: 1,
        lease: Duration::from_secs(7200),
        rate: None,
        reclaim: true,
    };
    let taken = store.claim(&req).await.unwrap();
    assert_eq!(taken.len(), 1, "another worker takes the expired job over");
    assert_eq!(taken[0].lease.attempt, 2);

    let report = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the stopped command's attempt ends")
        .unwrap()
        .unwrap();
    assert_eq!(report.outcome, WorkOutcome::LeaseLost);
    assert_eq!(std::fs::read_to_string(&got).unwrap_or_default(), "TERM\n");
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(start.elapsed())).await;
    assert!(!effect.exists(), "the command ran on beside the new owner");
    let j = store.get(&JobId::new("job-1").unwrap()).await.unwrap();
    assert_eq!(
        (j.state, j.attempts),
        (JobState::Running, 2),
        "the new owner's attempt is untouched"
    );
}
