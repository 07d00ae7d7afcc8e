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
//! other way round, and a copy's `sent` is when it reached that inbox (a post's own time, raised
//! where a later one arrived first; see [`Message::sent`](crate::Message::sent)).
//!
//! # Mute and block
//!
//! Every copy goes through [`InboxStore::deliver`](crate::InboxStore::deliver), which skips
//! followers who block the author and delivers hidden to those who mute them (see
//! [`crate::inbox::InboxLifecycle`]): fan-out honours both. A celebrity's posts, never copied,
//! are merged into [`Delivery::timeline`] at read time without the celebrities the owner mutes
//! or blocks (one more `find`, of the owner's lists).
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
//! the inbox strategy's delivery to the author (with fan out on write: 1 `find` of the author's
//! mute and block lists, 1 `insert`). Each fan-out job for a page of up to
//! [`DeliveryBuilder::batch`] followers (default 500): the job queue's own 5 (see
//! [`crate::jobs`]), 1 `find` of followers, 1 `find` of their activity, the
//! strategy's delivery, and 1 `insert` of the next job.

mod timeline;
mod watch;
mod worker;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};
use mongodb::{Collection, Database, IndexModel};

use crate::backend::update_batch::is_duplicate_key;
use crate::backend::Backend;
use crate::bson_ext::derived_id;
use crate::config::{store_builder_methods, StoreConfig};
use crate::error::{Error, Result};
use crate::graph::FollowGraph;
use crate::inbox::{DynInboxStore, Message, MessageId, Strategy};
use crate::jobs::{JobQueue, Worker};
use crate::observe::spans::Op;
use crate::page::PageRequest;
use crate::payload::Payload;
use crate::phantom_impls::{clone_fields, debug_fields};
use crate::setters::builder_setters;
use crate::sharding::ShardKey;

/// The delivery's collections, by default name (its job queue's claims go to
/// `delivery_jobs_locks`).
pub const COLLECTIONS: [&str; 4] = ["outbox", "user_activity", "celebrities", "delivery_jobs"];
/// The job kind of a page of fan-out.
const FAN_OUT: &str = "fan_out";
/// The job kind of a returning user's inbox rebuild.
const REBUILD: &str = "rebuild";
/// Bytes a fan-out job's payload takes beyond its message: the field names and the cursor of
/// the followers' page it reached (which holds a user id of up to
/// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES)).
const FAN_OUT_JOB_OVERHEAD: usize = 2 * 1024;

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
/// delivery.wait_until_drained(Duration::from_secs(30)).await?;
/// let page = delivery.inbox().inbox_page("bob", PageRequest::first(20)).await?;
/// assert_eq!(page.items[0].payload, "Hello, followers");
/// worker.stop().await;
/// # Ok(()) }
/// ```
pub struct Delivery<P: Payload> {
    inner: Arc<DeliveryState<P>>,
}

clone_fields!(Delivery<P: Payload> { inner });

impl<P: Payload> fmt::Debug for Delivery<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

/// Everything a fan-out job needs; shared by the [`Delivery`] and its workers.
struct DeliveryState<P: Payload> {
    backend: Backend,
    graph: Arc<FollowGraph>,
    inbox: Arc<DynInboxStore<P>>,
    outbox: Collection<Document>,
    activity: Collection<Document>,
    celebrities: Collection<Document>,
    jobs: JobQueue,
    batch: usize,
    dormant_after: Duration,
    celebrity_followers: Option<u64>,
    backfill: usize,
    rebuild_limit: usize,
    payload: PhantomData<fn() -> P>,
}

impl<P: Payload> fmt::Debug for DeliveryState<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("inbox", &self.inbox.strategy())
            .field("outbox", &self.outbox.name())
            .field("activity", &self.activity.name())
            .field("batch", &self.batch)
            .field("dormant_after", &self.dormant_after)
            .field("celebrity_followers", &self.celebrity_followers)
            .finish_non_exhaustive()
    }
}

/// Configures a [`Delivery`].
#[must_use = "a builder does nothing until `build()`"]
pub struct DeliveryBuilder<P: Payload> {
    config: StoreConfig,
    graph: Arc<FollowGraph>,
    inbox: Arc<DynInboxStore<P>>,
    batch: usize,
    dormant_after: Duration,
    lease: Duration,
    celebrity_followers: Option<u64>,
    backfill: usize,
    rebuild_limit: usize,
}

debug_fields!(DeliveryBuilder<P: Payload> { config, batch, dormant_after, .. });

impl<P: Payload> DeliveryBuilder<P> {
    store_builder_methods!();

    builder_setters! {
        /// Followers per fan-out job (default 500, at most [`PageRequest::MAX_LIMIT`]).
        batch: usize,

        /// How long a follower may go unseen before they stop receiving copies (default 7 days).
        dormant_after: Duration,
    }

    /// How long a worker's claim on a fan-out job lasts (default 60 s): a job whose worker died
    /// runs again after this. (`FeedStoreBuilder::job_lease` is the feed's.)
    pub fn job_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    builder_setters! {
        /// Authors with at least this many followers are celebrities: their posts are not copied,
        /// readers merge them in at read time (default 10,000; `None`: no one is). Needs an inbox
        /// read in send-time order ([`FanOutOnWrite`](crate::FanOutOnWrite) or
        /// [`FanOutOnRead`](crate::FanOutOnRead)), the order the merge pages in.
        celebrity_followers: Option<u64>,

        /// How many of a user's newest posts a new follower receives (default 20; 0: none).
        backfill: usize,

        /// How many posts a returning dormant user's inbox is refilled with (default 200).
        rebuild_limit: usize,
    }

    /// The delivery.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a batch of 0 or above [`PageRequest::MAX_LIMIT`], unusable
    /// or clashing collection names, or celebrities with a [`BucketedFanOut`](crate::BucketedFanOut)
    /// inbox.
    pub fn build(self) -> Result<Delivery<P>> {
        let [outbox, activity, celebrities, jobs] = self.config.names(COLLECTIONS)?;
        if self.celebrity_followers.is_some() && self.inbox.strategy() == Strategy::BucketedFanOut {
            return Err(Error::InvalidConfig {
                reason: "celebrities are merged into inboxes in send-time order, which a \
                         bucketed inbox does not keep: use fan-out on write or on read, or \
                         `celebrity_followers(None)`"
                    .to_owned(),
            });
        }
        if self.batch == 0 || self.batch > PageRequest::MAX_LIMIT {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "a fan-out batch of {} followers is outside 1..={}",
                    self.batch,
                    PageRequest::MAX_LIMIT
                ),
            });
        }
        let jobs = crate::jobs::JobQueue::builder_for(&self.config, &jobs)
            .lease(self.lease)
            .build()?;
        let database = self.config.database();
        let outbox = database.collection(&outbox);
        let by_author = IndexModel::builder()
            .keys(doc! { "from": 1, "sent": 1, "_id": 1 })
            .build();
        Ok(Delivery {
            inner: Arc::new(DeliveryState {
                backend: self
                    .config
                    .backend_without_locks()
                    .with_index(&outbox, by_author),
                graph: self.graph,
                inbox: self.inbox,
                outbox,
                activity: database.collection(&activity),
                celebrities: database.collection(&celebrities),
                jobs,
                batch: self.batch,
                dormant_after: self.dormant_after,
                celebrity_followers: self.celebrity_followers,
                backfill: self.backfill,
                rebuild_limit: self.rebuild_limit,
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

    /// The default follower count from which an author is a celebrity.
    pub const DEFAULT_CELEBRITY_FOLLOWERS: u64 = 10_000;

    /// Delivery through `inbox` to the followers `graph` knows, with the default settings (see
    /// [`Delivery::builder`]).
    ///
    /// # Errors
    ///
    /// As [`DeliveryBuilder::build`] (the defaults themselves are valid).
    pub fn new(
        database: &Database,
        graph: Arc<FollowGraph>,
        inbox: Arc<DynInboxStore<P>>,
    ) -> Result<Self> {
        Self::builder(database, graph, inbox).build()
    }

    /// A builder delivering through `inbox` to the followers `graph` knows. Celebrities are on
    /// (from [`Self::DEFAULT_CELEBRITY_FOLLOWERS`]) unless the inbox is bucketed.
    pub fn builder(
        database: &Database,
        graph: Arc<FollowGraph>,
        inbox: Arc<DynInboxStore<P>>,
    ) -> DeliveryBuilder<P> {
        DeliveryBuilder {
            config: StoreConfig::new(database),
            graph,
            celebrity_followers: (inbox.strategy() != Strategy::BucketedFanOut)
                .then_some(Self::DEFAULT_CELEBRITY_FOLLOWERS),
            batch: Self::DEFAULT_BATCH,
            dormant_after: Self::DEFAULT_DORMANT_AFTER,
            lease: Duration::from_secs(60),
            backfill: 20,
            rebuild_limit: 200,
            inbox,
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

    /// Creates the indexes of the outbox, the jobs and the inbox store (idempotent, safe on
    /// every start).
    pub async fn create_indexes(&self) -> Result<()> {
        Op::DeliveryCreateIndexes
            .span()
            .run(async move {
                self.inner.backend.create_indexes().await?;
                self.inner.jobs.create_indexes().await?;
                self.inner.inbox.create_indexes().await
            })
            .await
    }

    /// The shard key each of the delivery's own collections should have. The `celebrities`
    /// collection has none: it is a short list read whole on every timeline page, which is one
    /// shard's work only while the collection stays unsharded.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        let mut keys = vec![
            ShardKey::new(
                self.inner.outbox.name(),
                doc! { "from": 1, "sent": 1 },
                "an author's posts, read newest first to rebuild or backfill inboxes, stay on \
                 one shard; writes spread by author",
            ),
            ShardKey::hashed_id(
                self.inner.activity.name(),
                "activity is read and written one user at a time",
            ),
        ];
        // `celebrities` is left out on purpose: a short list read whole on every timeline page,
        // which stays on one shard only if the collection is not sharded.
        keys.extend(self.inner.jobs.shard_keys());
        keys
    }

    /// Shards the delivery's collections ([`Delivery::shard_keys`]: its outbox, activity and
    /// jobs) and its inbox store's when connected to a `mongos` (or a front end that answers as
    /// one); see [`crate::sharding::shard_collections`] (on a new deployment, before the
    /// indexes). The graph it
    /// reads is sharded by its own [`FollowGraph::shard_collections`](crate::FollowGraph::shard_collections).
    pub async fn shard_collections(&self) -> Result<()> {
        Op::DeliveryShardCollections
            .span()
            .run(async move {
                crate::sharding::shard_collections(
                    self.inner.backend.database(),
                    &self.shard_keys(),
                )
                .await?;
                self.inner.inbox.shard_collections().await
            })
            .await
    }

    /// Posts `payload` from `author` to their followers: the author's copies are written now,
    /// the followers' by the workers. Returns the message as posted (`to` is empty: it goes to
    /// whoever follows the author when its fan-out runs).
    ///
    /// # Errors
    ///
    /// Before any command: [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"sender"`) for the author's id,
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"message"`) for a message over
    /// [`Delivery::max_message_bytes`]. Then [`Error::NotFound`] (an author the graph does not
    /// know) before anything is written.
    pub async fn post(&self, author: &str, payload: P) -> Result<Message<P>> {
        Op::DeliveryPost
            .span()
            .run(async move {
                crate::validate::user_id("sender", author)?;
                let message = Message {
                    id: MessageId::new(),
                    from: author.to_owned(),
                    to: Vec::new(),
                    sent: bson::DateTime::now(),
                    payload,
                    edited: None,
                    read: false,
                    starred: false,
                };
                let document = message.to_document()?;
                crate::validate::encoded_size("message", &document, self.max_message_bytes())?;
                let stats = self.inner.graph.stats(author).await?;
                let celebrity = self
                    .inner
                    .celebrity_followers
                    .is_some_and(|threshold| stats.followers >= threshold);
                let mut outbox = document.clone();
                outbox.remove("id");
                outbox.insert("_id", message.id.0);
                if celebrity {
                    // Readers merge a celebrity's posts in; nothing is copied.
                    // A `$set` upsert and an insert keyed by the message id: both retried, neither
                    // applies twice.
                    self.inner
                        .upsert(
                            &self.inner.celebrities,
                            author,
                            doc! { "since": message.sent },
                        )
                        .await?;
                    self.inner
                        .backend
                        .insert_once(&self.inner.outbox, outbox)
                        .await?;
                } else {
                    // The job first: if the outbox write then fails, the job is withdrawn; if the
                    // process dies in between, the job's first page writes the outbox entry itself.
                    let job = self
                        .inner
                        .jobs
                        .enqueue(FAN_OUT, doc! { "message": document })
                        .await?;
                    if let Err(error) = self
                        .inner
                        .backend
                        .insert_once(&self.inner.outbox, outbox)
                        .await
                    {
                        self.inner.jobs.cancel(job).await?;
                        return Err(error);
                    }
                }
                self.inner
                    .inbox
                    .deliver(&message, &[author.to_owned()])
                    .await?;
                Ok(message)
            })
            .await
    }

    /// The largest message [`Delivery::post`] takes, encoded as stored, in bytes: the inbox's
    /// [`max_message_bytes`](crate::InboxStore::max_message_bytes), and no more than a fan-out
    /// job carries (the message and the page it reached, within
    /// [`JobQueue::MAX_PAYLOAD_BYTES`]).
    pub fn max_message_bytes(&self) -> usize {
        self.inner
            .inbox
            .max_message_bytes()
            .min(JobQueue::MAX_PAYLOAD_BYTES - FAN_OUT_JOB_OVERHEAD)
    }

    /// Records that `user` was seen now (they signed in, or read their inbox). Returns whether
    /// they were dormant (or never seen): then their inbox, which missed copies meanwhile, is
    /// rebuilt by a worker from the newest posts of whom they follow, and until it is,
    /// [`Delivery::timeline`] reads those posts directly, so the user never sees a partial
    /// inbox.
    pub async fn touch(&self, user: &str) -> Result<bool> {
        Op::DeliveryTouch
            .span()
            .run(async move {
                crate::validate::user_id("user", user)?;
                let inner = &self.inner;
                let now = bson::DateTime::now();
                let before = inner
                    .activity
                    .find_one(doc! { "_id": user })
                    .projection(doc! { "last_seen": 1 })
                    .await?;
                let last_seen = before.and_then(|d| d.get_datetime("last_seen").ok().copied());
                let dormant_ms = inner.dormant_after.as_millis() as i64;
                let returning = last_seen.is_none_or(|seen| {
                    seen.timestamp_millis() < now.timestamp_millis() - dormant_ms
                });
                if returning {
                    // Marked and queued before `last_seen` moves: a crash in between leaves the user
                    // still dormant, so the next touch queues the rebuild again. The job's id derives
                    // from the user and the old `last_seen`, so concurrent touches queue it once.
                    let key = format!(
                        "rebuild:{user}:{}",
                        last_seen.map_or(-1, |seen| seen.timestamp_millis())
                    );
                    let mut job = doc! { "user": user };
                    if let Some(seen) = last_seen {
                        // Copies stopped once the user was dormant; an hour's margin covers fan-outs
                        // that ran late. Earlier posts are in the inbox already.
                        let since = seen.timestamp_millis() + dormant_ms - 3_600_000;
                        job.insert("since", bson::DateTime::from_millis(since));
                    }
                    inner
                        .upsert(&inner.activity, user, doc! { "rebuilding": true })
                        .await?;
                    inner
                        .jobs
                        .enqueue_once(
                            derived_id(ObjectId::from_bytes([0; 12]), &key),
                            REBUILD,
                            job,
                        )
                        .await?;
                }
                inner
                    .upsert(&inner.activity, user, doc! { "last_seen": now })
                    .await?;
                Ok(returning)
            })
            .await
    }

    /// `owner` follows `user` (see [`FollowGraph::follow`]) and receives `user`'s newest posts
    /// ([`DeliveryBuilder::backfill`]; none for a celebrity, whose posts are merged at read
    /// time). Returns whether the follow is new.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow`].
    pub async fn follow(&self, owner: &str, user: &str) -> Result<bool> {
        Op::DeliveryFollow
            .span()
            .run(async move {
                let new = self.inner.graph.follow(owner, user).await?;
                if new && !self.is_celebrity(user).await? {
                    let posts = self
                        .inner
                        .newest_posts(&[user.to_owned()], None, self.inner.backfill)
                        .await?;
                    self.inner.backfill(owner, &posts).await?;
                    // An unfollow that ran meanwhile may have cleaned up before these copies landed.
                    self.inner
                        .take_back_unless_following(user, &[owner.to_owned()])
                        .await?;
                }
                Ok(new)
            })
            .await
    }

    /// `owner` stops following `user` directly (see [`FollowGraph::unfollow`]); if no route to
    /// `user` is left, `user`'s posts leave `owner`'s inbox. Returns whether there was a direct
    /// follow.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::unfollow`]; [`Error::Unsupported`], before anything is written, with a
    /// bucketed inbox, which cannot remove messages (use [`FollowGraph::unfollow`] there; the
    /// posts stay).
    pub async fn unfollow(&self, owner: &str, user: &str) -> Result<bool> {
        Op::DeliveryUnfollow
            .span()
            .run(async move {
                crate::validate::user_id("owner", owner)?;
                crate::validate::user_id("user", user)?;
                if self.inner.inbox.strategy() == Strategy::BucketedFanOut {
                    return Err(Error::Unsupported {
                        limit: crate::error::Limit::Strategy,
                        feature: "taking an unfollowed user's posts out of a bucketed inbox",
                        reason: "a bucketed inbox keeps what it received (positions would shift)"
                            .to_owned(),
                    });
                }
                let existed = self.inner.graph.unfollow(owner, user).await?;
                if self.inner.graph.subscription(owner, user).await?.is_none() {
                    self.inner.inbox.remove_from(owner, user).await?;
                }
                Ok(existed)
            })
            .await
    }

    /// Whether `user`'s posts are merged at read time rather than copied.
    pub async fn is_celebrity(&self, user: &str) -> Result<bool> {
        Op::DeliveryIsCelebrity
            .span()
            .run(async move {
                crate::validate::user_id("user", user)?;
                Ok(self
                    .inner
                    .celebrities
                    .find_one(doc! { "_id": user })
                    .await?
                    .is_some())
            })
            .await
    }

    /// Starts a worker that runs fan-out jobs until stopped or its handle is dropped; idle, it
    /// backs off as [`JobQueue::start_worker`] describes, and a post made through this delivery
    /// (or a clone) wakes it.
    #[must_use = "dropping the Worker stops it; keep the handle for as long as it should run"]
    pub fn start_worker(&self) -> Worker {
        self.inner
            .jobs
            .start_worker(Arc::new(worker::Handler(self.inner.clone())))
    }

    /// Runs the fan-out jobs that are due, in this task, until none is left; returns how many
    /// ran. See [`JobQueue::run_pending`].
    pub async fn run_pending(&self) -> Result<usize> {
        Op::DeliveryRunPending
            .span()
            .run(async move {
                self.inner
                    .jobs
                    .run_pending(&worker::Handler(self.inner.clone()))
                    .await
            })
            .await
    }

    /// Waits until no fan-out job is left (every post delivered), for tests and graceful
    /// shutdown; see [`JobQueue::wait_until_drained`].
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] after `timeout`.
    pub async fn wait_until_drained(&self, timeout: Duration) -> Result<()> {
        Op::DeliveryWaitUntilDrained
            .span()
            .run(async move { self.inner.jobs.wait_until_drained(timeout).await })
            .await
    }
}

impl<P: Payload> DeliveryState<P> {
    /// Sets `fields` on the document `{_id: id}` of `collection`, creating it if there is none
    /// (one `update` with `upsert`), retried on transient failures (setting twice sets once); a
    /// duplicate key (a concurrent upsert, or an earlier attempt, created the document first)
    /// counts as done.
    async fn upsert(
        &self,
        collection: &Collection<Document>,
        id: &str,
        fields: Document,
    ) -> Result<()> {
        let filter = doc! { "_id": id };
        let update = doc! { "$set": fields };
        self.backend
            .retry("upsert", || async {
                match collection
                    .update_one(filter.clone(), update.clone())
                    .upsert(true)
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(error) if is_duplicate_key(&error) => Ok(()),
                    Err(error) => Err(error.into()),
                }
            })
            .await
    }
}
