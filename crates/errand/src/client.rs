//! Enqueueing jobs.

use std::sync::Arc;

use errand_core::{Inserted, NewJob, Result, Store};

/// Enqueues jobs into a store.
#[derive(Clone, Debug)]
pub struct Client {
    store: Arc<dyn Store>,
}

impl Client {
    /// A client over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Client { store }
    }

    /// Inserts a job; an existing id returns the existing job unchanged.
    pub async fn enqueue(&self, job: NewJob) -> Result<Inserted> {
        self.store.insert(job).await
    }

    /// Inserts many jobs in one transaction.
    pub async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<Inserted>> {
        self.store.insert_many(jobs).await
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}
