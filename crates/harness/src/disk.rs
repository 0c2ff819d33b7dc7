//! A small file system the harness can fill (for the disk-full plan): a
//! tmpfs mounted in the run directory (root only), filled with a ballast
//! file until the kernel says ENOSPC, and freed by deleting it. Unmounted on
//! drop.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

#[derive(Debug)]
pub struct SmallDisk {
    mount: PathBuf,
}

impl SmallDisk {
    /// Mounts a `size_mib` tmpfs at `mount` (created if missing).
    pub fn mount(mount: &Path, size_mib: u32) -> Result<SmallDisk> {
        std::fs::create_dir_all(mount).context("create the mount point")?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m")])
            .arg("errand-harness")
            .arg(mount)
            .status()
            .context("run mount")?;
        if !status.success() {
            bail!(
                "cannot mount a tmpfs at {} (the disk-full plan needs root): {status}",
                mount.display()
            );
        }
        Ok(SmallDisk {
            mount: mount.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.mount
    }

    fn ballast(&self) -> PathBuf {
        self.mount.join("ballast")
    }

    /// Writes ballast until the file system is full; returns its size.
    pub fn fill(&self) -> Result<u64> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.ballast())
            .context("create the ballast file")?;
        let mut written = 0u64;
        // Big chunks first, then pages, so not even a page is left.
        for chunk in [1 << 20, 4096, 512] {
            let buf = vec![0xa5u8; chunk];
            loop {
                match f.write(&buf) {
                    Ok(0) => break,
                    Ok(n) => written += n as u64,
                    Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                    Err(e) => return Err(e).context("write the ballast file"),
                }
            }
        }
        Ok(written)
    }

    /// Deletes the ballast: space returns.
    pub fn free(&self) -> Result<()> {
        match std::fs::remove_file(self.ballast()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).context("delete the ballast file"),
        }
    }

    /// Copies the database files out (to keep them after the unmount).
    pub fn copy_out(&self, to: &Path) {
        if let Ok(entries) = std::fs::read_dir(&self.mount) {
            for e in entries.flatten() {
                let name = e.file_name();
                if name != "ballast" {
                    let _ = std::fs::copy(e.path(), to.join(name));
                }
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}
