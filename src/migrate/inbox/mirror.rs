//! [`MigratingInbox`]: the store an application uses while its inboxes move, writing both
//! stores and reading where the migration says.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use super::units::InboxMigrationEngine;
use crate::error::{Error, Invalid};
use crate::inbox::engine::{InboxEngine, LifecycleEngine, WatchRequest};
use crate::inbox::keyed::KeyedSend;
use crate::inbox::{
    Filter, Filters, Message, MessageId, NewMessage, Payload, Retention, Sent, Strategy, UpTo,
};
use crate::migrate::engine::Writes;
use crate::realtime::Updates;
use crate::sharding::ShardKey;
use crate::{Page, PageRequest, Result};

/// The inbox store of a running [`super::InboxMigration`]: every write goes to the source,
/// then to the target for the owners whose copy is done; reads go to the source, or to the
/// target once the migration moved them (see the [module docs](crate::migrate) for what each costs).
/// Errors are the source's: the target's own, after the source took a write, leave the owner
/// to be copied again.
pub struct MigratingInbox<P> {
    inner: Arc<InboxMigrationEngine<P>>,
}

impl<P> fmt::Debug for MigratingInbox<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MigratingInbox")
            .field("source", &self.inner.units.source)
            .field("target", &self.inner.units.target)
            .field("reads", &self.inner.reads)
            .finish_non_exhaustive()
    }
}

impl<P: Payload> MigratingInbox<P> {
    pub(super) fn new(inner: Arc<InboxMigrationEngine<P>>) -> Self {
        Self { inner }
    }

    /// The store a write goes to first: the one taking writes, or the source while both do
    /// (then `true`: the target takes it after).
    async fn first_store(&self) -> Result<(Arc<crate::inbox::DynInboxTransfer<P>>, bool)> {
        let units = &self.inner.units;
        Ok(match self.inner.writes().await? {
            Writes::Source => (units.source.clone(), false),
            Writes::Target => (units.target.clone(), false),
            Writes::Both => (units.source.clone(), true),
        })
    }

    /// Whether `owner`'s reads go to the target.
    async fn reads_target(&self, owner: &str) -> Result<bool> {
        self.inner.reads_target(owner).await
    }

    /// After the source took a write concerning `owners`: see the engine's `mirror`.
    async fn mirror<F, Fut, T>(&self, owners: Vec<String>, apply: F) -> Result<()>
    where
        F: FnOnce(Vec<String>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.inner.mirror(owners, apply).await
    }

    /// Runs a write on both stores: `on_source`, then `on_target` for `owners` that are ready
    /// (or on the target alone once finished).
    async fn write<T, S, SF, G, GF, U>(
        &self,
        owners: &[&str],
        on_source: S,
        on_target: G,
    ) -> Result<T>
    where
        S: FnOnce(Arc<crate::inbox::DynInboxTransfer<P>>) -> SF,
        SF: Future<Output = Result<T>>,
        G: FnOnce(Arc<crate::inbox::DynInboxTransfer<P>>, Vec<String>) -> GF,
        GF: Future<Output = Result<U>>,
    {
        let (first, then_target) = self.first_store().await?;
        let done = on_source(first).await?;
        if then_target {
            let target = self.inner.units.target.clone();
            let owners = owners.iter().map(|o| o.to_string()).collect();
            self.mirror(owners, |ready| on_target(target, ready))
                .await?;
        }
        Ok(done)
    }

    /// [`MigratingInbox::write`] of one and the same write of `owner`'s on each store: `apply`
    /// on the source, then on the target if `owner` is ready there.
    async fn write_both<T, S, SF>(&self, owner: &str, apply: S) -> Result<T>
    where
        S: Fn(Arc<crate::inbox::DynInboxTransfer<P>>) -> SF,
        SF: Future<Output = Result<T>>,
    {
        self.write(&[owner], &apply, |store, _| apply(store)).await
    }

    /// The store `owner`'s reads go to.
    async fn reader(&self, owner: &str) -> Result<Arc<crate::inbox::DynInboxTransfer<P>>> {
        Ok(if self.reads_target(owner).await? {
            self.inner.units.target.clone()
        } else {
            self.inner.units.source.clone()
        })
    }
}

#[async_trait]
impl<P: Payload> InboxEngine<P> for MigratingInbox<P> {
    fn migrating(&self) -> bool {
        true
    }

    /// The source's strategy (the target's pages, once reads moved, carry the target's
    /// cursors all the same).
    fn strategy(&self) -> Strategy {
        self.inner.units.source.strategy()
    }

    /// The source's own send derives the key again (`_keyed` is dropped).
    async fn send(&self, message: NewMessage<P>, _keyed: Option<KeyedSend>) -> Result<Sent<P>> {
        let (first, then_target) = self.first_store().await?;
        let sent = first.send(message).await?;
        if then_target {
            let owners: Vec<String> = sent
                .message
                .to
                .iter()
                .filter(|r| !sent.skipped.contains(r))
                .cloned()
                .collect();
            let target = self.inner.units.target.clone();
            let message = &sent.message;
            self.mirror(owners, |ready| async move {
                target.send_stamped(message, &ready).await
            })
            .await?;
        }
        Ok(sent)
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>> {
        let owners: Vec<&str> = recipients.iter().map(String::as_str).collect();
        self.write(
            &owners,
            |store| async move { store.deliver(message, recipients).await },
            |store, ready| async move { store.deliver(message, &ready).await },
        )
        .await
    }

    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64> {
        self.write_both(owner, |store| async move {
            store.remove_from(owner, sender).await
        })
        .await
    }

    fn max_message_bytes(&self) -> usize {
        self.inner
            .units
            .source
            .max_message_bytes()
            .min(self.inner.units.target.max_message_bytes())
    }

    /// A page of the store the owner's reads go to; a cursor the source made, met after the
    /// owner's reads moved, is still read from the source (whole until the migration
    /// finishes).
    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        if !self.reads_target(owner).await? {
            return self.inner.units.source.inbox_page(owner, page).await;
        }
        match self
            .inner
            .units
            .target
            .inbox_page(owner, page.clone())
            .await
        {
            Err(Error::InvalidInput {
                reason: Invalid::Cursor { .. },
            }) if page.after.is_some() && !self.inner.finished().await? => {
                self.inner.units.source.inbox_page(owner, page).await
            }
            other => other,
        }
    }

    async fn count(&self, owner: &str) -> Result<u64> {
        self.reader(owner).await?.count(owner).await
    }

    async fn filters(&self, owner: &str) -> Result<Filters> {
        self.reader(owner).await?.filters(owner).await
    }

    async fn create_indexes(&self) -> Result<()> {
        self.inner.units.source.create_indexes().await?;
        self.inner.units.target.create_indexes().await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        let mut keys = self.inner.units.source.shard_keys();
        keys.extend(self.inner.units.target.shard_keys());
        keys
    }

    fn database(&self) -> &mongodb::Database {
        self.inner.units.source.database()
    }

    /// The source's watch (whole until the migration finishes).
    fn watch(&self, request: WatchRequest<'_>) -> Updates<Message<P>> {
        let WatchRequest {
            owner,
            from,
            options,
        } = request;
        self.inner.units.source.watch(owner, from, options)
    }
}

#[async_trait]
impl<P: Payload> LifecycleEngine<P> for MigratingInbox<P> {
    async fn mark_read(&self, owner: &str, id: MessageId) -> Result<()> {
        self.write_both(
            owner,
            |store| async move { store.mark_read(owner, id).await },
        )
        .await
    }

    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()> {
        self.write_both(
            owner,
            |store| async move { store.mark_unread(owner, id).await },
        )
        .await
    }

    /// A cursor names a position in one strategy's pages only: marks through a cursor reach
    /// the other store by copying the owner again.
    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()> {
        let inner = self.inner.clone();
        let through_cursor = matches!(up_to, UpTo::Cursor(_));
        let on_target = up_to.clone();
        self.write(
            &[owner],
            |store| async move { store.mark_read_up_to(owner, up_to).await },
            |store, _| async move {
                if through_cursor {
                    inner.copy_again(&[owner.to_owned()]).await
                } else {
                    store.mark_read_up_to(owner, on_target).await
                }
            },
        )
        .await
    }

    async fn unread_count(&self, owner: &str, cap: Option<u64>) -> Result<u64> {
        let reader = self.reader(owner).await?;
        match cap {
            Some(cap) => reader.unread_count_up_to(owner, cap).await,
            None => reader.unread_count(owner).await,
        }
    }

    async fn set_starred(&self, owner: &str, id: MessageId, starred: bool) -> Result<()> {
        self.write_both(owner, |store| async move {
            store.set_starred(owner, id, starred).await
        })
        .await
    }

    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        self.write_both(owner, |store| async move { store.delete(owner, id).await })
            .await
    }

    /// Reaches every recipient: the source, the migration's epoch moved (a copy running
    /// meanwhile is checked again), then the target, which holds it for the owners copied. A
    /// failure of the target's is returned: retracting (and editing) again is safe, and
    /// completes it.
    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        self.everywhere(|store| async move { store.retract(sender, id).await })
            .await
    }

    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        // The payload goes to two stores: through its BSON, as both store it.
        let encoded = bson::to_bson(&payload)?;
        self.everywhere(move |store| {
            let payload = bson::from_bson::<P>(encoded.clone());
            async move {
                let payload = payload.map_err(|source| Error::Decode {
                    collection: String::new(),
                    id: None,
                    source,
                })?;
                store.edit(sender, id, payload).await
            }
        })
        .await
    }

    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        self.write_both(owner, |store| async move {
            store.set_filter(owner, sender, filter, on).await
        })
        .await
    }

    fn retention(&self) -> Retention {
        self.inner.units.source.retention()
    }

    /// Prunes the source (the target's strategy may keep other messages under the same
    /// retention: buckets drop whole buckets), and has the owner copied again.
    async fn prune(&self, owner: &str) -> Result<u64> {
        let inner = self.inner.clone();
        self.write(
            &[owner],
            |store| async move { store.prune(owner).await },
            |_, _| async move { inner.copy_again(&[owner.to_owned()]).await },
        )
        .await
    }
}

impl<P: Payload> MigratingInbox<P> {
    /// A write that may reach any owner (by the sender, to every recipient): on the source, the
    /// epoch moved, then on the target. The target's "not found" (the owners holding it are
    /// not copied yet) is no failure.
    async fn everywhere<T, F, Fut>(&self, write: F) -> Result<T>
    where
        F: Fn(Arc<crate::inbox::DynInboxTransfer<P>>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let (first, then_target) = self.first_store().await?;
        let done = write(first).await?;
        if !then_target {
            return Ok(done);
        }
        let inner = &self.inner;
        inner.states.bump_epoch().await?;
        match write(inner.units.target.clone()).await {
            Ok(_) | Err(Error::NotFound { .. }) => Ok(done),
            Err(Error::Forbidden { .. }) => Ok(done),
            Err(error) => Err(error),
        }
    }
}
