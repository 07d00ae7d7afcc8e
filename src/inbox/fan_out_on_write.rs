//! Fan out on write: one copy of each message per recipient.

use async_trait::async_trait;
use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

use super::recipient_lists::RecipientLists;
use super::time_ordered::{self, Layout};
use super::{validate, InboxStore, Message, NewMessage, Payload, Strategy, MAX_DOCUMENT_BYTES};
use crate::indexes::Indexes;
use crate::retry::RetryPolicy;
use crate::sharding::ShardKey;
use crate::update_batch::insert_many_once;
use crate::{Page, PageRequest, Result};

const LAYOUT: Layout = Layout {
    strategy: Strategy::FanOutOnWrite,
    owner_field: "recipient",
    id_field: "id",
};

/// Fan out on write: every recipient gets a copy, so an inbox read touches one index range on
/// one shard.
///
/// Documents look like `{recipient, id, from, to: [..], sent, message}`. The unique index
/// `{recipient: 1, sent: 1, id: 1}` serves every page read and guarantees a message is in an
/// inbox at most once. All copies go to the server in one unordered `insert` (the driver splits
/// batches above 100,000 documents or 48 MB), not one round trip per recipient as in the seed.
///
/// A recipient list longer than [`FanOutOnWriteBuilder::max_inline_recipients`] (100 by default)
/// is stored once, `{_id: message id, to}` in the recipients collection (`inbox_recipients`),
/// written just before the copies, and the copies carry `to_count` instead: otherwise a message
/// to N users would store N² names (1.4 GB for 10,000). Such a send takes 2 commands, and a page
/// holding such messages 2 `find`s; the `to` read back is the whole list either way.
///
/// Sharded on `{recipient: 1, sent: 1}`: an inbox lives on one shard (or a few, for very long
/// histories). Choose it when inboxes are read far more often than messages are sent, and
/// messages have few recipients; see [`super::BucketedFanOut`] for fewer index entries.
#[derive(Clone, Debug)]
pub struct FanOutOnWrite {
    database: Database,
    copies: Collection<Document>,
    recipients: RecipientLists,
    indexes: Indexes,
    retry: RetryPolicy,
}

/// Configures a [`FanOutOnWrite`] store.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct FanOutOnWriteBuilder {
    database: Database,
    collection: String,
    recipients: String,
    max_inline: usize,
    retry: RetryPolicy,
}

impl FanOutOnWriteBuilder {
    /// The collection of per-recipient copies (default `inbox_copies`).
    pub fn collection(mut self, name: impl Into<String>) -> Self {
        self.collection = name.into();
        self
    }

    /// The collection of recipient lists too long to store in every copy (default
    /// `inbox_recipients`).
    pub fn recipients_collection(mut self, name: impl Into<String>) -> Self {
        self.recipients = name.into();
        self
    }

    /// The longest recipient list stored in every copy (default 100); a longer one is stored
    /// once, in the recipients collection. 0 stores every list once.
    pub fn max_inline_recipients(mut self, max: usize) -> Self {
        self.max_inline = max;
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
    /// [`crate::Error::InvalidConfig`] for an empty or invalid collection name, or the same
    /// name for both collections.
    pub fn build(self) -> Result<FanOutOnWrite> {
        super::check_collection_names(
            &[&self.collection, &self.recipients],
            "copies and recipients",
        )?;
        Ok(FanOutOnWrite::with_collections(
            &self.database,
            &self.collection,
            RecipientLists::new(self.database.collection(&self.recipients), self.max_inline),
            self.retry,
        ))
    }
}

impl FanOutOnWrite {
    /// Inserts one copy of `message` per recipient, in one unordered `insert`; `delivered`
    /// marks copies written by [`InboxStore::deliver`], which `remove_from` may take back.
    ///
    /// Retried under the store's policy. Idempotent: the unique `{recipient, sent, id}` index
    /// refuses a second copy of the message for a recipient, so a copy refused as a duplicate was
    /// stored by an earlier attempt (or an earlier delivery) and counts as done.
    async fn insert_copies<P: Payload>(
        &self,
        message: &Message<P>,
        recipients: &[String],
        delivered: bool,
    ) -> Result<()> {
        let mut document = message.to_document()?;
        if delivered {
            document.insert("delivered", true);
        }
        let list = self.recipients.share(&mut document, message.id)?;
        let longest = recipients.iter().map(String::len).max().unwrap_or(0);
        // Every copy is this document plus one `recipient` field.
        validate::check_encoded_size(&document, MAX_DOCUMENT_BYTES - longest - 32)?;
        // The unique index is what refuses a second copy.
        self.indexes.ensure().await?;
        self.recipients.store(list, &self.retry).await?;
        let copies = recipients
            .iter()
            .map(|recipient| {
                let mut copy = document.clone();
                copy.insert("recipient", recipient.as_str());
                copy
            })
            .collect();
        insert_many_once(&self.retry, &self.copies, copies).await
    }

    /// How many messages `owner` has received (one command).
    pub async fn count(&self, owner: &str) -> Result<u64> {
        time_ordered::count(&self.copies, LAYOUT, owner).await
    }

    /// Creates the indexes the strategy needs (idempotent, safe on every start). The unique
    /// index is what keeps a message in an inbox at most once, so a store that was not told to
    /// create it creates it before its first write.
    pub async fn create_indexes(&self) -> Result<()> {
        self.indexes.create().await
    }

    /// The shard key each of the strategy's collections should have.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::new(
                self.copies.name(),
                doc! { "recipient": 1, "sent": 1 },
                "routes each inbox read to one shard; writes spread by recipient",
            ),
            ShardKey::new(
                self.recipients.name(),
                doc! { "_id": "hashed" },
                "long recipient lists, one per message, read by id",
            ),
        ]
    }

    /// The default collection name.
    pub const DEFAULT_COLLECTION: &'static str = "inbox_copies";

    /// A store with default settings in `database`.
    pub fn new(database: &Database) -> Self {
        Self::with_collections(
            database,
            Self::DEFAULT_COLLECTION,
            RecipientLists::new(
                database.collection(RecipientLists::DEFAULT_COLLECTION),
                RecipientLists::DEFAULT_MAX_INLINE,
            ),
            RetryPolicy::default(),
        )
    }

    fn with_collections(
        database: &Database,
        copies: &str,
        recipients: RecipientLists,
        retry: RetryPolicy,
    ) -> Self {
        let copies = database.collection(copies);
        let unique = IndexModel::builder()
            .keys(LAYOUT.index_keys())
            .options(IndexOptions::builder().unique(true).build())
            .build();
        Self {
            indexes: Indexes::new().with(&copies, unique),
            database: database.clone(),
            copies,
            recipients,
            retry,
        }
    }

    /// Starts configuring a store in `database`.
    pub fn builder(database: &Database) -> FanOutOnWriteBuilder {
        FanOutOnWriteBuilder {
            database: database.clone(),
            collection: Self::DEFAULT_COLLECTION.to_owned(),
            recipients: RecipientLists::DEFAULT_COLLECTION.to_owned(),
            max_inline: RecipientLists::DEFAULT_MAX_INLINE,
            retry: RetryPolicy::default(),
        }
    }
}

#[async_trait]
impl<P: Payload> InboxStore<P> for FanOutOnWrite {
    fn strategy(&self) -> Strategy {
        Strategy::FanOutOnWrite
    }

    async fn send(&self, message: NewMessage<P>) -> Result<Message<P>> {
        validate::check_new_message(&message)?;
        let message = Message::stamp(message);
        self.insert_copies(&message, &message.to, false).await?;
        Ok(message)
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<()> {
        validate::check_recipients(recipients)?;
        // Copies already there are refused by the unique index, and taken as done.
        self.insert_copies(message, recipients, true).await
    }

    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64> {
        validate::check_user_id("owner", owner)?;
        validate::check_user_id("sender", sender)?;
        let removed = self
            .copies
            .delete_many(doc! { "recipient": owner, "from": sender, "delivered": true })
            .await?;
        Ok(removed.deleted_count)
    }

    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        time_ordered::read_page(&self.copies, LAYOUT, owner, page, Some(&self.recipients)).await
    }

    async fn count(&self, owner: &str) -> Result<u64> {
        FanOutOnWrite::count(self, owner).await
    }

    async fn create_indexes(&self) -> Result<()> {
        FanOutOnWrite::create_indexes(self).await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        FanOutOnWrite::shard_keys(self)
    }

    fn database(&self) -> &Database {
        &self.database
    }
}
