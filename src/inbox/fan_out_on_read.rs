//! Fan out on read: one document per message; an inbox is every message naming its owner.

use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::{Collection, Database, IndexModel};

use super::time_ordered::{self, Layout};
use super::{
    derived_id, validate, InboxStore, Message, NewMessage, Payload, Strategy, MAX_DOCUMENT_BYTES,
};
use crate::backend::Backend;
use crate::config::{store_builder_methods, StoreConfig};
use crate::sharding::ShardKey;
use crate::{Page, PageRequest, Result};

/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 1] = ["inbox"];

const LAYOUT: Layout = Layout {
    strategy: Strategy::FanOutOnRead,
    owner_field: "to",
    id_field: "id",
};

/// Fan out on read: sending is one insert; reading gathers every message addressed to the owner.
///
/// Its one collection, `inbox`, holds documents `{_id, id, from, to: [..], sent, message}`,
/// indexed by `{to: 1, sent: 1, id: 1}`; the seed's `{to: 1, sent: 1}` plus the message id, so
/// keyset pages break ties between messages of the same millisecond. A sent message is one
/// document whose `_id` is its id; [`InboxStore::deliver`] adds one document per recipient not
/// already named by one (a `find` first), whose `_id` derives from the message and the
/// recipient, so a recipient never gets a second one.
///
/// Sharded on `{from: 1}`, writes spread by sender but every inbox read goes to every shard:
/// choose it when messages are sent far more often than inboxes are read.
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
    _payload: PhantomData<fn() -> P>,
}

impl<P> Clone for FanOutOnRead<P> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            messages: self.messages.clone(),
            _payload: PhantomData,
        }
    }
}

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
    _payload: PhantomData<fn() -> P>,
}

impl<P> fmt::Debug for FanOutOnReadBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FanOutOnReadBuilder")
            .field("config", &self.config)
            .finish()
    }
}

impl<P: Payload> FanOutOnReadBuilder<P> {
    store_builder_methods!();

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidConfig`] for an unusable collection name, or a name given to a
    /// collection the store does not have.
    pub fn build(self) -> Result<FanOutOnRead<P>> {
        let [messages] = self.config.names(COLLECTIONS)?;
        let messages = self.config.database().collection(&messages);
        let by_owner = IndexModel::builder().keys(LAYOUT.index_keys()).build();
        Ok(FanOutOnRead {
            // The store's correctness does not depend on its index (a delivered copy's `_id` is
            // what refuses a second one), only its speed.
            backend: self
                .config
                .backend_without_locks()
                .with_index(&messages, by_owner),
            messages,
            _payload: PhantomData,
        })
    }
}

impl<P: Payload> FanOutOnRead<P> {
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
            _payload: PhantomData,
        }
    }
}

#[async_trait]
impl<P: Payload> InboxStore<P> for FanOutOnRead<P> {
    fn strategy(&self) -> Strategy {
        Strategy::FanOutOnRead
    }

    async fn send(&self, message: NewMessage<P>) -> Result<Message<P>> {
        validate::check_new_message(&message)?;
        let message = Message::stamp(message);
        let mut document = message.to_document()?;
        document.insert("_id", message.id.0);
        validate::check_encoded_size(&document, MAX_DOCUMENT_BYTES)?;
        // The `_id` is the new message's id: a retry that meets it stored is meeting itself.
        self.backend.insert_once(&self.messages, document).await?;
        Ok(message)
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<()> {
        validate::check_recipients(recipients)?;
        let mut document = message.to_document()?;
        document.insert("delivered", true);
        validate::check_encoded_size(&document, MAX_DOCUMENT_BYTES)?;
        // Recipients of the sent document itself hold the message already. (`from` and `sent`
        // make this a lookup on one shard of the `{from}` key and a point in `{to, sent, id}`.)
        let holding: Vec<Document> = self
            .backend
            .retry("find", || async {
                Ok(self
                    .messages
                    .find(doc! {
                        "from": &message.from,
                        "sent": message.sent,
                        "id": message.id.0,
                        "to": { "$in": recipients },
                    })
                    .projection(doc! { "to": 1 })
                    .await?
                    .try_collect()
                    .await?)
            })
            .await?;
        let held: std::collections::HashSet<&str> = holding
            .iter()
            .filter_map(|d| d.get_array("to").ok())
            .flatten()
            .filter_map(bson::Bson::as_str)
            .collect();
        let missing: Vec<&String> = recipients
            .iter()
            .filter(|recipient| !held.contains(recipient.as_str()))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let copies = missing
            .into_iter()
            .map(|recipient| {
                let mut copy = document.clone();
                copy.insert("_id", derived_id(message.id, recipient));
                copy.insert("to", vec![recipient.as_str()]);
                copy
            })
            .collect();
        // A copy's `_id` derives from the message and the recipient: one refused as a duplicate
        // was delivered before (or by an earlier attempt of this one).
        self.backend.insert_many_once(&self.messages, copies).await
    }

    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64> {
        validate::check_user_id("owner", owner)?;
        validate::check_user_id("sender", sender)?;
        let removed = self
            .messages
            .delete_many(doc! { "from": sender, "to": owner, "delivered": true })
            .await?;
        Ok(removed.deleted_count)
    }

    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        time_ordered::read_page(&self.messages, LAYOUT, owner, page, None).await
    }

    async fn count(&self, owner: &str) -> Result<u64> {
        time_ordered::count(&self.messages, LAYOUT, owner).await
    }

    async fn create_indexes(&self) -> Result<()> {
        self.backend.create_indexes().await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        vec![ShardKey::new(
            self.messages.name(),
            doc! { "from": 1 },
            "spreads writes by sender; every inbox read is scattered to all shards",
        )]
    }

    fn database(&self) -> &Database {
        self.backend.database()
    }
}
