//! Moving inboxes between stores: what a migration from one strategy to another
//! ([`crate::migrate`]) needs of each, in a form no strategy owns.
//!
//! [`InboxTransfer`] lists a store's owners, exports one owner's inbox oldest first as
//! [`HeldMessage`]s (every message the owner holds, hidden and tombstoned ones included, with
//! the owner's state of each), imports such messages into another store's inbox of that owner,
//! and removes an owner's inbox (or the whole store's) again. Every strategy implements it; the
//! payload travels as stored (raw BSON), so a transfer never decodes the application's type.

use async_trait::async_trait;
use bson::{doc, Document};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::engine::TransferEngine;
use super::lifecycle::InboxLifecycle;
use super::operation::{for_user, span};
use super::recipient_lists::RecipientLists;
use super::validate::check_recipients;
use super::{Message, Payload};
use crate::Result;

pub use super::held::{Gone, HeldMessage};

/// What moving inboxes between stores needs of a store; every strategy implements it. See the
/// [module docs](self) and [`crate::migrate`].
#[async_trait]
pub trait InboxTransfer<P: Payload>: InboxLifecycle<P> {
    /// The strategy's transfer engine: what this trait's operations call once their input is
    /// checked. Hidden and unnameable outside the crate, so the trait is sealed: only the crate's
    /// strategies (and its migration's stores) are inbox stores, and new operations can be added to
    /// it without breaking any application.
    #[doc(hidden)]
    fn transfer_engine(&self) -> &dyn TransferEngine<P>;

    /// Every owner holding at least one message (shown, hidden or a tombstone) whose id sorts
    /// after `after`, in order of id.
    async fn owners(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        span!(self, "owners")
            .run(self.transfer_engine().owners(after))
            .await
    }

    /// Every message `owner` holds, oldest first (the order of the owner's pages, reversed),
    /// hidden ones and tombstones included.
    async fn export(&self, owner: &str) -> Result<BoxStream<'_, Result<HeldMessage>>> {
        let work = self.transfer_engine().export(owner);
        for_user(span!(self, "export"), "owner", owner, work).await
    }

    /// Writes `messages` (oldest first, and newer than any this store's inbox of `owner`
    /// holds) into `owner`'s inbox with their state. Repeating a call (after a lost reply, or
    /// one that failed part way) adds nothing: a message it already wrote is left as it is.
    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()> {
        let work = self.transfer_engine().import(owner, messages);
        let operation = span!(self, "import", items = messages.len());
        for_user(operation, "owner", owner, work).await
    }

    /// Removes everything `owner`'s inbox holds here (and the owner from shared messages).
    async fn purge(&self, owner: &str) -> Result<()> {
        let work = self.transfer_engine().purge(owner);
        for_user(span!(self, "purge"), "owner", owner, work).await
    }

    /// Removes every message and every owner's state from this store (its mute and block
    /// lists too).
    async fn purge_all(&self) -> Result<()> {
        span!(self, "purge_all")
            .run(self.transfer_engine().purge_all())
            .await
    }

    /// Whether this store holds no message at all.
    async fn is_empty(&self) -> Result<bool> {
        self.transfer_engine().is_empty().await
    }

    /// Sends `message` as stamped (its id and `sent` kept) to `recipients`, with this store's
    /// own rules (the recipients' mute and block lists): what [`super::InboxStore::send`] does
    /// once a message has its id. Idempotent. Returns the recipients it skipped (blocking).
    async fn send_stamped(
        &self,
        message: &Message<P>,
        recipients: &[String],
    ) -> Result<Vec<String>> {
        check_recipients(recipients)?;
        self.transfer_engine()
            .send_stamped(message, recipients)
            .await
    }
}

/// Every transfer engine is [`InboxTransfer`] (its operations are the trait's, written once).
impl<P: Payload, E: TransferEngine<P>> InboxTransfer<P> for E {
    fn transfer_engine(&self) -> &dyn TransferEngine<P> {
        self
    }
}

/// A transfer-capable store of any strategy, for `Arc<DynInboxTransfer<P>>`.
pub type DynInboxTransfer<P> = dyn InboxTransfer<P>;

/// The distinct values of `field` (an array of owners where `array`) in `collection` that sort
/// after `after`, in order: one `aggregate`, read in batches.
pub(crate) async fn distinct_owners<'a>(
    collection: &'a mongodb::Collection<Document>,
    field: &str,
    array: bool,
    after: Option<String>,
) -> Result<BoxStream<'a, Result<String>>> {
    let mut pipeline = Vec::new();
    let path = format!("${field}");
    if array {
        pipeline.push(doc! { "$project": { field: 1 } });
        pipeline.push(doc! { "$unwind": path.clone() });
    }
    if let Some(after) = after {
        pipeline.push(doc! { "$match": { field: { "$gt": after } } });
    }
    pipeline.push(doc! { "$group": { "_id": path } });
    pipeline.push(doc! { "$sort": { "_id": 1 } });
    let cursor = collection.aggregate(pipeline).await?;
    Ok(cursor
        .map_err(crate::Error::from)
        .try_filter_map(|group| async move { Ok(group.get_str("_id").ok().map(str::to_owned)) })
        .boxed())
}

/// The messages held in `groups` (an owner's copies read in chunks, or each bucket's entries),
/// in order: each group's shared recipient lists put back (one `find` where any has one), then
/// each document decoded by `held` as read from `collection`.
pub(super) fn held_in_groups<'a>(
    groups: impl futures::Stream<Item = Result<Vec<Document>>> + Send + 'a,
    recipients: &'a RecipientLists,
    collection: &str,
    held: fn(&str, &Document) -> Result<HeldMessage>,
) -> BoxStream<'a, Result<HeldMessage>> {
    let collection = collection.to_owned();
    groups
        .and_then(move |mut documents| {
            let collection = collection.clone();
            async move {
                recipients.restore(&mut documents, "id").await?;
                documents
                    .iter()
                    .map(|document| held(&collection, document))
                    .collect::<Result<Vec<_>>>()
            }
        })
        .map_ok(|messages| futures::stream::iter(messages.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
}

/// Whether `collection` holds no document at all: one `find_one`.
pub(crate) async fn holds_nothing(collection: &mongodb::Collection<Document>) -> Result<bool> {
    Ok(collection.find_one(doc! {}).await?.is_none())
}

/// The documents of `collection` matching `filter`, oldest first by `(sent, id)`: one `find`,
/// read in batches.
pub(crate) async fn oldest_first(
    collection: &mongodb::Collection<Document>,
    filter: Document,
) -> Result<impl futures::Stream<Item = Result<Document>>> {
    let cursor = collection
        .find(filter)
        .sort(doc! { "sent": 1, "id": 1 })
        .await?;
    Ok(cursor.map_err(crate::Error::from))
}

/// Deletes every document of `collections`, retried (deleting twice deletes once).
pub(crate) async fn delete_all(
    backend: &crate::backend::Backend,
    collections: &[&mongodb::Collection<Document>],
) -> Result<()> {
    for collection in collections {
        backend
            .command("purge store", || collection.delete_many(doc! {}))
            .await?;
    }
    Ok(())
}
