//! Fan out on write: one copy of each message per recipient.

mod lifecycle;
mod transfer;

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

use super::MessageId;

use super::filters::{self, FilterLists};
use super::keyed::KeyedSend;
use super::recipient_lists::RecipientLists;
use super::time_ordered::engine::TimeOrderedEngine;
use super::time_ordered::{Layout, OwnerState};
use super::{validate, Message, NewMessage, Payload, Sent, Strategy, MAX_DOCUMENT_BYTES};
use crate::backend::Backend;
use crate::config::{store_builder_methods, StoreConfig};
use crate::error::Result;
use crate::inbox::filters::Filter;
use crate::inbox::retention::Retention;
use crate::phantom_impls::{clone_fields, debug_fields};
use crate::setters::builder_setters;
use crate::sharding::ShardKey;

/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 4] = [
    "inbox_copies",
    RecipientLists::DEFAULT_COLLECTION,
    filters::DEFAULT_COLLECTION,
    "inbox_locks",
];

const LAYOUT: Layout = Layout {
    strategy: Strategy::FanOutOnWrite,
    owner_field: "recipient",
    id_field: "id",
    owners_in_array: false,
    state: OwnerState::Copy,
};
/// How long an owner's lifecycle lock lasts if its holder dies (servers without atomic updates).
const LOCK_LEASE: Duration = Duration::from_secs(30);

/// Fan out on write: every recipient gets a copy, so an inbox read touches one index range on
/// one shard.
///
/// Collections (default names; see [`FanOutOnWriteBuilder::collection`]):
/// - `inbox_copies`: `{_id, recipient, id, from, to: [..], sent, message}`, the `_id` derived
///   from the message and the recipient (`"<message id hex>.<recipient>"`): unique, so a message
///   is in an inbox at most once, one owner's copy is found by `_id`, and all of a message's
///   copies are one range of `_id`. The index `{recipient: 1, sent: 1, id: 1}` serves every page
///   read, walked backwards; on DocumentDB, which reads an index in order only forwards, it is
///   `{recipient: 1, sent: -1, id: -1}`, named in each page's hint. All copies go to the server in one unordered `insert` (the driver
///   splits batches above 100,000 documents or 48 MB), not one round trip per recipient as in
///   the seed.
/// - `inbox_recipients`: `{_id: message id, to}`, the recipient list of a message sent to more
///   than [`FanOutOnWriteBuilder::max_inline_recipients`] users (16 by default), stored once
///   and written just before the copies, which carry `to_count`
///   instead: otherwise a message to N users would store N² names (1.4 GB for 10,000). Such a
///   send takes 2 commands, and a page holding such messages 2 `find`s; the `to` read back is
///   the whole list either way. A send with an idempotency key ([`NewMessage::with_key`]) also
///   records itself here, `{_id: message id, from, to, sent, idempotency_key, content_digest,
///   done, skipped}`, before its copies: see [`InboxStore::send`](crate::InboxStore::send).
/// - `inbox_filters`: `{_id: owner, muted: [..], blocked: [..]}`, each owner's mute and block
///   lists, read by every send (one `find`): a blocked sender's copy is not written, a muted
///   one's is written hidden (see [`super::InboxLifecycle`]).
/// - `inbox_locks`: where updates are not atomic, the per-owner locks lifecycle
///   writes take.
///
/// Each copy also carries its owner's state: `unread: true` until read, `starred`, `muted`,
/// `blocked`, and `gone` for a tombstone left by a delete or a retraction. One more index serves
/// the unread count: `{recipient: 1}` over the unread copies only (a partial index; where the
/// server has none, `{recipient: 1, unread: 1}` over all). Every index is paid on every copy
/// written, so there are no others: a message's copies, for retract and edit, are a range of
/// `_id`.
///
/// Sharded on `{recipient: 1, sent: 1}`: an inbox lives on one shard (or a few, for very long
/// histories). Choose it when inboxes are read far more often than messages are sent, and
/// messages have few recipients; see [`super::BucketedFanOut`] for fewer index entries.
///
/// `P` is the application's payload type.
pub struct FanOutOnWrite<P> {
    backend: Backend,
    copies: Collection<Document>,
    recipients: RecipientLists,
    filters: FilterLists,
    retention: Retention,
    _payload: PhantomData<fn() -> P>,
}

clone_fields!(FanOutOnWrite<P> { backend, copies, recipients, filters, retention, _payload });

impl<P> fmt::Debug for FanOutOnWrite<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FanOutOnWrite")
            .field("copies", &self.copies.name())
            .field("recipients", &self.recipients)
            .finish_non_exhaustive()
    }
}

/// Configures a [`FanOutOnWrite`] store.
#[must_use = "a builder does nothing until `build()`"]
pub struct FanOutOnWriteBuilder<P> {
    config: StoreConfig,
    max_inline: Option<usize>,
    retention: Retention,
    _payload: PhantomData<fn() -> P>,
}

debug_fields!(FanOutOnWriteBuilder<P> { config, max_inline, retention });

impl<P: Payload> FanOutOnWriteBuilder<P> {
    store_builder_methods!();

    builder_setters! {
        /// How long owners' messages are kept, enforced by
        /// [`InboxLifecycle::prune`](super::InboxLifecycle::prune) (default: forever).
        retention: Retention,
    }

    /// The longest recipient list stored in every copy; a longer one is stored
    /// once, in the recipients collection. 0 stores every list once. By default 16: a list
    /// in every copy is N² names for a send to N (10,000 for a send to 100).
    pub fn max_inline_recipients(mut self, max: usize) -> Self {
        self.max_inline = Some(max);
        self
    }

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidConfig`] for an unusable collection name, the same name for both
    /// collections, or a name given to a collection the store does not have.
    pub fn build(self) -> Result<FanOutOnWrite<P>> {
        let [copies, recipients, filters, locks] = self.config.names(COLLECTIONS)?;
        let database = self.config.database();
        let copies = database.collection(&copies);
        // The unread count: an index of the unread copies only, which reading a copy takes out
        // of the index and no other write maintains; where the server has no partial indexes,
        // an index of every copy by owner and unread state.
        let unread = IndexModel::builder()
            .keys(doc! { "recipient": 1 })
            .options(
                IndexOptions::builder()
                    .name("recipient_1_unread".to_owned())
                    .partial_filter_expression(doc! { "unread": true })
                    .build(),
            )
            .build();
        let unread_everywhere = IndexModel::builder()
            .keys(doc! { "recipient": 1, "unread": 1 })
            .build();
        Ok(FanOutOnWrite {
            backend: self
                .config
                .backend(&locks, LOCK_LEASE)
                // Pages: an owner's copies newest first. Not unique: a copy's `_id`, derived
                // from the message and the owner, keeps it in an inbox once (on engines that
                // keep documents in PostgreSQL a unique secondary index is an exclusion
                // constraint, which checks every new copy against the others: 1,000 copies
                // took 215 ms against 75 ms without).
                .with_time_index(&copies, LAYOUT.time_index())
                .with_partial_index(&copies, unread, Some(unread_everywhere)),
            copies,
            recipients: RecipientLists::new(database.collection(&recipients), self.max_inline),
            filters: FilterLists::new(database.collection(&filters)),
            retention: self.retention,
            _payload: PhantomData,
        })
    }
}

/// The `_id` of `owner`'s copy of message `id`: the message id's hex, a `.`, the owner. Unique per
/// message and owner, so it keeps a message in an inbox once; and every copy of one message
/// shares the prefix before the owner, a range of `_id` ([`copies_of`]).
fn copy_id(id: MessageId, owner: &str) -> String {
    format!("{}.{owner}", id.0.to_hex())
}

/// The filter of every copy of message `id`: a range of `_id` (the hex of an ObjectId is 24
/// characters, followed by `.`, which `/` follows).
fn copies_of(id: MessageId) -> Document {
    let hex = id.0.to_hex();
    doc! { "_id": { "$gte": format!("{hex}."), "$lt": format!("{hex}/") } }
}

impl<P: Payload> FanOutOnWrite<P> {
    /// A store with default settings in `database`.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default settings are valid")
    }

    /// Starts configuring a store in `database`.
    pub fn builder(database: &Database) -> FanOutOnWriteBuilder<P> {
        FanOutOnWriteBuilder {
            config: StoreConfig::new(database),
            max_inline: None,
            retention: Retention::default(),
            _payload: PhantomData,
        }
    }

    /// Inserts one copy of `message` per recipient, in one unordered `insert`, after one `find`
    /// of the recipients' filters (and, at once, the `insert` of a long recipient list): none for a recipient who blocks the sender (returned), a
    /// hidden one (`muted`) for one who mutes them; `delivered` marks copies written by
    /// [`InboxStore::deliver`](crate::InboxStore::deliver), which `remove_from` may take back.
    ///
    /// Retried under the store's policy. Idempotent: a copy's `_id` is derived from the message
    /// and the recipient, so a copy refused as a duplicate was stored by an earlier attempt (or an
    /// earlier delivery) and counts as done.
    async fn insert_copies(
        &self,
        message: &Message<P>,
        recipients: &[String],
        delivered: bool,
    ) -> Result<Vec<String>> {
        let mut document = message.to_document()?;
        if delivered {
            document.insert("delivered", true);
        }
        let list = self.recipients.share(&mut document, message.id)?;
        let longest = recipients.iter().map(String::len).max().unwrap_or(0);
        // Every copy is this document plus one `recipient` field.
        validate::check_message_size(&document, MAX_DOCUMENT_BYTES - longest - 64)?;
        // The list goes out with the filters' read, one round trip for both: it must be stored
        // before any copy, and one stored for a message every recipient blocks is as harmless as
        // one left by a crash (see `RecipientLists`).
        let (filters, ()) = futures::try_join!(
            self.filters
                .for_sender(&self.backend, &message.from, recipients),
            self.recipients.store(list, &self.backend),
        )?;
        let (skipped, receiving): (Vec<&String>, Vec<&String>) = recipients
            .iter()
            .partition(|recipient| filters.has(recipient, Filter::Block));
        let skipped = skipped.into_iter().cloned().collect();
        if receiving.is_empty() {
            return Ok(skipped);
        }
        document.insert("unread", true);
        let copies = receiving
            .into_iter()
            .map(|recipient| {
                let mut copy = document.clone();
                // Derived from the message and the recipient: a copy is found (and refused a
                // second time) by `_id`, the one index every server uses.
                copy.insert("_id", copy_id(message.id, recipient));
                copy.insert("recipient", recipient.as_str());
                if filters.has(recipient, Filter::Mute) {
                    copy.insert("muted", true);
                }
                copy
            })
            .collect();
        self.backend.insert_many_once(&self.copies, copies).await?;
        Ok(skipped)
    }
}

#[async_trait]
impl<P: Payload> TimeOrderedEngine<P> for FanOutOnWrite<P> {
    fn filter_lists(&self) -> &FilterLists {
        &self.filters
    }

    fn recipient_lists(&self) -> Option<&RecipientLists> {
        Some(&self.recipients)
    }

    async fn send(&self, message: NewMessage<P>, keyed: Option<KeyedSend>) -> Result<Sent<P>> {
        if let Some(keyed) = keyed {
            let records = self.recipients.collection();
            return super::keyed::send_recorded(
                &self.backend,
                records,
                keyed,
                message,
                |m| async move {
                    let skipped = self.insert_copies(&m, &m.to, false).await?;
                    Ok((m, skipped))
                },
            )
            .await;
        }
        let message = Message::stamp(message);
        let skipped = self.insert_copies(&message, &message.to, false).await?;
        Ok(Sent { message, skipped })
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>> {
        // Copies already there are refused by the unique index, and taken as done.
        self.insert_copies(message, recipients, true).await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::new(
                self.copies.name(),
                doc! { "recipient": 1, "sent": 1 },
                "routes each inbox read to one shard; writes spread by recipient",
            ),
            self.recipients.shard_key(),
            self.filters.shard_key(),
        ]
    }
}
