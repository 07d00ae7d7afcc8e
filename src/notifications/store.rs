//! The store's public operations: input checks, then the groups' reads and writes.

use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use bson::doc;
use mongodb::Database;

use super::watch::Changes;
use super::writes::check;
use super::{
    Activity, Counts, Event, Group, NotificationStore, NotificationStoreBuilder, Notifier,
    MAX_DATA_BYTES,
};
use crate::config::StoreConfig;
use crate::observe::spans::Op;
use crate::realtime::{self, ResumeToken, Updates, WatchOptions};
use crate::sharding::{self, ShardKey};
use crate::validate;
use crate::{payload::Payload, Page, PageRequest, Result};

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
        self.groups
            .backend
            .create_indexes_in(Op::NotificationsCreateIndexes.span())
            .await
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
        let keys = self.shard_keys();
        sharding::shard_collections_in(
            Op::NotificationsShardCollections.span(),
            self.database(),
            &keys,
        )
        .await
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
    /// for one over [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) (`"recipient"`, `"actor"`, `"target"`,
    /// `"kind"`), [`Invalid::TooLarge`](crate::error::Invalid::TooLarge)
    /// (`"notification data"`) for data over [`MAX_DATA_BYTES`]. Then
    /// [`Error::RetriesExhausted`](crate::Error::RetriesExhausted) if more than 64 full groups of the window were met; [`Error::Conflict`](crate::Error::Conflict) for a key the recipient's events used with another
    /// activity, time or data, nothing written.
    pub async fn notify(&self, event: impl Into<Event<D>>) -> Result<()> {
        Op::NotificationsNotify
            .span()
            .run(async move {
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
            })
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
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), before anything is written.
    pub async fn withdraw(&self, activity: &Activity) -> Result<()> {
        Op::NotificationsWithdraw
            .span()
            .run(async move {
                check(activity)?;
                self.groups.withdraw(activity).await
            })
            .await
    }

    /// One page of `recipient`'s groups, newest first (by their newest event), in one `find`.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank), [`Invalid::PageLimit`](crate::error::Invalid::PageLimit), or [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor
    /// this store did not make for `recipient`.
    pub async fn page(&self, recipient: &str, page: PageRequest) -> Result<Page<Group<D>>> {
        let read = move || async move {
            page.check()?;
            self.groups.page(recipient, page).await
        };
        for_recipient(Op::NotificationsPage, recipient, read).await
    }

    /// How many of `recipient`'s groups are unseen and unread, in one command.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank recipient.
    pub async fn counts(&self, recipient: &str) -> Result<Counts> {
        let read = move || self.groups.counts(recipient);
        for_recipient(Op::NotificationsCounts, recipient, read).await
    }

    /// Marks `recipient`'s groups seen: those whose newest event is no later than `until` (the
    /// newest [`Group::updated`] the recipient was shown), or all for `None`. Returns how many
    /// changed.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank recipient.
    pub async fn mark_seen(&self, recipient: &str, until: Option<bson::DateTime>) -> Result<u64> {
        let marks = doc! { "seen": true };
        let write = move || self.groups.mark(recipient, until, marks);
        for_recipient(Op::NotificationsMarkSeen, recipient, write).await
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
        let marks = doc! { "seen": true, "read": true };
        let write = move || self.groups.mark(recipient, until, marks);
        for_recipient(Op::NotificationsMarkAllRead, recipient, write).await
    }

    /// Marks one of `recipient`'s groups read (and seen).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`](crate::Error::NotFound) ([`Entity::Notification`](crate::error::Entity::Notification)) for a group `recipient` does not have;
    /// [`Invalid::Blank`](crate::error::Invalid::Blank).
    pub async fn mark_read(&self, recipient: &str, group: &str) -> Result<()> {
        let write = move || self.groups.mark_read(recipient, group);
        for_recipient(Op::NotificationsMarkRead, recipient, write).await
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
        let write = move || self.groups.trim(recipient, keep);
        for_recipient(Op::NotificationsTrim, recipient, write).await
    }
}

/// Runs `work`, a read or write of `recipient`'s groups, in `op`'s span once `recipient` is
/// checked: a blank or over-long id fails there, before any command. `work` is called only
/// then.
async fn for_recipient<T, Fut>(op: Op, recipient: &str, work: impl FnOnce() -> Fut) -> Result<T>
where
    Fut: Future<Output = Result<T>>,
{
    op.span()
        .run(async move {
            validate::user_id("recipient", recipient)?;
            work().await
        })
        .await
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
