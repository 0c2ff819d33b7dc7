//! `errand-harness`: runs real `errand work` processes against a real
//! database while a seeded nemesis injects faults, then checks the history
//! and the final database. See README.md.

mod check;
mod cluster;
mod disk;
mod handle;
mod http;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "errand-harness",
    about = "Fault-injection harness and checker for Errand"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run workers, load and nemesis, heal, drain, and check.
    Run(Box<run::RunOptions>),
    /// The job handler (run by `errand work --exec`).
    Handle {
        /// The run directory (logs and effects).
        #[arg(long)]
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Handle { dir } => match handle::handle(&dir) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => {
                eprintln!("errand-harness handle: {e:#}");
                ExitCode::from(1)
            }
        },
        Cmd::Run(opts) => {
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("errand-harness: cannot start the runtime: {e}");
                    return ExitCode::from(2);
                }
            };
            match rt.block_on(run::run(&opts)) {
                Ok(result) => {
                    eprintln!("errand-harness: nemesis:");
                    for line in &result.nemesis {
                        eprintln!("  {line}");
                    }
                    let table = check::table(&result.figures, &run::required(&opts));
                    let head = format!(
                        "errand-harness: {} plan {:?}, seed {}, {} ms, logs in {}",
                        result.backend, result.plan, result.seed, result.elapsed_ms, result.dir
                    );
                    if opts.json {
                        eprintln!("{head}\n{table}");
                        match serde_json::to_string(&result) {
                            Ok(j) => println!("{j}"),
                            Err(e) => eprintln!("errand-harness: {e}"),
                        }
                    } else {
                        println!("{head}\n{table}");
                    }
                    eprintln!("errand-harness: replay with: {}", result.replay);
                    if result.violations.is_empty() {
                        eprintln!("errand-harness: PASS");
                        ExitCode::SUCCESS
                    } else {
                        for v in &result.violations {
                            eprintln!("errand-harness: VIOLATION {v}");
                        }
                        ExitCode::from(1)
                    }
                }
                Err(e) => {
                    eprintln!("errand-harness: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
