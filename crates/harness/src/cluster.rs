//! A private PostgreSQL cluster the harness starts itself (for the
//! crash-restart plan): `initdb` in a temporary directory as the `postgres`
//! user, a free port, trust authentication; stopped on drop.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    /// Starts a fresh cluster. Needs root (for `runuser -u postgres`) and the
    /// server binaries under /usr/lib/postgresql/*/bin.
    pub fn start() -> Result<Cluster> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .context("no /usr/lib/postgresql: the PostgreSQL server binaries are not installed")?
            .filter_map(std::result::Result::ok)
            .map(|e| e.path().join("bin"))
            .find(|p| p.join("initdb").exists())
            .context("no initdb under /usr/lib/postgresql/*/bin")?;
        let dir = tempfile::Builder::new()
            .prefix("errand-harness-pg-")
            .tempdir()
            .context("create the cluster directory")?;
        let chown = Command::new("chown")
            .arg("postgres")
            .arg(dir.path())
            .status()
            .context("run chown")?;
        if !chown.success() {
            bail!("cannot chown the cluster directory to postgres (the harness must run as root)");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("find a free port")?
            .port();
        let c = Cluster { bin, dir, port };
        let data = c.data();
        c.as_postgres("initdb", &["-D", &data, "-A", "trust", "-U", "postgres"])
            .context("initdb")?;
        c.ctl(&["start"]).context("pg_ctl start")?;
        Ok(c)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn as_postgres(&self, tool: &str, args: &[&str]) -> Result<()> {
        let status = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join(tool))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .with_context(|| format!("run {tool} as postgres"))?;
        if !status.success() {
            bail!("{tool} failed: {status}");
        }
        Ok(())
    }

    fn ctl(&self, action: &[&str]) -> Result<()> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        let data = self.data();
        let mut args = vec!["-D", &data, "-l", &log, "-w", "-o", &opts];
        args.extend_from_slice(action);
        self.as_postgres("pg_ctl", &args)
    }

    /// A crash-restart: every backend killed without a checkpoint, then
    /// recovery from the WAL.
    pub fn crash_restart(&self) -> Result<()> {
        self.ctl(&["-m", "immediate", "restart"])
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.ctl(&["-m", "immediate", "stop"]);
    }
}

/// How a pair's standby replicates (the failover plan).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Replication {
    /// A commit returns once the standby has it: nothing acknowledged is
    /// lost in a failover.
    Sync,
    /// A commit returns at once: the last ones may be lost in a failover.
    Async,
}

impl std::fmt::Display for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Replication::Sync => "sync",
            Replication::Async => "async",
        })
    }
}

/// A private primary and streaming standby made by `scripts/pg-pair.sh`,
/// reached through a multi-host URL; stopped on drop.
#[derive(Debug)]
pub struct Pair {
    dir: tempfile::TempDir,
    url: String,
}

impl Pair {
    /// The repository's pair script.
    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-pair.sh")
    }

    fn pair_dir(&self) -> PathBuf {
        self.dir.path().join("pair")
    }

    fn run(&self, action: &str, extra: &[&str]) -> Result<String> {
        let out = Command::new("bash")
            .arg(Self::script())
            .arg(action)
            .arg(self.pair_dir())
            .args(extra)
            .output()
            .with_context(|| format!("run pg-pair.sh {action}"))?;
        if !out.status.success() {
            bail!(
                "pg-pair.sh {action} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Starts both servers. Needs root and the server binaries.
    pub fn start(mode: Replication) -> Result<Pair> {
        let dir = tempfile::Builder::new()
            .prefix("errand-harness-pair-")
            .tempdir()
            .context("create the pair's directory")?;
        // The server tools run as `postgres` and must reach it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .context("open the pair's directory to postgres")?;
        let mut pair = Pair {
            dir,
            url: String::new(),
        };
        pair.url = pair.run("start", &[&mode.to_string()])?;
        Ok(pair)
    }

    /// Both servers, the one that takes writes chosen by the client.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// A failover: the standby's receiving stopped for `lag_ms`, the
    /// primary killed, the standby promoted, then the old primary rebuilt
    /// as the new one's standby, ready for the next.
    pub fn fail_over(&self, lag_ms: u64) -> Result<()> {
        self.run("promote", &[&lag_ms.to_string()])?;
        self.run("rejoin", &[])?;
        Ok(())
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = self.run("stop", &[]);
    }
}
