//! A durable background job queue in a MongoDB collection, with leased claims.
//!
//! A job is one document `{_id, kind, payload, attempts, not_before, failed}`. Workers poll for
//! jobs that are due, claim them with a leased lock document (an `insert` on a unique `_id`,
//! atomic on every server, FerretDB 1.x included, whose `findAndModify` is not), run the
//! application's [`JobHandler`], then delete the job and the lock. A worker that dies keeps its
//! claim only until the lease runs out; the next worker that finds the job breaks the expired lock
//! and runs the job again.
//!
//! Delivery is therefore *at least once*: a job whose handler outlives the lease, or whose worker
//! dies after the handler's writes but before the job is deleted, runs twice. Handlers must be
//! idempotent (the feed's handlers are: adding a post to a feed that already holds it changes
//! nothing). Within a lease, a job runs on one worker at a time.
//!
//! A claim covers a batch of jobs run one after the other, so a worker keeps to its lease: it
//! notes when it claimed the batch and starts no further job of it once the lease less a margin
//! of a quarter of the lease has passed (the first job of a batch always runs); the jobs not
//! started are released at once, for the next claim. A handler whose work can be long reads
//! [`Job::deadline`], stops by then and leaves the rest to a job it enqueues (as the feed's
//! propagation jobs do). A handler that runs past its lease can still run concurrently with
//! another worker that broke its expired claim.
//!
//! An idle worker looks for due jobs with one `find`, sleeping between looks for the poll
//! interval (50 ms by default), doubled after each look that finds nothing up to the maximum
//! poll interval (2 s by default); a job found, or enqueued through the queue in this process,
//! brings it back to the poll interval. A worker runs while its [`Worker`] handle lives.
//!
//! Commands per job, with a batch of one: `find` (due jobs), `insert` (lock), `find` (re-check
//! the job still exists), the handler's own, `delete` (job), `delete` (lock). A batch of `n` jobs
//! costs the same first three commands once. A worker looks at the due jobs of four batches and
//! starts claiming at a batch of its own, so concurrent workers rarely contend for the same jobs;
//! each batch found taken costs one more `insert`.
//!
//! # Transient failures
//!
//! Every command of the queue is retried on transient failures under its [`RetryPolicy`](crate::RetryPolicy)
//! ([`JobQueueBuilder::retry_policy`]), and none applies twice: an enqueue carries its job's
//! `_id` (a retry that meets the stored job counts it as its own insert), a claim is a lock
//! insert whose retry recognises its own token, completing a job and releasing claims are
//! deletes by `_id` (and token), and recording a failure `$set`s absolute values (the attempt
//! count the run started with, plus one). A handler that fails during an outage has its failure
//! recorded and its claim released through those retries, so its job runs again
//! [`JobQueueBuilder::retry_delay`] after the server is back, not after the lease. A worker
//! whose rounds keep failing (past the retry budget) backs off as the policy does, from its
//! initial backoff doubling to its longest, and keeps going.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};
use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::config::{store_builder_methods, StoreConfig};
use crate::error::{Error, Result};
use crate::lease_lock::LeaseLocks;
use crate::retry::jittered;
use crate::sharding::ShardKey;

/// A worker looks at this many batches of due jobs and claims the first free one.
const CANDIDATE_BATCHES: usize = 4;

/// One job as a handler receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The job's id, assigned when it was enqueued.
    #[serde(rename = "_id")]
    pub id: ObjectId,
    /// What to do, for the handler to dispatch on (such as `"post_created"`).
    pub kind: String,
    /// The job's arguments.
    pub payload: Document,
    /// How many earlier runs failed.
    pub attempts: u32,
    /// When the claim stops covering new work; set by the queue when it runs the job.
    #[serde(skip)]
    deadline: Option<Instant>,
}

impl Job {
    /// An [`Error::Handler`] for this job: how an application's [`JobHandler`] reports a failure
    /// of its own. The queue records the error's text on the job and runs it again later.
    ///
    /// ```
    /// use mongo_social::jobs::{Job, JobHandler};
    ///
    /// #[derive(Debug)]
    /// struct Greet;
    ///
    /// #[async_trait::async_trait]
    /// impl JobHandler for Greet {
    ///     async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
    ///         let who = job.payload.get_str("who").map_err(|error| job.error(error))?;
    ///         println!("hello, {who}");
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn error(&self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::Handler {
            kind: self.kind.clone(),
            source: source.into(),
        }
    }

    /// When the worker's claim on this job stops covering new work: the claim time plus the
    /// lease less a quarter of the lease (`None` for a job that no queue is running). A handler
    /// whose work can outlast it should stop by then, record its progress and enqueue a job for
    /// the rest; work started after it may overlap a second run of the job on another worker.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

/// The application's code for running jobs.
///
/// Must be idempotent: a job can run more than once (see the [module docs](self)).
#[async_trait]
pub trait JobHandler: Send + Sync + fmt::Debug + 'static {
    /// Runs one job. An error leaves the job in the queue, retried after a back-off, and marked
    /// failed after [`JobQueueBuilder::max_attempts`] runs; its text is kept on the job as
    /// `last_error`. A failure of the application's own is an [`Error::Handler`], made with
    /// [`Job::error`]; errors of this crate's stores pass through `?` as they are.
    async fn handle(&self, job: &Job) -> Result<()>;
}

/// A durable job queue; cheap to clone (clones share the collections).
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::{Arc, Mutex, PoisonError};
/// use std::time::Duration;
/// use mongo_social::jobs::{Job, JobHandler, JobQueue};
///
/// #[derive(Debug)]
/// struct Print;
///
/// #[async_trait::async_trait]
/// impl JobHandler for Print {
///     async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
///         println!("{}: {}", job.kind, job.payload);
///         Ok(())
///     }
/// }
///
/// let queue = JobQueue::new(&db);
/// queue.create_indexes().await?;
/// queue.enqueue("greet", bson::doc! { "who": "bob" }).await?;
/// let worker = queue.start_worker(Arc::new(Print));
/// queue.wait_until_drained(Duration::from_secs(10)).await?;
/// worker.stop().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct JobQueue {
    backend: Backend,
    jobs: Collection<Document>,
    /// Claims, taken on every server.
    locks: LeaseLocks,
    lease: Duration,
    max_attempts: u32,
    retry_delay: Duration,
    batch: usize,
    poll_interval: Duration,
    max_poll_interval: Duration,
    /// Bumped by every enqueue through this queue or a clone, to wake this process's workers.
    enqueued: Arc<tokio::sync::watch::Sender<u64>>,
}

/// Configures a [`JobQueue`].
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct JobQueueBuilder {
    config: StoreConfig,
    lease: Duration,
    max_attempts: u32,
    retry_delay: Duration,
    batch: usize,
    poll_interval: Duration,
    max_poll_interval: Duration,
}

impl JobQueueBuilder {
    store_builder_methods!();

    /// How long a claim lasts (default 60 s): a job whose worker died runs again after this. A
    /// claim covers a batch run one job after the other; once three quarters of the lease have
    /// passed, the worker starts no further job of the batch and releases the rest. Keep it well
    /// above one job's longest run, or make long handlers follow [`Job::deadline`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Runs after which a failing job is marked failed and no longer claimed (default 10).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Delay before the first retry of a failed job, doubled for each later one up to five
    /// minutes (default 1 s).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// Jobs a worker claims at once (default 20).
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch;
        self
    }

    /// How long an idle worker first sleeps before looking for jobs again (default 50 ms). Each
    /// further look that finds nothing doubles the sleep, up to
    /// [`JobQueueBuilder::max_poll_interval`]; finding a job, or a job enqueued through this
    /// queue (or a clone of it, in this process), brings it back to this.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The longest an idle worker sleeps between looks for jobs (default 2 s): the most a job
    /// enqueued by another process waits for an idle worker.
    pub fn max_poll_interval(mut self, interval: Duration) -> Self {
        self.max_poll_interval = interval;
        self
    }

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
        let jobs = self.config.database().collection(&jobs);
        let due = IndexModel::builder()
            .keys(doc! { "failed": 1, "not_before": 1, "_id": 1 })
            .options(IndexOptions::builder().name("due".to_owned()).build())
            .build();
        let backend = self
            .config
            .backend(&locks, self.lease)
            .with_index(&jobs, due);
        Ok(JobQueue {
            locks: backend.lease_locks(self.lease),
            backend,
            jobs,
            lease: self.lease,
            max_attempts: self.max_attempts,
            retry_delay: self.retry_delay,
            batch: self.batch,
            poll_interval: self.poll_interval,
            max_poll_interval: self.max_poll_interval,
            enqueued: Arc::new(tokio::sync::watch::channel(0).0),
        })
    }
}

impl JobQueue {
    /// A queue with default settings in `database`.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default job queue settings are valid")
    }

    /// A queue for a store configured by `store` (its database, retry policy and capabilities),
    /// keeping its jobs in the collection `jobs` (a name the store resolved already).
    pub(crate) fn builder_for(store: &StoreConfig, jobs: &str) -> JobQueueBuilder {
        let mut builder = Self::builder(store.database())
            .collection("jobs", jobs)
            .retry_policy(store.retry_policy());
        if let Some(capabilities) = store.given_capabilities() {
            builder = builder.capabilities(capabilities);
        }
        builder
    }

    /// Starts configuring a queue in `database`.
    pub fn builder(database: &Database) -> JobQueueBuilder {
        JobQueueBuilder {
            config: StoreConfig::new(database),
            lease: Duration::from_secs(60),
            max_attempts: 10,
            retry_delay: Duration::from_secs(1),
            batch: 20,
            poll_interval: Duration::from_millis(50),
            max_poll_interval: Duration::from_secs(2),
        }
    }

    /// How long a claim lasts.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The jobs collection's name, for errors that name a job's document.
    pub(crate) fn collection_name(&self) -> &str {
        self.jobs.name()
    }

    /// The largest payload a job may carry, encoded, in bytes: 16 MiB less 8 KiB, which a job's
    /// document keeps for its other fields (its kind, of up to [`MAX_ID_BYTES`](crate::MAX_ID_BYTES),
    /// its attempt count and times, and the last failure's text, kept to 4 KiB).
    pub const MAX_PAYLOAD_BYTES: usize = crate::validate::MAX_DOCUMENT_BYTES - 8 * 1024;

    /// Adds a job, due now (one `insert`).
    ///
    /// # Errors
    ///
    /// Before anything is written: [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank
    /// `kind`, [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"job kind"`) for one over
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES), [`Invalid::TooLarge`](crate::error::Invalid::TooLarge)
    /// (`"job payload"`) for a payload over [`JobQueue::MAX_PAYLOAD_BYTES`].
    pub async fn enqueue(&self, kind: &str, payload: Document) -> Result<ObjectId> {
        let id = ObjectId::new();
        self.enqueue_once(id, kind, payload).await?;
        Ok(id)
    }

    /// Adds a job with the id `id` unless a job with that id is queued already: returns whether
    /// it was added. A handler that queues a follow-up job under an id derived from its own
    /// work (say, the next batch of a fan-out) queues it once however often it is re-run. (A
    /// follow-up that already ran and left the queue is queued again; its handler must be
    /// idempotent, as every handler must.)
    ///
    /// # Errors
    ///
    /// As [`JobQueue::enqueue`].
    pub async fn enqueue_once(&self, id: ObjectId, kind: &str, payload: Document) -> Result<bool> {
        crate::validate::id("job kind", kind)?;
        crate::validate::encoded_size("job payload", &payload, Self::MAX_PAYLOAD_BYTES)?;
        let job = doc! {
            "_id": id,
            "kind": kind,
            "payload": payload,
            "attempts": 0,
            "not_before": bson::DateTime::now(),
            "failed": false,
        };
        let added = self.backend.insert_once(&self.jobs, job).await?;
        if added {
            self.enqueued
                .send_modify(|count| *count = count.wrapping_add(1));
        }
        Ok(added)
    }

    /// Whether a job of `kind` whose `field` is `value` was queued after `id` and is not
    /// failed (one `find`): a later job that supersedes `id`'s.
    pub(crate) async fn has_later(
        &self,
        kind: &str,
        field: &str,
        value: &str,
        id: ObjectId,
    ) -> Result<bool> {
        let filter = doc! { "kind": kind, field: value, "_id": { "$gt": id }, "failed": false };
        let later = self
            .backend
            .retry("find later job", || async {
                Ok(self
                    .jobs
                    .find_one(filter.clone())
                    .projection(doc! { "_id": 1 })
                    .await?)
            })
            .await?;
        Ok(later.is_some())
    }

    /// Deletes the jobs of `kind` whose `field` is `value`, queued no later than `id` (one
    /// `delete`): a job done some other way, with those it superseded.
    pub(crate) async fn complete_up_to(
        &self,
        kind: &str,
        field: &str,
        value: &str,
        id: ObjectId,
    ) -> Result<()> {
        let filter = doc! { "kind": kind, field: value, "_id": { "$lte": id } };
        self.backend
            .retry("complete jobs", || async {
                self.jobs.delete_many(filter.clone()).await?;
                Ok(())
            })
            .await
    }

    /// Runs due jobs with `handler` in this task, batch after batch, until none is due; returns
    /// how many ran. For tests, scripts and applications without a worker. The stores built on
    /// the queue ([`crate::delivery::Delivery`], [`crate::FeedStore`]) have a `run_pending` of
    /// their own that passes their handler.
    pub async fn run_pending(&self, handler: &dyn JobHandler) -> Result<usize> {
        let mut total = 0;
        loop {
            let ran = self.run_once(handler).await?;
            if ran == 0 {
                return Ok(total);
            }
            total += ran;
        }
    }

    /// Claims up to one batch of due jobs and runs them with `handler`, one after the other,
    /// starting no further job once three quarters of the lease have passed since the claim (the
    /// jobs not started are released for a later claim). Returns how many jobs were claimed (0
    /// when none was due or all were claimed elsewhere).
    ///
    /// A handler error is recorded on its job (which is retried later), not returned.
    ///
    /// # Errors
    ///
    /// Server errors while claiming, re-reading or completing jobs; the claims are then released
    /// (or, if releasing fails too, left to their lease) and the first error is returned.
    pub async fn run_once(&self, handler: &dyn JobHandler) -> Result<usize> {
        let due = self.due_jobs().await?;
        if due.is_empty() {
            return Ok(0);
        }
        let keys: Vec<String> = due.iter().map(|id| id.to_hex()).collect();
        let token = ObjectId::new();
        // Workers start at different batches of the due jobs, so they do not all contend for
        // the oldest one.
        let batches: Vec<&[String]> = keys.chunks(self.batch).collect();
        let first = usize::from(token.bytes()[11]) % batches.len();
        let mut taken = Vec::new();
        let mut claimed_at = Instant::now();
        for offset in 0..batches.len() {
            claimed_at = Instant::now();
            taken = self
                .locks
                .try_acquire(batches[(first + offset) % batches.len()], token)
                .await?;
            if !taken.is_empty() {
                break;
            }
        }
        if taken.is_empty() {
            // Everything is claimed: by live workers, or by dead ones whose lease ran out.
            self.locks.break_expired(&keys).await?;
            claimed_at = Instant::now();
            taken = self.locks.try_acquire(batches[first], token).await?;
            if taken.is_empty() {
                return Ok(0);
            }
        }
        let deadline = claimed_at + (self.lease - self.lease / 4);
        let claimed = taken.len();
        let outcome = match self.claimed_jobs(&taken).await {
            Ok(jobs) => self.run_claimed(handler, jobs, deadline).await,
            Err(error) => Err(error),
        };
        // The claims are given back whatever happened (through an outage, in the background);
        // a lock left behind only delays a retry. The first error is the one reported.
        let released = self.locks.give_back(&taken, token).await;
        outcome?;
        released?;
        Ok(claimed)
    }

    /// The claimed jobs that are still due: a job completed (or failed and postponed) by another
    /// worker between our `find` and our claim is gone (or not due) now.
    async fn claimed_jobs(&self, taken: &[String]) -> Result<Vec<Job>> {
        let ids: Vec<ObjectId> = taken
            .iter()
            .filter_map(|key| ObjectId::parse_str(key).ok())
            .collect();
        let now = bson::DateTime::now();
        let found: Vec<Document> = self
            .backend
            .retry("find claimed jobs", || async {
                Ok(self
                    .jobs
                    .find(doc! {
                        "_id": { "$in": &ids },
                        "failed": false,
                        "not_before": { "$lte": now },
                    })
                    .sort(doc! { "_id": 1 })
                    .await?
                    .try_collect()
                    .await?)
            })
            .await?;
        found
            .into_iter()
            .map(|job| crate::bson_ext::decode(self.jobs.name(), job))
            .collect()
    }

    /// Runs the jobs in order; from the second on, only while `deadline` has not passed.
    async fn run_claimed(
        &self,
        handler: &dyn JobHandler,
        jobs: Vec<Job>,
        deadline: Instant,
    ) -> Result<()> {
        for (index, mut job) in jobs.into_iter().enumerate() {
            if index > 0 && Instant::now() >= deadline {
                // The rest is released with the claim and run by a later one.
                break;
            }
            job.deadline = Some(deadline);
            match handler.handle(&job).await {
                Ok(()) => {
                    // A delete by `_id`: a retry finds nothing more to delete.
                    // Background work: an outage is waited out within the budget.
                    self.backend
                        .retry_through_outages("complete job", || async {
                            self.jobs.delete_one(doc! { "_id": job.id }).await?;
                            Ok(())
                        })
                        .await?;
                }
                Err(error) => self.record_failure(&job, &error).await?,
            }
        }
        Ok(())
    }

    async fn record_failure(&self, job: &Job, error: &Error) -> Result<()> {
        let attempts = job.attempts + 1;
        // The first retry waits `retry_delay`, each later one twice the one before.
        let delay = self
            .retry_delay
            .saturating_mul(1 << (attempts - 1).min(16))
            .min(Duration::from_secs(300));
        let not_before = bson::DateTime::from_millis(
            bson::DateTime::now().timestamp_millis() + delay.as_millis() as i64,
        );
        let update = doc! { "$set": {
            "attempts": attempts,
            "not_before": not_before,
            "failed": attempts >= self.max_attempts,
            "last_error": failure_text(error),
        } };
        // Absolute values, not an `$inc`: a retry sets the same ones again.
        self.backend
            .retry_through_outages("record job failure", || async {
                self.jobs
                    .update_one(doc! { "_id": job.id }, update.clone())
                    .await?;
                Ok(())
            })
            .await
    }

    async fn due_jobs(&self) -> Result<Vec<ObjectId>> {
        let now = bson::DateTime::now();
        let due: Vec<Document> = self
            .backend
            .retry("find due jobs", || async {
                Ok(self
                    .jobs
                    .find(doc! { "failed": false, "not_before": { "$lte": now } })
                    .sort(doc! { "not_before": 1, "_id": 1 })
                    .projection(doc! { "_id": 1 })
                    .limit((self.batch * CANDIDATE_BATCHES) as i64)
                    .await?
                    .try_collect()
                    .await?)
            })
            .await?;
        Ok(due
            .iter()
            .filter_map(|job| job.get_object_id("_id").ok())
            .collect())
    }

    /// Deletes a job, whether waiting, running or failed (one `delete`); returns whether it was
    /// there. A run already under way finishes.
    ///
    /// Retried on transient failures: deleting by `_id` twice deletes once. When the first
    /// attempt's reply was lost, a retry finds the job gone and returns `false`.
    pub async fn cancel(&self, job: ObjectId) -> Result<bool> {
        let deleted = self
            .backend
            .retry("cancel job", || async {
                Ok(self.jobs.delete_one(doc! { "_id": job }).await?)
            })
            .await?;
        Ok(deleted.deleted_count > 0)
    }

    /// Jobs waiting or running (not failed), one `count`.
    pub async fn pending(&self) -> Result<u64> {
        Ok(self.jobs.count_documents(doc! { "failed": false }).await?)
    }

    /// Jobs given up on after [`JobQueueBuilder::max_attempts`] runs, one `count`.
    pub async fn failed(&self) -> Result<u64> {
        Ok(self.jobs.count_documents(doc! { "failed": true }).await?)
    }

    /// Waits until no job is pending (failed jobs do not count), checking every 20 ms.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] if jobs are still pending after `timeout`.
    pub async fn wait_until_drained(&self, timeout: Duration) -> Result<()> {
        let started = tokio::time::Instant::now();
        loop {
            if self.pending().await? == 0 {
                return Ok(());
            }
            if started.elapsed() >= timeout {
                return Err(Error::Timeout {
                    what: "draining the job queue",
                    waited: timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts a worker on the current tokio runtime: it runs [`JobQueue::run_once`] in a loop
    /// while it finds jobs. When none is due it sleeps, first for the poll interval, then twice
    /// as long after each look that finds nothing, up to the maximum poll interval (by default
    /// 50 ms doubling to 2 s: about one `find` every 2 s once idle); a job it finds, or one
    /// enqueued through this queue or a clone of it, brings the sleep back to the poll interval,
    /// and such an enqueue wakes it at once. A round that fails (its commands' transient
    /// failures outlasted the retry budget, or a permanent failure) is followed by a sleep of
    /// the retry policy's backoff for that many failures in a row (its longest backoff when the
    /// database is unreachable), at least the poll interval: a worker rides out an outage at a
    /// bounded rate of commands and resumes when the server answers.
    ///
    /// The worker runs as long as its [`Worker`] handle lives: dropping the handle stops it
    /// after the batch it is running, like [`Worker::stop`] without the wait.
    #[must_use = "dropping the Worker stops it; keep the handle for as long as it should run"]
    pub fn start_worker(&self, handler: Arc<dyn JobHandler>) -> Worker {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let mut enqueued = self.enqueued.subscribe();
        let queue = self.clone();
        let state = Arc::new(WorkerState::default());
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut idle_sleep = queue.poll_interval;
            let mut failures_in_a_row = 0;
            // Stopped by `stop`, or by the handle being dropped (which closes the channel).
            while stopped.has_changed().is_ok() && !*stopped.borrow() {
                enqueued.borrow_and_update();
                let pause = match queue.run_once(&*handler).await {
                    Ok(0) => {
                        failures_in_a_row = 0;
                        let pause = idle_sleep;
                        idle_sleep = (idle_sleep * 2).min(queue.max_poll_interval);
                        pause
                    }
                    Ok(_) => {
                        failures_in_a_row = 0;
                        idle_sleep = queue.poll_interval;
                        continue;
                    }
                    Err(error) => {
                        *shared
                            .last_error
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = Some(error.to_string());
                        shared.failed_rounds.fetch_add(1, Ordering::Relaxed);
                        failures_in_a_row += 1;
                        let policy = queue.backend.retry_policy();
                        // An unreachable database will not be back in milliseconds: wait the
                        // longest backoff before looking again.
                        let backoff = if error.is_unreachable() {
                            policy.backoff(u32::MAX)
                        } else {
                            policy.backoff(failures_in_a_row)
                        };
                        jittered(backoff).max(queue.poll_interval)
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = enqueued.changed() => idle_sleep = queue.poll_interval,
                    _ = stopped.changed() => {}
                }
            }
        });
        Worker { stop, task, state }
    }

    /// Creates the indexes the queue needs (idempotent, safe on every start). The queue is
    /// correct without them, only slower.
    pub async fn create_indexes(&self) -> Result<()> {
        self.backend.create_indexes().await
    }

    /// The shard key of each of the queue's collections.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::new(
                self.jobs.name(),
                doc! { "_id": "hashed" },
                "spreads enqueues over every shard; workers poll all shards, which suits a queue",
            ),
            ShardKey::new(
                self.locks.collection_name(),
                doc! { "_id": 1 },
                "claims are found by job id only",
            ),
        ]
    }
}

/// A running worker; see [`JobQueue::start_worker`]. Dropping it stops the worker after the
/// batch it is running; [`Worker::stop`] does the same and waits for it.
#[derive(Debug)]
#[must_use = "dropping the Worker stops it; keep the handle for as long as it should run"]
pub struct Worker {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    state: Arc<WorkerState>,
}

/// What a worker's task reports to its [`Worker`].
#[derive(Debug, Default)]
struct WorkerState {
    last_error: Mutex<Option<String>>,
    failed_rounds: AtomicU64,
}

impl Worker {
    /// Asks the worker to stop after the batch it is running, and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }

    /// Stops the worker at once, even in the middle of a job, as if its process died: its claims
    /// stay until their lease runs out, then another worker runs those jobs.
    pub fn abort(self) {
        self.task.abort();
    }

    /// The last server error the worker met while claiming or completing jobs (it keeps going,
    /// retrying after its poll interval, backing off as when idle). Handler errors are recorded on their jobs instead.
    pub fn last_error(&self) -> Option<String> {
        self.state
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many of the worker's rounds ([`JobQueue::run_once`]) have failed since it started:
    /// each is followed by a backoff (see [`JobQueue::start_worker`]).
    pub fn failed_rounds(&self) -> u64 {
        self.state.failed_rounds.load(Ordering::Relaxed)
    }

    /// Whether the worker's task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// The most of a failure's text a job keeps as its `last_error`, in bytes: with the job's other
/// fields, within the room [`JobQueue::MAX_PAYLOAD_BYTES`] leaves in its document.
const MAX_ERROR_BYTES: usize = 4 * 1024;

/// The text a job keeps of `error`: its message, cut to [`MAX_ERROR_BYTES`] (at a character
/// boundary, marked with an ellipsis), so recording a failure never makes the job's document
/// too large to store.
fn failure_text(error: &Error) -> String {
    let mut text = error.to_string();
    if text.len() > MAX_ERROR_BYTES {
        let ellipsis = "…";
        let mut end = MAX_ERROR_BYTES - ellipsis.len();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(ellipsis);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_failure_is_cut_to_fit_the_job() {
        let job: Job = bson::from_document(doc! {
            "_id": ObjectId::new(), "kind": "k", "payload": {}, "attempts": 0,
        })
        .unwrap();
        let short = job.error("no such template");
        assert_eq!(failure_text(&short), short.to_string());
        let long = Error::InvalidConfig {
            reason: "é".repeat(MAX_ERROR_BYTES),
        };
        let text = failure_text(&long);
        assert!(
            text.len() <= MAX_ERROR_BYTES && text.ends_with('…'),
            "{}",
            text.len()
        );
        assert!(long.to_string().starts_with(text.trim_end_matches('…')));
    }
}
