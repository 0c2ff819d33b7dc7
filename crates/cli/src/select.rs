//! Which jobs a bulk operator command (`replay`, `purge`) acts on: job ids,
//! or filters with a bound — resolved to jobs the same way for every command.

use clap::Args;
use errand::{BulkFilter, Error, JobState};

use crate::exit::Failure;

/// Job ids, or filters with a bound (not both, not neither).
#[derive(Args, Debug)]
pub struct Selection {
    /// Job ids (all are acted on or none).
    pub ids: Vec<String>,
    /// Filter: jobs in this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Filter: jobs of this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Filter: jobs whose last error contains this text.
    #[arg(long)]
    pub error: Option<String>,
    /// Filter: jobs that died (or were cancelled) at or after this RFC 3339
    /// time.
    #[arg(long)]
    pub since: Option<String>,
    /// Filter: jobs that died (or were cancelled) before this RFC 3339 time.
    #[arg(long)]
    pub until: Option<String>,
    /// With filters: act on at most this many.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
}

impl Selection {
    /// The jobs named by id, or those in `state` matching every filter
    /// given, oldest first, at most `--limit`. `extra` are the command's
    /// own filter flags (name, given), which count as filters too.
    pub fn selection(
        self,
        verb: &str,
        state: JobState,
        extra: &[(&str, bool)],
    ) -> Result<errand::Selection, Failure> {
        let has_filter = self.queue.is_some()
            || self.kind.is_some()
            || self.error.is_some()
            || self.since.is_some()
            || self.until.is_some()
            || extra.iter().any(|(_, given)| *given);
        if self.ids.is_empty() != has_filter {
            let mut flags = vec!["--queue", "--kind", "--error", "--since", "--until"];
            flags.extend(extra.iter().map(|(name, _)| *name));
            return Err(Error::invalid(format!(
                "name the jobs to {verb} either by id or by filter ({}), not both and not neither",
                flags.join(", ")
            ))
            .into());
        }
        Ok(if has_filter {
            errand::Selection::Filter(BulkFilter {
                state,
                queue: crate::name("queue", self.queue)?,
                kind: crate::name("kind", self.kind)?,
                error_contains: self.error,
                since: crate::time_arg("since", self.since)?,
                until: crate::time_arg("until", self.until)?,
                limit: self.limit,
            })
        } else {
            errand::Selection::Ids(crate::ids(self.ids)?)
        })
    }
}
