//! What one inbox strategy supplies: the engine half of every inbox store.
//!
//! An inbox store is two halves. Its operations are written once, as the provided methods of
//! the public traits ([`super::InboxStore`], [`super::InboxLifecycle`],
//! [`super::InboxTransfer`]): each checks every input (user ids, recipient lists, idempotency
//! keys), opens the operation's span ([`super::operation`]), and hands the engine values it may
//! trust. An engine is what differs between strategies: where a message's copies go, how a
//! range of an inbox reads back, where an owner's state lives, and how an inbox is exported and
//! imported. [`super::FanOutOnRead`], [`super::FanOutOnWrite`] and [`super::BucketedFanOut`] are
//! engines, and so is the migration mirror ([`crate::migrate::MigratingInbox`]), which routes
//! each call to the source or the target store and so gets the same checks and one span per
//! operation without repeating them. Every engine is a store by the blanket implementations
//! beside the public traits.
//!
//! Why provided methods over a hidden engine, rather than a blanket implementation of traits
//! applications could implement too: the public traits are sealed (the hidden method that
//! reaches the engine returns a trait nothing outside the crate can name), so an operation
//! can be added to them without breaking an application, and each operation's code stands
//! beside its documentation. These engine traits are public in a private module, so nothing
//! outside the crate can name or implement them.
//!
//! Methods share their names with the public traits' methods they serve. Every one may assume
//! its inputs passed the checks: owner, sender and recipient ids are valid, recipient lists are
//! non-empty and without repeats, a keyed send's key is checked and its id derived. Checks that
//! only an engine can make (a cursor of its own, a message's size as it stores it) stay in the
//! engine.

use std::fmt;

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::filters::{Filter, Filters};
use super::held::HeldMessage;
use super::keyed::KeyedSend;
use super::retention::Retention;
use super::up_to::UpTo;
use super::{Message, MessageId, NewMessage, Payload, Sent, Strategy};
use crate::error::Result;
use crate::page::{Page, PageRequest};
use crate::realtime::{ResumeToken, Updates, WatchOptions};
use crate::sharding::ShardKey;
use crate::validate::MAX_DOCUMENT_BYTES;

/// The strategy's part of [`super::InboxStore`]: sending, delivering, reading pages.
#[async_trait]
pub trait InboxEngine<P: Payload>: Send + Sync + fmt::Debug + 'static {
    /// Which strategy this is.
    fn strategy(&self) -> Strategy;

    /// Whether this is a running migration's store, whose operations' spans are
    /// `migrate.inbox.<operation>` (a store's own are `inbox.<operation>`).
    fn migrating(&self) -> bool {
        false
    }

    /// The database the store lives in.
    fn database(&self) -> &mongodb::Database;

    /// The shard key each collection should have.
    fn shard_keys(&self) -> Vec<ShardKey>;

    /// The largest message (encoded) the engine stores.
    fn max_message_bytes(&self) -> usize {
        MAX_DOCUMENT_BYTES - 1024
    }

    /// Creates the engine's indexes.
    async fn create_indexes(&self) -> Result<()>;

    /// The owner's mute and block lists.
    async fn filters(&self, owner: &str) -> Result<Filters>;

    /// Sends a checked message; `keyed` is its idempotency key with the id it derives, if any.
    async fn send(&self, message: NewMessage<P>, keyed: Option<KeyedSend>) -> Result<Sent<P>>;

    /// Delivers a stamped message to checked recipients, idempotently.
    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>>;

    /// Removes the owner's delivered messages from `sender`.
    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64>;

    /// One page of the owner's inbox (the cursor and the limit are the engine's to check).
    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>>;

    /// How many messages the owner's inbox shows.
    async fn count(&self, owner: &str) -> Result<u64>;

    /// The messages arriving in the owner's inbox.
    fn watch(&self, request: WatchRequest<'_>) -> Updates<Message<P>>;
}

/// A watch of one owner's inbox as [`super::InboxStore::watch`] hands it to an engine: the owner
/// passed the check.
#[derive(Debug)]
pub struct WatchRequest<'a> {
    /// Whose inbox.
    pub owner: &'a str,
    /// The token to resume after, if any.
    pub from: Option<ResumeToken>,
    /// How to watch.
    pub options: WatchOptions,
}

/// The strategy's part of [`super::InboxLifecycle`]: where an owner's state of a message lives.
#[async_trait]
pub trait LifecycleEngine<P: Payload>: InboxEngine<P> {
    /// Marks the owner's message read.
    async fn mark_read(&self, owner: &str, id: MessageId) -> Result<()>;

    /// Marks the owner's message unread.
    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()>;

    /// Marks the message `up_to` names and every older one read.
    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()>;

    /// How many of the owner's shown messages are unread, counting no further than `cap`
    /// (`None`: every one). [`super::InboxLifecycle::unread_count_up_to`] sends nothing for a cap
    /// of 0.
    async fn unread_count(&self, owner: &str, cap: Option<u64>) -> Result<u64>;

    /// Stars or unstars the owner's message.
    async fn set_starred(&self, owner: &str, id: MessageId, starred: bool) -> Result<()>;

    /// Deletes the message from the owner's inbox.
    async fn delete(&self, owner: &str, id: MessageId) -> Result<()>;

    /// Retracts the sender's message from every inbox.
    async fn retract(&self, sender: &str, id: MessageId) -> Result<()>;

    /// Replaces the sender's message's payload in every inbox.
    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime>;

    /// Mutes or blocks (or stops) `sender` for the owner.
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()>;

    /// The retention the engine prunes to.
    fn retention(&self) -> Retention;

    /// Prunes the owner's inbox to the retention.
    async fn prune(&self, owner: &str) -> Result<u64>;
}

/// The strategy's part of [`super::InboxTransfer`]: its own layout, exported and imported.
#[async_trait]
pub trait TransferEngine<P: Payload>: LifecycleEngine<P> {
    /// Every owner after `after`, in order.
    async fn owners(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>>;

    /// Everything the owner holds, oldest first.
    async fn export(&self, owner: &str) -> Result<BoxStream<'_, Result<HeldMessage>>>;

    /// Writes held messages into the owner's inbox, idempotently.
    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()>;

    /// Removes everything the owner holds.
    async fn purge(&self, owner: &str) -> Result<()>;

    /// Removes everything the store holds.
    async fn purge_all(&self) -> Result<()>;

    /// Whether the store holds no message.
    async fn is_empty(&self) -> Result<bool>;

    /// Sends a stamped message to checked recipients, idempotently.
    async fn send_stamped(
        &self,
        message: &Message<P>,
        recipients: &[String],
    ) -> Result<Vec<String>>;
}
