//! Moving a fan-out-on-write inbox ([`InboxTransfer`]): an owner's copies, oldest first.

use async_trait::async_trait;
use bson::{doc, Document};
use futures::stream::BoxStream;
use futures::TryStreamExt;

use super::{copy_id, FanOutOnWrite};
use crate::inbox::held::{Gone, HeldMessage};
use crate::inbox::time_ordered::transfer::TimeOrderedTransfer;
use crate::inbox::transfer;
use crate::inbox::{Message, Payload};
use crate::Result;

/// Copies read at once when exporting, so their shared lists are put back in one `find`.
const EXPORT_CHUNK: usize = 256;

/// A stored copy as the owner holds it.
fn held(collection: &str, document: &Document) -> Result<HeldMessage> {
    let mut message = HeldMessage::from_document(collection, document, "id")?;
    message.read = !document.get_bool("unread").unwrap_or(false);
    message.starred = document.get_bool("starred").unwrap_or(false);
    message.muted = document.get_bool("muted").unwrap_or(false);
    message.blocked = document.get_bool("blocked").unwrap_or(false);
    message.gone = document.get_str("gone").ok().map(Gone::from_name);
    Ok(message)
}

#[async_trait]
impl<P: Payload> TimeOrderedTransfer<P> for FanOutOnWrite<P> {
    /// One `find` of the owner's copies by `(sent, id)`, read in batches; one `find` of shared
    /// lists per 256 copies that have one.
    async fn export(&self, owner: &str) -> Result<BoxStream<'_, Result<HeldMessage>>> {
        let documents = transfer::oldest_first(&self.copies, doc! { "recipient": owner }).await?;
        let chunks = documents.try_chunks(EXPORT_CHUNK).map_err(|error| error.1);
        let collection = self.copies.name();
        Ok(transfer::held_in_groups(
            chunks,
            &self.recipients,
            collection,
            held,
        ))
    }

    /// One unordered `insert` of the copies (a list past `max_inline_recipients` stored once
    /// first); a copy already there is refused by its derived `_id` and taken as done.
    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()> {
        let mut copies = Vec::with_capacity(messages.len());
        for message in messages {
            let mut copy = message.message_document();
            let list = self.recipients.share(&mut copy, message.id)?;
            self.recipients.store(list, &self.backend).await?;
            copy.insert("_id", copy_id(message.id, owner));
            copy.insert("recipient", owner);
            match message.gone {
                Some(gone) => {
                    copy.insert("gone", gone.name());
                }
                None => {
                    if !message.read {
                        copy.insert("unread", true);
                    }
                    if message.starred {
                        copy.insert("starred", true);
                    }
                }
            }
            if message.muted {
                copy.insert("muted", true);
            }
            if message.blocked {
                copy.insert("blocked", true);
            }
            copies.push(copy);
        }
        if copies.is_empty() {
            return Ok(());
        }
        self.backend.insert_many_once(&self.copies, copies).await
    }

    async fn send_stamped(
        &self,
        message: &Message<P>,
        recipients: &[String],
    ) -> Result<Vec<String>> {
        self.insert_copies(message, recipients, false).await
    }
}
