#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Batching never weakens the contract (issue 7): real `errand work`
//! processes claiming up to 32 jobs per claim (the runtime's batch, with 64
//! slots) and acknowledging them in batched `complete_many` transactions
//! are SIGKILLed in the middle of a batch, twice:
//!
//! 1. at `batch-ack-partial`: a batch acknowledgment has committed while
//!    other jobs of the same claim are still leased (the claimed batch is
//!    part done, part running), no waiter told;
//! 2. at `batch-ack-committed`: a batch acknowledgment has committed, no
//!    waiter told;
//!
//! then an unarmed worker drains the queue. Each job's handler appends
//! `ID ATTEMPT` to `exec.log`. The checks: each crash really happened
//! (the worker died by SIGKILL at the armed point, and wrote so); every
//! job ends `done`, none dead; each ran at least once, including the
//! attempt that was acknowledged; each was acknowledged once, every earlier
//! attempt of it ended `lease_expired` (a job re-ran only when its
//! acknowledgment had not committed); a job `done` at a crash never ran
//! again (those done at the first crash ran exactly once); the jobs the
//! crashed batch acknowledged were `done`, and the claim's other jobs
//! `running`, at the crash; every job left `running` by a crash was
//! reclaimed after its lease and finished.
//!
//! SQLite always (a file of its own); PostgreSQL when
//! `ERRAND_TEST_POSTGRES_URL` is set (a schema of its own; under `CI` it
//! must be set). The workers are this package's `errand-crashable`: the
//! `errand` command with the crash points of `src/crash.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use errand::{ConnectOptions, Job, JobFilter, JobId, JobState, NewJob, Payload, Store};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const JOBS: usize = 300;
/// Long enough that a live worker's heartbeat never loses a lease on a
/// loaded machine, short enough that reclaims after a crash are quick.
const LEASE: &str = "2s";
/// What a step may take at most (a crash to fire, the queue to drain).
const DEADLINE: Duration = Duration::from_secs(90);

/// One run at a time: each spawns a worker with 64 slots.
static SERIAL: Mutex<()> = Mutex::new(());

fn pg_url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL half")
}

/// The `errand` command with its crash points: this package's
/// `errand-crashable` binary.
fn errand_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_errand-crashable"))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A worker process, SIGKILLed on drop if still running (a failed
/// assertion leaves nothing behind).
struct Worker {
    child: Child,
    name: String,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The line a crash point wrote before the SIGKILL, taken apart.
#[derive(Debug)]
struct Crash {
    acknowledged: Vec<String>,
    unacknowledged: Vec<String>,
}

/// What the database and the execution log held while no worker ran.
struct Snapshot {
    jobs: BTreeMap<String, Job>,
    runs: BTreeMap<String, Vec<u32>>,
}

impl Snapshot {
    fn ids_in(&self, state: JobState) -> BTreeSet<String> {
        self.jobs
            .iter()
            .filter(|(_, j)| j.state == state)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

struct Run {
    rt: tokio::runtime::Runtime,
    store: Arc<dyn Store>,
    errand: PathBuf,
    db_args: Vec<String>,
    dir: PathBuf,
    backend: &'static str,
}

impl Run {
    fn new(backend: &'static str, db: &str, schema: Option<&str>, dir: &Path) -> Run {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let options = ConnectOptions {
            create_and_migrate: true,
            schema: schema.map(str::to_owned),
            ..ConnectOptions::default()
        };
        let store = rt
            .block_on(errand::connect(db, &options))
            .expect("connect and migrate");
        let mut db_args = vec!["--db".to_owned(), db.to_owned()];
        if let Some(s) = schema {
            db_args.extend(["--schema".to_owned(), s.to_owned()]);
        }
        Run {
            rt,
            store,
            errand: errand_bin(),
            db_args,
            dir: dir.to_path_buf(),
            backend,
        }
    }

    fn enqueue(&self) -> Vec<String> {
        let ids: Vec<String> = (0..JOBS).map(|n| format!("bc-{n:03}")).collect();
        let jobs: Vec<NewJob> = ids
            .iter()
            .map(|id| {
                NewJob::new("work", Payload::default())
                    .unwrap()
                    .with_id(JobId::new(id.clone()).unwrap())
            })
            .collect();
        let inserted = self.rt.block_on(self.store.insert_many(jobs)).unwrap();
        assert!(inserted.iter().all(|i| i.created));
        ids
    }

    /// Starts `errand work` with 64 slots (claims of up to 32), armed with
    /// `failpoints` if given.
    fn spawn(&self, name: &str, failpoints: Option<&str>) -> Worker {
        let exec = format!(
            "echo \"$ERRAND_JOB_ID $ERRAND_ATTEMPT\" >> {}",
            shell_quote(&self.dir.join("exec.log").display().to_string())
        );
        let out = std::fs::File::create(self.dir.join(format!("{name}.out"))).unwrap();
        let err = std::fs::File::create(self.dir.join(format!("{name}.err"))).unwrap();
        let mut cmd = Command::new(&self.errand);
        cmd.args(&self.db_args)
            .args(["work", "--concurrency", "64", "--lease", LEASE])
            .args(["--poll", "50ms", "--drain", "5s", "--exec", &exec])
            .env("ERRAND_LOG", "warn")
            .env_remove("ERRAND_CLOCK_OFFSET_FILE")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        match failpoints {
            Some(f) => cmd.env("ERRAND_FAILPOINTS", f),
            None => cmd.env_remove("ERRAND_FAILPOINTS"),
        };
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.errand.display()));
        Worker {
            child,
            name: name.to_owned(),
        }
    }

    fn stderr_of(&self, w: &Worker) -> String {
        std::fs::read_to_string(self.dir.join(format!("{}.err", w.name))).unwrap_or_default()
    }

    /// Runs a worker armed to die at the `passes + 1`-th firing of `point`,
    /// waits for it to die, and asserts that it died by SIGKILL at that
    /// point.
    fn crash(&self, name: &str, point: &str, passes: u32) -> Crash {
        let arm = format!("{point}={passes}*off->return");
        let mut w = self.spawn(name, Some(&arm));
        let pid = w.child.id();
        let start = Instant::now();
        let status: ExitStatus = loop {
            if let Some(s) = w.child.try_wait().expect("wait for the worker") {
                break s;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{}: worker {name} ({arm}) never crashed within {DEADLINE:?}: the crash point never fired\n{}",
                self.backend,
                self.stderr_of(&w)
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = self.stderr_of(&w);
        assert_eq!(
            status.signal(),
            Some(Signal::SIGKILL as i32),
            "{}: worker {name} ({arm}) was to die by SIGKILL at {point}, but ended with {status}:\n{stderr}",
            self.backend
        );
        let prefix = format!("errand failpoint {point}: SIGKILL pid {pid} at ");
        let line = stderr
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| {
                panic!(
                    "{}: worker {name} died by SIGKILL but not at {point}:\n{stderr}",
                    self.backend
                )
            });
        let field = |key: &str| -> Vec<String> {
            line.split(' ')
                .find_map(|w| w.strip_prefix(key))
                .map(|v| {
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let crash = Crash {
            acknowledged: field("acknowledged="),
            unacknowledged: field("unacknowledged="),
        };
        eprintln!(
            "{}: {name} died at {point} ({} jobs acknowledged by the batch, {} of their claim unacknowledged)",
            self.backend,
            crash.acknowledged.len(),
            crash.unacknowledged.len()
        );
        assert!(
            !crash.acknowledged.is_empty(),
            "{}: {point} fired for a batch that acknowledged nothing: {line}",
            self.backend
        );
        crash
    }

    fn jobs(&self) -> BTreeMap<String, Job> {
        let filter = JobFilter {
            limit: Some(10_000),
            ..JobFilter::default()
        };
        let jobs = self.rt.block_on(self.store.list(&filter)).unwrap();
        assert_eq!(jobs.len(), JOBS, "{}: every job exists", self.backend);
        jobs.into_iter()
            .map(|j| (j.id.as_str().to_owned(), j))
            .collect()
    }

    /// Each job's executions: the attempt numbers its handler ran with.
    fn runs(&self) -> BTreeMap<String, Vec<u32>> {
        let text = std::fs::read_to_string(self.dir.join("exec.log")).unwrap_or_default();
        let mut runs: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for line in text.lines() {
            let mut w = line.split(' ');
            let (Some(id), Some(attempt)) = (w.next(), w.next()) else {
                panic!("a torn exec.log line: {line:?}");
            };
            runs.entry(id.to_owned())
                .or_default()
                .push(attempt.parse().expect("an attempt number"));
        }
        runs
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            jobs: self.jobs(),
            runs: self.runs(),
        }
    }

    /// An unarmed worker runs until every job is done, then drains on
    /// SIGTERM.
    fn drain(&self) {
        let mut w = self.spawn("drain", None);
        let start = Instant::now();
        loop {
            let jobs = self.jobs();
            let bad: Vec<_> = jobs
                .values()
                .filter(|j| matches!(j.state, JobState::Dead | JobState::Cancelled))
                .collect();
            assert!(
                bad.is_empty(),
                "{}: jobs ended badly: {bad:?}",
                self.backend
            );
            if jobs.values().all(|j| j.state == JobState::Done) {
                break;
            }
            if let Some(s) = w.child.try_wait().unwrap() {
                panic!(
                    "{}: the draining worker exited early ({s}):\n{}",
                    self.backend,
                    self.stderr_of(&w)
                );
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{}: jobs still not done after {DEADLINE:?}: {:?}",
                self.backend,
                jobs.values()
                    .filter(|j| j.state != JobState::Done)
                    .map(|j| (j.id.as_str(), j.state))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid = i32::try_from(w.child.id()).unwrap();
        kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
        let status = w.child.wait().unwrap();
        assert!(
            status.success(),
            "{}: the draining worker did not stop cleanly ({status}):\n{}",
            self.backend,
            self.stderr_of(&w)
        );
    }
}

/// The crash plan and every check, on one backend.
fn batch_crash(backend: &'static str, db: Option<(&str, &str)>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::Builder::new()
        .prefix("errand-batch-crash-")
        .tempdir()
        .unwrap();
    let sqlite = dir.path().join("jobs.db").display().to_string();
    let (url, schema) = match db {
        Some((url, schema)) => (url.to_owned(), Some(schema)),
        None => (sqlite, None),
    };
    let run = Run::new(backend, &url, schema, dir.path());
    let ids = run.enqueue();

    // Crash 1: the third time a batch acknowledgment commits while its
    // claims still hold unacknowledged jobs.
    let c1 = run.crash("crash-partial", "batch-ack-partial", 2);
    let s1 = run.snapshot();
    // Crash 2: the third batch acknowledgment of the next worker.
    let c2 = run.crash("crash-committed", "batch-ack-committed", 2);
    let s2 = run.snapshot();
    run.drain();
    let end = run.snapshot();

    let done1 = s1.ids_in(JobState::Done);
    let running1 = s1.ids_in(JobState::Running);
    let done2 = s2.ids_in(JobState::Done);
    let running2 = s2.ids_in(JobState::Running);
    eprintln!(
        "{backend}: at crash 1 {} done, {} running; at crash 2 {} done, {} running",
        done1.len(),
        running1.len(),
        done2.len(),
        running2.len()
    );

    // The crashes were in the middle of a batch: what the batch had
    // committed was done, the rest of its claims still leased.
    for id in &c1.acknowledged {
        assert!(
            done1.contains(id),
            "{backend}: {id} acknowledged before crash 1 but not done"
        );
    }
    assert!(
        !c1.unacknowledged.is_empty(),
        "{backend}: batch-ack-partial fired with no unacknowledged job"
    );
    for id in &c1.unacknowledged {
        assert!(
            running1.contains(id),
            "{backend}: {id}, of a part-acknowledged claim, was not running at crash 1: {:?}",
            s1.jobs[id]
        );
    }
    for id in &c2.acknowledged {
        assert!(
            done2.contains(id),
            "{backend}: {id} acknowledged before crash 2 but not done"
        );
    }
    assert!(!running1.is_empty() && !running2.is_empty());

    let mut reran = 0;
    for id in &ids {
        let job = &end.jobs[id];
        let runs = end.runs.get(id).cloned().unwrap_or_default();
        // Nothing lost, nothing dead; the effect happened, including the
        // attempt that was acknowledged.
        assert_eq!(job.state, JobState::Done, "{backend}: {job:?}");
        assert!(
            runs.contains(&job.attempts),
            "{backend}: {id} was acknowledged as attempt {} but ran only as {runs:?}",
            job.attempts
        );
        if runs.len() > 1 {
            reran += 1;
        }
        // A job done at a crash never ran again; done at the first, it
        // ran exactly once.
        if done1.contains(id) {
            assert_eq!(runs, vec![1], "{backend}: {id} was done at crash 1");
            assert_eq!(job.attempts, 1, "{backend}: {job:?}");
        }
        if done2.contains(id) {
            assert_eq!(
                Some(&runs),
                s2.runs.get(id),
                "{backend}: {id} ran again after its acknowledgment committed (before crash 2)"
            );
            assert_eq!(job.attempts, s2.jobs[id].attempts, "{backend}: {job:?}");
        }
        // A job a crash left running was reclaimed after its lease.
        for (running, s) in [(&running1, &s1), (&running2, &s2)] {
            if running.contains(id) {
                let before = &s.jobs[id];
                assert!(
                    job.attempts > before.attempts && job.lease_expiries > before.lease_expiries,
                    "{backend}: {id} was running at a crash ({before:?}) and not reclaimed: {job:?}"
                );
            }
        }
        // Acknowledged once; every earlier attempt ended unacknowledged
        // (its lease expired), so a re-run was never of an acknowledged job.
        let detail = run.rt.block_on(run.store.detail(&job.id)).unwrap();
        let outcomes: Vec<&str> = detail
            .history
            .iter()
            .map(|a| a.outcome.as_deref().unwrap_or("running"))
            .collect();
        let mut expected = vec!["lease_expired"; outcomes.len().saturating_sub(1)];
        expected.push("succeeded");
        assert_eq!(outcomes, expected, "{backend}: {id}'s attempts");
    }
    eprintln!(
        "{backend}: {JOBS} jobs done, {} executions, {reran} jobs ran more than once (each only after an unacknowledged attempt)",
        end.runs.values().map(Vec::len).sum::<usize>()
    );
}

#[test]
fn sqlite_a_sigkill_in_the_middle_of_a_batch_loses_nothing_and_reruns_nothing_acknowledged() {
    batch_crash("sqlite", None);
}

#[test]
fn postgres_a_sigkill_in_the_middle_of_a_batch_loses_nothing_and_reruns_nothing_acknowledged() {
    let Some(url) = pg_url() else { return };
    let schema = format!(
        "batch_crash_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    batch_crash("postgres", Some((&url, &schema)));
    drop_schema(&url, &schema);
}

/// Drops the test's schema (left in place when the test fails, to look at).
fn drop_schema(url: &str, schema: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect to drop the schema");
        let task = tokio::spawn(conn);
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .await
            .expect("drop the schema");
        drop(client);
        let _ = task.await;
    });
}
