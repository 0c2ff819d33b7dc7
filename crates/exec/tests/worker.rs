#![allow(clippy::unwrap_used)]
//! The exec handler in a one-shot worker: the job handed to the command,
//! exit codes and signals mapped to outcomes, the trace context, and the
//! output exchanged through files.

#[path = "../../errand/tests/common/mod.rs"]
mod common;

use common::{config, insert_after, job, output_of, setup};

use std::sync::Arc;
use std::time::Duration;

use errand::{ErrorClass, JobId, NewJob, Payload, Store, WorkOutcome, Worker};
use errand_exec::ExecHandler;

#[tokio::test]
async fn exec_passes_the_job_and_maps_exit_codes() {
    let (f, store) = setup(5).await;
    let out = f.path.with_file_name("seen.txt");
    let cmd = format!(
        "cat > {0}; echo \"$ERRAND_JOB_ID $ERRAND_ATTEMPT $ERRAND_KIND $ERRAND_QUEUE\" >> {0}; echo 'provider said no' >&2; exit 75",
        out.display()
    );
    let w = Worker::new(store.clone(), config(0.5));
    let r = w.run_once(Arc::new(ExecHandler::new(cmd))).await.unwrap();
    assert_eq!(r.outcome, WorkOutcome::RetryScheduled);
    let seen = std::fs::read_to_string(&out).unwrap();
    assert_eq!(seen, "{\"to\":\"a@example\"}job-1 1 receipt default\n");
    assert_eq!(
        job(&store).await.last_error.as_deref(),
        Some("provider said no")
    );

    f.clock.advance(Duration::from_secs(60));
    let r = w
        .run_once(Arc::new(ExecHandler::new("exit 65")))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::Dead);
    let j = job(&store).await;
    assert_eq!(j.last_error_class, Some(ErrorClass::Permanent));
    assert!(j.last_error.unwrap().contains("65"));
}

#[tokio::test]
async fn exec_success_and_signals() {
    let (f, store) = setup(5).await;
    let w = Worker::new(store.clone(), config(0.5));
    let r = w
        .run_once(Arc::new(ExecHandler::new("kill -9 $$")))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::RetryScheduled);
    assert!(job(&store).await.last_error.unwrap().contains("signal 9"));
    f.clock.advance(Duration::from_secs(60));
    let r = w
        .run_once(Arc::new(ExecHandler::new("cat >/dev/null")))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::Acknowledged);
}

/// An external command gets the job's trace context as `TRACEPARENT`, and
/// none for a job enqueued without one.
#[tokio::test]
async fn exec_hands_the_trace_context_to_the_command() {
    let f = common::fixture();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    for (id, traced) in [("a-traced", true), ("b-plain", false)] {
        let mut job = NewJob::new("receipt", Payload::from_json_text("{}").unwrap())
            .unwrap()
            .with_id(JobId::new(id).unwrap());
        if traced {
            job = job.with_traceparent(errand::core::TraceParent::parse(tp).unwrap());
        }
        store.insert(job).await.unwrap();
    }
    let out = f.path.with_file_name("trace.txt");
    let cmd = format!(
        "echo \"$ERRAND_JOB_ID=${{TRACEPARENT:-none}}\" >> {}",
        out.display()
    );
    let w = Worker::new(store.clone(), config(0.5));
    for _ in 0..2 {
        let r = w
            .run_once(Arc::new(ExecHandler::new(cmd.clone())))
            .await
            .unwrap();
        assert_eq!(r.outcome, WorkOutcome::Acknowledged);
    }
    let seen = std::fs::read_to_string(&out).unwrap();
    assert_eq!(seen, format!("a-traced={tp}\nb-plain=none\n"));
}

/// An `--exec` command writes its result to `$ERRAND_OUTPUT`; a dependent
/// command finds its dependencies' results in `$ERRAND_INPUTS` (an object
/// keyed by job id). Both files are gone after the attempt. Output that is
/// not JSON fails the attempt for good, saying so; no file records none.
#[tokio::test]
async fn exec_commands_exchange_outputs_through_files() {
    let (f, store) = setup(3).await;
    insert_after(&store, "job-2", &["job-1"]).await;
    let w = Worker::new(store.clone(), config(0.5));
    let names = f.path.with_file_name("files.txt");
    let cmd = format!(
        "printf '{{\"rows\": 3}}\\n' > \"$ERRAND_OUTPUT\"; echo \"$ERRAND_OUTPUT ${{ERRAND_INPUTS:-none}}\" >> {}",
        names.display()
    );
    let r = w.run_once(Arc::new(ExecHandler::new(cmd))).await.unwrap();
    assert_eq!(r.outcome, WorkOutcome::Acknowledged);
    assert_eq!(
        output_of(&job(&store).await),
        Some(serde_json::json!({"rows": 3}))
    );
    let cmd = format!(
        "cat \"$ERRAND_INPUTS\" > \"$ERRAND_OUTPUT\"; echo \"$ERRAND_OUTPUT $ERRAND_INPUTS\" >> {}",
        names.display()
    );
    let r = w.run_once(Arc::new(ExecHandler::new(cmd))).await.unwrap();
    assert_eq!(r.outcome, WorkOutcome::Acknowledged);
    let j2 = store.get(&JobId::new("job-2").unwrap()).await.unwrap();
    assert_eq!(
        output_of(&j2),
        Some(serde_json::json!({"job-1": {"rows": 3}}))
    );
    let seen = std::fs::read_to_string(&names).unwrap();
    let lines: Vec<Vec<&str>> = seen.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 2, "{seen}");
    assert_eq!(
        lines[0][1], "none",
        "no inputs file for a job without dependencies"
    );
    for path in lines.iter().flatten().filter(|p| **p != "none") {
        assert!(
            !std::path::Path::new(path).exists(),
            "{path} was left behind"
        );
    }

    insert_after(&store, "job-3", &[]).await;
    let r = w
        .run_once(Arc::new(ExecHandler::new("echo nope > \"$ERRAND_OUTPUT\"")))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::Dead);
    let j3 = store.get(&JobId::new("job-3").unwrap()).await.unwrap();
    let error = j3.last_error.unwrap();
    assert!(
        error.starts_with(
            "the command succeeded but its output was refused: the output is not valid JSON"
        ),
        "{error}"
    );
    insert_after(&store, "job-4", &[]).await;
    let r = w
        .run_once(Arc::new(ExecHandler::new("true")))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::Acknowledged);
    let j4 = store.get(&JobId::new("job-4").unwrap()).await.unwrap();
    assert_eq!(j4.output, None);
}

/// An output "file" that is not a regular file (here a FIFO nobody
/// writes) is refused without being read: the attempt ends, permanently
/// failed, instead of waiting forever.
#[tokio::test]
async fn an_output_that_is_not_a_regular_file_is_refused_unread() {
    let (_f, store) = setup(3).await;
    let w = Worker::new(store.clone(), config(0.5));
    let r = w
        .run_once(Arc::new(ExecHandler::new("mkfifo \"$ERRAND_OUTPUT\"")))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::Dead);
    let error = job(&store).await.last_error.unwrap();
    assert!(error.contains("it is not a regular file"), "{error}");
}
