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
