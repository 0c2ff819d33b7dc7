//! `errand`: the operator's command line.
//!
//! Every command takes `--db` (or `ERRAND_DB`): a file path or
//! `sqlite://PATH` (default `./errand.db`). Output is human-readable, or JSON
//! with `--json`. Exit codes are a stable interface; see `docs/cli.md`.
//! Output goes through the `output` module, never `println!` (which panics
//! when the reader of a pipe has gone).
//!
//! The command is a library with a two-line binary (`src/main.rs`), so the
//! fault harness can build the same command with its crash points
//! installed ([`main_with`] and [`Hooks`]) as a binary of its own.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use errand::{Error, JobId, Name, Timestamp};

mod admin;
mod args;
#[cfg(feature = "bench")]
mod bench;
mod connect;
mod exit;
mod flags;
mod jobs;
mod keys;
mod output;
mod progress;
mod queue;
mod schedule;
mod select;
mod serve;
mod serve_loop;
mod signal;
mod stats;
mod telemetry;
mod transfer;
mod wait;
mod work;
mod workflow;

use exit::Failure;
use output::{errln, outln};

use args::{Cli, Command};
use flags::parse_duration;
use jobs::{cancel, enqueue, jobs, prune, replay, reschedule, show};
use serve::{serve, serve_config};
use work::work;

/// `$TRACEPARENT` (set by tracing-aware tools that run errand), when it is
/// a valid W3C trace context. An invalid one is not the operator's input:
/// it is ignored with a warning rather than refusing the job.
pub(crate) fn traceparent_from_env() -> Option<String> {
    let value = std::env::var("TRACEPARENT").ok()?;
    match errand::TraceParent::parse(value.clone()) {
        Ok(_) => Some(value),
        Err(e) => {
            errln!("errand: warning: ignoring $TRACEPARENT ({e}); pass --traceparent to set one");
            None
        }
    }
}

pub(crate) fn operator(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

pub(crate) fn name(what: &str, s: Option<String>) -> Result<Option<Name>, Error> {
    s.map(|s| Name::parse(what, s)).transpose()
}

pub(crate) fn time_arg(flag: &str, s: Option<String>) -> Result<Option<Timestamp>, Error> {
    s.map(|s| Timestamp::parse_rfc3339(&s).map_err(|e| Error::invalid(format!("--{flag}: {e}"))))
        .transpose()
}

pub(crate) fn ids(raw: Vec<String>) -> Result<Vec<JobId>, Error> {
    raw.into_iter().map(JobId::new).collect()
}

/// The exit code of a refused invocation (bad arguments or environment).
pub const EXIT_INVALID: u8 = exit::INVALID;

/// What a program embedding the command adds to it.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    /// The clock SQLite stores decide leases and due times with (default:
    /// the host's).
    pub clock: Option<Arc<dyn errand::Clock>>,
}

/// The `errand` command as its binary runs it: refuses the fault harness's
/// variables, which only the harness's own build of the command reads.
pub fn main() -> ExitCode {
    // Arguments first: `--help` and `--version` answer whatever is set.
    let cli = Cli::parse();
    for var in ["ERRAND_FAILPOINTS", "ERRAND_CLOCK_OFFSET_FILE"] {
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            errln!(
                "errand: {var} is set, but this `errand` has no crash points or test clock; \
                 the fault harness's `errand-crashable` binary has them"
            );
            return ExitCode::from(exit::INVALID);
        }
    }
    run_command_line(cli, Hooks::default())
}

/// Parses the arguments and runs the command with `hooks`.
pub fn main_with(hooks: Hooks) -> ExitCode {
    run_command_line(Cli::parse(), hooks)
}

fn run_command_line(cli: Cli, hooks: Hooks) -> ExitCode {
    let telemetry = telemetry::init();
    let code = run_with_runtime(cli, hooks);
    telemetry.shutdown();
    code
}

fn run_with_runtime(cli: Cli, hooks: Hooks) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("errand: cannot start the async runtime: {e}");
            return ExitCode::from(exit::RUNTIME);
        }
    };
    let result = runtime.block_on(run(cli, hooks));
    let failed = result.is_err();
    let code = match result {
        Ok(code) => code,
        Err(failure) => failure.report(),
    };
    // A reader that closed stdout is not a failure (see output.rs); any
    // other write error is, unless the command failed on its own.
    match output::stdout_failure() {
        Some(e) => {
            errln!("errand: writing the output failed: {e}");
            if failed {
                code
            } else {
                ExitCode::from(exit::RUNTIME)
            }
        }
        None => code,
    }
}

async fn run(cli: Cli, hooks: Hooks) -> Result<ExitCode, Failure> {
    let mut options = errand::ConnectOptions {
        create_and_migrate: false,
        synchronous: cli.synchronous,
        schema: Some(cli.schema.clone()),
        allow_public_schema: cli.allow_public_schema,
        clock: hooks.clock,
        keys: None,
    };
    if let Command::Keys(keys::KeysArgs {
        command: keys::KeysCommand::Generate(args),
    }) = &cli.command
    {
        return keys::generate(args);
    }
    options.keys = keys::given(cli.keys_file.as_deref())?;
    if let Command::Migrate(args) = &cli.command {
        options.create_and_migrate = true;
        let shown = progress::Progress::spinner(args.json, "migrating the schema");
        let connected = errand::connect(&cli.db, &options).await;
        shown.finish();
        connected?;
        let version = match errand::DbTarget::parse(&cli.db)? {
            errand::DbTarget::Sqlite(_) => errand::sqlite::SCHEMA_VERSION,
            errand::DbTarget::Postgres(_) => errand::postgres::SCHEMA_VERSION,
        };
        if args.json {
            output::json(&serde_json::json!({"migrated": true, "schema_version": version}))?;
        } else {
            outln!("schema is at version {version}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Command::Transfer(args) = &cli.command {
        return transfer::run(args, &cli.schema, cli.allow_public_schema).await;
    }
    #[cfg(feature = "bench")]
    if let Command::Bench(args) = &cli.command {
        return bench::bench(
            &cli.db,
            &cli.schema,
            cli.synchronous,
            options.keys.clone(),
            args,
        )
        .await;
    }
    // A refused server configuration is reported before the database is
    // opened: the operator's mistake comes first.
    let serve_config = match &cli.command {
        Command::Serve(args) => Some(serve_config(args)?),
        _ => None,
    };
    let named = connect::Named {
        db: &cli.db,
        schema: &cli.schema,
        allow_public_schema: cli.allow_public_schema,
    };
    let store = connect::connect(&named, &options).await?;
    let admin = errand::Admin::new(store.clone());
    match cli.command {
        Command::Migrate(_) => Ok(ExitCode::SUCCESS),
        Command::Enqueue(args) => enqueue(store, *args).await,
        Command::Jobs(args) => jobs(&admin, args).await,
        Command::Show(args) => show(&admin, args).await,
        Command::Wait(args) => wait::wait(store, args).await,
        Command::Signal(args) => signal::signal(store, args).await,
        Command::Replay(args) => replay(&admin, args).await,
        Command::Cancel(args) => cancel(&admin, args).await,
        Command::Reschedule(args) => reschedule(&admin, args).await,
        Command::Workflow(args) => workflow::run(&admin, args).await,
        Command::Batch(args) => workflow::batch(&admin, args).await,
        Command::Work(args) => work(store, args).await,
        Command::Prune(args) => prune(store, args).await,
        Command::Purge(args) => admin::purge(&admin, args).await,
        Command::Stats(args) => stats::run(&admin, args).await,
        Command::Pause(args) => admin::pause(&admin, args).await,
        Command::Resume(args) => admin::resume(&admin, args).await,
        Command::Queues(args) => admin::queues(&admin, args.json).await,
        Command::Queue(args) => queue::run(&admin, args).await,
        Command::Audit(args) => admin::audit(&admin, args).await,
        Command::Keys(args) => keys::run(&admin, options.keys.clone(), args).await,
        Command::Schedule(args) => schedule::run(store, args).await,
        #[cfg(feature = "bench")]
        Command::Bench(_) => Err(anyhow::anyhow!("errand bench opens its own database").into()),
        Command::Transfer(_) => {
            Err(anyhow::anyhow!("errand transfer opens its own databases").into())
        }
        Command::Serve(_) => match serve_config {
            Some(config) => serve(store, config).await,
            None => Err(anyhow::anyhow!("the server configuration went missing").into()),
        },
    }
}
