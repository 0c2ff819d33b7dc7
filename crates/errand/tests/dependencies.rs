#![allow(clippy::unwrap_used)]
//! Two dependencies of one job, settled at the same moment by two worker
//! processes, release their dependent exactly once — 200 times over, on
//! SQLite (one file, two processes) and on PostgreSQL (two connection
//! pools in two processes). The same for a batch of two jobs: its
//! `on_success` and `on_finish` callbacks are each released once.
//!
//! The test starts this test binary twice more as helper processes (the
//! ignored `settling_process` below). Each opens the database, then
//! acknowledges each lease it reads from its standard input at once; the
//! test hands both processes their lease in back-to-back writes, so both
//! settlements run together.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use errand::ConnectOptions;
use errand::core::{ClaimRequest, JobId, JobState, Lease, LeaseToken, NewJob, Payload, Store};
use errand_testsupport::{KillOnDrop, PgSchema, postgres_url};

const ROUNDS: usize = 200;
const DB_ENV: &str = "ERRAND_TEST_SETTLING_DB";
const SCHEMA_ENV: &str = "ERRAND_TEST_SETTLING_SCHEMA";
const DONE: &str = "SETTLED";

fn options(schema: Option<String>, create: bool) -> ConnectOptions {
    ConnectOptions {
        create_and_migrate: create,
        schema,
        ..ConnectOptions::default()
    }
}

fn job(id: &str) -> NewJob {
    NewJob::new("step", Payload::default())
        .unwrap()
        .with_id(JobId::new(id).unwrap())
}

struct Settler {
    _child: KillOnDrop,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Settler {
    fn start(db: &str, schema: Option<&str>) -> Settler {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "settling_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DB_ENV, db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
        if let Some(s) = schema {
            cmd.env(SCHEMA_ENV, s);
        }
        let mut child = KillOnDrop::new(cmd.spawn().unwrap());
        let input = child.child().stdin.take().unwrap();
        let output = BufReader::new(child.child().stdout.take().unwrap());
        Settler {
            _child: child,
            input,
            output,
        }
    }

    fn hand(&mut self, lease: &Lease) {
        writeln!(
            self.input,
            "{} {} {}",
            lease.id,
            lease.token.as_str(),
            lease.attempt
        )
        .unwrap();
        self.input.flush().unwrap();
    }

    fn answer(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.output.read_line(&mut line).unwrap() > 0,
                "a settling process ended early"
            );
            // The test harness may print its own `test … ` before the first.
            if let Some(at) = line.find(DONE) {
                return line[at + DONE.len()..].trim().to_owned();
            }
        }
    }
}

/// What the two settled jobs release.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A job depending on both.
    Dependent,
    /// The callbacks of the batch holding both.
    Batch,
}

async fn run(db: &str, schema: Option<String>, shape: Shape) {
    let store: Arc<dyn Store> = errand::connect(db, &options(schema.clone(), true))
        .await
        .unwrap();
    let mut settlers = [
        Settler::start(db, schema.as_deref()),
        Settler::start(db, schema.as_deref()),
    ];
    let claim = |limit| ClaimRequest {
        queues: Vec::new(),
        limit,
        lease: Duration::from_secs(60),
        rate: None,
        reclaim: false,
    };
    for round in 0..ROUNDS {
        let (a, b, c) = (
            format!("a-{round}"),
            format!("b-{round}"),
            format!("c-{round}"),
        );
        let finish = format!("f-{round}");
        let mut released = vec![c.clone()];
        if shape == Shape::Dependent {
            let joined = job(&c)
                .depends_on(JobId::new(&a).unwrap())
                .depends_on(JobId::new(&b).unwrap());
            store
                .insert_many(vec![job(&a), job(&b), joined])
                .await
                .unwrap();
        } else {
            let batch = errand::BatchId::new(format!("batch-{round}")).unwrap();
            store
                .insert_many(vec![
                    job(&a).in_batch(batch.clone()),
                    job(&b).in_batch(batch.clone()),
                ])
                .await
                .unwrap();
            let sealed = store
                .seal_batch(&errand::BatchSeal {
                    batch,
                    on_success: Some(job(&c)),
                    on_finish: Some(job(&finish)),
                })
                .await
                .unwrap();
            assert_eq!(sealed.total, 2, "round {round}");
            released.push(finish.clone());
        }
        let mut running = store.claim(&claim(10)).await.unwrap();
        running.sort_by(|x, y| x.job.id.cmp(&y.job.id));
        let held: Vec<&str> = running.iter().map(|r| r.job.id.as_str()).collect();
        assert_eq!(held, [a.as_str(), b.as_str()], "round {round}");
        // Both leases go out back to back; each process settles at once.
        settlers[0].hand(&running[0].lease);
        settlers[1].hand(&running[1].lease);
        for s in &mut settlers {
            assert_eq!(s.answer(), "ok", "round {round}");
        }
        for id in &released {
            let joined = store.get(&JobId::new(id).unwrap()).await.unwrap();
            assert_eq!(
                (joined.state, joined.waiting_on),
                (JobState::Ready, 0),
                "round {round}: {id} must be released once both settled"
            );
        }
        let mut next = store.claim(&claim(10)).await.unwrap();
        next.sort_by(|x, y| x.job.id.cmp(&y.job.id));
        let got: Vec<&str> = next.iter().map(|r| r.job.id.as_str()).collect();
        let mut want: Vec<&str> = released.iter().map(String::as_str).collect();
        want.sort_unstable();
        assert_eq!(got, want, "round {round}: exactly one claim of each");
        for n in &next {
            store.complete(&n.lease).await.unwrap();
        }
        assert!(store.claim(&claim(10)).await.unwrap().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dependencies_settled_at_once_by_two_processes_release_once_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("settling.db");
    run(db.to_str().unwrap(), None, Shape::Dependent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_settled_at_once_by_two_processes_runs_each_callback_once_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("batch.db");
    run(db.to_str().unwrap(), None, Shape::Batch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_settled_at_once_by_two_processes_runs_each_callback_once_on_postgres() {
    let Some(url) = postgres_url(
        "a_batch_settled_at_once_by_two_processes_runs_each_callback_once_on_postgres",
    ) else {
        return;
    };
    let schema = PgSchema::new(&url, "batch_settling");
    run(&url, Some(schema.name.clone()), Shape::Batch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dependencies_settled_at_once_by_two_processes_release_once_on_postgres() {
    let Some(url) =
        postgres_url("two_dependencies_settled_at_once_by_two_processes_release_once_on_postgres")
    else {
        return;
    };
    let schema = PgSchema::new(&url, "settling");
    run(&url, Some(schema.name.clone()), Shape::Dependent).await;
}

/// The helper process: acknowledges every lease it is handed (`id token
/// attempt` per line) — one process by the single acknowledgment, the
/// other by the batched one — and answers `SETTLED ok` or the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a helper process that the two-process tests start themselves"]
async fn settling_process() {
    let Ok(db) = std::env::var(DB_ENV) else {
        panic!("run by the two-process tests, with {DB_ENV} set");
    };
    let store = errand::connect(&db, &options(std::env::var(SCHEMA_ENV).ok(), false))
        .await
        .unwrap();
    let (lines, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut n = 0u64;
    while let Some(line) = rx.recv().await {
        let mut parts = line.split_whitespace();
        let (Some(id), Some(token), Some(attempt)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("a lease line must be `id token attempt`, got {line:?}");
        };
        let lease = Lease {
            id: JobId::new(id).unwrap(),
            token: LeaseToken::from_string(token.to_owned()),
            attempt: attempt.parse().unwrap(),
        };
        n += 1;
        let answer = if n.is_multiple_of(2) {
            match store.complete_many(std::slice::from_ref(&lease)).await {
                Ok(acked) if acked == [true] => "ok".to_owned(),
                Ok(acked) => format!("refused {acked:?}"),
                Err(e) => format!("error {e}"),
            }
        } else {
            match store.complete(&lease).await {
                Ok(_) => "ok".to_owned(),
                Err(e) => format!("error {e}"),
            }
        };
        println!("{DONE} {answer}");
        std::io::stdout().flush().unwrap();
    }
}
