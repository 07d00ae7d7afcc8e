//! A social feed: denormalized posts, the user ladder, per-post counters, ranked feeds and
//! search, after seed 004 (Azure Cosmos DB's social-media guidance) applied to MongoDB.
//!
//! One [`FeedStore`] holds every collection (names prefixed by
//! [`FeedStoreBuilder::collection_prefix`]):
//!
//! | collection | document | indexes | shard key |
//! |---|---|---|---|
//! | `posts` | [`Post`]: title, body, `created`, `created_by` ([`UserChunk`]), media, extension | `{created_by.id: 1, _id: 1}`, `{created: -1, _id: -1}`, text `{title, body}` where supported | `{_id: "hashed"}` |
//! | `users` | [`User`], the hot profile | unique `{username: 1}` | unsharded (a shard key must prefix the unique index) |
//! | `extended_users` | [`ExtendedUser`], the rest | `_id` | `{_id: "hashed"}` |
//! | `post_counters` | [`Counters`]: `{_id: post, likes, comments, points}` | `_id` | `{_id: "hashed"}` |
//! | `post_likes` | `{_id: {post, user}, post, user, at, created, op}` (`created`: the post's; `pending` / `removing` while a like / unlike is not finished, see [`FeedStore::like`]) | `{post: 1, at: 1}`, `{at: 1}`, `{created: 1, at: 1}` | `{post: "hashed"}` |
//! | `feeds` | `{_id: "latest" \| "hot" \| "user:<id>", items: [{post, score}]}` | `_id` | `{_id: "hashed"}` |
//! | `propagations` | chunk propagation progress `{user, target, last_id, done}` | `{done: 1}` | `{_id: 1}` |
//! | `feed_jobs`, `feed_jobs_locks` | the [`JobQueue`] | see [`JobQueue`] | see [`JobQueue`] |
//! | `feed_locks` | leased locks (servers without atomic updates only) | `_id` | `{_id: 1}` |
//!
//! # Partitioning: by user, by time, by category
//!
//! - **By user** (`created_by.id`): an author's posts live on one shard, so profile pages and
//!   chunk propagation are targeted; but a post read by id and a feed page's `$in` of post ids
//!   go to every shard, and a prolific author is a write hot spot.
//! - **By time** (`created`): the "latest" and "hot" windows read one range, but every new post
//!   lands on the shard owning the newest range: all writes on one shard.
//! - **By category**: topic feeds are targeted, but categories are uneven in size and traffic,
//!   so shards are too, and a post in several categories has no single home.
//!
//! The advice here is to shard posts (and their counters) on a hashed `_id`: a post read by id is
//! one shard, a feed page's `$in` goes only to the shards that own those ids, and writes spread
//! evenly. Author pages, propagation and search scatter, and they are rare or background work.
//! Likes are sharded by post so all likes of a post share one shard and the unique
//! `_id: {post, user}` stays unique cluster-wide.

mod counters;
mod cursor;
mod feeds;
mod posts;
mod ranking;
mod search;
mod users;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};
use serde::{Deserialize, Serialize};

use crate::graph::{DynFollowSource, FollowList};

pub use counters::{Counter, Counters};
pub use feeds::{FeedItem, FeedKind};
pub use posts::{Media, NewPost, Post};
pub use ranking::{Candidate, DefaultRanking, DynRanking, Ranking};
pub use search::{SearchOrder, FALLBACK_CANDIDATES};
pub use users::{ExtendedUser, NewUser, PropagationStatus, User, UserChunk};

use crate::backend::Backend;
use crate::config::{store_builder_methods, StoreConfig};
use crate::jobs::{JobQueue, Worker};
use crate::server::Capabilities;
use crate::sharding::ShardKey;
use crate::validate::check_collection_name;
use crate::Payload;
use crate::{Error, Result};

/// The store's collections, by default name (its job queue's claims go to
/// `feed_jobs_locks`).
pub const COLLECTIONS: [&str; 9] = [
    "posts",
    "users",
    "extended_users",
    "post_counters",
    "post_likes",
    "feeds",
    "propagations",
    "feed_jobs",
    "feed_locks",
];

/// A post's stable id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PostId(pub ObjectId);

impl PostId {
    /// A fresh id.
    pub fn new() -> Self {
        Self(ObjectId::new())
    }
}

impl Default for PostId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for PostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for PostId {
    type Err = bson::oid::Error;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        ObjectId::parse_str(s).map(Self)
    }
}

/// Where the store gets the time: posts' `created`, likes' `at` and the hot window's end.
/// Replace it to test windows without waiting (see [`FeedStoreBuilder::clock`]).
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> bson::DateTime;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> bson::DateTime {
        bson::DateTime::now()
    }
}

/// How long a feed or counter lock lasts if its holder dies.
const LOCK_LEASE: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
struct Collections {
    posts: Collection<Document>,
    users: Collection<Document>,
    extended_users: Collection<Document>,
    counters: Collection<Document>,
    likes: Collection<Document>,
    feeds: Collection<Document>,
    propagations: Collection<Document>,
}

#[derive(Clone, Debug)]
struct Settings {
    max_feed_len: usize,
    max_post_bytes: usize,
    hot_window: Duration,
    propagation_batch: usize,
    /// Collections and fields embedding a [`UserChunk`], updated by chunk propagation.
    chunk_targets: Vec<(String, String)>,
}

/// Posts, users, counters, feeds and search over one database; cheap to clone.
///
/// `X` is the application's extension of a post: any serde type, stored under `extension`.
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::Arc;
/// use mongo_social::feed::{FeedKind, FeedStore, NewPost, NewUser};
/// use mongo_social::graph::FollowList;
/// use mongo_social::PageRequest;
///
/// let follows = Arc::new(FollowList::new());
/// follows.follow("bob", "ann");
/// let store: FeedStore<()> = FeedStore::builder(&db).follows(follows).build()?;
/// store.create_indexes().await?;
/// store.create_user(NewUser::new("ann", "ann")).await?;
/// store.create_post(NewPost::new("ann", "Hello", "First post", ())).await?;
/// store.run_pending().await?; // or store.start_worker() in a service
/// let page = store.feed_page(&FeedKind::User("bob".into()), PageRequest::first(20)).await?;
/// assert_eq!(page.items[0].title, "Hello");
/// # Ok(()) }
/// ```
pub struct FeedStore<X> {
    /// The server's differences: writers of feeds and counters take turns where updates are
    /// not atomic.
    backend: Backend,
    collections: Collections,
    jobs: JobQueue,
    follows: Arc<DynFollowSource>,
    ranking: Arc<DynRanking>,
    clock: Arc<dyn Clock>,
    settings: Arc<Settings>,
    _extension: PhantomData<fn() -> X>,
}

impl<X> Clone for FeedStore<X> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            collections: self.collections.clone(),
            jobs: self.jobs.clone(),
            follows: self.follows.clone(),
            ranking: self.ranking.clone(),
            clock: self.clock.clone(),
            settings: self.settings.clone(),
            _extension: PhantomData,
        }
    }
}

impl<X> fmt::Debug for FeedStore<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeedStore")
            .field("posts", &self.collections.posts.name())
            .field("follows", &self.follows)
            .field("ranking", &self.ranking)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// Configures a [`FeedStore`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct FeedStoreBuilder<X> {
    config: StoreConfig,
    follows: Arc<DynFollowSource>,
    ranking: Arc<DynRanking>,
    clock: Arc<dyn Clock>,
    job_lease: Duration,
    job_batch: usize,
    job_retry_delay: Duration,
    max_feed_len: usize,
    max_post_bytes: usize,
    hot_window: Duration,
    propagation_batch: usize,
    extra_chunk_targets: Vec<(String, String)>,
    _extension: PhantomData<fn() -> X>,
}

impl<X: Payload> FeedStoreBuilder<X> {
    store_builder_methods!();

    /// Who follows whom, for per-user feeds (default: an empty [`FollowList`]).
    pub fn follows(mut self, follows: Arc<DynFollowSource>) -> Self {
        self.follows = follows;
        self
    }

    /// How posts are ranked in feeds (default [`DefaultRanking`]).
    pub fn ranking(mut self, ranking: Arc<DynRanking>) -> Self {
        self.ranking = ranking;
        self
    }

    /// Where the time comes from (default [`SystemClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long a worker's claim on a feed job lasts (default 60 s).
    pub fn job_lease(mut self, lease: Duration) -> Self {
        self.job_lease = lease;
        self
    }

    /// Delay before a failed feed job's first retry (default 1 s); see
    /// [`crate::jobs::JobQueueBuilder::retry_delay`].
    pub fn job_retry_delay(mut self, delay: Duration) -> Self {
        self.job_retry_delay = delay;
        self
    }

    /// Jobs a worker claims at once (default 20); see [`crate::jobs::JobQueueBuilder::batch`].
    pub fn job_batch(mut self, batch: usize) -> Self {
        self.job_batch = batch;
        self
    }

    /// Most posts a feed keeps; older or lower-ranked ones fall off (default 500).
    pub fn max_feed_len(mut self, len: usize) -> Self {
        self.max_feed_len = len;
        self
    }

    /// Largest encoded post in bytes (default 256 KiB, at most 15 MiB).
    pub fn max_post_bytes(mut self, bytes: usize) -> Self {
        self.max_post_bytes = bytes;
        self
    }

    /// The "hot" feed's window (default 24 hours).
    pub fn hot_window(mut self, window: Duration) -> Self {
        self.hot_window = window;
        self
    }

    /// Documents updated per batch when a user chunk changes (default 100).
    pub fn propagation_batch(mut self, batch: usize) -> Self {
        self.propagation_batch = batch;
        self
    }

    /// Another collection whose documents embed a [`UserChunk`] at `field` (such as comments at
    /// `author`); renames propagate there too. It needs an index on `{<field>.id: 1, _id: 1}`.
    pub fn chunk_target(mut self, collection: impl Into<String>, field: impl Into<String>) -> Self {
        self.extra_chunk_targets
            .push((collection.into(), field.into()));
        self
    }

    /// Builds the store. The server's capabilities are asked for on first use, unless they
    /// were given.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for unusable or clashing collection names, a name given to a
    /// collection the store does not have, or zero sizes.
    pub fn build(self) -> Result<FeedStore<X>> {
        if self.max_feed_len == 0 || self.propagation_batch == 0 || self.max_post_bytes == 0 {
            return Err(Error::InvalidConfig {
                reason: "max_feed_len, propagation_batch and max_post_bytes must be positive"
                    .to_owned(),
            });
        }
        if self.max_post_bytes > 15 * 1024 * 1024 {
            return Err(Error::InvalidConfig {
                reason: "max_post_bytes must leave room in a 16 MiB document".to_owned(),
            });
        }
        let [posts, users, extended_users, counters, likes, feeds, propagations, jobs, locks] =
            self.config.names(COLLECTIONS)?;
        for (collection, field) in &self.extra_chunk_targets {
            check_collection_name(collection)?;
            if field.is_empty() || field.starts_with('$') {
                return Err(Error::InvalidConfig {
                    reason: format!("`{field}` is not a usable chunk field"),
                });
            }
        }
        let db = self.config.database();
        let mut chunk_targets = vec![(posts.clone(), "created_by".to_owned())];
        chunk_targets.extend(self.extra_chunk_targets);
        let collections = Collections {
            posts: db.collection(&posts),
            users: db.collection(&users),
            extended_users: db.collection(&extended_users),
            counters: db.collection(&counters),
            likes: db.collection(&likes),
            feeds: db.collection(&feeds),
            propagations: db.collection(&propagations),
        };
        let jobs = self
            .config
            .job_queue(&jobs)
            .lease(self.job_lease)
            .batch(self.job_batch)
            .retry_delay(self.job_retry_delay)
            .build()?;
        Ok(FeedStore {
            backend: with_indexes(self.config.backend(&locks, LOCK_LEASE), &collections),
            jobs,
            collections,
            follows: self.follows,
            ranking: self.ranking,
            clock: self.clock,
            settings: Arc::new(Settings {
                max_feed_len: self.max_feed_len,
                max_post_bytes: self.max_post_bytes,
                hot_window: self.hot_window,
                propagation_batch: self.propagation_batch,
                chunk_targets,
            }),
            _extension: PhantomData,
        })
    }
}

impl<X: Payload> FeedStore<X> {
    /// Starts configuring a store in `database`.
    pub fn builder(database: &Database) -> FeedStoreBuilder<X> {
        FeedStoreBuilder {
            config: StoreConfig::new(database),
            follows: Arc::new(FollowList::new()),
            ranking: Arc::new(DefaultRanking),
            clock: Arc::new(SystemClock),
            job_lease: Duration::from_secs(60),
            job_batch: 20,
            job_retry_delay: Duration::from_secs(1),
            max_feed_len: 500,
            max_post_bytes: 256 * 1024,
            hot_window: Duration::from_secs(24 * 60 * 60),
            propagation_batch: 100,
            extra_chunk_targets: Vec::new(),
            _extension: PhantomData,
        }
    }

    /// The database the store lives in.
    pub fn database(&self) -> &Database {
        self.backend.database()
    }

    /// The capabilities the store works with: given to its builder, or detected on first use.
    pub async fn capabilities(&self) -> Result<Capabilities> {
        self.backend.capabilities().await
    }

    /// The queue of feed jobs (post fan-out, hot refresh, background propagation).
    pub fn jobs(&self) -> &JobQueue {
        &self.jobs
    }

    /// Starts a background worker for the store's jobs on the current tokio runtime. Several
    /// workers (in one process or many) can run at once. It runs until stopped or its handle is
    /// dropped; idle, it backs off as [`JobQueue::start_worker`] describes, and a job queued
    /// through this store (or a clone) wakes it.
    #[must_use = "dropping the Worker stops it; keep the handle for as long as it should run"]
    pub fn start_worker(&self) -> Worker {
        self.jobs
            .start_worker(Arc::new(feeds::FeedJobs(self.clone())))
    }

    /// Runs due jobs in this task until none is left; returns how many ran. For tests, scripts
    /// and applications without a worker. See [`JobQueue::run_pending`].
    pub async fn run_pending(&self) -> Result<usize> {
        self.jobs.run_pending(&feeds::FeedJobs(self.clone())).await
    }

    /// Waits until every job enqueued so far has run; see [`JobQueue::wait_until_drained`].
    pub async fn wait_until_drained(&self, timeout: Duration) -> Result<()> {
        self.jobs.wait_until_drained(timeout).await
    }

    /// Creates every index the store needs (idempotent, safe on every start: one command per
    /// index), and the job queue's. The text index is created only where the server has text
    /// search ([`Capabilities::text_search`]). The unique username index is what keeps a
    /// username taken once, so a store that was not told to create its indexes creates them
    /// before its first [`FeedStore::create_user`] or rename.
    pub async fn create_indexes(&self) -> Result<()> {
        self.backend.create_indexes().await?;
        self.jobs.create_indexes().await
    }

    /// The shard key of each sharded collection; see the [module docs](self) for the
    /// trade-offs.
    ///
    /// `users` is not in the list and stays unsharded: its unique `{username: 1}` index could
    /// only survive sharding on a key that index starts with (`{username: 1}`), and profiles are
    /// read by id, which would then scatter. One unsharded collection of profiles serves many
    /// millions of users; usernames stay unique without help from the application.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        let c = &self.collections;
        let mut keys = vec![
            ShardKey::new(
                c.posts.name(),
                doc! { "_id": "hashed" },
                "a post read by id and a feed page's $in reach only the owning shards; writes \
                 spread evenly; author pages, propagation and search scatter",
            ),
            ShardKey::new(
                c.extended_users.name(),
                doc! { "_id": "hashed" },
                "read rarely, by id",
            ),
            ShardKey::new(
                c.counters.name(),
                doc! { "_id": "hashed" },
                "one document per post, read and incremented by post id",
            ),
            ShardKey::new(
                c.likes.name(),
                doc! { "post": "hashed" },
                "a post's likes on one shard, so `_id: {post, user}` stays unique; the hot \
                 window's aggregation scatters, in the background",
            ),
            ShardKey::new(
                c.feeds.name(),
                doc! { "_id": "hashed" },
                "a feed page reads one document from one shard",
            ),
            ShardKey::new(
                c.propagations.name(),
                doc! { "_id": 1 },
                "small: a few documents per rename",
            ),
            ShardKey::new(
                self.backend.locks_collection(),
                doc! { "_id": 1 },
                "locks are taken and released by key",
            ),
        ];
        keys.extend(self.jobs.shard_keys());
        keys
    }

    /// Shards the store's collections on [`FeedStore::shard_keys`] when connected to a `mongos`;
    /// see [`crate::sharding::shard_collections`]. No key conflicts with a unique index (`users`
    /// is left unsharded), and each `shardCollection` accepts a repeat, so a run that stopped
    /// halfway (a network error) is finished by running it again.
    pub async fn shard_collections(&self) -> Result<()> {
        crate::sharding::shard_collections(self.database(), &self.shard_keys()).await
    }

    /// Runs `f` holding the leased locks on `keys` when the server's updates are not atomic;
    /// runs it directly otherwise.
    async fn serialized<T, F>(&self, keys: &[String], f: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        self.backend.exclusive(keys, f).await
    }
}

/// Every index of the store's own collections (the job queue has its own).
/// `backend` with the store's indexes on `c` (the text index where the server has text search).
fn with_indexes(backend: Backend, c: &Collections) -> Backend {
    let plain = |keys: Document| IndexModel::builder().keys(keys).build();
    backend
        .with_index(&c.posts, plain(doc! { "created_by.id": 1, "_id": 1 }))
        .with_index(&c.posts, plain(doc! { "created": -1, "_id": -1 }))
        .with_index_where(
            |capabilities| capabilities.text_search,
            &c.posts,
            IndexModel::builder()
                .keys(doc! { "title": "text", "body": "text" })
                .options(
                    IndexOptions::builder()
                        .weights(doc! { "title": 3, "body": 1 })
                        .name("post_text".to_owned())
                        .build(),
                )
                .build(),
        )
        .with_index(
            &c.users,
            IndexModel::builder()
                .keys(doc! { "username": 1 })
                .options(IndexOptions::builder().unique(true).build())
                .build(),
        )
        .with_index(&c.likes, plain(doc! { "post": 1, "at": 1 }))
        .with_index(&c.likes, plain(doc! { "at": 1 }))
        .with_index(&c.likes, plain(doc! { "created": 1, "at": 1 }))
        .with_index(&c.propagations, plain(doc! { "done": 1 }))
}
