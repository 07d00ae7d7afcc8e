//! The queue ([`JobQueue`]): its collections, enqueuing, counting and cancelling jobs.

use std::sync::Arc;
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};
use mongodb::{Collection, Database};

use super::builder::QueueSettings;
use super::JobQueueBuilder;
use crate::backend::lease_lock::LeaseLocks;
use crate::backend::Backend;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::jobs::spans::Op;
use crate::sharding::{self, ShardKey};

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
    pub(super) backend: Backend,
    pub(super) jobs: Collection<Document>,
    /// Claims, taken on every server.
    pub(super) locks: LeaseLocks,
    pub(super) settings: QueueSettings,
    /// Bumped by every enqueue through this queue or a clone, to wake this process's workers.
    pub(super) enqueued: Arc<tokio::sync::watch::Sender<u64>>,
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
            settings: QueueSettings::default(),
        }
    }

    /// How long a claim lasts.
    pub fn lease(&self) -> Duration {
        self.settings.lease
    }

    /// The jobs collection's name, for errors that name a job's document.
    pub(crate) fn collection_name(&self) -> &str {
        self.jobs.name()
    }

    /// The largest payload a job may carry, encoded, in bytes: 16 MiB less 8 KiB, which a job's
    /// document keeps for its other fields (its kind, of up to [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES),
    /// its attempt count and times, and the last failure's text, kept to 4 KiB).
    pub const MAX_PAYLOAD_BYTES: usize = crate::validate::MAX_DOCUMENT_BYTES - 8 * 1024;

    /// Adds a job, due now (one `insert`).
    ///
    /// # Errors
    ///
    /// Before anything is written: [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank
    /// `kind`, [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"job kind"`) for one over
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), [`Invalid::TooLarge`](crate::error::Invalid::TooLarge)
    /// (`"job payload"`) for a payload over [`JobQueue::MAX_PAYLOAD_BYTES`].
    pub async fn enqueue(&self, kind: &str, payload: Document) -> Result<ObjectId> {
        Op::Enqueue(kind)
            .span()
            .run(async move {
                let id = ObjectId::new();
                self.enqueue_once(id, kind, payload).await?;
                Ok(id)
            })
            .await
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
        Op::EnqueueOnce(kind)
            .span()
            .run(async move {
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
            })
            .await
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
        self.backend
            .exists("find later job", &self.jobs, filter)
            .await
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
            .command("complete jobs", || self.jobs.delete_many(filter.clone()))
            .await
            .map(drop)
    }

    /// Deletes a job, whether waiting, running or failed (one `delete`); returns whether it was
    /// there. A run already under way finishes.
    ///
    /// Retried on transient failures: deleting by `_id` twice deletes once. When the first
    /// attempt's reply was lost, a retry finds the job gone and returns `false`.
    pub async fn cancel(&self, job: ObjectId) -> Result<bool> {
        Op::Cancel
            .span()
            .run(async move {
                let deleted = self
                    .backend
                    .command("cancel job", || self.jobs.delete_one(doc! { "_id": job }))
                    .await?;
                Ok(deleted.deleted_count > 0)
            })
            .await
    }

    /// Jobs waiting or running (not failed), one `count`.
    pub async fn pending(&self) -> Result<u64> {
        Op::Pending
            .span()
            .run(async move { Ok(self.jobs.count_documents(doc! { "failed": false }).await?) })
            .await
    }

    /// Jobs given up on after [`JobQueueBuilder::max_attempts`] runs, one `count`.
    pub async fn failed(&self) -> Result<u64> {
        Op::Failed
            .span()
            .run(async move { Ok(self.jobs.count_documents(doc! { "failed": true }).await?) })
            .await
    }

    /// Waits until no job is pending (failed jobs do not count), checking every 20 ms.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] if jobs are still pending after `timeout`.
    pub async fn wait_until_drained(&self, timeout: Duration) -> Result<()> {
        Op::WaitUntilDrained
            .span()
            .run(async move {
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
            })
            .await
    }

    /// Creates the indexes the queue needs (idempotent, safe on every start). The queue is
    /// correct without them, only slower.
    pub async fn create_indexes(&self) -> Result<()> {
        self.backend
            .create_indexes_in(Op::CreateIndexes.span())
            .await
    }

    /// Shards the queue's collections on [`JobQueue::shard_keys`] when connected to a `mongos`
    /// (or a front end that answers as one); see [`crate::sharding::shard_collections`].
    pub async fn shard_collections(&self) -> Result<()> {
        let keys = self.shard_keys();
        sharding::shard_collections_in(Op::ShardCollections.span(), self.backend.database(), &keys)
            .await
    }

    /// The shard key of each of the queue's collections.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::hashed_id(
                self.jobs.name(),
                "spreads enqueues over every shard; workers poll all shards, which suits a queue",
            ),
            ShardKey::ranged_id(
                self.locks.collection_name(),
                "claims are found by job id only",
            ),
        ]
    }
}
