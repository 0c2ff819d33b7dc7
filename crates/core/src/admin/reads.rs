//! What an operator reads: a job, its detail, listings and selections,
//! batches, the audit log, statistics and charts.

use crate::brief::JobBrief;
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::filter::JobFilter;
use crate::ids::{JobId, Name};
use crate::job::{Job, JobDetail};
use crate::labels::WorkflowId;
use crate::minutes::{ChartWindow, Charts};
use crate::requests::{AuditEntry, AuditFilter, BulkFilter, Selection};
use crate::stats::{Stats, StatsRequest};

use super::Admin;

impl Admin {
    /// One job, or [`Error::NotFound`](crate::Error::NotFound).
    pub async fn job(&self, id: &JobId) -> Result<Job> {
        Ok(self.opened_one(self.jobs.get(id).await?))
    }

    /// One job with its attempt history and audit entries.
    pub async fn detail(&self, id: &JobId) -> Result<JobDetail> {
        let mut detail = self.store.detail(id).await?;
        detail.job = self.opened_one(detail.job);
        Ok(detail)
    }

    /// What a bulk replay or purge by filter acts on: the jobs in the
    /// filter's state matching every filter given, oldest first, at most
    /// its limit. [`Admin::act_on_selection`] reads a filter with it and
    /// acts on what it found, all or none.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a limit out of range.
    pub async fn matching(&self, filter: &BulkFilter) -> Result<Vec<JobBrief>> {
        filter.validate()?;
        let wanted = filter.limit as usize;
        let mut page = filter.to_job_filter();
        // Read in pages with the listings' byte budget, each kept only as
        // briefs: the selection's memory is bounded whatever the payloads
        // weigh. (The action's own step still reads back the rows it
        // changes.)
        page.max_bytes = Some(crate::filter::DEFAULT_PAGE_BYTES);
        let mut found = Vec::new();
        loop {
            page.limit = Some(u32::try_from(wanted - found.len()).unwrap_or(u32::MAX));
            let jobs = self.page_after(&page).await?;
            let next = page.next_after(&jobs).cloned();
            found.extend(jobs.iter().map(JobBrief::from));
            match next {
                Some(after) if found.len() < wanted => page.after = Some(after),
                _ => return Ok(found),
            }
        }
    }

    /// One page of `filter`; when the job it starts after has gone (purged
    /// or pruned since the last page was read), [`Error::Busy`](crate::Error::Busy): the
    /// selection cannot go on where it stopped, and a bulk action must not
    /// act on a part of it without saying so.
    async fn page_after(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        let gone = |after: &JobId| {
            Error::Busy(format!(
                "job {after} left the selection while it was being read (purged or pruned \
                 meanwhile); nothing was done: run the command again"
            ))
        };
        match (self.store.list(filter).await, &filter.after) {
            (Err(Error::NotFound(_)), Some(after)) => Err(gone(after)),
            (Ok(jobs), Some(after)) if jobs.is_empty() => match self.jobs.get(after).await {
                Err(Error::NotFound(_)) => Err(gone(after)),
                Err(e) => Err(e),
                Ok(_) => Ok(jobs),
            },
            (result, _) => result,
        }
    }

    /// The jobs a selection names, as briefs (no payloads, whatever they
    /// weigh): [`Admin::briefs`] of its ids, or [`Admin::matching`] of its
    /// filter.
    ///
    /// # Errors
    /// As those two.
    pub async fn selected(&self, selection: &Selection) -> Result<Vec<JobBrief>> {
        match selection {
            Selection::Ids(ids) => self.briefs(ids).await,
            Selection::Filter(filter) => self.matching(filter).await,
        }
    }

    /// The jobs named, as briefs, in the order named (each must exist).
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) naming the first job that is not stored.
    pub async fn briefs(&self, ids: &[JobId]) -> Result<Vec<JobBrief>> {
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            found.push(JobBrief::from(&self.jobs.get(id).await?));
        }
        Ok(found)
    }

    /// Jobs matching the filter, oldest first.
    pub async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        Ok(self.opened(self.store.list(filter).await?))
    }

    /// One page of a search: the jobs of its listing that meet every term,
    /// reading at most its scan bound of candidates (see
    /// [`JobSearch`](crate::JobSearch)). Without terms, a page of the listing.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a term or bound out of
    /// range; as [`Admin::list`] otherwise.
    pub async fn search(&self, search: &crate::JobSearch) -> Result<crate::SearchPage> {
        search.validate()?;
        if !search.has_terms() {
            let jobs = self.list(&search.filter).await?;
            let next = search.filter.next_after(&jobs).cloned();
            let scanned = jobs.len() as u64;
            return Ok(crate::SearchPage {
                jobs,
                next,
                scanned,
                stopped: false,
            });
        }
        crate::search::scan(self.store.as_ref(), self.jobs.keyring(), search).await
    }

    /// A batch: whether it is sealed, its counts by state, and its
    /// callbacks' jobs.
    ///
    /// # Errors
    /// [`Error::NoSuchBatch`](crate::Error::NoSuchBatch) when none has that id.
    pub async fn batch(&self, id: &WorkflowId) -> Result<crate::BatchView> {
        let batch = self.store.batch(id).await?;
        let job = |id: Option<JobId>| async move {
            match id {
                None => Ok(None),
                Some(id) => match self.jobs.get(&id).await {
                    Ok(job) => Ok(Some(job)),
                    Err(Error::NotFound(_)) => Ok(None),
                    Err(e) => Err(e),
                },
            }
        };
        let on_success_job = job(batch.on_success.clone()).await?;
        let on_finish_job = job(batch.on_finish.clone()).await?;
        Ok(crate::BatchView {
            batch,
            on_success_job,
            on_finish_job,
        })
    }

    /// Audit entries, newest first.
    pub async fn audit_log(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        self.store.audit_log(filter).await
    }

    /// The operator signals (`errand stats`, `/metrics`, the dashboard).
    pub async fn stats(&self, req: &StatsRequest) -> Result<Stats> {
        self.store.stats(req).await
    }

    /// Counts every queue's jobs per state whole now and stores the counts
    /// for [`Admin::stats`] to show past its cap (what running services do
    /// once a minute while a count passes the cap). Reads every ready,
    /// blocked, waiting, running and dead job's index entry.
    pub async fn count_exactly(&self) -> Result<Vec<crate::ExactCount>> {
        self.store.count_exactly().await
    }

    /// The charts of one queue (or of every queue added together) over the
    /// window ending in the minute of `now`, from the per-minute counts
    /// workers report (see [`crate::Tally`]).
    pub async fn charts(
        &self,
        queue: Option<Name>,
        window: ChartWindow,
        now: Timestamp,
    ) -> Result<Charts> {
        let rows = self
            .store
            .minutes(&Charts::query(queue.clone(), window, now))
            .await?;
        Ok(Charts::from_minutes(queue, window, now, &rows))
    }
}
