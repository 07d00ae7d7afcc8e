//! Delivery to followers: a user posts, and background workers copy the post into every
//! active follower's inbox (seed 000's asynchronous fan-out on write).
//!
//! [`Delivery::post`] writes the author's own copies at once (the `outbox`, the author's record
//! of what they posted, and the author's inbox) and queues the fan-out as a durable job, then
//! returns. Workers ([`Delivery::start_worker`]) take the job, read one page of the author's
//! followers from the [`FollowGraph`] (any route, direct or through a group), skip dormant ones,
//! deliver to the rest through any [`InboxStore`](crate::InboxStore) strategy, and queue the
//! next page as a job of its own, so each job stays short.
//!
//! # Durable, exactly once
//!
//! Jobs live in MongoDB ([`crate::jobs::JobQueue`]): a worker that dies mid-job leaves its claim
//! to expire, and another worker runs the job again. Re-running is harmless:
//! [`InboxStore::deliver`](crate::InboxStore::deliver) never gives a recipient a second copy,
//! and the job for the next page is queued under an id derived from the message and the page's
//! cursor, so it is queued once however often its predecessor runs. Nothing is lost: a job
//! leaves the queue only after its page was delivered and its successor queued.
//!
//! # Order
//!
//! With [`FanOutOnWrite`](crate::FanOutOnWrite) and [`FanOutOnRead`](crate::FanOutOnRead)
//! inboxes read in send-time order, so posts appear in the order they were posted whatever
//! order their fan-outs ran in. [`BucketedFanOut`](crate::BucketedFanOut) inboxes keep arrival
//! order: when the fan-outs of two posts by one author overlap, a follower can receive them the
//! other way round.
//!
//! # Dormant users
//!
//! [`Delivery::touch`] records when a user was last seen (in `user_activity`); call it when
//! they sign in or read. Followers not seen within [`DeliveryBuilder::dormant_after`] (7 days
//! by default, as Mastodon does), or never seen, get no copies.
//!
//! # Collections
//!
//! | collection | documents | index | shard key |
//! |---|---|---|---|
//! | `outbox` | `{_id: message id, from, to: [], sent, message}` | `{from, sent, _id}` | `{from: 1, sent: 1}` |
//! | `user_activity` | `{_id: user, last_seen}` | `_id` | `{_id: "hashed"}` |
//! | `delivery_jobs` | the fan-out jobs | see [`crate::jobs`] | see [`crate::jobs`] |
//!
//! # Costs (commands)
//!
//! A post: 1 `find` (the author exists), 1 `insert` (the job), 1 `insert` (the outbox), and
//! the inbox strategy's delivery to the author. Each fan-out job for a page of up to
//! [`DeliveryBuilder::batch`] followers (default 500): the job queue's own (a `find`, a lock
//! `insert` and `delete`, a `delete`), 1 `find` of followers, 1 `find` of their activity, the
//! strategy's delivery, and 1 `insert` of the next job.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::{Collection, Database, IndexModel};

use crate::graph::{FollowGraph, GraphCursor, GraphQuery};
use crate::inbox::{check_collection_name, derived_id, DynInboxStore, Message, MessageId};
use crate::jobs::{Job, JobHandler, JobQueue, Worker};
use crate::sharding::ShardKey;
use crate::{Error, Payload, Result};

/// The job kind of a page of fan-out.
const FAN_OUT: &str = "fan_out";

/// Posts delivered to followers by background workers. See the [module docs](self).
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use mongo_social::delivery::Delivery;
/// use mongo_social::graph::FollowGraph;
/// use mongo_social::{FanOutOnWrite, PageRequest};
///
/// let graph = Arc::new(FollowGraph::new(&db));
/// let delivery: Delivery<String> =
///     Delivery::builder(&db, graph.clone(), Arc::new(FanOutOnWrite::new(&db))).build()?;
/// delivery.create_indexes().await?;
/// graph.add_user("ann").await?;
/// graph.add_user("bob").await?;
/// graph.follow("bob", "ann").await?;
/// delivery.touch("bob").await?;
///
/// let worker = delivery.start_worker();
/// delivery.post("ann", "Hello, followers".to_string()).await?;
/// delivery.wait_until_delivered(Duration::from_secs(30)).await?;
/// let page = delivery.inbox().inbox_page("bob", PageRequest::first(20)).await?;
/// assert_eq!(page.items[0].payload, "Hello, followers");
/// worker.stop().await;
/// # Ok(()) }
/// ```
pub struct Delivery<P: Payload> {
    inner: Arc<Inner<P>>,
}

impl<P: Payload> Clone for Delivery<P> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<P: Payload> fmt::Debug for Delivery<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

/// Everything a fan-out job needs; shared by the [`Delivery`] and its workers.
struct Inner<P: Payload> {
    graph: Arc<FollowGraph>,
    inbox: Arc<DynInboxStore<P>>,
    outbox: Collection<Document>,
    activity: Collection<Document>,
    jobs: JobQueue,
    batch: usize,
    dormant_after: Duration,
    payload: PhantomData<fn() -> P>,
}

impl<P: Payload> fmt::Debug for Inner<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("inbox", &self.inbox.strategy())
            .field("outbox", &self.outbox.name())
            .field("activity", &self.activity.name())
            .field("batch", &self.batch)
            .field("dormant_after", &self.dormant_after)
            .finish_non_exhaustive()
    }
}

/// Configures a [`Delivery`].
pub struct DeliveryBuilder<P: Payload> {
    database: Database,
    graph: Arc<FollowGraph>,
    inbox: Arc<DynInboxStore<P>>,
    outbox: String,
    activity: String,
    jobs: String,
    batch: usize,
    dormant_after: Duration,
    lease: Duration,
}

impl<P: Payload> fmt::Debug for DeliveryBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeliveryBuilder")
            .field("outbox", &self.outbox)
            .field("activity", &self.activity)
            .field("jobs", &self.jobs)
            .field("batch", &self.batch)
            .field("dormant_after", &self.dormant_after)
            .finish_non_exhaustive()
    }
}

impl<P: Payload> DeliveryBuilder<P> {
    /// Followers per fan-out job (default 500, at most [`GraphQuery::MAX_LIMIT`]).
    pub fn batch(mut self, followers: usize) -> Self {
        self.batch = followers;
        self
    }

    /// How long a follower may go unseen before they stop receiving copies (default 7 days).
    pub fn dormant_after(mut self, period: Duration) -> Self {
        self.dormant_after = period;
        self
    }

    /// How long a worker's claim on a fan-out job lasts (default 60 s): a job whose worker died
    /// runs again after this.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The collections' names (defaults `outbox`, `user_activity`, `delivery_jobs`).
    pub fn collections(mut self, outbox: &str, activity: &str, jobs: &str) -> Self {
        self.outbox = outbox.to_owned();
        self.activity = activity.to_owned();
        self.jobs = jobs.to_owned();
        self
    }

    /// The delivery.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a batch of 0 or above [`GraphQuery::MAX_LIMIT`], or an
    /// unusable collection name.
    pub fn build(self) -> Result<Delivery<P>> {
        check_collection_name(&self.outbox)?;
        check_collection_name(&self.activity)?;
        if self.batch == 0 || self.batch > GraphQuery::MAX_LIMIT {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "a fan-out batch of {} followers is outside 1..={}",
                    self.batch,
                    GraphQuery::MAX_LIMIT
                ),
            });
        }
        let jobs = JobQueue::builder(&self.database)
            .collection(self.jobs)
            .lease(self.lease)
            .build()?;
        Ok(Delivery {
            inner: Arc::new(Inner {
                graph: self.graph,
                inbox: self.inbox,
                outbox: self.database.collection(&self.outbox),
                activity: self.database.collection(&self.activity),
                jobs,
                batch: self.batch,
                dormant_after: self.dormant_after,
                payload: PhantomData,
            }),
        })
    }
}

impl<P: Payload> Delivery<P> {
    /// The default number of followers per fan-out job.
    pub const DEFAULT_BATCH: usize = 500;
    /// The default period after which an unseen user is dormant: 7 days.
    pub const DEFAULT_DORMANT_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

    /// A builder delivering through `inbox` to the followers `graph` knows.
    pub fn builder(
        database: &Database,
        graph: Arc<FollowGraph>,
        inbox: Arc<DynInboxStore<P>>,
    ) -> DeliveryBuilder<P> {
        DeliveryBuilder {
            database: database.clone(),
            graph,
            inbox,
            outbox: "outbox".to_owned(),
            activity: "user_activity".to_owned(),
            jobs: "delivery_jobs".to_owned(),
            batch: Self::DEFAULT_BATCH,
            dormant_after: Self::DEFAULT_DORMANT_AFTER,
            lease: Duration::from_secs(60),
        }
    }

    /// The inbox store copies are delivered to.
    pub fn inbox(&self) -> &Arc<DynInboxStore<P>> {
        &self.inner.inbox
    }

    /// The job queue of fan-out jobs.
    pub fn jobs(&self) -> &JobQueue {
        &self.inner.jobs
    }

    /// Creates the indexes of the outbox, the jobs and the inbox store (idempotent).
    pub async fn create_indexes(&self) -> Result<()> {
        let index = IndexModel::builder()
            .keys(doc! { "from": 1, "sent": 1, "_id": 1 })
            .build();
        self.inner.outbox.create_index(index).await?;
        self.inner.jobs.create_indexes().await?;
        self.inner.inbox.create_indexes().await
    }

    /// The shard key each of the delivery's own collections should have.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        let mut keys = vec![
            ShardKey::new(
                self.inner.outbox.name(),
                doc! { "from": 1, "sent": 1 },
                "an author's posts, read newest first to rebuild or backfill inboxes, stay on \
                 one shard; writes spread by author",
            ),
            ShardKey::new(
                self.inner.activity.name(),
                doc! { "_id": "hashed" },
                "activity is read and written one user at a time",
            ),
        ];
        keys.extend(self.inner.jobs.shard_keys());
        keys
    }

    /// Posts `payload` from `author` to their followers: the author's copies are written now,
    /// the followers' by the workers. Returns the message as posted (`to` is empty: it goes to
    /// whoever follows the author when its fan-out runs).
    ///
    /// # Errors
    ///
    /// [`Error::EmptyUserId`] or [`Error::NotFound`] (an author the graph does not know) before
    /// anything is written.
    pub async fn post(&self, author: &str, payload: P) -> Result<Message<P>> {
        if author.is_empty() {
            return Err(Error::EmptyUserId { what: "sender" });
        }
        self.inner.graph.stats(author).await?;
        let message = Message {
            id: MessageId::new(),
            from: author.to_owned(),
            to: Vec::new(),
            sent: bson::DateTime::now(),
            payload,
        };
        let document = bson::to_document(&message)?;
        // The job first: if the outbox write then fails, the job is withdrawn; if the process
        // dies in between, the followers still get the post.
        let job = self
            .inner
            .jobs
            .enqueue(FAN_OUT, doc! { "message": document.clone() })
            .await?;
        let mut outbox = document;
        outbox.insert("_id", message.id.0);
        if let Err(error) = self.inner.outbox.insert_one(outbox).await {
            self.inner.jobs.cancel(job).await?;
            return Err(error.into());
        }
        self.inner
            .inbox
            .deliver(&message, &[author.to_owned()])
            .await?;
        Ok(message)
    }

    /// Records that `user` was seen now (they signed in, or read their inbox).
    pub async fn touch(&self, user: &str) -> Result<()> {
        if user.is_empty() {
            return Err(Error::EmptyUserId { what: "user" });
        }
        self.inner
            .activity
            .update_one(
                doc! { "_id": user },
                doc! { "$set": { "last_seen": bson::DateTime::now() } },
            )
            .upsert(true)
            .await?;
        Ok(())
    }

    /// Starts a worker that runs fan-out jobs until stopped.
    pub fn start_worker(&self) -> Worker {
        self.inner
            .jobs
            .start_worker(Arc::new(FanOut(self.inner.clone())))
    }

    /// Runs the fan-out jobs that are due now, in this task; returns how many ran.
    pub async fn run_pending(&self) -> Result<usize> {
        let handler = FanOut(self.inner.clone());
        let mut ran = 0;
        loop {
            let now = self.inner.jobs.run_once(&handler).await?;
            if now == 0 {
                return Ok(ran);
            }
            ran += now;
        }
    }

    /// Waits until no fan-out job is left (every post delivered), for tests and graceful
    /// shutdown.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] after `timeout`.
    pub async fn wait_until_delivered(&self, timeout: Duration) -> Result<()> {
        self.inner.jobs.wait_until_drained(timeout).await
    }
}

impl<P: Payload> Inner<P> {
    /// The ones of `users` seen within the dormancy period.
    async fn active(&self, users: &[String]) -> Result<Vec<String>> {
        let since = bson::DateTime::from_millis(
            bson::DateTime::now().timestamp_millis() - self.dormant_after.as_millis() as i64,
        );
        let seen: Vec<Document> = self
            .activity
            .find(doc! { "_id": { "$in": users }, "last_seen": { "$gte": since } })
            .projection(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        let seen: std::collections::HashSet<&str> =
            seen.iter().filter_map(|d| d.get_str("_id").ok()).collect();
        Ok(users
            .iter()
            .filter(|user| seen.contains(user.as_str()))
            .cloned()
            .collect())
    }
}

/// The fan-out job handler.
struct FanOut<P: Payload>(Arc<Inner<P>>);

impl<P: Payload> fmt::Debug for FanOut<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FanOut").field(&self.0).finish()
    }
}

#[async_trait]
impl<P: Payload> JobHandler for FanOut<P> {
    async fn handle(&self, job: &Job) -> Result<()> {
        let inner = &self.0;
        let document = job
            .payload
            .get_document("message")
            .map_err(|_| Error::Decode(serde::de::Error::custom("fan-out job without message")))?;
        let message: Message<P> = bson::from_document(document.clone())?;
        let after = match job.payload.get_str("after") {
            Ok(cursor) => Some(cursor.parse::<GraphCursor>()?),
            Err(_) => None,
        };
        let query = GraphQuery {
            limit: inner.batch,
            after,
        };
        let page = inner.graph.followers(&message.from, &query).await?;
        let followers: Vec<String> = page.items.into_iter().map(|s| s.owner).collect();
        let active = inner.active(&followers).await?;
        if !active.is_empty() {
            inner.inbox.deliver(&message, &active).await?;
        }
        if let Some(next) = page.next {
            // Queued under an id derived from the message and the cursor: once, however often
            // this job runs.
            inner
                .jobs
                .enqueue_once(
                    derived_id(message.id, next.as_str()),
                    FAN_OUT,
                    doc! { "message": document.clone(), "after": next.as_str() },
                )
                .await?;
        }
        Ok(())
    }
}
