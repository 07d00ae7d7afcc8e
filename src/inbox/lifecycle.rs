//! The inbox lifecycle: read state and unread counts, stars, delete for me, retract and edit by
//! the sender, retention, mute and block; one [`InboxLifecycle`] trait that every strategy
//! implements.
//!
//! # Why a second trait
//!
//! [`InboxStore`] stays the minimum a strategy needs (send, deliver, page, count), and
//! [`InboxLifecycle`] extends it (`InboxLifecycle<P>: InboxStore<P>`): code that only sends
//! and reads (such as [`crate::delivery::Delivery`]) keeps asking for an
//! `Arc<DynInboxStore<P>>`. An `Arc<DynInboxLifecycle<P>>` converts into one (trait
//! upcasting), so an application holds one handle of each strategy and passes it to both. Blocking is the exception that lives in
//! [`InboxStore`] itself: a blocked sender's message is never delivered, whoever calls
//! [`InboxStore::send`] or [`InboxStore::deliver`], so both report the recipients they skipped.
//!
//! # What every strategy promises
//!
//! - **Read state.** A message arrives unread. [`InboxLifecycle::mark_read`] and
//!   [`InboxLifecycle::mark_unread`] change one message, [`InboxLifecycle::mark_read_up_to`] a
//!   message and every older one ([`UpTo`]), each in a bounded number of commands whatever the
//!   number of messages. [`InboxLifecycle::unread_count`] is one command. Pages carry the state
//!   ([`Message::read`](super::Message::read), [`Message::starred`](super::Message::starred)).
//!   Marks and new arrivals, however they interleave, never make the unread count wrong or
//!   negative.
//! - **Delete and retract.** [`InboxLifecycle::delete`] removes a message from its owner's inbox
//!   only; [`InboxLifecycle::retract`] removes it, by its sender, from every inbox holding it (a
//!   group message, and deliveries to followers, included). Both leave a tombstone where the
//!   message was (no payload), so pages stay exact (no gap, no repeat, positions and cursors
//!   unchanged) and a repeated call finds its own work done. [`InboxLifecycle::edit`] replaces
//!   the payload in every inbox and records when ([`Message::edited`](super::Message::edited)).
//! - **Mute and block.** Per owner and sender. A muted sender's messages are delivered hidden,
//!   and the ones already there are hidden: pages, [`InboxStore::count`] and the unread count
//!   leave them out until [`InboxLifecycle::unmute`], which shows them again with the read state
//!   they had. A blocked sender's messages are not delivered ([`super::Sent::skipped`]), and the
//!   ones already there are hidden until [`InboxLifecycle::unblock`]. Pages still filter on the
//!   server, in the one `find` they were before (buckets skip hidden entries of the buckets that
//!   find returns).
//! - **Retention.** A store built with a [`Retention`] drops an owner's old messages in
//!   [`InboxLifecycle::prune`], in a bounded number of commands. What is pruned is gone: it
//!   leaves the counts, its read state goes with it, marking it is [`Error::NotFound`], and a
//!   cursor pointing into pruned history reads an empty last page.
//! - **Bad input** fails with a typed error before anything is written: an id the owner never
//!   received (or deleted, or pruned) is [`Error::NotFound`] (`Entity::Message`); a cursor of
//!   another owner's inbox or another strategy is [`Invalid::Cursor`](crate::error::Invalid::Cursor); a change by someone
//!   other than the sender is [`Forbidden::NotSender`]; a blank id is [`Invalid::Blank`](crate::error::Invalid::Blank); an edit too
//!   large for the store is [`Invalid::TooLarge`](crate::error::Invalid::TooLarge).
//! - **Retries.** Every write is idempotent under a lost reply (see each strategy's notes), so
//!   the store retries it under its [`RetryPolicy`](crate::retry::RetryPolicy), and a caller may repeat
//!   any call after a failure.
//!
//! # How each strategy keeps the state
//!
//! - [`FanOutOnWrite`](super::FanOutOnWrite): on each copy (`unread`, `starred`, `muted`,
//!   `blocked`, and `gone` for a tombstone); counts are a `count` of an index range starting
//!   with the owner.
//! - [`FanOutOnRead`](super::FanOutOnRead): one document per message shared by its
//!   recipients, so the owners' state is arrays of owners on it (`read_by`, `starred_by`,
//!   `gone_for`, `muted_for`, `blocked_for`; `retracted` for the sender's tombstone), and pages
//!   and counts filter on them (`{read_by: {$ne: owner}}`).
//! - [`BucketedFanOut`](super::BucketedFanOut): on each entry of a bucket (`read`, `starred`,
//!   `gone`, `muted`, `blocked`), and per bucket the counters `unread` (visible unread entries)
//!   and `hidden` (entries pages skip), changed in the same atomic update as the entries they
//!   count, so they are exact under any concurrency; the unread count sums `unread` over the
//!   owner's buckets that have any (one `find`). Entries are addressed by their index in the
//!   bucket (`messages.7.read`), never shifted: positions and cursors stay valid. Writes that
//!   depend on what they read are guarded by the bucket's revision (`rev`), and re-read when
//!   another writer got there first. No positional (`$`) or array-filter update is needed, so
//!   the same code runs on servers that have neither.
//!
//! Mute and block lists live in one document per owner (`{_id: owner, muted, blocked}`): in
//! the bucketed store's heads collection, which every send reads already; in an
//! `inbox_filters` collection for the other two, which a send reads with one more `find`.
//!
//! Where single-document updates are not atomic (see docs/SERVERS.md), lifecycle writes take the same
//! per-owner locks as bucketed sends (per document for [`FanOutOnRead`](super::FanOutOnRead),
//! whose documents are shared by owners), so concurrent writers take turns. On every other
//! server they run as they are. A mute or block racing a send to the same owner may let that
//! one message through unhidden (the send read the lists before the mute wrote them); muting
//! again hides it.
//!
//! The commands each operation costs, per strategy, are in `docs/INBOXES.md` ("Inbox lifecycle"),
//! checked by `tests/inbox.rs`.

use async_trait::async_trait;

use super::engine::LifecycleEngine;
use super::operation::{for_user, span};
use super::validate::check_user_id;
use super::{InboxStore, MessageId, Payload};
use crate::error::{Error, Forbidden, Result};

pub use super::filters::{Filter, Filters};
pub use super::retention::Retention;
pub use super::up_to::UpTo;

/// The inbox lifecycle: read state, stars, delete and retract, edit, retention, mute and block.
/// Every strategy implements it; see the [module docs](self) for what each call promises and
/// how each strategy keeps the state.
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::Arc;
/// use mongo_social::inbox::{DynInboxLifecycle, UpTo};
/// use mongo_social::{DynInboxStore, FanOutOnWrite, NewMessage, PageRequest};
///
/// let inbox: Arc<DynInboxLifecycle<String>> = Arc::new(FanOutOnWrite::new(&db));
/// inbox.create_indexes().await?;
/// let hi = inbox.send(NewMessage::new("joe", ["bob"], "Hi!".to_string())).await?.message;
/// assert_eq!(inbox.unread_count("bob").await?, 1);
/// inbox.mark_read("bob", hi.id).await?;
/// inbox.edit("joe", hi.id, "Hi Bob!".to_string()).await?;
/// inbox.mute("bob", "joe").await?; // joe's messages are hidden from bob until unmuted
/// inbox.mark_read_up_to("bob", UpTo::Newest).await?;
/// let plain: Arc<DynInboxStore<String>> = inbox; // what `Delivery` takes
/// # Ok(()) }
/// ```
#[async_trait]
pub trait InboxLifecycle<P: Payload>: InboxStore<P> {
    /// The strategy's lifecycle engine: what this trait's operations call once their input is
    /// checked. Hidden and unnameable outside the crate, so the trait is sealed: only the crate's
    /// strategies (and its migration's stores) are inbox stores, and new operations can be added to
    /// it without breaking any application.
    #[doc(hidden)]
    fn lifecycle_engine(&self) -> &dyn LifecycleEngine<P>;

    /// Marks message `id` of `owner`'s inbox read (again: nothing changes).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] (`Entity::Message`) for a message `owner` never received, deleted, or
    /// lost to pruning or retraction; [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank owner.
    async fn mark_read(&self, owner: &str, id: MessageId) -> Result<()> {
        let work = self.lifecycle_engine().mark_read(owner, id);
        for_user(span!(self, "mark_read"), "owner", owner, work).await
    }

    /// Marks message `id` of `owner`'s inbox unread (again: nothing changes).
    ///
    /// # Errors
    ///
    /// As [`InboxLifecycle::mark_read`].
    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()> {
        let work = self.lifecycle_engine().mark_unread(owner, id);
        for_user(span!(self, "mark_unread"), "owner", owner, work).await
    }

    /// Marks the message `up_to` names, and every older one, read. Hidden messages (from a muted
    /// or blocked sender) keep their state, and show it when the sender is unmuted or unblocked.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for a message `owner` never received (or no longer holds);
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor of another owner's inbox or of another strategy;
    /// [`Invalid::Blank`](crate::error::Invalid::Blank).
    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()> {
        let work = self.lifecycle_engine().mark_read_up_to(owner, up_to);
        for_user(span!(self, "mark_read_up_to"), "owner", owner, work).await
    }

    /// Marks every message of `owner`'s inbox read: [`InboxLifecycle::mark_read_up_to`] with
    /// [`UpTo::Newest`], named as notifications name it
    /// ([`NotificationStore::mark_all_read`](crate::NotificationStore::mark_all_read)).
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank owner.
    async fn mark_all_read(&self, owner: &str) -> Result<()> {
        self.mark_read_up_to(owner, UpTo::Newest).await
    }

    /// How many messages of `owner`'s inbox are unread, leaving out hidden ones. One command.
    ///
    /// The count is exact, so its cost grows with the unread messages (a count of a million
    /// reads a million index entries). For a badge, [`InboxLifecycle::unread_count_up_to`] stops
    /// at a cap.
    async fn unread_count(&self, owner: &str) -> Result<u64> {
        let work = self.lifecycle_engine().unread_count(owner, None);
        for_user(span!(self, "unread_count"), "owner", owner, work).await
    }

    /// How many messages of `owner`'s inbox are unread, counting no further than `cap`: exact
    /// below `cap`, `cap` itself when there are `cap` or more (show it as "99+" for a cap of
    /// 100, as Mastodon's `unread_count` does with its `limit`). One command, which stops
    /// counting at `cap`: on MongoDB its cost follows `cap`, not the unread messages; on
    /// DocumentDB it still grows with them, more slowly than an exact count
    /// (docs/BENCHMARKS.md). A `cap` of 0 returns 0 and sends nothing.
    ///
    /// ```no_run
    /// # async fn demo(inbox: &mongo_social::FanOutOnWrite<String>) -> mongo_social::Result<()> {
    /// use mongo_social::inbox::InboxLifecycle;
    /// let badge = match inbox.unread_count_up_to("bob", 100).await? {
    ///     100 => "99+".to_owned(),
    ///     n => n.to_string(),
    /// };
    /// # Ok(()) }
    /// ```
    ///
    /// A store of the application's own that leaves this out counts exactly and caps the
    /// result.
    ///
    /// # Errors
    ///
    /// As [`InboxLifecycle::unread_count`].
    async fn unread_count_up_to(&self, owner: &str, cap: u64) -> Result<u64> {
        span!(self, "unread_count", cap)
            .run(async move {
                check_user_id("owner", owner)?;
                if cap == 0 {
                    return Ok(0);
                }
                self.lifecycle_engine().unread_count(owner, Some(cap)).await
            })
            .await
    }

    /// Stars (`true`) or unstars message `id` of `owner`'s inbox.
    ///
    /// # Errors
    ///
    /// As [`InboxLifecycle::mark_read`].
    async fn set_starred(&self, owner: &str, id: MessageId, starred: bool) -> Result<()> {
        let work = self.lifecycle_engine().set_starred(owner, id, starred);
        for_user(span!(self, "set_starred"), "owner", owner, work).await
    }

    /// Deletes message `id` from `owner`'s inbox only ("delete for me"); every other recipient
    /// keeps it. Deleting it again, or deleting a retracted message, changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for a message `owner` never received (or that was pruned);
    /// [`Invalid::Blank`](crate::error::Invalid::Blank).
    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        let work = self.lifecycle_engine().delete(owner, id);
        for_user(span!(self, "delete"), "owner", owner, work).await
    }

    /// Retracts message `id`, sent by `sender`, from every inbox that holds it. Retracting it
    /// again changes nothing.
    ///
    /// # Errors
    ///
    /// [`Forbidden::NotSender`] when `sender` did not send it, [`Error::NotFound`] when no inbox
    /// holds it, both before anything is written; [`Invalid::Blank`](crate::error::Invalid::Blank).
    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        let work = self.lifecycle_engine().retract(sender, id);
        for_user(span!(self, "retract"), "sender", sender, work).await
    }

    /// Replaces the payload of message `id`, sent by `sender`, in every inbox that holds it, and
    /// returns the edit's time, which pages show as [`Message::edited`](super::Message::edited).
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"sender"`) for the sender's id and
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"message"`) for a payload that
    /// alone is larger than a message of the store may be (about
    /// [`InboxStore::max_message_bytes`]), before any
    /// command; [`Forbidden::NotSender`], [`Error::NotFound`] (no inbox
    /// holds it, or it was retracted), [`Invalid::TooLarge`](crate::error::Invalid::TooLarge)
    /// for the message with the new payload, all before anything is written.
    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        let work = self.lifecycle_engine().edit(sender, id, payload);
        for_user(span!(self, "edit"), "sender", sender, work).await
    }

    /// Turns `filter` on (`on`) or off for `sender`'s messages in `owner`'s inbox; see
    /// [`InboxLifecycle::mute`] and [`InboxLifecycle::block`]. Idempotent.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank owner or sender.
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        span!(self, "set_filter")
            .run(async move {
                check_user_id("owner", owner)?;
                check_user_id("sender", sender)?;
                self.lifecycle_engine()
                    .set_filter(owner, sender, filter, on)
                    .await
            })
            .await
    }

    /// Mutes `sender` for `owner`: their messages, those already there and those to come, are
    /// hidden from `owner`'s pages, count and unread count until [`InboxLifecycle::unmute`].
    async fn mute(&self, owner: &str, sender: &str) -> Result<()> {
        self.set_filter(owner, sender, Filter::Mute, true).await
    }

    /// Undoes [`InboxLifecycle::mute`]: the sender's messages show again, with the read state
    /// they had (unless the sender is also blocked).
    async fn unmute(&self, owner: &str, sender: &str) -> Result<()> {
        self.set_filter(owner, sender, Filter::Mute, false).await
    }

    /// Blocks `sender` for `owner`: their messages are no longer delivered to `owner`
    /// ([`super::Sent::skipped`]), and those already there are hidden until
    /// [`InboxLifecycle::unblock`].
    async fn block(&self, owner: &str, sender: &str) -> Result<()> {
        self.set_filter(owner, sender, Filter::Block, true).await
    }

    /// Undoes [`InboxLifecycle::block`]: the sender's messages from before the block show again
    /// (unless muted); those sent while blocked were never delivered.
    async fn unblock(&self, owner: &str, sender: &str) -> Result<()> {
        self.set_filter(owner, sender, Filter::Block, false).await
    }

    /// The store's [`Retention`], set on its builder.
    fn retention(&self) -> Retention {
        self.lifecycle_engine().retention()
    }

    /// Drops what `owner`'s inbox keeps no longer under the store's [`Retention`], and returns
    /// how many messages went. Run it from a background job, or after sends to an owner.
    async fn prune(&self, owner: &str) -> Result<u64> {
        let work = self.lifecycle_engine().prune(owner);
        for_user(span!(self, "prune"), "owner", owner, work).await
    }
}

/// Every lifecycle engine is [`InboxLifecycle`] (its operations are the trait's, written once).
impl<P: Payload, E: LifecycleEngine<P>> InboxLifecycle<P> for E {
    fn lifecycle_engine(&self) -> &dyn LifecycleEngine<P> {
        self
    }
}

/// An inbox store with its lifecycle, of any strategy, for `Arc<DynInboxLifecycle<P>>`.
pub type DynInboxLifecycle<P> = dyn InboxLifecycle<P>;

/// [`Error::NotFound`] for message `id`.
pub(super) fn message_not_found(id: MessageId) -> Error {
    Error::NotFound {
        what: crate::error::Entity::Message,
        id: id.to_string(),
    }
}

/// [`Forbidden::NotSender`] for `user` and message `id`.
pub(super) fn not_sender(user: &str, id: MessageId) -> Error {
    Error::Forbidden {
        reason: Forbidden::NotSender {
            user: user.to_owned(),
            id: id.to_string(),
        },
    }
}
