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
//! Where updates are not atomic, `notify` and `withdraw` also take and give
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

mod builder;
pub(crate) mod outbox;
mod reads;
mod store;
mod types;
mod watch;
mod writes;

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use bson::Document;
use mongodb::Collection;

pub use builder::NotificationStoreBuilder;
pub use outbox::Outbox;
pub use types::{Activity, Counts, Event, Group, Kind};

use crate::backend::Backend;
use crate::phantom_impls::clone_fields;
use crate::Result;

/// The store's collections, by default name.
pub const COLLECTIONS: [&str; 2] = ["notifications", "notification_locks"];

/// When a group last gained an actor, by the server's clock.
const CHANGED: &str = "changed";
/// How many times a group gained an actor: with its `_id`, names one state of it.
const CHANGES: &str = "changes";

/// The largest data an event may carry ([`Event::with_data`]), encoded, in bytes: 1 MiB.
///
/// A group keeps its newest event's data beside its actors, in one document of at most 16 MiB:
/// 1 MiB of data leaves the rest to them, room for the default 10,000 actors
/// ([`NotificationStoreBuilder::max_actors`]) even with ids of the longest kind
/// ([`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES)). Data is for showing the group ("Ann liked *your
/// trip photos*"); the application keeps anything larger itself and puts its id here.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// What a store that knows an action happened tells: the crate's stores call it when built
/// with a notifier (see the [module docs](self)), through their [`Outbox`], so a call may come
/// again (at least once per write), later than the write, and from the outbox's worker. Both
/// calls must be idempotent. Applications implement it for notifications of their own (a push
/// service, a queue of their own); an error leaves the notification in the outbox, retried.
///
/// An application implements it to send events elsewhere; [`NotificationStore`] implements it,
/// and the graph, the feed and the comment stores call it.
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

clone_fields!(NotificationStore<D> { groups, _data });

impl<D> fmt::Debug for NotificationStore<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotificationStore")
            .field("groups", &self.groups.groups.name())
            .field("window", &self.groups.window)
            .finish_non_exhaustive()
    }
}
