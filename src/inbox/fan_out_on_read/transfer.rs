//! Moving a fan-out-on-read inbox ([`InboxTransfer`]): the messages naming an owner, oldest
//! first, with that owner's state on each.
//!
//! A message is one document its recipients share, so importing an owner's messages upserts
//! each document by the message's id (the whole recipient list is added once, every owner's
//! state to its arrays), and purging an owner hides every document naming them from them
//! (`gone_for`, as a delete for me does), so the others keep the message and its recipient
//! list whole; an import shows each again.

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::FanOutOnRead;
use crate::inbox::held::{Gone, HeldMessage};
use crate::inbox::time_ordered::named_in;
use crate::inbox::time_ordered::transfer::TimeOrderedTransfer;
use crate::inbox::transfer;
use crate::inbox::{Message, Payload};
use crate::Result;

/// The state arrays every owner's state of a shared message lives in.
const STATE_ARRAYS: [&str; 5] = [
    "read_by",
    "starred_by",
    "muted_for",
    "blocked_for",
    "gone_for",
];

/// The upsert an import applies to the shared document of `message`: the message set once,
/// `owner` added to its recipients and to the state arrays of what they hold.
fn imported_update(owner: &str, message: &HeldMessage) -> Document {
    let mut insert = message.message_document();
    insert.remove("to");
    let mut recipients: Vec<Bson> = message.to.iter().map(Bson::from).collect();
    if !message.to.iter().any(|r| r == owner) {
        recipients.push(Bson::from(owner));
    }
    let mut add = doc! { "to": { "$each": recipients } };
    for (field, on) in [
        ("read_by", message.read),
        ("starred_by", message.starred),
        ("muted_for", message.muted),
        ("blocked_for", message.blocked),
        ("gone_for", message.gone == Some(Gone::Deleted)),
    ] {
        if on {
            add.insert(field, owner);
        }
    }
    // The payload is the message's, the same for every owner, but a tombstone of one
    // owner (deleted for them) lacks it: set by whoever has it.
    let mut set = Document::new();
    if message.gone.is_none() {
        for field in ["message", "edited"] {
            if let Some(value) = insert.remove(field) {
                set.insert(field, value);
            }
        }
    }
    let mut update = doc! { "$setOnInsert": insert, "$addToSet": add };
    if !set.is_empty() {
        update.insert("$set", set);
    }
    if message.gone != Some(Gone::Deleted) {
        // Shown again where a purge had hidden it.
        update.insert("$pull", doc! { "gone_for": owner });
    }
    if message.gone == Some(Gone::Retracted) {
        // A retraction is the sender's, for every recipient: the shared message goes.
        update.insert("$set", doc! { "retracted": message.sent });
        if let Ok(set_on_insert) = update.get_document_mut("$setOnInsert") {
            set_on_insert.remove("message");
        }
        update.insert("$unset", doc! { "message": "" });
    }
    update
}
#[async_trait]
impl<P: Payload> TimeOrderedTransfer<P> for FanOutOnRead<P> {
    /// One `find` of the messages naming the owner, by `(sent, id)`, read in batches.
    async fn export(&self, owner: &str) -> Result<BoxStream<'_, Result<HeldMessage>>> {
        let collection = self.messages.name().to_owned();
        let owner = owner.to_owned();
        let documents = transfer::oldest_first(&self.messages, doc! { "to": &owner }).await?;
        Ok(documents
            .and_then(move |document| {
                let held = (|| {
                    let mut message = HeldMessage::from_document(&collection, &document, "id")?;
                    message.read = named_in(&document, "read_by", &owner);
                    message.starred = named_in(&document, "starred_by", &owner);
                    message.muted = named_in(&document, "muted_for", &owner);
                    message.blocked = named_in(&document, "blocked_for", &owner);
                    message.gone = if document.contains_key("retracted") {
                        Some(Gone::Retracted)
                    } else if named_in(&document, "gone_for", &owner) {
                        Some(Gone::Deleted)
                    } else {
                        None
                    };
                    Ok(message)
                })();
                async move { held }
            })
            .boxed())
    }

    /// One `update` of upserting statements (as many commands as the server takes them in):
    /// each sets the message once and adds the owner to its recipients and state arrays.
    /// Repeating it adds nothing (`$setOnInsert`, `$addToSet`).
    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()> {
        let mut statements = Vec::with_capacity(messages.len());
        for message in messages {
            let mut update = imported_update(owner, message);
            // The sender (the shard key) beside `_id`: an upsert must name its shard on a
            // sharded cluster. Its `from` then comes from the filter.
            let filter = self
                .backend
                .by_id(message.id.0.into(), &doc! { "from": &message.from })
                .await?;
            if filter.contains_key("from") {
                if let Ok(set_on_insert) = update.get_document_mut("$setOnInsert") {
                    set_on_insert.remove("from");
                }
            }
            statements.push((filter, update));
        }
        for attempt in 0..2 {
            let mut batch = self.backend.update_batch(self.messages.name());
            for (filter, update) in &statements {
                batch.push(filter.clone(), update.clone(), true)?;
            }
            let outcome = batch.run().await?;
            // Two first upserts of one message (another owner's import, a live send): the
            // other created it, and the statement applies to it now.
            if outcome.duplicate_key.is_empty() || attempt == 1 {
                return Ok(());
            }
            statements = outcome
                .duplicate_key
                .iter()
                .map(|&i| statements[i].clone())
                .collect();
        }
        Ok(())
    }

    /// One `update_many` hiding the messages the owner shares from them (gone for them, their
    /// state taken off) while every other recipient keeps them as they were, recipient list
    /// included.
    async fn hide_shared(&self, owner: &str) -> Result<()> {
        let mut pull = Document::new();
        for field in STATE_ARRAYS.iter().filter(|field| **field != "gone_for") {
            pull.insert(*field, owner);
        }
        let hide = doc! { "$addToSet": { "gone_for": owner }, "$pull": pull };
        self.messages
            .update_many(doc! { "to": owner }, hide)
            .await?;
        Ok(())
    }

    /// The message's document as `send` writes it, `_id` its id (one `find` of the lists, one
    /// `insert`, refused and taken as done when a retry or another writer stored it). Every
    /// recipient of the message is named; `recipients` are checked only.
    async fn send_stamped(
        &self,
        message: &Message<P>,
        recipients: &[String],
    ) -> Result<Vec<String>> {
        let (document, skipped) = self.sent_document(message).await?;
        if skipped.len() < message.to.len() {
            self.backend.insert_once(&self.messages, document).await?;
        }
        Ok(skipped
            .into_iter()
            .filter(|r| recipients.contains(r))
            .collect())
    }
}
