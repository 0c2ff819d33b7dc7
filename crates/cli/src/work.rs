//! `errand work`: one job (`--once`), or the worker service when no
//! `--once` is given.

use std::process::ExitCode;
use std::sync::Arc;

use errand::{Error, Name, RetryPolicy, Store, Worker, WorkerConfig};
use errand_exec::ExecHandler;

use crate::args::WorkArgs;
use crate::exit::Failure;
use crate::{exit, output, serve_loop};

pub(crate) async fn work(store: Arc<dyn Store>, a: WorkArgs) -> Result<ExitCode, Failure> {
    let queues: Vec<Name> = a
        .queue
        .into_iter()
        .map(|q| Name::parse("queue", q))
        .collect::<Result<_, _>>()?;
    let retry = RetryPolicy::EqualJitter {
        base: a.retry_base,
        max: a.retry_max,
    };
    let handler = Arc::new(
        ExecHandler::new(a.exec)
            .stop_grace(a.stop_grace)
            .timeout(a.timeout)
            .max_inputs(a.max_inputs),
    );
    // Made now: what killed workers left is removed even if no job comes.
    handler.files_dir()?;
    if a.once {
        let config = WorkerConfig {
            queues,
            lease: a.lease,
            retry,
            ..WorkerConfig::default()
        };
        let report = Worker::new(store, config)
            .run_once_and_report(handler.clone())
            .await?;
        output::report(&report, a.json)?;
        return cannot_run(&handler);
    }
    let rate = match a.rate {
        Some(per_second) => {
            if queues.is_empty() {
                return Err(Error::invalid("--rate limits named queues: add --queue NAME").into());
            }
            let limit = errand::RateLimit {
                per_second,
                burst: a.burst,
            };
            limit.validate()?;
            Some(limit)
        }
        None => None,
    };
    let key_rate = match a.key_rate {
        Some(per_second) => {
            if queues.is_empty() {
                return Err(Error::invalid(
                    "--key-rate limits the keys of named queues: add --queue NAME",
                )
                .into());
            }
            let limit = errand::RateLimit {
                per_second,
                burst: a.key_burst,
            };
            limit.validate()?;
            Some(limit)
        }
        None => None,
    };
    let args = serve_loop::ServiceArgs {
        rate,
        key_rate,
        queues,
        concurrency: usize::try_from(a.concurrency).unwrap_or(1),
        lease: a.lease,
        poll: a.poll,
        drain: a.drain,
        retry,
        json: a.json,
    };
    serve_loop::run(store, handler.clone(), args).await?;
    cannot_run(&handler)
}

/// Exit 2, saying why, when the command could not be run; success
/// otherwise.
pub(crate) fn cannot_run(handler: &ExecHandler) -> Result<ExitCode, Failure> {
    match handler.cannot_run_reason() {
        Some(why) => Err(Failure::Coded(
            exit::INVALID,
            format!("{why}; this worker stopped: fix --exec and start it again"),
        )),
        None => Ok(ExitCode::SUCCESS),
    }
}
