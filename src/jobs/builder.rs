//! Configuring a [`JobQueue`] ([`JobQueueBuilder`]).

use std::sync::Arc;
use std::time::Duration;

use bson::doc;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use super::JobQueue;
use crate::config::{store_builder_methods, StoreConfig};
use crate::error::{Error, Result};
use crate::setters::settings;

/// Configures a [`JobQueue`].
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct JobQueueBuilder {
    pub(super) config: StoreConfig,
    pub(super) settings: QueueSettings,
}

settings! {
    /// How a queue claims, retries and polls: set on the builder, kept as they are by the queue.
    #[derive(Clone, Copy, Debug)]
    pub(super) struct QueueSettings, fields pub(super), set by JobQueueBuilder in settings;
    impl Default;

    /// How long a claim lasts (default 60 s): a job whose worker died runs again after this. A
    /// claim covers a batch run one job after the other; once three quarters of the lease have
    /// passed, the worker starts no further job of the batch and releases the rest. Keep it well
    /// above one job's longest run, or make long handlers follow [`Job::deadline`].
    ///
    /// [`Job::deadline`]: super::Job::deadline
    lease: Duration = Duration::from_secs(60),

    /// Runs after which a failing job is marked failed and no longer claimed (default 10).
    max_attempts: u32 = 10,

    /// Delay before the first retry of a failed job, doubled for each later one up to five
    /// minutes (default 1 s).
    retry_delay: Duration = Duration::from_secs(1),

    /// Jobs a worker claims at once (default 20).
    batch: usize = 20,

    /// How long an idle worker first sleeps before looking for jobs again (default 50 ms). Each
    /// further look that finds nothing doubles the sleep, up to
    /// [`JobQueueBuilder::max_poll_interval`]; finding a job, or a job enqueued through this
    /// queue (or a clone of it, in this process), brings it back to this.
    poll_interval: Duration = Duration::from_millis(50),

    /// The longest an idle worker sleeps between looks for jobs (default 2 s): the most a job
    /// enqueued by another process waits for an idle worker.
    max_poll_interval: Duration = Duration::from_secs(2),
}

impl QueueSettings {
    /// Refuses settings no queue can run with.
    fn check(&self) -> Result<()> {
        if self.lease.is_zero() || self.batch == 0 || self.max_attempts == 0 {
            return Err(Error::InvalidConfig {
                reason: "a job queue needs a non-zero lease, batch and max_attempts".to_owned(),
            });
        }
        if self.poll_interval.is_zero() || self.max_poll_interval < self.poll_interval {
            return Err(Error::InvalidConfig {
                reason: "a job queue needs a non-zero poll interval, and a maximum poll \
                         interval no shorter"
                    .to_owned(),
            });
        }
        Ok(())
    }
}

impl JobQueueBuilder {
    store_builder_methods!();

    /// Builds the queue.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an unusable collection name, a name given to a collection
    /// other than `jobs`, a zero lease, batch, `max_attempts` or poll interval, or a maximum
    /// poll interval below the poll interval.
    pub fn build(self) -> Result<JobQueue> {
        let [jobs] = self.config.names(["jobs"])?;
        // Claims live beside the jobs, whatever they are called.
        let locks = format!("{jobs}_locks");
        crate::validate::check_collection_name(&locks)?;
        self.settings.check()?;
        let jobs = self.config.database().collection(&jobs);
        let due = IndexModel::builder()
            .keys(doc! { "failed": 1, "not_before": 1, "_id": 1 })
            .options(IndexOptions::builder().name("due".to_owned()).build())
            .build();
        let backend = self
            .config
            .backend(&locks, self.settings.lease)
            .with_index(&jobs, due);
        Ok(JobQueue {
            locks: backend.lease_locks(self.settings.lease),
            backend,
            jobs,
            settings: self.settings,
            enqueued: Arc::new(tokio::sync::watch::channel(0).0),
        })
    }
}
