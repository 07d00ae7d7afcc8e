//! [`FeedStoreBuilder`]: a store's collections, sizes and plug-ins, and its indexes.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::{Database, IndexModel};

use super::ranking::{DefaultRanking, DynRanking};
use super::state::{Collections, FeedState, Settings};
use super::store::FeedStore;
use super::types::{Clock, SystemClock};
use crate::backend::Backend;
use crate::config::{store_builder_methods, StoreConfig};
use crate::error::{Error, Result};
use crate::graph::{DynFollowSource, FollowList};
use crate::notifications::DynNotifier;
use crate::payload::Payload;
use crate::setters::builder_setters;
use crate::validate::check_collection_name;

/// The store's collections, by default name (its job queue's claims go to
/// `feed_jobs_locks`).
pub const COLLECTIONS: [&str; 10] = [
    "posts",
    "users",
    "extended_users",
    "post_counters",
    "post_likes",
    "feeds",
    "propagations",
    "feed_jobs",
    "feed_locks",
    "post_keys",
];

/// How long a feed, counter or user lock lasts if its holder dies.
const LOCK_LEASE: Duration = Duration::from_secs(30);

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
    notifier: Option<Arc<DynNotifier>>,
    _extension: PhantomData<fn() -> X>,
}

// `FeedStore::builder` lives here, beside what it makes, so that the store and its builder do
// not import each other.
impl<X: Payload> FeedStore<X> {
    /// A store in `database` with the default settings: no follows source (feeds of followed
    /// authors stay empty until one is given with [`FeedStoreBuilder::follows`]), the default
    /// ranking, the system clock.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default feed settings are valid")
    }

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
            notifier: None,
            _extension: PhantomData,
        }
    }
}

impl<X: Payload> FeedStoreBuilder<X> {
    store_builder_methods!();

    /// Tells `notifier` (a [`NotificationStore`](crate::NotificationStore), say) of every like:
    /// the post's author is notified ([`Kind::Like`](crate::notifications::Kind::Like) on the
    /// post's id, by the user who liked it; nobody of their own like), and an unlike withdraws
    /// it. Off by default.
    ///
    /// The notification never fails the like (or the unlike): it is queued in the feed's own
    /// database, in the collection `<post_likes>_outbox`, and tried at once (for at most 2
    /// seconds); one that could not be delivered then is delivered by the feed's
    /// [`outbox`](crate::FeedStore::outbox) worker, at least once (see
    /// [`Outbox`](crate::notifications::Outbox)). On, a like or an unlike costs 2 commands more
    /// in the feed's database (queue, then complete) besides the notifier's own.
    pub fn notifier(mut self, notifier: Arc<DynNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    builder_setters! {
        /// Who follows whom, for per-user feeds (default: an empty [`FollowList`]).
        follows: Arc<DynFollowSource>,

        /// How posts are ranked in feeds (default [`DefaultRanking`]).
        ranking: Arc<DynRanking>,

        /// Where the time comes from (default [`SystemClock`]).
        clock: Arc<dyn Clock>,

        /// How long a worker's claim on a feed job lasts (default 60 s).
        job_lease: Duration,

        /// Delay before a failed feed job's first retry (default 1 s); see
        /// [`crate::jobs::JobQueueBuilder::retry_delay`].
        job_retry_delay: Duration,

        /// Jobs a worker claims at once (default 20); see [`crate::jobs::JobQueueBuilder::batch`].
        job_batch: usize,

        /// Most posts a feed keeps; older or lower-ranked ones fall off (default 500).
        max_feed_len: usize,

        /// Largest encoded post in bytes (default 256 KiB, at most 15 MiB).
        max_post_bytes: usize,

        /// The "hot" feed's window (default 24 hours).
        hot_window: Duration,

        /// Documents updated per batch when a user chunk changes (default 100).
        propagation_batch: usize,
    }

    /// Another collection whose documents embed a [`super::UserChunk`] at `field` (such as
    /// comments at `author`); renames propagate there too. It needs an index on
    /// `{<field>.id: 1, _id: 1}`.
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
        let [posts, users, extended_users, counters, likes, feeds, propagations, jobs, locks, post_keys] =
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
            post_keys: db.collection(&post_keys),
        };
        let outbox = self
            .notifier
            .map(|notifier| {
                crate::notifications::Outbox::build(
                    &self.config,
                    &crate::notifications::Outbox::collection_for(&likes),
                    notifier,
                )
            })
            .transpose()?;
        let jobs = crate::jobs::JobQueue::builder_for(&self.config, &jobs)
            .lease(self.job_lease)
            .batch(self.job_batch)
            .retry_delay(self.job_retry_delay)
            .build()?;
        Ok(FeedStore::from_inner(FeedState {
            backend: with_indexes(self.config.backend(&locks, LOCK_LEASE), &collections),
            jobs,
            collections,
            follows: self.follows,
            ranking: self.ranking,
            clock: self.clock,
            settings: Settings {
                max_feed_len: self.max_feed_len,
                max_post_bytes: self.max_post_bytes,
                hot_window: self.hot_window,
                propagation_batch: self.propagation_batch,
                chunk_targets,
            },
            outbox,
        }))
    }
}

/// `backend` with the store's indexes on `c` (the text index where the server has text search);
/// the job queue has its own.
fn with_indexes(backend: Backend, c: &Collections) -> Backend {
    let plain = |keys: Document| IndexModel::builder().keys(keys).build();
    backend
        .with_index(&c.posts, plain(doc! { "created_by.id": 1, "_id": 1 }))
        .with_index(&c.posts, plain(doc! { "created": -1, "_id": -1 }))
        .with_text_index(
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
