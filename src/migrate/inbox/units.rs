//! What an inbox migration moves, owner by owner, and how a moved inbox is verified.

use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;

use crate::error::Result;
use crate::inbox::{DynInboxTransfer, HeldMessage, Payload};
use crate::migrate::engine::{Engine, Units};
use crate::migrate::units;

/// Messages imported at a time.
const IMPORT_CHUNK: usize = 500;

/// The inbox migration's engine.
pub(super) type InboxMigrationEngine<P> = Engine<Inboxes<P>>;

/// What an inbox migration moves: owners' inboxes, from `source` to `target`.
pub(in crate::migrate) struct Inboxes<P> {
    pub(in crate::migrate) source: Arc<DynInboxTransfer<P>>,
    pub(in crate::migrate) target: Arc<DynInboxTransfer<P>>,
}

impl<P> std::fmt::Debug for Inboxes<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inboxes")
            .field("source", &self.source)
            .field("target", &self.target)
            .finish()
    }
}

#[async_trait]
impl<P: Payload> Units for Inboxes<P> {
    fn kind(&self) -> &'static str {
        "migrate-inbox"
    }

    fn unit(&self) -> &'static str {
        "owner"
    }

    fn strategies(&self) -> (String, String) {
        (
            format!("{:?}", self.source.strategy()),
            format!("{:?}", self.target.strategy()),
        )
    }

    async fn create_indexes(&self) -> Result<()> {
        self.source.create_indexes().await?;
        self.target.create_indexes().await
    }

    async fn check_start(&self) -> Result<()> {
        if !self.target.is_empty().await? {
            return Err(units::target_not_empty("messages"));
        }
        Ok(())
    }

    async fn list(&self, after: Option<String>, limit: usize) -> Result<Vec<String>> {
        units::first(self.source.owners(after).await?, limit).await
    }

    /// Empties the owner's inbox in the target, imports the source's export (500 messages at
    /// a time), and the owner's mute and block lists.
    async fn copy(&self, owner: &str) -> Result<u64> {
        self.target.purge(owner).await?;
        let mut exported = self.source.export(owner).await?;
        let mut chunk = Vec::with_capacity(IMPORT_CHUNK);
        let mut messages = 0;
        while let Some(held) = exported.try_next().await? {
            chunk.push(held);
            if chunk.len() == IMPORT_CHUNK {
                self.target.import(owner, &chunk).await?;
                messages += chunk.len() as u64;
                chunk.clear();
            }
        }
        drop(exported);
        if !chunk.is_empty() {
            self.target.import(owner, &chunk).await?;
            messages += chunk.len() as u64;
        }
        let filters = self.source.filters(owner).await?;
        for sender in &filters.muted {
            self.target.mute(owner, sender).await?;
        }
        for sender in &filters.blocked {
            self.target.block(owner, sender).await?;
        }
        Ok(messages)
    }

    async fn verified(&self, owner: &str) -> Result<bool> {
        verified(&*self.source, &*self.target, owner).await
    }

    async fn purge_target(&self) -> Result<()> {
        self.target.purge_all().await
    }
}

/// Whether `owner`'s inbox in `target` is the one in `source`: the same count and unread count,
/// and every message the owner holds shown the same, in the same order (newest and oldest
/// ids, read state, stars and edits included).
pub(super) async fn verified<P: Payload>(
    source: &DynInboxTransfer<P>,
    target: &DynInboxTransfer<P>,
    owner: &str,
) -> Result<bool> {
    if source.count(owner).await? != target.count(owner).await?
        || source.unread_count(owner).await? != target.unread_count(owner).await?
    {
        return Ok(false);
    }
    Ok(shown(source, owner).await? == shown(target, owner).await?)
}

/// What `owner`'s pages show of each message `store` holds for them, oldest first.
async fn shown<P: Payload>(
    store: &DynInboxTransfer<P>,
    owner: &str,
) -> Result<
    Vec<(
        crate::inbox::MessageId,
        Option<bson::Bson>,
        Option<bson::DateTime>,
        bool,
        bool,
    )>,
> {
    let held: Vec<HeldMessage> = store.export(owner).await?.try_collect().await?;
    Ok(held
        .into_iter()
        .filter(HeldMessage::is_shown)
        .map(|m| (m.id, m.payload, m.edited, m.read, m.starred))
        .collect())
}
