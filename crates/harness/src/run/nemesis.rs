//! The fault phase: the nemesis starts the workers (and the http plan's
//! server), strikes as planned (kill, pause, fill, clock step, server
//! kill, cluster restart, failover) while the load runs, tends what it struck, heals,
//! waits for the drain and stops everything.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use errand::{JobFilter, JobState, Store};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::backend::Backend;
use super::load::LoadShared;
use super::plan::Action;
use super::workers::{Slot, Workers, in_flight, shell_quote};
use super::{Fault, RunOptions};

async fn unfinished(store: &dyn Store) -> Result<usize> {
    let mut n = 0;
    for state in [JobState::Ready, JobState::Running] {
        let filter = JobFilter {
            state: Some(state),
            limit: Some(10_000),
            ..JobFilter::default()
        };
        n += store.list(&filter).await?.len();
    }
    Ok(n)
}

/// What a nemesis action did: struck (or was skipped), or is to be tried
/// again at the next pass (its target was not yet in the state that makes
/// the strike prove something).
enum Strike {
    Done,
    Wait,
}

/// The fault phase: the workers, the server of the http plan, and what the
/// nemesis did to them.
pub(super) struct Nemesis<'a> {
    pub(super) opts: &'a RunOptions,
    pub(super) dir: &'a Path,
    pub(super) backend: &'a Backend,
    workers: Workers,
    pub(super) server: Option<crate::http::Server>,
    /// Crash points still to arm, one per worker spawn in the fault phase.
    crash_arms: VecDeque<String>,
    fault_phase: bool,
    full_until: Option<Instant>,
    clock_offset: i64,
    /// `(pid, ms)` of each kill and pause: when a worker stopped serving.
    pub(super) outages: Vec<(i32, i64)>,
    pub(super) forward_steps_over_leases: u64,
    pub(super) kills_mid_request: u64,
    /// What happened, line by line, for the report.
    pub(super) log: Vec<String>,
}

impl<'a> Nemesis<'a> {
    /// Spawns the workers (the first ones armed with crash points) and the
    /// http plan's server.
    pub(super) fn start(
        opts: &'a RunOptions,
        dir: &'a Path,
        backend: &'a Backend,
        errand_bin: PathBuf,
        crash_arms: VecDeque<String>,
    ) -> Result<Nemesis<'a>> {
        let harness = std::env::current_exe().context("locate this executable")?;
        let harness = if harness.file_name().is_some_and(|n| n == "errand-harness") {
            harness
        } else {
            errand_bin.with_file_name("errand-harness")
        };
        let exec = format!(
            "exec {} handle --dir {}",
            shell_quote(&harness.display().to_string()),
            shell_quote(&dir.display().to_string())
        );
        let workers = Workers {
            errand: errand_bin,
            db_args: backend.db_args(),
            exec,
            dir: dir.to_path_buf(),
            concurrency: opts.concurrency,
            lease_ms: opts.lease_ms,
            clock_file: opts
                .plan
                .contains(&Fault::Clock)
                .then(|| dir.join("clock-offset")),
            slots: Vec::new(),
        };
        let mut me = Nemesis {
            opts,
            dir,
            backend,
            workers,
            server: None,
            crash_arms,
            fault_phase: true,
            full_until: None,
            clock_offset: 0,
            outages: Vec::new(),
            forward_steps_over_leases: 0,
            kills_mid_request: 0,
            log: Vec::new(),
        };
        for i in 0..opts.workers {
            let arm = me.crash_arms.pop_front();
            let child = me.workers.spawn(arm.as_deref())?;
            if let Some(arm) = arm {
                me.log.push(format!(
                    "0 ms: worker {i} (pid {}) armed: {arm}",
                    child.id()
                ));
            }
            me.workers.slots.push(Slot {
                child: Some(child),
                killed: false,
                respawn_at: None,
                paused_until: None,
            });
        }
        // The HTTP plan's server (on its own port, restarted after each kill).
        if opts.plan.contains(&Fault::Http) {
            me.server = Some(crate::http::Server::start(
                &me.workers.errand,
                &me.workers.db_args,
                dir,
            )?);
        }
        Ok(me)
    }

    /// Strikes as planned while the load runs, heals, and waits for the
    /// queue to drain (the log says how many jobs were left unfinished).
    pub(super) async fn fault_and_drain(
        &mut self,
        actions: &[(u64, Action)],
        store: &dyn Store,
        load: &tokio::task::JoinHandle<()>,
        shared: &LoadShared,
    ) -> Result<()> {
        let t0 = Instant::now();
        let fault_ms = self.opts.fault_secs * 1000;
        let mut next = 0;
        let mut drain_until: Option<Instant> = None;
        let left = loop {
            let now = Instant::now();
            let elapsed = now.duration_since(t0).as_millis() as u64;
            // Nemesis actions that are due.
            while self.fault_phase
                && let Some((t, action)) = actions.get(next).copied()
                && t <= elapsed
            {
                match self.strike(t, action, elapsed, now, shared).await? {
                    Strike::Done => next += 1,
                    Strike::Wait => break,
                }
            }
            self.tend(now, elapsed)?;
            if self.fault_phase && elapsed >= fault_ms && load.is_finished() {
                self.fault_phase = false;
                drain_until = Some(now + Duration::from_secs(self.opts.drain_secs));
                self.log.push(format!("{elapsed} ms: heal and drain"));
                continue;
            }
            if let Some(until) = drain_until {
                let left = unfinished(store).await.unwrap_or(usize::MAX);
                if left == 0 || now >= until {
                    break left;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            } else {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        };
        let ms = t0.elapsed().as_millis();
        self.log
            .push(format!("{ms} ms: drained ({left} unfinished)"));
        Ok(())
    }

    /// One planned action, due at `t`.
    async fn strike(
        &mut self,
        t: u64,
        action: Action,
        elapsed: u64,
        now: Instant,
        shared: &LoadShared,
    ) -> Result<Strike> {
        match action {
            Action::Kill(chosen) => Ok(self.kill(t, chosen, elapsed)),
            Action::Pause(slot, len) => Ok(self.pause(t, slot, len, elapsed, now)),
            Action::Fill(len) => {
                if let Some(d) = &self.backend.disk {
                    let n = tokio::task::block_in_place(|| d.fill())?;
                    self.full_until = Some(now + Duration::from_millis(len));
                    self.log.push(format!(
                        "{t} ms: file system full ({n} bytes of ballast) for {len} ms"
                    ));
                }
                Ok(Strike::Done)
            }
            Action::Jump(step) => self.jump(t, step, elapsed),
            Action::KillServer => {
                self.kill_server(t, shared).await;
                Ok(Strike::Done)
            }
            Action::Failover => {
                if let Some(p) = &self.backend.pair {
                    let lag = self.opts.lag_ms;
                    let r = tokio::task::block_in_place(|| p.fail_over(lag));
                    self.log.push(format!(
                        "{t} ms: standby stopped receiving for {lag} ms, primary killed (pg_ctl stop -m immediate), standby promoted, old primary rebuilt as its standby: {r:?}"
                    ));
                    r?;
                }
                Ok(Strike::Done)
            }
            Action::Restart => {
                if let Some(c) = &self.backend.cluster {
                    let r = tokio::task::block_in_place(|| c.crash_restart());
                    self.log
                        .push(format!("{t} ms: pg_ctl restart -m immediate: {r:?}"));
                    r?;
                }
                Ok(Strike::Done)
            }
        }
    }

    /// Whether worker `slot` is up: spawned, not killed, not paused.
    fn up(&self, slot: usize) -> bool {
        self.workers
            .slots
            .get(slot)
            .is_some_and(|s| s.child.is_some() && !s.killed && s.paused_until.is_none())
    }

    /// Whether a strike at worker `slot` should wait (at most
    /// `--strike-wait-ms` past its time) for the worker to be running a
    /// handler: a strike at an idle worker proves nothing.
    fn idle_worth_waiting(&self, slot: usize, t: u64, elapsed: u64) -> bool {
        let pid = self
            .workers
            .slots
            .get(slot)
            .and_then(|s| s.child.as_ref())
            .map(Child::id);
        pid.is_some_and(|pid| !in_flight(self.dir, pid)) && elapsed < t + self.opts.strike_wait_ms
    }

    /// SIGKILL: the chosen worker, or when it is down (killed, not yet
    /// respawned) or paused, the next one that is up; all down: skip.
    fn kill(&mut self, t: u64, chosen: usize, elapsed: u64) -> Strike {
        let n = self.workers.slots.len().max(1);
        let slot = (0..n)
            .map(|i| (chosen + i) % n)
            .find(|&i| self.up(i))
            .unwrap_or(chosen);
        let paused = self
            .workers
            .slots
            .get(slot)
            .is_some_and(|s| s.paused_until.is_some() || s.killed);
        if !paused && self.idle_worth_waiting(slot, t, elapsed) {
            return Strike::Wait;
        }
        match (!paused)
            .then(|| self.workers.signal(slot, Signal::SIGKILL))
            .flatten()
        {
            Some(pid) => {
                self.outages.push((pid, crate::handle::now_ms()));
                if let Some(s) = self.workers.slots.get_mut(slot) {
                    s.killed = true;
                }
                self.log
                    .push(format!("{t} ms: SIGKILL worker {slot} (pid {pid})"));
            }
            None => self.log.push(format!(
                "{t} ms: kill of worker {slot} skipped (down or paused)"
            )),
        }
        Strike::Done
    }

    /// SIGSTOP worker `slot` for `len` ms, mid-handler when it can be.
    fn pause(&mut self, t: u64, slot: usize, len: u64, elapsed: u64, now: Instant) -> Strike {
        let paused = self
            .workers
            .slots
            .get(slot)
            .is_some_and(|s| s.paused_until.is_some());
        if !paused && self.idle_worth_waiting(slot, t, elapsed) {
            return Strike::Wait;
        }
        match (!paused)
            .then(|| self.workers.signal(slot, Signal::SIGSTOP))
            .flatten()
        {
            Some(pid) => {
                self.outages.push((pid, crate::handle::now_ms()));
                if let Some(s) = self.workers.slots.get_mut(slot) {
                    s.paused_until = Some(now + Duration::from_millis(len));
                }
                self.log.push(format!(
                    "{t} ms: SIGSTOP worker {slot} (pid {pid}) for {len} ms"
                ));
            }
            None => self.log.push(format!(
                "{t} ms: pause of worker {slot} skipped (down or paused)"
            )),
        }
        Strike::Done
    }

    /// Steps the workers' clock by `step` ms while some worker holds a
    /// lease (waiting at most a second for one: a step with no lease held
    /// proves nothing).
    fn jump(&mut self, t: u64, step: i64, elapsed: u64) -> Result<Strike> {
        let busy = self
            .workers
            .slots
            .iter()
            .filter_map(|s| s.child.as_ref())
            .any(|c| in_flight(self.dir, c.id()));
        if !busy && elapsed < t + 1000 {
            return Ok(Strike::Wait);
        }
        if busy && step > 0 {
            self.forward_steps_over_leases += 1;
        }
        if let Some(file) = &self.workers.clock_file {
            self.clock_offset += step;
            let tmp = file.with_extension("tmp");
            std::fs::write(&tmp, self.clock_offset.to_string())
                .context("write the clock offset")?;
            std::fs::rename(&tmp, file).context("write the clock offset")?;
            self.log.push(format!(
                "{t} ms: workers' clock stepped {step:+} ms (offset {:+} ms)",
                self.clock_offset
            ));
        }
        Ok(Strike::Done)
    }

    /// SIGKILL the http plan's server mid-request: wait (at most a second)
    /// for a request to start — woken by the client, not by polling, since
    /// a request lasts milliseconds — then strike at once.
    async fn kill_server(&mut self, t: u64, shared: &LoadShared) {
        let by = Instant::now() + Duration::from_millis(1000);
        let mut requests = shared.http_in_flight.load(Ordering::SeqCst);
        while requests == 0 && Instant::now() < by {
            let _ = tokio::time::timeout_at(by.into(), shared.request_started.notified()).await;
            // A moment more, so the burst reaches the server and some
            // requests are being committed when it dies (a burst of 25
            // enqueues on SQLite can be answered within 3 ms, so no longer
            // than 1).
            tokio::time::sleep(Duration::from_millis(1)).await;
            requests = shared.http_in_flight.load(Ordering::SeqCst);
        }
        match self.server.as_mut().and_then(crate::http::Server::kill) {
            Some(pid) => {
                self.kills_mid_request += u64::from(requests > 0);
                self.log.push(format!(
                    "{t} ms: SIGKILL server (pid {pid}) with {requests} requests in flight"
                ));
            }
            None => self.log.push(format!("{t} ms: server kill skipped (down)")),
        }
    }

    /// Between strikes: restarts a killed server, frees the file system
    /// and resumes paused workers when their time is up (everything on
    /// heal), reaps dead workers and respawns them after a short delay.
    fn tend(&mut self, now: Instant, elapsed: u64) -> Result<()> {
        if let Some(s) = self.server.as_mut()
            && let Some(line) = s.tick(now)?
        {
            self.log.push(format!("{elapsed} ms: {line}"));
        }
        let fault_phase = self.fault_phase;
        if self.full_until.is_some_and(|u| !fault_phase || u <= now)
            && let Some(d) = &self.backend.disk
        {
            self.full_until = None;
            d.free()?;
            self.log
                .push(format!("{elapsed} ms: file system space returned"));
        }
        for (i, slot) in self.workers.slots.iter_mut().enumerate() {
            if slot.paused_until.is_some_and(|u| !fault_phase || u <= now) {
                slot.paused_until = None;
                if let Some(c) = &slot.child
                    && let Ok(pid) = i32::try_from(c.id())
                {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                    self.log
                        .push(format!("{elapsed} ms: SIGCONT worker {i} (pid {pid})"));
                }
            }
        }
        for slot_index in 0..self.workers.slots.len() {
            self.reap_and_respawn(slot_index, now, elapsed)?;
        }
        Ok(())
    }

    /// Notes worker `slot_index`'s exit (killed by the nemesis or by a
    /// poison job) and respawns it 300 ms later, armed with the next crash
    /// point while the fault phase lasts.
    fn reap_and_respawn(&mut self, slot_index: usize, now: Instant, elapsed: u64) -> Result<()> {
        let exited = match self
            .workers
            .slots
            .get_mut(slot_index)
            .and_then(|s| s.child.as_mut())
        {
            Some(c) => c
                .try_wait()
                .context("wait for a worker")?
                .map(|st| (c.id(), st)),
            None => None,
        };
        if let Some((pid, status)) = exited
            && let Some(slot) = self.workers.slots.get_mut(slot_index)
        {
            slot.child = None;
            slot.killed = false;
            slot.respawn_at = Some(now + Duration::from_millis(300));
            self.log.push(format!(
                "{elapsed} ms: worker {slot_index} (pid {pid}) exited: {status}"
            ));
        }
        let due = self
            .workers
            .slots
            .get(slot_index)
            .is_some_and(|s| s.child.is_none() && s.respawn_at.is_some_and(|r| r <= now));
        if due {
            let arm = self
                .fault_phase
                .then(|| self.crash_arms.pop_front())
                .flatten();
            let child = self.workers.spawn(arm.as_deref())?;
            if let Some(arm) = arm {
                self.log.push(format!(
                    "{elapsed} ms: worker {slot_index} (pid {}) armed: {arm}",
                    child.id()
                ));
            }
            if let Some(slot) = self.workers.slots.get_mut(slot_index) {
                slot.child = Some(child);
                slot.respawn_at = None;
            }
        }
        Ok(())
    }

    /// Stops the server, then the workers: SIGTERM, and SIGKILL for any
    /// still running 15 s later.
    pub(super) async fn stop(&mut self) -> Result<()> {
        if let Some(s) = self.server.as_mut() {
            tokio::task::block_in_place(|| s.stop());
        }
        for i in 0..self.workers.slots.len() {
            self.workers.signal(i, Signal::SIGTERM);
        }
        let stop_by = Instant::now() + Duration::from_secs(15);
        for slot in &mut self.workers.slots {
            if let Some(child) = slot.child.as_mut() {
                while child.try_wait().context("wait for a worker")?.is_none() {
                    if Instant::now() > stop_by {
                        let _ = child.kill();
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                slot.child = None;
            }
        }
        Ok(())
    }
}
