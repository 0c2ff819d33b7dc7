//! Re-encryption of everything a store holds under one key
//! (`errand keys rotate`).

use serde::Serialize;

use super::Admin;
use crate::encryption::{Keyring, Rewrite, sealed_key};
use crate::error::{Error, Result};

/// The most jobs one step of a re-encryption reads and rewrites.
pub const MAX_ROTATE_BATCH: u32 = 10_000;

/// What a re-encryption did (so far, while it runs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Rotation {
    /// The key every value is now under.
    pub key: String,
    /// Jobs read.
    pub jobs: u64,
    /// Payloads, outputs and signal payloads read.
    pub values: u64,
    /// Values rewritten under the key (from another key, or clear).
    pub rewritten: u64,
    /// Values already under the key.
    pub already: u64,
    /// Values under a key not given, or that do not open: left as they
    /// are (each still names its key).
    pub unreadable: u64,
    /// Values that changed between the read and the rewrite (an output
    /// recorded meanwhile, a job pruned): left, and read again by a
    /// later run.
    pub changed: u64,
}

impl Admin {
    /// Brings every payload, output and signal payload the store holds
    /// under `keys`' first key, `batch` jobs at a time in id order, each
    /// step its own transaction, calling `progress` after each. A run that
    /// is stopped leaves every value under one key or the other, readable;
    /// running it again goes on (values already under the key are only
    /// read).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a batch out of 1..=[`MAX_ROTATE_BATCH`];
    /// a store error stops the run where it was.
    pub async fn rotate_keys(
        &self,
        keys: &Keyring,
        batch: u32,
        mut progress: impl FnMut(&Rotation),
    ) -> Result<Rotation> {
        if !(1..=MAX_ROTATE_BATCH).contains(&batch) {
            return Err(Error::invalid(format!(
                "the batch must be from 1 to {MAX_ROTATE_BATCH} jobs (got {batch})"
            )));
        }
        let target = keys.current().to_owned();
        let mut done = Rotation {
            key: target.clone(),
            ..Rotation::default()
        };
        let mut after = None;
        loop {
            let page = self.store.stored_values(after.as_ref(), batch).await?;
            let Some(last) = page.last else {
                return Ok(done);
            };
            let mut rewrites = Vec::new();
            for was in page.values {
                done.values += 1;
                match sealed_key(was.value.as_str()) {
                    Some(key) if key == target => done.already += 1,
                    _ => match keys.open(was.field, &was.job, &was.value) {
                        Ok(clear) => {
                            let value = keys.seal(was.field, &was.job, &clear)?;
                            rewrites.push(Rewrite { was, value });
                        }
                        Err(_) => done.unreadable += 1,
                    },
                }
            }
            let planned = rewrites.len() as u64;
            let replaced = if rewrites.is_empty() {
                0
            } else {
                self.store.rewrite_values(&rewrites).await?
            };
            done.rewritten += replaced;
            done.changed += planned.saturating_sub(replaced);
            done.jobs += page.jobs;
            after = Some(last);
            progress(&done);
        }
    }
}
