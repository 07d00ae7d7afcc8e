//! The inbox engine of a time-ordered store ([`crate::FanOutOnRead`], [`crate::FanOutOnWrite`]),
//! written once over its [`Layout`](super::Layout): [`InboxEngine`] for every
//! [`TimeOrderedEngine`].
//!
//! Pages, counts, watches, indexes and the removal of delivered messages read and write the
//! store's documents as its layout says; a store says how a message reaches its recipients,
//! where its mute and block lists and its shared recipient lists are, and its shard keys.

use async_trait::async_trait;
use bson::doc;

use super::lifecycle::TimeOrderedStore;
use crate::error::Result;
use crate::inbox::engine::{InboxEngine, WatchRequest};
use crate::inbox::filters::FilterLists;
use crate::inbox::filters::Filters;
use crate::inbox::keyed::KeyedSend;
use crate::inbox::recipient_lists::RecipientLists;
use crate::inbox::{Message, NewMessage, Payload, Sent, Strategy};
use crate::page::{Page, PageRequest};
use crate::realtime::Updates;
use crate::sharding::ShardKey;

/// What a [`TimeOrderedStore`] does its own way of [`InboxEngine`]. Methods share their names
/// with the [`InboxEngine`] methods they serve.
#[async_trait]
pub(in crate::inbox) trait TimeOrderedEngine<P: Payload>:
    TimeOrderedStore + std::fmt::Debug + 'static
{
    /// The owners' mute and block lists.
    fn filter_lists(&self) -> &FilterLists;

    /// Where the store keeps long recipient lists once, if it does: a page and a watch put them
    /// back.
    fn recipient_lists(&self) -> Option<&RecipientLists>;

    /// Sends a checked message ([`InboxEngine::send`]).
    async fn send(&self, message: NewMessage<P>, keyed: Option<KeyedSend>) -> Result<Sent<P>>;

    /// Delivers a stamped message to checked recipients ([`InboxEngine::deliver`]).
    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>>;

    /// The shard key each collection should have ([`InboxEngine::shard_keys`]).
    fn shard_keys(&self) -> Vec<ShardKey>;
}

#[async_trait]
impl<P: Payload, S: TimeOrderedEngine<P>> InboxEngine<P> for S {
    fn strategy(&self) -> Strategy {
        S::LAYOUT.strategy
    }

    fn database(&self) -> &mongodb::Database {
        self.backend().database()
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        TimeOrderedEngine::shard_keys(self)
    }

    async fn create_indexes(&self) -> Result<()> {
        self.backend().create_indexes().await
    }

    async fn filters(&self, owner: &str) -> Result<Filters> {
        self.filter_lists().get(owner).await
    }

    async fn send(&self, message: NewMessage<P>, keyed: Option<KeyedSend>) -> Result<Sent<P>> {
        TimeOrderedEngine::send(self, message, keyed).await
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>> {
        TimeOrderedEngine::deliver(self, message, recipients).await
    }

    /// One `delete_many` of the owner's documents from `sender` that a delivery wrote.
    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64> {
        let delivered = doc! { "from": sender, S::LAYOUT.owner_field: owner, "delivered": true };
        let removed = self.documents().delete_many(delivered).await?;
        Ok(removed.deleted_count)
    }

    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        let recipients = self.recipient_lists();
        super::read_page(
            self.backend(),
            self.documents(),
            S::LAYOUT,
            owner,
            page,
            recipients,
        )
        .await
    }

    async fn count(&self, owner: &str) -> Result<u64> {
        super::count(self.documents(), S::LAYOUT, owner).await
    }

    fn watch(&self, request: WatchRequest<'_>) -> Updates<Message<P>> {
        crate::inbox::watch::TimeOrdered::watch(
            self.backend(),
            self.documents(),
            S::LAYOUT,
            self.recipient_lists().cloned(),
            request,
        )
    }
}
