//! Notification feeds with aggregation: "Ann and 3 others liked your post", "Bob started
//! following you", grouped per recipient by kind and target within a window, with seen and read
//! state.
//!
//! # The model
//!
//! One collection, `notifications`, one document per group:
//!
//! `{_id, recipient, kind, target, window, part, members: [actor, ..], count, updated, seen,
//! read, data, created}`
//!
//! - A group is every event of one [`Kind`] on one target for one recipient within one window
//!   of time (a day by default, aligned to the epoch: [`NotificationStoreBuilder::window`]). Its
//!   `_id` is made from those four (and `part`, below), so an event finds its group without a
//!   read and two concurrent first events cannot open two groups: the unique `_id` refuses the
//!   second.
//! - `members` holds the group's distinct actors in the order they joined; `count` is their
//!   number. Pages return the newest few ([`NotificationStoreBuilder::recent_actors`], 3 by
//!   default) and the count: "Ann, Bob and 30 others".
//! - A group holds at most [`NotificationStoreBuilder::max_actors`] actors (10,000 by default,
//!   about 200 KB): a busier window continues in a second group (`part` 1, 2, ...), listed as a
//!   group of its own.
//!
//! Indexes: `{recipient: 1, updated: -1, _id: -1}` (pages, trimming), `{recipient: 1, read: 1,
//! seen: 1}` (counts, marks), `{recipient: 1, kind: 1, target: 1, window: 1}` (withdrawals, a
//! full group's next part), `{recipient: 1, changed: 1, _id: 1}` (watches that poll; `changed`
//! is the server's time of a group's last join, `changes` their number). Shard key `{recipient: 1, _id: 1}`: every command names the
//! recipient, so each goes to one shard.
//!
//! # Operations and their cost (commands, MongoDB)
//!
//! | operation | commands |
//! |---|---|
//! | [`notify`](NotificationStore::notify) | 1 `update` (upsert); +2 `find` when the actor is already there or the group is full |
//! | [`withdraw`](NotificationStore::withdraw) | 1 `update` (every group of the kind and target holding the actor), 1 `delete` of groups left empty |
//! | [`page`](NotificationStore::page) | 1 `find` |
//! | [`counts`](NotificationStore::counts) | 1 `aggregate` over the recipient's unread groups |
//! | [`mark_seen`](NotificationStore::mark_seen), [`mark_all_read`](NotificationStore::mark_all_read), [`mark_read`](NotificationStore::mark_read) | 1 `update` |
//! | [`trim`](NotificationStore::trim) | 1 `find`, 1 `delete` |
//!
//! On servers without atomic updates (FerretDB 1.x) `notify` and `withdraw` also take and give
//! back a leased lock on `(recipient, kind, target)` (+2).
//!
//! # Concurrency and retries
//!
//! An event is one conditional update: `members` must not hold the actor, and the group must
//! have room; it pushes the actor, increments `count`, raises `updated` and marks the group
//! unseen and unread, all in one atomic update. So 32 actors liking a post at once make one
//! group of 32, and an actor's repeated event (or a retry after a lost reply) matches nothing
//! and changes nothing: the upsert then meets the existing `_id`, and one `find` confirms the
//! actor is there. A withdrawal pulls the actor and decrements `count` only in groups that hold
//! the actor, so it too applies once. Seen and read marks are `$set`s.
//!
//! A group an actor joins after the recipient saw it is unseen again ("3 new"). Marking seen
//! takes a time ([`NotificationStore::mark_seen`]): groups updated after what the recipient was
//! shown stay unseen. Pages are keyset pages on `(updated, _id)`; a group that gains an actor
//! while a reader pages moves to the top, so the reader does not meet it again further down.
//!
//! # Emitted by the other stores
//!
//! A [`Notifier`] (such as a [`NotificationStore`]) given to a store's builder is told of what
//! that store already knows happened, with the recipient rule of each:
//!
//! | store | event | recipient | withdrawn when |
//! |---|---|---|---|
//! | [`crate::FeedStore`] ([`Likes`](crate::feed::Likes)) | [`Kind::Like`] on the post's id | the post's author | unliked |
//! | [`crate::FollowGraph`] | [`Kind::Follow`] on the followed user | the followed user | unfollowed |
//! | [`crate::comments::PerComment`], [`crate::comments::Embedded`] | [`Kind::Reply`] on `"<discussion>/<parent link>"` | the parent comment's author | the reply is deleted |
//!
//! These notifications never fail the write that caused them: each store queues them in an
//! [`Outbox`] in its own database and tells the notifier at once (for at most 2 seconds); what
//! could not be delivered then is delivered by the outbox's worker, at least once. See
//! [`Outbox`] for the guarantee and what can lose one.
//!
//! Nobody is notified of their own action. The crate does not know who owns a discussion of
//! comments (the application's content), so a comment on it is the application's to notify:
//! one [`NotificationStore::notify`] of [`Kind::Comment`] where it posts the comment.

mod outbox;
mod types;

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

pub use outbox::Outbox;
pub use types::{Activity, Counts, Event, Group, Kind};

use crate::backend::Backend;
use crate::bson_ext::{self, integer};
use crate::config::{store_builder_methods, StoreConfig};
use crate::page::{self, invalid, Cursor};
use crate::realtime::{self, Key, ResumeToken, Source, Updates, WatchOptions};
use crate::sharding::ShardKey;
use crate::update_batch::is_duplicate_key;
use crate::validate;
use crate::{Entity, Error, Page, PageRequest, Payload, Result};

/// The store's collections, by default name.
pub const COLLECTIONS: [&str; 2] = ["notifications", "notification_locks"];
/// How long a group's lock lasts if its holder dies (servers without atomic updates).
const LOCK_LEASE: Duration = Duration::from_secs(30);
/// The tag of the store's cursors.
const CURSOR_TAG: &str = "ng";

/// The scope of the cursors of `recipient`'s notifications.
fn cursor_scope(recipient: &str) -> page::Scope {
    page::Scope::new("recipient's notifications", &[recipient])
}

/// When a group last gained an actor, by the server's clock.
const CHANGED: &str = "changed";
/// How many times a group gained an actor: with its `_id`, names one state of it.
const CHANGES: &str = "changes";
/// Parts of one window's group tried before an event gives up with [`Error::RetriesExhausted`].
const MAX_PART_ATTEMPTS: usize = 64;

/// The largest data an event may carry ([`Event::with_data`]), encoded, in bytes: 1 MiB.
///
/// A group keeps its newest event's data beside its actors, in one document of at most 16 MiB:
/// 1 MiB of data leaves the rest to them, room for the default 10,000 actors
/// ([`NotificationStoreBuilder::max_actors`]) even with ids of the longest kind
/// ([`MAX_ID_BYTES`](crate::MAX_ID_BYTES)). Data is for showing the group ("Ann liked *your
/// trip photos*"); the application keeps anything larger itself and puts its id here.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// What a store that knows an action happened tells: the crate's stores call it when built
/// with a notifier (see the [module docs](self)), through their [`Outbox`], so a call may come
/// again (at least once per write), later than the write, and from the outbox's worker. Both
/// calls must be idempotent. Applications implement it for notifications of their own (a push
/// service, a queue of their own); an error leaves the notification in the outbox, retried.
#[async_trait]
pub trait Notifier: Send + Sync + fmt::Debug + 'static {
    /// Adds `activity`'s actor to the recipient's group of its kind and target.
    async fn notify(&self, activity: Activity) -> Result<()>;

    /// Takes `activity`'s actor back out of the recipient's groups of its kind and target.
    async fn withdraw(&self, activity: Activity) -> Result<()>;
}

/// A notifier of any kind, for `Arc<DynNotifier>`.
pub type DynNotifier = dyn Notifier;

/// A notification feed per recipient, grouped by kind and target within a window. See the
/// [module docs](self).
///
/// `D` is the application's data carried by an event (any serde type; `()` for none).
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use mongo_social::notifications::{Activity, Kind, NotificationStore};
/// use mongo_social::PageRequest;
///
/// let notifications: NotificationStore<()> = NotificationStore::new(&db);
/// notifications.create_indexes().await?;
/// for fan in ["bob", "cat", "dan"] {
///     notifications.notify(Activity::new("ann", Kind::Like, "post-1", fan)).await?;
/// }
/// let page = notifications.page("ann", PageRequest::first(20)).await?;
/// let group = &page.items[0];
/// assert_eq!((group.actor_count, group.actors[0].as_str()), (3, "dan"));
/// assert_eq!(notifications.counts("ann").await?.unseen, 1);
/// # Ok(()) }
/// ```
pub struct NotificationStore<D> {
    groups: Groups,
    _data: PhantomData<fn() -> D>,
}

/// The store's state and logic, whatever the data type.
#[derive(Clone, Debug)]
struct Groups {
    backend: Backend,
    groups: Collection<Document>,
    window: Duration,
    recent_actors: usize,
    max_actors: u64,
}

impl<D> Clone for NotificationStore<D> {
    fn clone(&self) -> Self {
        Self {
            groups: self.groups.clone(),
            _data: PhantomData,
        }
    }
}

impl<D> fmt::Debug for NotificationStore<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotificationStore")
            .field("groups", &self.groups.groups.name())
            .field("window", &self.groups.window)
            .finish_non_exhaustive()
    }
}

/// Configures a [`NotificationStore`].
#[must_use = "a builder does nothing until `build()`"]
pub struct NotificationStoreBuilder<D> {
    config: StoreConfig,
    window: Duration,
    recent_actors: usize,
    max_actors: u64,
    _data: PhantomData<fn() -> D>,
}

impl<D> fmt::Debug for NotificationStoreBuilder<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotificationStoreBuilder")
            .field("config", &self.config)
            .field("window", &self.window)
            .field("recent_actors", &self.recent_actors)
            .field("max_actors", &self.max_actors)
            .finish()
    }
}

impl<D: Payload> NotificationStoreBuilder<D> {
    store_builder_methods!();

    /// How long a group gathers events (default 24 hours): windows are aligned to the Unix
    /// epoch, so a day's window runs from midnight to midnight UTC.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// How many of a group's newest actors a page returns (default 3, at most 100).
    pub fn recent_actors(mut self, actors: usize) -> Self {
        self.recent_actors = actors;
        self
    }

    /// The most actors one group document holds (default 10,000, at most 100,000); a busier
    /// window continues in another group.
    pub fn max_actors(mut self, actors: u64) -> Self {
        self.max_actors = actors;
        self
    }

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a window under a second, a number of recent actors outside
    /// `1..=100`, a group size outside `1..=100_000`, or unusable collection names.
    pub fn build(self) -> Result<NotificationStore<D>> {
        if self.window < Duration::from_secs(1) {
            return Err(Error::InvalidConfig {
                reason: "a notification window needs at least a second".to_owned(),
            });
        }
        if !(1..=100).contains(&self.recent_actors) || !(1..=100_000).contains(&self.max_actors) {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "recent_actors must be 1..=100 and max_actors 1..=100000, not {} and {}",
                    self.recent_actors, self.max_actors
                ),
            });
        }
        let [groups, locks] = self.config.names(COLLECTIONS)?;
        let groups = self.config.database().collection(&groups);
        let index = |keys: Document, name: &str| {
            IndexModel::builder()
                .keys(keys)
                .options(IndexOptions::builder().name(name.to_owned()).build())
                .build()
        };
        let backend = self
            .config
            .backend(&locks, LOCK_LEASE)
            .with_index(
                &groups,
                index(doc! { "recipient": 1, "updated": -1, "_id": -1 }, "newest"),
            )
            .with_index(
                &groups,
                index(doc! { "recipient": 1, "read": 1, "seen": 1 }, "unread"),
            )
            .with_index(
                &groups,
                index(
                    doc! { "recipient": 1, "kind": 1, "target": 1, "window": 1 },
                    "by_target",
                ),
            )
            .with_index(
                &groups,
                index(doc! { "recipient": 1, CHANGED: 1, "_id": 1 }, "changed"),
            );
        Ok(NotificationStore {
            groups: Groups {
                backend,
                groups,
                window: self.window,
                recent_actors: self.recent_actors,
                max_actors: self.max_actors,
            },
            _data: PhantomData,
        })
    }
}

impl<D: Payload> NotificationStore<D> {
    /// A store with default settings in `database`.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default settings are valid")
    }

    /// Starts configuring a store in `database`.
    pub fn builder(database: &Database) -> NotificationStoreBuilder<D> {
        NotificationStoreBuilder {
            config: StoreConfig::new(database),
            window: Duration::from_secs(24 * 60 * 60),
            recent_actors: 3,
            max_actors: 10_000,
            _data: PhantomData,
        }
    }

    /// The database the store lives in.
    pub fn database(&self) -> &Database {
        self.groups.backend.database()
    }

    /// Creates the store's indexes (idempotent, one command per index: safe on every start).
    /// Correctness does not depend on them (a group's `_id` is what keeps it single), only the
    /// speed of pages, counts and withdrawals.
    pub async fn create_indexes(&self) -> Result<()> {
        self.groups.backend.create_indexes().await
    }

    /// The shard key of the store's collection.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        vec![ShardKey::new(
            self.groups.groups.name(),
            doc! { "recipient": 1, "_id": 1 },
            "a recipient's groups on one shard: every read, mark and event names the recipient",
        )]
    }

    /// Shards the store's collection on [`NotificationStore::shard_keys`] when connected to a
    /// `mongos`; see [`crate::sharding::shard_collections`].
    pub async fn shard_collections(&self) -> Result<()> {
        crate::sharding::shard_collections(self.database(), &self.shard_keys()).await
    }

    /// Adds the event's actor to its group (opening the group if it is the first), marks the
    /// group unseen and unread, and keeps the event's data as the group's. An actor already in
    /// the group changes nothing (so a repeated event, or a retry, counts once); an actor who is
    /// the recipient is not notified.
    ///
    /// An event with an idempotency key ([`Event::with_key`]) is applied once per recipient
    /// and key: a record `{_id: "key/<hash of recipient and key>", ...}` in the groups'
    /// collection is inserted first (its unique `_id` settles concurrent attempts, and fixes
    /// the event's time), then the event applied, then the record marked done (3 commands
    /// more); a repeat is 1 `find` and writes nothing, and a repeat of one interrupted after
    /// its record completes it. Records are not groups: no page, count, mark, watch or
    /// [`trim`](Self::trim) meets them.
    ///
    /// ```no_run
    /// # async fn demo(store: mongo_social::NotificationStore<()>) -> mongo_social::Result<()> {
    /// use mongo_social::notifications::{Activity, Event, Kind};
    /// let event = Event::new(Activity::new("ann", Kind::Mention, "p1", "bob")).with_key("req-1");
    /// store.notify(event.clone()).await?;
    /// store.notify(event).await?; // nothing written
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Before anything is written: [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank
    /// recipient, actor, target or custom kind, [`Invalid::TooLong`](crate::error::Invalid::TooLong)
    /// for one over [`MAX_ID_BYTES`](crate::MAX_ID_BYTES) (`"recipient"`, `"actor"`, `"target"`,
    /// `"kind"`), [`Invalid::TooLarge`](crate::error::Invalid::TooLarge)
    /// (`"notification data"`) for data over [`MAX_DATA_BYTES`]. Then
    /// [`Error::RetriesExhausted`] if more than 64 full groups of the window were met; [`Error::Conflict`] for a key the recipient's events used with another
    /// activity, time or data, nothing written.
    pub async fn notify(&self, event: impl Into<Event<D>>) -> Result<()> {
        let event = event.into();
        check(&event.activity)?;
        let data = event.data.as_ref().map(bson::to_bson).transpose()?;
        if let Some(data) = &data {
            validate::encoded_size("notification data", data, MAX_DATA_BYTES)?;
        }
        if event.activity.actor == event.activity.recipient {
            return Ok(());
        }
        let Some(key) = &event.key else {
            let at = event.at.unwrap_or_else(bson::DateTime::now);
            return self.groups.notify(&event.activity, at, data).await;
        };
        crate::idempotency::check(Some(key))?;
        let activity = &event.activity;
        let content = crate::idempotency::digest(&(
            (&activity.kind.as_str(), &activity.target, &activity.actor),
            event.at,
            &data,
        ))?;
        self.groups
            .notify_keyed(activity, key, &content, event.at, data)
            .await
    }

    /// Takes `activity`'s actor back out of the recipient's groups of its kind and target (an
    /// unlike, an unfollow, a deleted comment), the count included; a group left without actors
    /// is deleted. Withdrawing an actor who is in no group changes nothing.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for blank input,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) for an id over
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES), before anything is written.
    pub async fn withdraw(&self, activity: &Activity) -> Result<()> {
        check(activity)?;
        self.groups.withdraw(activity).await
    }

    /// One page of `recipient`'s groups, newest first (by their newest event), in one `find`.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank), [`Invalid::PageLimit`](crate::error::Invalid::PageLimit), or [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor
    /// this store did not make for `recipient`.
    pub async fn page(&self, recipient: &str, page: PageRequest) -> Result<Page<Group<D>>> {
        validate::user_id("recipient", recipient)?;
        page.check()?;
        self.groups.page(recipient, page).await
    }

    /// How many of `recipient`'s groups are unseen and unread, in one command.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank recipient.
    pub async fn counts(&self, recipient: &str) -> Result<Counts> {
        validate::user_id("recipient", recipient)?;
        self.groups.counts(recipient).await
    }

    /// Marks `recipient`'s groups seen: those whose newest event is no later than `until` (the
    /// newest [`Group::updated`] the recipient was shown), or all for `None`. Returns how many
    /// changed.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank recipient.
    pub async fn mark_seen(&self, recipient: &str, until: Option<bson::DateTime>) -> Result<u64> {
        validate::user_id("recipient", recipient)?;
        self.groups
            .mark(recipient, until, doc! { "seen": true })
            .await
    }

    /// Marks `recipient`'s groups read (and seen): those whose newest event is no later than
    /// `until`, or all for `None`. Returns how many changed.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank recipient.
    pub async fn mark_all_read(
        &self,
        recipient: &str,
        until: Option<bson::DateTime>,
    ) -> Result<u64> {
        validate::user_id("recipient", recipient)?;
        self.groups
            .mark(recipient, until, doc! { "seen": true, "read": true })
            .await
    }

    /// Marks one of `recipient`'s groups read (and seen).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] ([`Entity::Notification`]) for a group `recipient` does not have;
    /// [`Invalid::Blank`](crate::error::Invalid::Blank).
    pub async fn mark_read(&self, recipient: &str, group: &str) -> Result<()> {
        validate::user_id("recipient", recipient)?;
        self.groups.mark_read(recipient, group).await
    }

    /// A stream of `recipient`'s groups as actors join them, from `from` (the token of the last
    /// update handled) or from now: a group is reported each time it gains an actor (not when
    /// one is withdrawn). See [`crate::realtime`] for how it learns of them (a change stream
    /// filtered to the recipient, or one `find` per poll on `{recipient, changed}`) and what its
    /// tokens promise.
    ///
    /// ```no_run
    /// # async fn demo(store: mongo_social::NotificationStore<()>) -> mongo_social::Result<()> {
    /// use futures::StreamExt;
    /// use mongo_social::realtime::WatchOptions;
    /// let mut updates = store.watch("ann", None, WatchOptions::default());
    /// if let Some(update) = updates.next().await {
    ///     println!("{:?} by {}", update?.item.kind, "...");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The stream yields [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank recipient, [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a
    /// token of another watch, and server failures past the store's retry budget; then it ends.
    pub fn watch(
        &self,
        recipient: &str,
        from: Option<ResumeToken>,
        options: WatchOptions,
    ) -> Updates<Group<D>> {
        if let Err(error) = validate::user_id("recipient", recipient) {
            return crate::realtime::failed(error);
        }
        realtime::watch(
            Changes {
                groups: self.groups.clone(),
                recipient: recipient.to_owned(),
                _data: PhantomData::<fn() -> D>,
            },
            from,
            options,
        )
    }

    /// Deletes `recipient`'s groups past the newest `keep`, in two commands; returns how many
    /// went. Counts and pages then cover the groups kept; a cursor into the deleted ones reads
    /// an empty page.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank recipient.
    pub async fn trim(&self, recipient: &str, keep: usize) -> Result<u64> {
        validate::user_id("recipient", recipient)?;
        self.groups.trim(recipient, keep).await
    }
}

#[async_trait]
impl<D: Payload> Notifier for NotificationStore<D> {
    async fn notify(&self, activity: Activity) -> Result<()> {
        NotificationStore::notify(self, activity).await
    }

    async fn withdraw(&self, activity: Activity) -> Result<()> {
        NotificationStore::withdraw(self, &activity).await
    }
}

/// The input checks of an activity.
fn check(activity: &Activity) -> Result<()> {
    validate::user_id("recipient", &activity.recipient)?;
    validate::user_id("actor", &activity.actor)?;
    validate::id("target", &activity.target)?;
    validate::id("kind", activity.kind.as_str())
}

/// The `_id` of a group: each text field length-prefixed, so no id can be read two ways.
fn group_id(activity: &Activity, window: bson::DateTime, part: i64) -> String {
    let mut id = String::new();
    for field in [
        activity.recipient.as_str(),
        activity.kind.as_str(),
        activity.target.as_str(),
    ] {
        id.push_str(&format!("{}:{field}", field.len()));
    }
    id.push_str(&format!("{}.{part}", window.timestamp_millis()));
    id
}

/// The filter of every group of `activity`'s recipient, kind and target.
fn by_target(activity: &Activity) -> Document {
    doc! {
        "recipient": &activity.recipient,
        "kind": activity.kind.as_str(),
        "target": &activity.target,
    }
}

impl Groups {
    /// The start of the window holding `at`.
    fn window_of(&self, at: bson::DateTime) -> bson::DateTime {
        let length = self.window.as_millis().min(i64::MAX as u128) as i64;
        let millis = at.timestamp_millis();
        bson::DateTime::from_millis(millis - millis.rem_euclid(length))
    }

    /// The lock of a recipient's groups of one kind and target, where updates are not atomic.
    fn lock_key(activity: &Activity) -> String {
        format!(
            "notify:{}",
            group_id(activity, bson::DateTime::from_millis(0), 0)
        )
    }

    async fn notify(
        &self,
        activity: &Activity,
        at: bson::DateTime,
        data: Option<Bson>,
    ) -> Result<()> {
        let window = self.window_of(at);
        self.backend
            .exclusive_one(&Self::lock_key(activity), async {
                let mut part = 0;
                for _ in 0..MAX_PART_ATTEMPTS {
                    if self.add(activity, window, part, at, &data).await? {
                        return Ok(());
                    }
                    // The actor is in the window's group already (a repeat, a retry), or the
                    // part tried is full.
                    let mut holding = by_target(activity);
                    holding.insert("window", window);
                    holding.insert("members", &activity.actor);
                    let held = self
                        .backend
                        .retry("find notification group", || async {
                            Ok(self.groups.find_one(holding.clone()).await?)
                        })
                        .await?;
                    if held.is_some() {
                        return Ok(());
                    }
                    let mut parts = by_target(activity);
                    parts.insert("window", window);
                    let last = self
                        .backend
                        .retry("find notification group", || async {
                            Ok(self
                                .groups
                                .find_one(parts.clone())
                                .sort(doc! { "part": -1 })
                                .projection(doc! { "part": 1, "count": 1 })
                                .await?)
                        })
                        .await?;
                    part = match last {
                        Some(last) => {
                            let full =
                                integer(&last, "count").unwrap_or(0) >= self.max_actors as i64;
                            integer(&last, "part").unwrap_or(0) + i64::from(full)
                        }
                        None => 0,
                    };
                }
                Err(Error::contention("notify", MAX_PART_ATTEMPTS))
            })
            .await
    }

    /// [`Groups::notify`] of an event keyed `key` (whose digest is `content`): a record
    /// `{_id: "key/<hash of recipient and key>", recipient, idempotency_key, content_digest,
    /// at, done}` in the groups' collection first (an `insert`, which its unique `_id` lets one
    /// attempt of concurrent ones make), the event, then the record marked done. A repeat finds
    /// the record (one `find`) and, done, writes nothing; not done, it applies the event again
    /// (idempotent) and marks it. Records hold no `count`, `seen` or `changed`, so no page,
    /// count, mark, watch or trim meets them.
    async fn notify_keyed(
        &self,
        activity: &Activity,
        key: &str,
        content: &str,
        at: Option<bson::DateTime>,
        data: Option<Bson>,
    ) -> Result<()> {
        use crate::idempotency::{CONTENT, KEY};
        let id = format!(
            "key/{}",
            crate::idempotency::id(&activity.recipient, key).to_hex()
        );
        let filter = doc! { "_id": &id, "recipient": &activity.recipient };
        let find = || async {
            self.backend
                .retry("find notification key", || async {
                    Ok(self.groups.find_one(filter.clone()).await?)
                })
                .await
        };
        let record = match find().await? {
            Some(record) => record,
            None => {
                let record = doc! {
                    "_id": &id,
                    "recipient": &activity.recipient,
                    KEY: key,
                    CONTENT: content,
                    // The event's time, fixed by the first attempt for every later one.
                    "at": at.unwrap_or_else(bson::DateTime::now),
                    "done": false,
                };
                if self
                    .backend
                    .insert_once(&self.groups, record.clone())
                    .await?
                {
                    record
                } else {
                    find()
                        .await?
                        .ok_or_else(|| Error::contention("record notification key", 1))?
                }
            }
        };
        crate::idempotency::same(&record, Entity::Notification, key, content)?;
        if record.get_bool("done") == Ok(true) {
            return Ok(());
        }
        let at = record
            .get_datetime("at")
            .copied()
            .unwrap_or_else(|_| bson::DateTime::now());
        self.notify(activity, at, data).await?;
        let done = doc! { "_id": &id, "recipient": &activity.recipient, "done": false };
        self.backend
            .retry("finish notification key", || async {
                self.groups
                    .update_one(done.clone(), doc! { "$set": { "done": true } })
                    .await?;
                Ok(())
            })
            .await
    }

    /// The one conditional upsert of an event: whether the actor joined group `part`.
    ///
    /// Idempotent: the filter excludes a group holding the actor, so a retry after a lost reply
    /// matches nothing, and its upsert meets the `_id` as a duplicate key: `false`, and the
    /// caller finds the actor there.
    async fn add(
        &self,
        activity: &Activity,
        window: bson::DateTime,
        part: i64,
        at: bson::DateTime,
        data: &Option<Bson>,
    ) -> Result<bool> {
        let mut filter = by_target(activity);
        filter.insert("_id", group_id(activity, window, part));
        filter.insert("window", window);
        filter.insert("part", part);
        filter.insert("members", doc! { "$ne": &activity.actor });
        filter.insert("count", doc! { "$lt": self.max_actors as i64 });
        let mut set = doc! { "seen": false, "read": false };
        if let Some(data) = data {
            set.insert("data", data.clone());
        }
        let update = doc! {
            "$setOnInsert": { "created": at },
            "$push": { "members": &activity.actor },
            "$inc": { "count": 1_i64, CHANGES: 1_i64 },
            "$max": { "updated": at },
            "$set": set,
            // The server's time of the change: what a watch polls by (`updated` is the event's
            // own time, which may be older).
            "$currentDate": { CHANGED: true },
        };
        self.backend
            .retry("notify", || async {
                match self
                    .groups
                    .update_one(filter.clone(), update.clone())
                    .upsert(true)
                    .await
                {
                    Ok(result) => Ok(result.matched_count > 0 || result.upserted_id.is_some()),
                    Err(error) if is_duplicate_key(&error) => Ok(false),
                    Err(error) => Err(error.into()),
                }
            })
            .await
    }

    /// Pulls the actor from every group of the kind and target holding it, then deletes the
    /// groups left empty. Both are idempotent: the first matches only groups holding the actor,
    /// the second only empty ones.
    async fn withdraw(&self, activity: &Activity) -> Result<()> {
        self.backend
            .exclusive_one(&Self::lock_key(activity), async {
                let mut holding = by_target(activity);
                holding.insert("members", &activity.actor);
                let pull = doc! {
                    "$pull": { "members": &activity.actor },
                    "$inc": { "count": -1_i64 },
                };
                self.backend
                    .retry("withdraw notification", || async {
                        Ok(self
                            .groups
                            .update_many(holding.clone(), pull.clone())
                            .await?)
                    })
                    .await?;
                let mut empty = by_target(activity);
                empty.insert("count", doc! { "$lte": 0_i64 });
                self.backend
                    .retry("delete empty notification groups", || async {
                        Ok(self.groups.delete_many(empty.clone()).await?)
                    })
                    .await?;
                Ok(())
            })
            .await
    }

    async fn page<D: Payload>(&self, recipient: &str, page: PageRequest) -> Result<Page<Group<D>>> {
        let mut filter = doc! { "recipient": recipient, "count": { "$gt": 0_i64 } };
        if let Some(after) = &page.after {
            let [updated, id] = after.fields(CURSOR_TAG, cursor_scope(recipient))?;
            let updated = page::parse_time(&updated)?;
            if id.is_empty() {
                return Err(invalid("no group id"));
            }
            filter.insert(
                "$or",
                vec![
                    doc! { "updated": { "$lt": updated } },
                    doc! { "updated": updated, "_id": { "$lt": id } },
                ],
            );
        }
        let mut find = self
            .groups
            .find(filter)
            .sort(doc! { "updated": -1, "_id": -1 })
            .limit(page.fetch() as i64)
            .batch_size(page.fetch() as u32);
        if self.backend.capabilities().await?.slice_projection {
            // Every field named: servers differ on whether a lone `$slice` keeps the others.
            find = find.projection(doc! {
                "members": { "$slice": -(self.recent_actors as i32) },
                "recipient": 1, "kind": 1, "target": 1, "window": 1, "count": 1,
                "updated": 1, "seen": 1, "read": 1, "data": 1,
            });
        }
        let documents: Vec<Document> = find.await?.try_collect().await?;
        let groups = documents
            .into_iter()
            .map(|document| self.decode(document))
            .collect::<Result<Vec<Group<D>>>>()?;
        Ok(Page::from_overfetch(groups, page.limit, |last| {
            let fields = [&page::time_field(last.updated), &last.id];
            Cursor::new(
                CURSOR_TAG,
                cursor_scope(recipient),
                &fields.map(String::as_str),
            )
        }))
    }

    fn decode<D: Payload>(&self, mut document: Document) -> Result<Group<D>> {
        let name = self.groups.name();
        let id = document.get("_id").cloned();
        let corrupt = |what: &str| bson_ext::corrupt(name, id.clone(), what);
        let text = |document: &Document, key: &str| -> Result<String> {
            document
                .get_str(key)
                .map(str::to_owned)
                .map_err(|_| corrupt(key))
        };
        let members: Vec<String> = match document.remove("members") {
            Some(Bson::Array(members)) => members
                .into_iter()
                .rev()
                .take(self.recent_actors)
                .filter_map(|actor| actor.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        let data = match document.remove("data") {
            Some(Bson::Null) | None => None,
            Some(data) => Some(bson_ext::decode_with_id(name, id.clone(), data)?),
        };
        Ok(Group {
            id: text(&document, "_id")?,
            recipient: text(&document, "recipient")?,
            kind: Kind::from_name(&text(&document, "kind")?),
            target: text(&document, "target")?,
            window: document
                .get_datetime("window")
                .map_err(|_| corrupt("window"))
                .copied()?,
            actors: members,
            actor_count: bson_ext::count(&document, "count"),
            updated: document
                .get_datetime("updated")
                .map_err(|_| corrupt("updated"))
                .copied()?,
            seen: document.get_bool("seen").unwrap_or(false),
            read: document.get_bool("read").unwrap_or(false),
            data,
        })
    }

    /// One `aggregate` over the recipient's unread groups, grouped by whether they were seen
    /// (an unseen group is unread too).
    async fn counts(&self, recipient: &str) -> Result<Counts> {
        let rows: Vec<Document> = self
            .groups
            .aggregate(vec![
                doc! { "$match": {
                    "recipient": recipient, "read": false, "count": { "$gt": 0_i64 },
                } },
                doc! { "$group": { "_id": "$seen", "groups": { "$sum": 1 } } },
            ])
            .await?
            .try_collect()
            .await?;
        let mut counts = Counts::default();
        for row in rows {
            let groups = bson_ext::count(&row, "groups");
            counts.unread += groups;
            if row.get_bool("_id") != Ok(true) {
                counts.unseen += groups;
            }
        }
        Ok(counts)
    }

    /// Sets `marks` on the recipient's groups updated no later than `until` (all for `None`)
    /// that lack them. A `$set`: a retry sets the same values.
    async fn mark(
        &self,
        recipient: &str,
        until: Option<bson::DateTime>,
        marks: Document,
    ) -> Result<u64> {
        let missing: Vec<Document> = marks
            .keys()
            .map(|mark| doc! { mark.as_str(): false })
            .collect();
        let mut filter = doc! { "recipient": recipient, "$or": missing };
        if let Some(until) = until {
            filter.insert("updated", doc! { "$lte": until });
        }
        let update = doc! { "$set": marks };
        let result = self
            .backend
            .retry("mark notifications", || async {
                Ok(self
                    .groups
                    .update_many(filter.clone(), update.clone())
                    .await?)
            })
            .await?;
        Ok(result.modified_count)
    }

    async fn mark_read(&self, recipient: &str, group: &str) -> Result<()> {
        let filter = doc! { "_id": group, "recipient": recipient, "count": { "$gt": 0_i64 } };
        let update = doc! { "$set": { "seen": true, "read": true } };
        let result = self
            .backend
            .retry("mark notification read", || async {
                Ok(self
                    .groups
                    .update_one(filter.clone(), update.clone())
                    .await?)
            })
            .await?;
        if result.matched_count == 0 {
            return Err(Error::NotFound {
                what: Entity::Notification,
                id: group.to_owned(),
            });
        }
        Ok(())
    }

    async fn trim(&self, recipient: &str, keep: usize) -> Result<u64> {
        // Keyed events' records (see `notify_keyed`) are not groups: they stay.
        let groups_only = doc! { "$exists": false };
        let first_gone = self
            .groups
            .find_one(doc! { "recipient": recipient, crate::idempotency::KEY: groups_only.clone() })
            .sort(doc! { "updated": -1, "_id": -1 })
            .skip(keep as u64)
            .projection(doc! { "updated": 1 })
            .await?;
        let Some(first_gone) = first_gone else {
            return Ok(0);
        };
        let (Ok(updated), Some(id)) = (first_gone.get_datetime("updated"), first_gone.get("_id"))
        else {
            return Err(bson_ext::corrupt(
                self.groups.name(),
                first_gone.get("_id").cloned(),
                "updated",
            ));
        };
        let older = doc! {
            "recipient": recipient,
            crate::idempotency::KEY: groups_only,
            "$or": [
                { "updated": { "$lt": updated } },
                { "updated": updated, "_id": { "$lte": id.clone() } },
            ],
        };
        // A filtered delete: a retry deletes what is left of the same range.
        let deleted = self
            .backend
            .retry("trim notifications", || async {
                Ok(self.groups.delete_many(older.clone()).await?)
            })
            .await?;
        Ok(deleted.deleted_count)
    }
}

/// A recipient's groups as a watch sees them: keyed by when they last gained an actor.
struct Changes<D> {
    groups: Groups,
    recipient: String,
    _data: PhantomData<fn() -> D>,
}

impl<D> Changes<D> {
    /// When the group last gained an actor, and which of its states that made: two joins in
    /// one millisecond are two keys.
    fn key(document: &Document) -> Option<Key> {
        let changed = document.get_datetime(CHANGED).ok()?;
        let id = document.get_str("_id").ok()?;
        let changes = integer(document, CHANGES)?;
        Some(Key::new(
            changed.timestamp_millis(),
            format!("{id}/{changes:020}"),
        ))
    }
}

#[async_trait]
impl<D: Payload> Source for Changes<D> {
    type Item = Group<D>;

    fn name(&self) -> String {
        format!(
            "notifications/{}/{}",
            self.groups.groups.name(),
            self.recipient
        )
    }

    fn backend(&self) -> &crate::backend::Backend {
        &self.groups.backend
    }

    async fn poll(
        &self,
        from: &Key,
        _seen: &std::collections::BTreeSet<Key>,
        limit: usize,
    ) -> Result<Vec<(Key, Group<D>)>> {
        let documents: Vec<Document> = self
            .groups
            .groups
            .find(doc! {
                "recipient": &self.recipient,
                CHANGED: { "$gte": bson::DateTime::from_millis(from.time) },
            })
            .sort(doc! { CHANGED: 1, "_id": 1 })
            .limit(limit as i64)
            .await?
            .try_collect()
            .await?;
        documents
            .into_iter()
            .filter_map(|document| Some((Self::key(&document)?, document)))
            .map(|(key, document)| Ok((key, self.groups.decode(document)?)))
            .collect()
    }

    async fn changes(&self) -> Result<(Collection<Document>, Vec<Document>)> {
        Ok((
            self.groups.groups.clone(),
            vec![doc! { "$match": {
                "fullDocument.recipient": &self.recipient,
                "operationType": { "$in": ["insert", "update", "replace"] },
            } }],
        ))
    }

    async fn items_of(
        &self,
        event: mongodb::change_stream::event::ChangeStreamEvent<Document>,
        _newest: &Key,
        _seen: &std::collections::BTreeSet<Key>,
    ) -> Result<Vec<(Key, Group<D>)>> {
        // An actor joining sets `changed`; a withdrawal does not, and is not reported.
        let joined = event
            .update_description
            .as_ref()
            .is_none_or(|update| update.updated_fields.contains_key(CHANGED));
        let Some(document) = event.full_document.filter(|_| joined) else {
            return Ok(Vec::new());
        };
        let Some(key) = Self::key(&document) else {
            return Ok(Vec::new());
        };
        if bson_ext::count(&document, "count") == 0 {
            return Ok(Vec::new());
        }
        Ok(vec![(key, self.groups.decode(document)?)])
    }
}
