//! Social inboxes: one [`InboxStore`] trait, three fan-out strategies.
//!
//! | strategy | send to N recipients | read a page | shard key |
//! |---|---|---|---|
//! | [`FanOutOnRead`] | a `find` of the recipients' mute and block lists, one `insert` | one `find`, scattered to every shard | `{from: 1}` |
//! | [`FanOutOnWrite`] | a `find` of the lists, one `insert` of N copies (batched) | one `find`, one shard | `{recipient: 1, sent: 1}` |
//! | [`BucketedFanOut`] | 3 commands, 6 when a bucket rolls over (the pushes in commands of as many statements as the server takes well) | one `find` of a few buckets | `{owner: 1, sequence: 1}` |
//!
//! Every strategy also implements [`InboxLifecycle`]: read state and unread counts, stars,
//! delete for me, retract and edit by the sender, retention, mute and block (see
//! [`lifecycle`] for what it promises and how each strategy keeps the state).
//!
//! The two strategies that copy a message store a recipient list longer than 16 names (their
//! builders' `max_inline_recipients`) once, in `inbox_recipients`, rather
//! than in every copy: one `insert` more for such a send, one `find` more for a page holding
//! such messages.
//!
//! All three share the message model ([`NewMessage`] in, [`Message`] out), the crate's keyset
//! pages ([`crate::page`]: a [`PageRequest`] in, a [`Page`] out, each strategy's own
//! [`crate::Cursor`]s), and the input checks in this module, so they can be swapped at runtime
//! behind an `Arc<DynInboxStore<P>>`.

pub(crate) mod bucketed;
pub(crate) mod cursor;
pub(crate) mod engine;
mod fan_out_on_read;
mod fan_out_on_write;
mod filters;
mod held;
pub(crate) mod keyed;
pub mod lifecycle;
mod operation;
mod recipient_lists;
mod retention;
mod time_ordered;
pub mod transfer;
mod up_to;
mod validate;
mod watch;

use engine::{InboxEngine, WatchRequest};
use keyed::KeyedSend;
use operation::{for_user, span};
use std::fmt;
use validate::{check_new_message, check_recipients, check_user_id};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use bucketed::{BucketedFanOut, BucketedFanOutBuilder, DEFAULT_BUCKET_SIZE, MAX_BUCKET_SIZE};
pub use fan_out_on_read::{FanOutOnRead, FanOutOnReadBuilder};
pub use fan_out_on_write::{FanOutOnWrite, FanOutOnWriteBuilder};
pub use filters::{Filter, Filters};
pub use held::{Gone, HeldMessage};
pub use lifecycle::{DynInboxLifecycle, InboxLifecycle};
pub use retention::Retention;
pub use transfer::{DynInboxTransfer, InboxTransfer};
pub use up_to::UpTo;

use crate::error::Result;
use crate::object_id::object_id_type;
use crate::page::{Page, PageRequest};
use crate::realtime::{ResumeToken, Updates, WatchOptions};
use crate::sharding::ShardKey;
use crate::strategy_enum::strategy_enum;

pub use crate::payload::Payload;
// For the strategies (`super::...`): the checks every module shares.
use crate::validate::MAX_DOCUMENT_BYTES;

object_id_type! {
    /// A message's stable id, assigned once when it is sent and shared by every copy of it.
    MessageId;
    /// A fresh id. Ids made by one process increase, so they break ties between messages sent
    /// in the same millisecond in sending order.
    fn new;
}

/// A message to send: who from, to whom, and the application's payload.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage<P> {
    /// The sender's user id.
    pub from: String,
    /// The recipients' user ids: one for a direct message, several for a group message.
    pub to: Vec<String>,
    /// The application's content.
    pub payload: P,
    /// The caller's idempotency key, if any (see [`NewMessage::with_key`]).
    pub key: Option<String>,
}

impl<P> NewMessage<P> {
    /// A message from `from` to each of `to`.
    ///
    /// ```
    /// use mongo_social::NewMessage;
    /// let hi = NewMessage::new("joe", ["bob", "jane"], "Hi!".to_string());
    /// assert_eq!(hi.to, ["bob", "jane"]);
    /// ```
    pub fn new<I, S>(from: impl Into<String>, to: I, payload: P) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            from: from.into(),
            to: to.into_iter().map(Into::into).collect(),
            payload,
            key: None,
        }
    }

    /// The same message with an idempotency key: a caller-chosen id (blank or longer than
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) refused), unique per sender, that makes a repeated
    /// send (a client retrying a request whose response it lost) return the first send's
    /// message (the same [`Message::id`] and [`Message::sent`]) and write nothing. The same key
    /// with another recipient list or payload is [`Error::Conflict`](crate::Error::Conflict).
    /// Every strategy enforces it in the database, under concurrency: the message id is derived
    /// from the sender and the key (see [`InboxStore::send`]).
    ///
    /// ```no_run
    /// # async fn demo(inbox: &mongo_social::DynInboxStore<String>) -> mongo_social::Result<()> {
    /// use mongo_social::NewMessage;
    /// let hi = NewMessage::new("joe", ["bob"], "Hi!".to_string()).with_key("req-7f3a");
    /// let first = inbox.send(hi.clone()).await?;
    /// let again = inbox.send(hi).await?; // the response was lost: the client sends again
    /// assert_eq!((again.message.id, again.message.sent), (first.message.id, first.message.sent));
    /// # Ok(()) }
    /// ```
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

/// A message as it reads back from an inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message<P> {
    /// The message's id, the same in every recipient's inbox.
    pub id: MessageId,
    /// The sender's user id.
    pub from: String,
    /// Every recipient of the message.
    pub to: Vec<String>,
    /// When the store accepted the message (millisecond precision, the sending client's
    /// clock).
    ///
    /// In a [`BucketedFanOut`] inbox, which keeps arrival order, it is when the message reached
    /// that inbox: the time the message was accepted, raised where needed to the newest `sent`
    /// already there (a concurrent message that reached the inbox first, or a delivery of an
    /// older message), so `sent` never increases down an inbox's pages. What
    /// [`InboxStore::send`] returns carries the time it was accepted; without concurrent
    /// senders to the same inbox, every inbox shows that same time.
    pub sent: bson::DateTime,
    /// The application's content.
    #[serde(rename = "message")]
    pub payload: P,
    /// When the sender last edited the message ([`InboxLifecycle::edit`]); `None` if never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited: Option<bson::DateTime>,
    /// Whether the owner of the inbox it was read from has read it ([`InboxLifecycle`]); `false`
    /// in what [`InboxStore::send`] returns.
    #[serde(default)]
    pub read: bool,
    /// Whether the owner of the inbox it was read from starred it; `false` in what
    /// [`InboxStore::send`] returns.
    #[serde(default)]
    pub starred: bool,
}

impl<P: Payload> Message<P> {
    /// Gives a new message its id and sent time.
    fn stamp(message: NewMessage<P>) -> Self {
        Self {
            id: MessageId::new(),
            from: message.from,
            to: message.to,
            sent: bson::DateTime::now(),
            payload: message.payload,
            edited: None,
            read: false,
            starred: false,
        }
    }

    /// The message as a BSON document, fields named as stored. The owner's own state (`read`,
    /// `starred`) is not part of the message: each strategy keeps it its own way.
    pub(crate) fn to_document(&self) -> Result<bson::Document> {
        let mut document = bson::to_document(self)?;
        document.remove("read");
        document.remove("starred");
        Ok(document)
    }
}

/// What [`InboxStore::send`] returns: the message as stored, and the recipients it was not
/// delivered to because they block its sender ([`InboxLifecycle::block`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Sent<P> {
    /// The message, with its id and sent time.
    pub message: Message<P>,
    /// Recipients who block the sender: the message is not in their inboxes. Empty otherwise.
    pub skipped: Vec<String>,
}

impl<P> Sent<P> {
    /// The message, without the skipped recipients.
    pub fn into_message(self) -> Message<P> {
        self.message
    }
}

strategy_enum! {
    /// The three strategies, for display and for code that must know which one it holds.
    pub enum Strategy {
        /// One document per message, found by recipient at read time.
        FanOutOnRead => "fan-out-on-read", fan_out_on_read::COLLECTIONS;
        /// One document per message per recipient.
        FanOutOnWrite => "fan-out-on-write", fan_out_on_write::COLLECTIONS;
        /// Each recipient's messages grouped into time-ordered buckets.
        BucketedFanOut => "bucketed-fan-out", bucketed::COLLECTIONS;
    }
    example: "inbox", FanOutOnRead => ["inbox", "inbox_filters", "inbox_locks"];
}

/// A social inbox: send messages to recipients, read each owner's inbox newest first.
///
/// Every strategy keeps these promises:
/// - a sent message appears exactly once in each recipient's inbox, even with many concurrent
///   senders;
/// - an inbox reads newest first: [`Message::sent`] never increases down an inbox, across pages
///   too, and the messages of one sender appear in the order that sender sent them. What
///   "newest" means depends on the strategy:
///   - [`FanOutOnRead`] and [`FanOutOnWrite`] order by send time, `(sent, id)`: a message sent
///     before another but stored after it appears below it;
///   - [`BucketedFanOut`] orders by arrival (each inbox is an append-only run of buckets), and
///     its `sent` is when the message reached that inbox (see [`Message::sent`]);
/// - pages are keyset pages: a page read while new messages arrive has no gaps and no repeats;
/// - bad input fails with a typed [`crate::Error`] before anything is written.
///
/// Hold it as `Arc<DynInboxStore<P>>` to choose the strategy at runtime:
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::Arc;
/// use mongo_social::{BucketedFanOut, DynInboxStore, FanOutOnWrite, NewMessage, PageRequest};
///
/// let store: Arc<DynInboxStore<String>> = if std::env::var("BUCKETS").is_ok() {
///     Arc::new(BucketedFanOut::new(&db))
/// } else {
///     Arc::new(FanOutOnWrite::new(&db))
/// };
/// store.create_indexes().await?;
/// store.send(NewMessage::new("joe", ["bob", "jane"], "Hi!".to_string())).await?;
/// let page = store.inbox_page("bob", PageRequest::first(20)).await?;
/// assert_eq!(page.items[0].payload, "Hi!");
/// # Ok(()) }
/// ```
#[async_trait]
pub trait InboxStore<P: Payload>: Send + Sync + fmt::Debug + 'static {
    /// The strategy's engine: what this trait's operations call once their input is checked. Hidden
    /// and unnameable outside the crate, so the trait is sealed: only the crate's strategies (and
    /// its migration's stores) are inbox stores, and new operations can be added to it without
    /// breaking any application.
    #[doc(hidden)]
    fn inbox_engine(&self) -> &dyn InboxEngine<P>;

    /// Which strategy this store implements.
    fn strategy(&self) -> Strategy {
        self.inbox_engine().strategy()
    }

    /// Delivers a message to every recipient who does not block its sender, and returns it as
    /// stored with the recipients it skipped ([`Sent::skipped`]). A recipient who muted the
    /// sender receives it hidden (see [`InboxLifecycle::mute`]).
    ///
    /// A message with an idempotency key ([`NewMessage::with_key`]) is sent once per sender and
    /// key: a repeat returns the first send's [`Sent`] (message id, `sent`, skipped recipients)
    /// and writes nothing, even if the first call failed after storing it (a repeat then
    /// completes a delivery that stopped half-way). Its id is derived from the sender and the
    /// key, so concurrent first attempts meet in the database:
    /// - [`FanOutOnRead`]: the message document's unique `_id` (stored even when every
    ///   recipient blocks the sender, in no inbox then); a repeat costs 1 `find`;
    /// - [`FanOutOnWrite`], [`BucketedFanOut`]: a record of the send in the recipients
    ///   collection, under that `_id`, inserted before the copies and marked done after them,
    ///   which fixes the `sent` every attempt delivers; a first send costs 3 commands more
    ///   (`find`, `insert`, `update`), a repeat 1 `find`.
    ///
    /// ```no_run
    /// # async fn demo(inbox: &mongo_social::DynInboxStore<String>) -> mongo_social::Result<()> {
    /// use mongo_social::NewMessage;
    /// let hi = NewMessage::new("joe", ["bob"], "Hi!".to_string()).with_key("req-1");
    /// let first = inbox.send(hi.clone()).await?;
    /// assert_eq!(inbox.send(hi).await?, first);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Before anything is written:
    /// [`Invalid::NoRecipients`](crate::error::Invalid::NoRecipients),
    /// [`Invalid::DuplicateRecipient`](crate::error::Invalid::DuplicateRecipient),
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"sender"`, `"recipient"`, the key) for an id
    /// blank or over [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES),
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) for a message (`"message"`: its
    /// payload and recipients, as stored) over what the strategy stores (about
    /// [`InboxStore::max_message_bytes`]) or a recipient list stored apart (`"recipient list"`)
    /// over 16 MiB; [`crate::Error::Conflict`] for a key the sender used for another recipient
    /// list or payload, nothing written; then [`crate::Error::Unreachable`] or
    /// [`crate::Error::Database`] from the server.
    async fn send(&self, message: NewMessage<P>) -> Result<Sent<P>> {
        span!(self, "send", recipients = message.to.len())
            .run(async move {
                check_new_message(&message)?;
                let keyed = KeyedSend::of(&message)?;
                self.inbox_engine().send(message, keyed).await
            })
            .await
    }

    /// Delivers `message`, already sent (stamped with its id and time), to `recipients`,
    /// idempotently: a recipient who already holds the message does not get a second copy, and
    /// one who blocks the sender gets none. Returns the recipients who block the sender (those
    /// who held the message already included). This
    /// is how background fan-out writes copies in batches and retries a batch that failed or
    /// whose worker died, and how an inbox is filled with messages sent before its owner
    /// followed their sender.
    ///
    /// `recipients` need not be `message.to`: a message to followers is delivered to them batch
    /// by batch. Each strategy keeps the promise its own way:
    /// - [`FanOutOnWrite`]: the unique `{recipient, sent, id}` index refuses a second copy.
    /// - [`FanOutOnRead`]: one document per recipient (`to: [recipient]`), whose `_id` derives
    ///   from the message and the recipient, so a second one is refused.
    /// - [`BucketedFanOut`]: a push never lands in a bucket that already holds the message, and
    ///   recipients holding it in either of their two newest buckets are skipped. A copy lands at
    ///   the newest position, with `sent` raised to the newest `sent` already in that inbox
    ///   where the message is older (see [`Message::sent`]). (Two
    ///   deliveries of one message to one recipient running at the same moment, across that
    ///   recipient's bucket rolling over, could still both land.)
    ///
    /// # Errors
    ///
    /// As [`InboxStore::send`], before anything is written.
    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>> {
        span!(self, "deliver", recipients = recipients.len())
            .run(async move {
                check_recipients(recipients)?;
                self.inbox_engine().deliver(message, recipients).await
            })
            .await
    }

    /// Removes from `owner`'s inbox the messages from `sender` that reached it through
    /// [`InboxStore::deliver`] (posts to followers, backfills), when `owner` stops following
    /// `sender`; messages sent to `owner` with [`InboxStore::send`] stay. Returns how many went.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Unsupported`] for [`BucketedFanOut`], whose positions would shift (a
    /// bucketed inbox keeps what it received); [`Invalid::Blank`](crate::error::Invalid::Blank)
    /// or [`Invalid::TooLong`](crate::error::Invalid::TooLong) for an id.
    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64> {
        span!(self, "remove_from")
            .run(async move {
                check_user_id("owner", owner)?;
                check_user_id("sender", sender)?;
                self.inbox_engine().remove_from(owner, sender).await
            })
            .await
    }

    /// The largest message (encoded, in bytes) the store accepts, so a caller can refuse a
    /// larger one before writing anything else.
    fn max_message_bytes(&self) -> usize {
        self.inbox_engine().max_message_bytes()
    }

    /// One page of `owner`'s inbox, newest first.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor this strategy did not make
    /// or made for another owner's inbox,
    /// [`Invalid::PageLimit`](crate::error::Invalid::PageLimit) for a limit outside `1..=PageRequest::MAX_LIMIT`.
    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        span!(self, "page", limit = page.limit)
            .run(async move {
                check_user_id("owner", owner)?;
                page.check()?;
                self.inbox_engine().inbox_page(owner, page).await
            })
            .await
    }

    /// How many messages `owner`'s inbox shows: those a walk through its pages returns (not
    /// deleted, retracted, pruned, or from a muted or blocked sender).
    async fn count(&self, owner: &str) -> Result<u64> {
        let work = self.inbox_engine().count(owner);
        for_user(span!(self, "count"), "owner", owner, work).await
    }

    /// The senders `owner` mutes and blocks ([`InboxLifecycle::mute`],
    /// [`InboxLifecycle::block`]): one `find`. [`crate::delivery::Delivery`] reads it
    /// to leave muted and blocked celebrities out of a timeline.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank owner.
    async fn filters(&self, owner: &str) -> Result<Filters> {
        let work = self.inbox_engine().filters(owner);
        for_user(span!(self, "filters"), "owner", owner, work).await
    }

    /// Creates the indexes the strategy needs (idempotent, one command per index: safe to run on
    /// every start). A strategy whose correctness depends on a unique index creates its indexes
    /// before its first write if this was not called on the store (or a clone of it).
    async fn create_indexes(&self) -> Result<()> {
        span!(self, "create_indexes")
            .run(self.inbox_engine().create_indexes())
            .await
    }

    /// The shard key each of the strategy's collections should have.
    fn shard_keys(&self) -> Vec<ShardKey> {
        self.inbox_engine().shard_keys()
    }

    /// The database the store lives in.
    fn database(&self) -> &mongodb::Database {
        self.inbox_engine().database()
    }

    /// A stream of the messages arriving in `owner`'s inbox, from `from` (the token of the last
    /// update handled) or from now: each message once, as the inbox's pages would show it when
    /// it arrived (not deleted, retracted, or from a muted or blocked sender). See
    /// [`crate::realtime`] for how it learns of them (a change stream filtered to the owner, or
    /// one `find` per poll) and what its tokens promise. A [`BucketedFanOut`] watch keys
    /// messages by position, not time; without a token it starts after the last message stamped
    /// before it was asked for (one `find` when it first runs).
    ///
    /// ```no_run
    /// # async fn demo(inbox: std::sync::Arc<mongo_social::DynInboxStore<String>>) -> mongo_social::Result<()> {
    /// use futures::StreamExt;
    /// use mongo_social::realtime::WatchOptions;
    /// let mut arriving = inbox.watch("bob", None, WatchOptions::default());
    /// while let Some(update) = arriving.next().await {
    ///     let update = update?;
    ///     println!("{}: {}", update.item.from, update.item.payload);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The stream yields [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank owner,
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a token of another watch, and server failures past
    /// the store's retry budget; then it ends.
    fn watch(
        &self,
        owner: &str,
        from: Option<ResumeToken>,
        options: WatchOptions,
    ) -> Updates<Message<P>> {
        if let Err(error) = check_user_id("owner", owner) {
            return crate::realtime::failed(error);
        }
        self.inbox_engine().watch(WatchRequest {
            owner,
            from,
            options,
        })
    }

    /// Shards the strategy's collections on [`InboxStore::shard_keys`], when connected to a
    /// `mongos`; see [`crate::sharding::shard_collections`] for what happens elsewhere.
    async fn shard_collections(&self) -> Result<()> {
        crate::sharding::shard_collections(self.database(), &self.shard_keys()).await
    }
}

/// Every inbox engine is [`InboxStore`] (its operations are the trait's, written once).
impl<P: Payload, E: InboxEngine<P>> InboxStore<P> for E {
    fn inbox_engine(&self) -> &dyn InboxEngine<P> {
        self
    }
}

/// An inbox store of any strategy, for `Arc<DynInboxStore<P>>`.
pub type DynInboxStore<P> = dyn InboxStore<P>;
