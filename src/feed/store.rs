//! [`FeedStore`], the entry point: set-up, the job worker, and the handles.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bson::doc;
use mongodb::Database;

use super::feeds::Feeds;
use super::jobs::FeedJobs;
use super::likes::Likes;
use super::posts::Posts;
use super::search::Search;
use super::state::FeedState;
use super::users::Users;
use crate::jobs::{JobQueue, Worker};
use crate::observe::spans::Op;
use crate::payload::Payload;
use crate::phantom_impls::clone_fields;
use crate::server::Capabilities;
use crate::sharding::{self, ShardKey};
use crate::Result;

/// Posts, users, likes and counters, feeds and search over one database; cheap to clone.
///
/// `X` is the application's extension of a post: any serde type, stored under `extension`.
/// The store sets up its collections and runs its jobs; the work is done through its handles,
/// one per concern, each cheap to clone and sharing the store's state: [`FeedStore::posts`],
/// [`FeedStore::users`], [`FeedStore::likes`], [`FeedStore::feeds`] and
/// [`FeedStore::search`].
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
/// store.users().create(NewUser::new("ann", "ann")).await?;
/// store.posts().create(NewPost::new("ann", "Hello", "First post", ())).await?;
/// store.run_pending().await?; // or store.start_worker() in a service
/// let bob = FeedKind::User("bob".into());
/// let page = store.feeds().page(&bob, PageRequest::first(20)).await?;
/// assert_eq!(page.items[0].title, "Hello");
/// # Ok(()) }
/// ```
pub struct FeedStore<X> {
    inner: Arc<FeedState>,
    _extension: PhantomData<fn() -> X>,
}

clone_fields!(FeedStore<X> { inner, _extension });

impl<X> fmt::Debug for FeedStore<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<X: Payload> FeedStore<X> {
    /// The store over `inner`, built by its builder.
    pub(super) fn from_inner(inner: FeedState) -> Self {
        Self {
            inner: Arc::new(inner),
            _extension: PhantomData,
        }
    }

    /// Posts: publish and read.
    pub fn posts(&self) -> Posts<X> {
        Posts::new(self.inner.clone())
    }

    /// Users: profiles, their extended rest, renames and chunk propagation.
    pub fn users(&self) -> Users {
        Users::new(self.inner.clone())
    }

    /// Likes and each post's counters.
    pub fn likes(&self) -> Likes {
        Likes::new(self.inner.clone())
    }

    /// Feeds: pages, entries, the hot refresh and user feed rebuilds.
    pub fn feeds(&self) -> Feeds<X> {
        Feeds::new(self.inner.clone())
    }

    /// Search over posts' title and body.
    pub fn search(&self) -> Search<X> {
        Search::new(self.inner.clone())
    }

    /// The database the store lives in.
    pub fn database(&self) -> &Database {
        self.inner.backend.database()
    }

    /// The capabilities the store works with: given to its builder, or detected on first use.
    pub async fn capabilities(&self) -> Result<Capabilities> {
        self.inner.backend.capabilities().await
    }

    /// The notifications the store owes, when it was built with a
    /// [`notifier`](crate::feed::FeedStoreBuilder::notifier): run its worker (or `run_pending`)
    /// to deliver those whose first attempt failed.
    pub fn outbox(&self) -> Option<&crate::notifications::Outbox> {
        self.inner.outbox.as_ref()
    }

    /// The queue of feed jobs (post fan-out, hot refresh, background propagation).
    pub fn jobs(&self) -> &JobQueue {
        &self.inner.jobs
    }

    /// Starts a background worker for the store's jobs on the current tokio runtime. Several
    /// workers (in one process or many) can run at once. It runs until stopped or its handle is
    /// dropped; idle, it backs off as [`JobQueue::start_worker`] describes, and a job queued
    /// through this store (or a clone, or one of its handles) wakes it.
    #[must_use = "dropping the Worker stops it; keep the handle for as long as it should run"]
    pub fn start_worker(&self) -> Worker {
        self.inner
            .jobs
            .start_worker(Arc::new(FeedJobs(self.inner.clone())))
    }

    /// Runs due jobs in this task until none is left; returns how many ran. For tests, scripts
    /// and applications without a worker. See [`JobQueue::run_pending`].
    pub async fn run_pending(&self) -> Result<usize> {
        Op::FeedRunPending
            .span()
            .run(async move {
                let handler = FeedJobs(self.inner.clone());
                self.inner.jobs.run_pending(&handler).await
            })
            .await
    }

    /// Waits until every job enqueued so far has run; see [`JobQueue::wait_until_drained`].
    pub async fn wait_until_drained(&self, timeout: Duration) -> Result<()> {
        Op::FeedWaitUntilDrained
            .span()
            .run(async move { self.inner.jobs.wait_until_drained(timeout).await })
            .await
    }

    /// Creates every index the store needs (idempotent, safe on every start: one command per
    /// index), and the job queue's. The text index is created only where the server has text
    /// search ([`Capabilities::text_search`]). The unique username index is what keeps a
    /// username taken once, so a store that was not told to create its indexes creates them
    /// before its first [`Users::create`] or rename.
    pub async fn create_indexes(&self) -> Result<()> {
        Op::FeedCreateIndexes
            .span()
            .run(async move {
                self.inner.backend.create_indexes().await?;
                self.inner.jobs.create_indexes().await
            })
            .await
    }

    /// The shard key of each sharded collection; see the [module docs](super) for the
    /// trade-offs.
    ///
    /// `users` is not in the list and stays unsharded: its unique `{username: 1}` index could
    /// only survive sharding on a key that index starts with (`{username: 1}`), and profiles are
    /// read by id, which would then scatter. One unsharded collection of profiles serves many
    /// millions of users; usernames stay unique without help from the application.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        let c = &self.inner.collections;
        let mut keys = vec![
            ShardKey::hashed_id(
                c.posts.name(),
                "a post read by id and a feed page's $in reach only the owning shards; writes \
                 spread evenly; author pages, propagation and search scatter",
            ),
            ShardKey::hashed_id(c.extended_users.name(), "read rarely, by id"),
            ShardKey::hashed_id(
                c.counters.name(),
                "one document per post, read and incremented by post id",
            ),
            ShardKey::new(
                c.likes.name(),
                doc! { "post": "hashed" },
                "a post's likes on one shard, so `_id: {post, user}` stays unique; the hot \
                 window's aggregation scatters, in the background",
            ),
            ShardKey::hashed_id(
                c.feeds.name(),
                "a feed page reads one document from one shard",
            ),
            ShardKey::ranged_id(c.propagations.name(), "small: a few documents per rename"),
            ShardKey::hashed_id(
                c.post_keys.name(),
                "a keyed post's record, found by its `_id` (derived from the author and the \
                 key), whose uniqueness the shard key keeps",
            ),
            ShardKey::ranged_id(
                self.inner.backend.locks_collection(),
                "locks are taken and released by key",
            ),
        ];
        keys.extend(self.inner.jobs.shard_keys());
        keys
    }

    /// Shards the store's collections on [`FeedStore::shard_keys`] when connected to a `mongos`;
    /// see [`crate::sharding::shard_collections`]. No key conflicts with a unique index (`users`
    /// is left unsharded), and each `shardCollection` accepts a repeat, so a run that stopped
    /// halfway (a network error) is finished by running it again.
    pub async fn shard_collections(&self) -> Result<()> {
        let keys = self.shard_keys();
        sharding::shard_collections_in(Op::FeedShardCollections.span(), self.database(), &keys)
            .await
    }
}
