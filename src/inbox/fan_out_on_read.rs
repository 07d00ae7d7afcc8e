//! Fan out on read: one document per message; an inbox is every message naming its owner.

use async_trait::async_trait;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::{Collection, Database, IndexModel};

use super::time_ordered::{self, Layout};
use super::{
    derived_id, validate, InboxStore, Message, NewMessage, Payload, Strategy, MAX_DOCUMENT_BYTES,
};
use crate::indexes::Indexes;
use crate::retry::{retry, RetryPolicy};
use crate::sharding::ShardKey;
use crate::update_batch::{insert_many_once, insert_once_with};
use crate::{Page, PageRequest, Result};

const LAYOUT: Layout = Layout {
    strategy: Strategy::FanOutOnRead,
    owner_field: "to",
    id_field: "id",
};

/// Fan out on read: sending is one insert; reading gathers every message addressed to the owner.
///
/// Documents look like `{_id, id, from, to: [..], sent, message}`, indexed by
/// `{to: 1, sent: 1, id: 1}`; the seed's `{to: 1, sent: 1}` plus the message id, so keyset
/// pages break ties between messages of the same millisecond. A sent message is one document
/// whose `_id` is its id; [`InboxStore::deliver`] adds one document per recipient not already
/// named by one (a `find` first), whose `_id` derives from the message and the recipient, so a
/// recipient never gets a second one.
///
/// Sharded on `{from: 1}`, writes spread by sender but every inbox read goes to every shard:
/// choose it when messages are sent far more often than inboxes are read.
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use mongo_social::{FanOutOnRead, InboxStore, NewMessage, PageRequest};
/// let store = FanOutOnRead::builder(&db).collection("messages").build()?;
/// store.create_indexes().await?;
/// store.send(NewMessage::new("joe", ["bob"], "Hi!".to_string())).await?;
/// let page = store.inbox_page("bob", PageRequest::first(50)).await?;
/// let first: &String = &page.items[0].payload;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FanOutOnRead {
    database: Database,
    messages: Collection<Document>,
    indexes: Indexes,
    retry: RetryPolicy,
}

/// Configures a [`FanOutOnRead`] store.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct FanOutOnReadBuilder {
    database: Database,
    collection: String,
    retry: RetryPolicy,
}

impl FanOutOnReadBuilder {
    /// The messages collection (default `inbox`).
    pub fn collection(mut self, name: impl Into<String>) -> Self {
        self.collection = name.into();
        self
    }

    /// How transient failures are retried (default [`RetryPolicy::default`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidConfig`] for an empty collection name.
    pub fn build(self) -> Result<FanOutOnRead> {
        super::check_collection_name(&self.collection)?;
        Ok(FanOutOnRead::with_collection(
            &self.database,
            &self.collection,
            self.retry,
        ))
    }
}

impl FanOutOnRead {
    /// How many messages `owner` has received (one command).
    pub async fn count(&self, owner: &str) -> Result<u64> {
        time_ordered::count(&self.messages, LAYOUT, owner).await
    }

    /// Creates the indexes the strategy needs (idempotent, safe on every start). The store's
    /// correctness does not depend on them (a delivered copy's `_id` is what refuses a second
    /// one), only its speed: run it at startup.
    pub async fn create_indexes(&self) -> Result<()> {
        self.indexes.create().await
    }

    /// The shard key each of the strategy's collections should have.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        vec![ShardKey::new(
            self.messages.name(),
            doc! { "from": 1 },
            "spreads writes by sender; every inbox read is scattered to all shards",
        )]
    }

    /// The default collection name.
    pub const DEFAULT_COLLECTION: &'static str = "inbox";

    /// A store with default settings in `database`.
    pub fn new(database: &Database) -> Self {
        Self::with_collection(database, Self::DEFAULT_COLLECTION, RetryPolicy::default())
    }

    fn with_collection(database: &Database, collection: &str, retry: RetryPolicy) -> Self {
        let messages = database.collection(collection);
        Self {
            indexes: Indexes::new().with(
                &messages,
                IndexModel::builder().keys(LAYOUT.index_keys()).build(),
            ),
            database: database.clone(),
            messages,
            retry,
        }
    }

    /// Starts configuring a store in `database`.
    pub fn builder(database: &Database) -> FanOutOnReadBuilder {
        FanOutOnReadBuilder {
            database: database.clone(),
            collection: Self::DEFAULT_COLLECTION.to_owned(),
            retry: RetryPolicy::default(),
        }
    }
}

#[async_trait]
impl<P: Payload> InboxStore<P> for FanOutOnRead {
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
        insert_once_with(&self.retry, &self.messages, document).await?;
        Ok(message)
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<()> {
        validate::check_recipients(recipients)?;
        let mut document = message.to_document()?;
        document.insert("delivered", true);
        validate::check_encoded_size(&document, MAX_DOCUMENT_BYTES)?;
        // Recipients of the sent document itself hold the message already. (`from` and `sent`
        // make this a lookup on one shard of the `{from}` key and a point in `{to, sent, id}`.)
        let holding: Vec<Document> = retry(&self.retry, "find", || async {
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
        insert_many_once(&self.retry, &self.messages, copies).await
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
        FanOutOnRead::count(self, owner).await
    }

    async fn create_indexes(&self) -> Result<()> {
        FanOutOnRead::create_indexes(self).await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        FanOutOnRead::shard_keys(self)
    }

    fn database(&self) -> &Database {
        &self.database
    }
}
