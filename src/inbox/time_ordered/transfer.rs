//! Moving a time-ordered inbox ([`crate::FanOutOnRead`], [`crate::FanOutOnWrite`]), written
//! once over its [`Layout`](super::Layout): [`TransferEngine`] for every
//! [`TimeOrderedTransfer`].
//!
//! Listing the owners, emptying the whole store and asking whether it holds anything read the
//! store's documents as its layout says, and so does purging one owner's inbox (their
//! documents and their mute and block lists); a store says how it exports and imports one
//! owner's inbox, how a purge hides the documents it shares, and how it sends a stamped
//! message.

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::engine::TimeOrderedEngine;
use crate::error::Result;
use crate::inbox::engine::TransferEngine;
use crate::inbox::held::HeldMessage;
use crate::inbox::transfer;
use crate::inbox::{Message, Payload};

/// What a [`TimeOrderedEngine`] does its own way of [`TransferEngine`]. Methods share their
/// names with the [`TransferEngine`] methods they serve.
#[async_trait]
pub(in crate::inbox) trait TimeOrderedTransfer<P: Payload>:
    TimeOrderedEngine<P>
{
    /// Everything `owner` holds, oldest first ([`TransferEngine::export`]).
    async fn export(&self, owner: &str) -> Result<BoxStream<'_, Result<HeldMessage>>>;

    /// Writes held messages into `owner`'s inbox, idempotently ([`TransferEngine::import`]).
    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()>;

    /// Hides from `owner` the documents they share with other owners, which a purge leaves to
    /// the others ([`TransferEngine::purge`] deletes those that are `owner`'s alone),
    /// repeatable. Nothing by default: where each owner has copies of their own, no document
    /// is shared.
    async fn hide_shared(&self, _owner: &str) -> Result<()> {
        Ok(())
    }

    /// Sends a stamped message to checked recipients, idempotently
    /// ([`TransferEngine::send_stamped`]).
    async fn send_stamped(
        &self,
        message: &Message<P>,
        recipients: &[String],
    ) -> Result<Vec<String>>;
}

#[async_trait]
impl<P: Payload, S: TimeOrderedTransfer<P>> TransferEngine<P> for S {
    /// One `aggregate` grouping the documents by owner (unwinding the owners of a document
    /// that names several).
    async fn owners(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        let layout = S::LAYOUT;
        let documents = self.documents();
        transfer::distinct_owners(documents, layout.owner_field, layout.owners_in_array, after)
            .await
    }

    async fn export(&self, owner: &str) -> Result<BoxStream<'_, Result<HeldMessage>>> {
        TimeOrderedTransfer::export(self, owner).await
    }

    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()> {
        TimeOrderedTransfer::import(self, owner, messages).await
    }

    /// One `delete_many` of the documents that are the owner's alone, what the store's
    /// [`TimeOrderedTransfer::hide_shared`] sends, and one `delete_one` of the owner's lists,
    /// retried together.
    async fn purge(&self, owner: &str) -> Result<()> {
        let alone = S::LAYOUT.alone(owner);
        self.backend()
            .retry("purge owner", || async {
                self.documents().delete_many(alone.clone()).await?;
                self.hide_shared(owner).await?;
                self.filter_lists().forget(owner).await
            })
            .await
    }

    /// One `delete_many` of each collection: the documents, the shared recipient lists (where
    /// the store keeps them), the mute and block lists.
    async fn purge_all(&self) -> Result<()> {
        let mut collections = vec![self.documents()];
        collections.extend(self.recipient_lists().map(|lists| lists.collection()));
        collections.push(self.filter_lists().collection());
        transfer::delete_all(self.backend(), &collections).await
    }

    async fn is_empty(&self) -> Result<bool> {
        transfer::holds_nothing(self.documents()).await
    }

    async fn send_stamped(
        &self,
        message: &Message<P>,
        recipients: &[String],
    ) -> Result<Vec<String>> {
        TimeOrderedTransfer::send_stamped(self, message, recipients).await
    }
}
