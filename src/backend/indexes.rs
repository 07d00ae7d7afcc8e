//! A store's indexes: created one per command, so setup is safe on every start, and created
//! before the first write of a store whose correctness depends on them.
//!
//! Every store's `create_indexes` goes through [`Indexes::create`], which sends one
//! `createIndexes` command per index: FerretDB 1.24 drops the connection (a bare I/O error) when
//! one `createIndexes` names several indexes that all exist already, which is what the second
//! start of an application against existing data does. On MongoDB an index that exists is left
//! alone either way. Each command is retried under the store's [`RetryPolicy`] on a transient
//! failure (a connection lost at a start is no reason to fail it): creating an index that exists
//! is accepted as done, so a repeat is harmless.
//!
//! Stores whose writes rely on a unique index to be correct (a bucket or page that must not be
//! opened twice, a follow or a username that must not be recorded twice) call
//! [`Indexes::ensure`] before writing: it creates the indexes once per store (clones share it),
//! unless [`Indexes::create`] already did, so a store used before `create_indexes` still keeps
//! its promises. That costs the first write one command per index.

use std::sync::Arc;

use bson::Document;
use mongodb::{Collection, IndexModel};
use tokio::sync::OnceCell;

use crate::error::Result;
use crate::retry::RetryPolicy;
use crate::server::Capabilities;

/// An index, and the servers it is for (`None`: every server).
type Wanted = (
    Collection<Document>,
    IndexModel,
    Option<fn(&Capabilities) -> bool>,
);

/// The indexes a store needs, and whether this store (or a clone) has created them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Indexes {
    wanted: Vec<Wanted>,
    created: Arc<OnceCell<()>>,
}

impl Indexes {
    /// No indexes yet; add them with [`Indexes::with`].
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds `model` on `collection`, for the servers on which `available` holds (every server
    /// for `None`).
    pub(crate) fn with(
        mut self,
        collection: &Collection<Document>,
        model: IndexModel,
        available: Option<fn(&Capabilities) -> bool>,
    ) -> Self {
        self.wanted.push((collection.clone(), model, available));
        self
    }

    /// Creates every index the server with `capabilities` takes, one `createIndexes` command
    /// each (see the [module docs](self)), and remembers that they exist.
    pub(crate) async fn create(
        &self,
        capabilities: &Capabilities,
        policy: &RetryPolicy,
    ) -> Result<()> {
        self.create_each(capabilities, policy).await?;
        // A concurrent `ensure` may be setting it too; either way they exist now.
        let _ = self.created.set(());
        Ok(())
    }

    /// Creates the indexes unless this store (or a clone) already did; concurrent callers wait
    /// for one creation. A failed creation is tried again by the next call.
    pub(crate) async fn ensure(
        &self,
        capabilities: &Capabilities,
        policy: &RetryPolicy,
    ) -> Result<()> {
        self.created
            .get_or_try_init(|| self.create_each(capabilities, policy))
            .await
            .map(drop)
    }

    async fn create_each(&self, capabilities: &Capabilities, policy: &RetryPolicy) -> Result<()> {
        for (collection, model, available) in &self.wanted {
            if available.is_none_or(|available| available(capabilities)) {
                crate::retry::retry(policy, "create index", || async {
                    collection.create_index(model.clone()).await?;
                    Ok(())
                })
                .await?;
            }
        }
        Ok(())
    }
}
