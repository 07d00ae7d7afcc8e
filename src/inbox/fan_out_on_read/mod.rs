//! Fan out on read: one document per message; an inbox is every message naming its owner.

mod lifecycle;
mod transfer;

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, Document};
use mongodb::{Collection, Database, IndexModel};

use super::filters::{self, FilterLists};
use super::keyed::KeyedSend;
use super::recipient_lists::RecipientLists;
use super::time_ordered::engine::TimeOrderedEngine;
use super::time_ordered::{Layout, OwnerState};
use super::{validate, Message, NewMessage, Payload, Sent, Strategy, MAX_DOCUMENT_BYTES};
use crate::backend::Backend;
use crate::bson_ext::{self, derived_id};
use crate::config::{store_builder_methods, StoreConfig};
use crate::inbox::filters::Filter;
use crate::inbox::retention::Retention;
use crate::phantom_impls::{clone_fields, debug_fields};
use crate::setters::builder_setters;
use crate::sharding::ShardKey;
use crate::Result;

/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 3] = ["inbox", filters::DEFAULT_COLLECTION, "inbox_locks"];

const LAYOUT: Layout = Layout {
    strategy: Strategy::FanOutOnRead,
    owner_field: "to",
    id_field: "id",
    owners_in_array: true,
    state: OwnerState::Shared,
};
/// Where a keyed message keeps the recipients its send skipped (`gone_for` also takes deletes).
const SKIPPED: &str = "skipped";
/// How long the lifecycle lock lasts if its holder dies (servers without atomic updates).
const LOCK_LEASE: Duration = Duration::from_secs(30);

/// Fan out on read: sending is one insert; reading gathers every message addressed to the owner.
///
/// Its one collection, `inbox`, holds documents `{_id, id, from, to: [..], sent, message}`,
/// indexed by `{to: 1, sent: 1, id: 1}`; the seed's `{to: 1, sent: 1}` plus the message id, so
/// keyset pages break ties between messages of the same millisecond. A sent message is one
/// document whose `_id` is its id; [`InboxStore::deliver`](crate::InboxStore::deliver) adds one document per recipient not
/// already named by one (a `find` first), whose `_id` derives from the message and the
/// recipient, so a recipient never gets a second one. A message sent with an idempotency key
/// ([`NewMessage::with_key`](super::NewMessage::with_key)) has an id (and `_id`) derived from
/// its sender and the key, and keeps `idempotency_key`, `content_digest` and `skipped`: a
/// repeat finds it by `_id` (see [`InboxStore::send`](crate::InboxStore::send)).
///
/// Owners' state lives on the shared documents, as arrays of owners (`read_by`, `starred_by`,
/// `gone_for`, `muted_for`, `blocked_for`, and `retracted` for the sender's tombstone; see
/// [`super::InboxLifecycle`]), so a page is still one `find` of `{to, sent, id}` filtered on
/// the server. An index `{id: 1}` finds a message's documents. Two more collections:
/// `inbox_filters` (`{_id: owner, muted, blocked}`, each owner's mute and block lists, read by
/// every send: one `find`) and `inbox_locks` (where updates are not atomic, the per-document locks
/// that lifecycle writes take, because their documents are shared by owners).
///
/// Sharded on `{from: 1}`, writes spread by sender but every inbox read goes to every shard:
/// choose it when messages are sent far more often than inboxes are read.
///
/// On MongoDB a page walks `{to, sent, id}` in order and stops. On the DocumentDB engine with
/// ordered index scans (the default from DocumentDB 0.109), an index over an array is read in
/// order only where no filter bounds the keys it orders by, so there a page reads
/// `{to: 1, sent: -1, id: -1}` in order from the owner's newest entry with the cursor as a
/// filter: the newest 50 of 1,000,000 in about 10 ms, as of 1,000. Page `k` reads about `k`
/// pages of entries (and the hidden messages newer than it); where the engine gives up that
/// order (some hundreds of thousands of entries read), the page is read through an unordered
/// index `{to: 1, sent: 1, id: 1}` (`storageEngine: { enableOrderedIndex: false }`), which
/// sorts every message of the owner's (1.6 s at 1,000,000). Without ordered scans every page
/// sorts them; there, bound long inboxes with a [`Retention`](super::lifecycle::Retention) or
/// choose [`super::FanOutOnWrite`] or [`super::BucketedFanOut`]. See `docs/BENCHMARKS.md`.
///
/// `P` is the application's payload type.
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use mongo_social::{FanOutOnRead, InboxStore, NewMessage, PageRequest};
/// let store = FanOutOnRead::builder(&db).collection("inbox", "messages").build()?;
/// store.create_indexes().await?;
/// store.send(NewMessage::new("joe", ["bob"], "Hi!".to_string())).await?;
/// let page = store.inbox_page("bob", PageRequest::first(50)).await?;
/// let first: &String = &page.items[0].payload;
/// # Ok(()) }
/// ```
pub struct FanOutOnRead<P> {
    backend: Backend,
    messages: Collection<Document>,
    filters: FilterLists,
    retention: Retention,
    _payload: PhantomData<fn() -> P>,
}

clone_fields!(FanOutOnRead<P> { backend, messages, filters, retention, _payload });

impl<P> fmt::Debug for FanOutOnRead<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FanOutOnRead")
            .field("messages", &self.messages.name())
            .finish_non_exhaustive()
    }
}

/// Configures a [`FanOutOnRead`] store.
#[must_use = "a builder does nothing until `build()`"]
pub struct FanOutOnReadBuilder<P> {
    config: StoreConfig,
    retention: Retention,
    _payload: PhantomData<fn() -> P>,
}

debug_fields!(FanOutOnReadBuilder<P> { config, retention });

impl<P: Payload> FanOutOnReadBuilder<P> {
    store_builder_methods!();

    builder_setters! {
        /// How long owners' messages are kept, enforced by
        /// [`InboxLifecycle::prune`](super::InboxLifecycle::prune) (default: forever).
        retention: Retention,
    }

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidConfig`] for an unusable collection name, or a name given to a
    /// collection the store does not have.
    pub fn build(self) -> Result<FanOutOnRead<P>> {
        let [messages, filters, locks] = self.config.names(COLLECTIONS)?;
        let database = self.config.database();
        let messages = database.collection(&messages);
        let by_id = IndexModel::builder().keys(doc! { "id": 1 }).build();
        Ok(FanOutOnRead {
            // The store's correctness does not depend on its indexes (a delivered copy's `_id`
            // is what refuses a second one), only its speed.
            backend: self
                .config
                .backend(&locks, LOCK_LEASE)
                .with_time_index(&messages, LAYOUT.time_index())
                .with_index(&messages, by_id),
            messages,
            filters: FilterLists::new(database.collection(&filters)),
            retention: self.retention,
            _payload: PhantomData,
        })
    }
}

impl<P: Payload> FanOutOnRead<P> {
    /// `message` as its document is stored when sent (`_id` its id), the recipients who block
    /// its sender marked gone (and returned), those who mute them marked muted: after one
    /// `find` of the recipients' lists.
    async fn sent_document(&self, message: &Message<P>) -> Result<(Document, Vec<String>)> {
        let mut document = message.to_document()?;
        document.insert("_id", message.id.0);
        // Room for the owners' state arrays, which name recipients again.
        let names: usize = message.to.iter().map(|r| r.len() + 16).sum();
        validate::check_message_size(&document, MAX_DOCUMENT_BYTES.saturating_sub(4 * names))?;
        let filters = self
            .filters
            .for_sender(&self.backend, &message.from, &message.to)
            .await?;
        let skipped: Vec<String> = message
            .to
            .iter()
            .filter(|r| filters.has(r, Filter::Block))
            .cloned()
            .collect();
        if !skipped.is_empty() {
            document.insert("gone_for", &skipped);
        }
        let muted: Vec<&String> = message
            .to
            .iter()
            .filter(|r| filters.has(r, Filter::Mute))
            .collect();
        if !muted.is_empty() {
            document.insert("muted_for", muted);
        }
        Ok((document, skipped))
    }

    /// A store with default settings in `database`.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default settings are valid")
    }

    /// Starts configuring a store in `database`.
    pub fn builder(database: &Database) -> FanOutOnReadBuilder<P> {
        FanOutOnReadBuilder {
            config: StoreConfig::new(database),
            retention: Retention::default(),
            _payload: PhantomData,
        }
    }
}

impl<P: Payload> FanOutOnRead<P> {
    /// What the send of `stored` (a keyed message) returned, for a repeat of it with `message`;
    /// [`crate::Error::Conflict`] if `message` differs.
    fn sent_before(
        &self,
        keyed: &super::keyed::KeyedSend,
        stored: &Document,
        message: NewMessage<P>,
    ) -> Result<Sent<P>> {
        keyed.check(stored, &message.from)?;
        let sent = super::keyed::sent_of(self.messages.name(), stored)?;
        Ok(Sent {
            message: keyed.message(message, sent),
            skipped: bson_ext::strings(stored, SKIPPED),
        })
    }
}

#[async_trait]
impl<P: Payload> TimeOrderedEngine<P> for FanOutOnRead<P> {
    fn filter_lists(&self) -> &FilterLists {
        &self.filters
    }

    fn recipient_lists(&self) -> Option<&RecipientLists> {
        None
    }

    /// One `find` of the recipients' filters, one `insert`. Recipients who block the sender are
    /// named in `gone_for` (the message is not in their inbox), those who mute them in
    /// `muted_for`; when every recipient blocks the sender, nothing is stored.
    async fn send(&self, message: NewMessage<P>, keyed: Option<KeyedSend>) -> Result<Sent<P>> {
        if let Some(keyed) = &keyed {
            // A repeat: one `find` by the derived `_id`, nothing written.
            if let Some(stored) =
                super::keyed::find(&self.backend, &self.messages, keyed.id).await?
            {
                return self.sent_before(keyed, &stored, message);
            }
        }
        let message = match &keyed {
            Some(keyed) => keyed.message(message, bson::DateTime::now()),
            None => Message::stamp(message),
        };
        let (mut document, skipped) = self.sent_document(&message).await?;
        if skipped.len() == message.to.len() && keyed.is_none() {
            return Ok(Sent { message, skipped });
        }
        if let Some(keyed) = &keyed {
            // Stored even when every recipient blocks the sender (in no inbox then), so a
            // repeat finds it.
            document.insert(crate::idempotency::KEY, &keyed.key);
            document.insert(crate::idempotency::CONTENT, &keyed.content);
            document.insert(SKIPPED, &skipped);
        }
        // The `_id` is the new message's id: a retry that meets it stored is meeting itself.
        let inserted = self.backend.insert_once(&self.messages, document).await?;
        if let (Some(keyed), false) = (&keyed, inserted) {
            // Stored by a concurrent attempt with the same key, or by this one (a lost reply).
            let stored = super::keyed::find(&self.backend, &self.messages, keyed.id)
                .await?
                .ok_or_else(|| crate::Error::contention("send keyed message", 1))?;
            let Message {
                from, to, payload, ..
            } = message;
            let again = NewMessage {
                from,
                to,
                payload,
                key: Some(keyed.key.clone()),
            };
            return self.sent_before(keyed, &stored, again);
        }
        Ok(Sent { message, skipped })
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>> {
        let mut document = message.to_document()?;
        document.insert("delivered", true);
        validate::check_message_size(&document, MAX_DOCUMENT_BYTES)?;
        // Recipients of the sent document itself hold the message already. (`from` and `sent`
        // make this a lookup on one shard of the `{from}` key and a point in `{to, sent, id}`.)
        let holding: Vec<Document> = self
            .backend
            .find_all("find", || {
                self.messages
                    .find(doc! {
                        "from": &message.from,
                        "sent": message.sent,
                        "id": message.id.0,
                        "to": { "$in": recipients },
                    })
                    .projection(doc! { "to": 1 })
            })
            .await?;
        let held: std::collections::HashSet<&str> = holding
            .iter()
            .filter_map(|d| d.get_array("to").ok())
            .flatten()
            .filter_map(bson::Bson::as_str)
            .collect();
        let missing: Vec<String> = recipients
            .iter()
            .filter(|recipient| !held.contains(recipient.as_str()))
            .cloned()
            .collect();
        let filters = self
            .filters
            .for_sender(&self.backend, &message.from, recipients)
            .await?;
        let skipped: Vec<String> = recipients
            .iter()
            .filter(|recipient| filters.has(recipient, Filter::Block))
            .cloned()
            .collect();
        let missing: Vec<String> = missing
            .into_iter()
            .filter(|recipient| !filters.has(recipient, Filter::Block))
            .collect();
        if missing.is_empty() {
            return Ok(skipped);
        }
        let copies = missing
            .iter()
            .map(|recipient| {
                let mut copy = document.clone();
                copy.insert("_id", derived_id(message.id.0, recipient));
                copy.insert("to", vec![recipient.as_str()]);
                if filters.has(recipient, Filter::Mute) {
                    copy.insert("muted_for", vec![recipient.as_str()]);
                }
                copy
            })
            .collect();
        // A copy's `_id` derives from the message and the recipient: one refused as a duplicate
        // was delivered before (or by an earlier attempt of this one).
        self.backend
            .insert_many_once(&self.messages, copies)
            .await?;
        Ok(skipped)
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::new(
                self.messages.name(),
                doc! { "from": 1 },
                "spreads writes by sender; every inbox read is scattered to all shards",
            ),
            self.filters.shard_key(),
        ]
    }
}
