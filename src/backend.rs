//! The one seam between the data models and the server's differences in write isolation.
//!
//! On MongoDB (and every engine whose single-document updates are atomic) the stores' filters
//! make each write safe on its own. FerretDB 1.x reads, modifies and writes back whole documents
//! without isolation, so there writers of the same documents must take turns. [`Exclusive`] is
//! where that choice is made, once, from the detected [`Capabilities`]: data-model code says
//! which keys its work touches and never reads a capability flag to choose a locking strategy.
//! A new server quirk of this kind changes this file.

use std::future::Future;
use std::time::Duration;

use bson::Document;
use mongodb::{Collection, Database};

use crate::lease_lock::LeaseLocks;
use crate::retry::RetryPolicy;
use crate::server::{Capabilities, DetectedCapabilities};
use crate::Result;

/// Runs work alone among the writers of the same keys where the server needs it, and directly
/// where it does not; the server's capabilities are detected on first use (or given), and
/// clones share them.
///
/// Where updates are not atomic, each key is a leased lock document `{_id: key, token,
/// expires}` in the store's locks collection (see [`LeaseLocks`]): one `insert` to take the
/// locks of a call, one `delete` to release them, taken over after `lease` if a holder dies.
#[derive(Clone, Debug)]
pub(crate) struct Exclusive {
    database: Database,
    capabilities: DetectedCapabilities,
    locks: LeaseLocks,
}

impl Exclusive {
    /// Writers serialised through leased locks in `locks` (used only where needed).
    pub(crate) fn new(
        database: &Database,
        locks: &str,
        lease: Duration,
        retry: RetryPolicy,
    ) -> Self {
        Self::over(database, database.collection(locks), lease, retry)
    }

    /// [`Exclusive::new`] with the locks collection given.
    pub(crate) fn over(
        database: &Database,
        locks: Collection<Document>,
        lease: Duration,
        retry: RetryPolicy,
    ) -> Self {
        Self {
            database: database.clone(),
            capabilities: DetectedCapabilities::default(),
            locks: LeaseLocks::new(locks, lease, retry),
        }
    }

    /// The same writers on a server whose capabilities the application gave: nothing is
    /// detected.
    pub(crate) fn given(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = DetectedCapabilities::given(capabilities);
        self
    }

    /// The server's capabilities, detected on first use.
    pub(crate) async fn capabilities(&self) -> Result<Capabilities> {
        self.capabilities.get(&self.database).await
    }

    /// The name of the locks collection.
    pub(crate) fn locks_collection(&self) -> &str {
        self.locks.collection_name()
    }

    /// Whether writers must take turns on this server.
    async fn locking(&self) -> Result<bool> {
        Ok(!self.capabilities().await?.atomic_updates)
    }

    /// Runs `work` holding every one of `keys` where the server needs it.
    pub(crate) async fn run<T>(
        &self,
        keys: &[String],
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.locking().await? {
            self.locks.with_locks(keys, work).await
        } else {
            work.await
        }
    }

    /// [`Exclusive::run`] for one key.
    pub(crate) async fn run_one<T>(
        &self,
        key: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        self.run(&[key.to_owned()], work).await
    }

    /// Runs `work` on all of `keys`: at once where the server needs no locks; otherwise in
    /// rounds of at most `batch` keys, each holding the locks of the keys it got (see
    /// [`LeaseLocks::in_rounds`]), so no caller holds some keys while waiting for others.
    pub(crate) async fn in_rounds<F, Fut>(
        &self,
        keys: &[String],
        batch: usize,
        mut work: F,
    ) -> Result<()>
    where
        F: FnMut(Vec<String>) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        if self.locking().await? {
            self.locks.in_rounds(keys, batch, work).await
        } else {
            work(keys.to_vec()).await
        }
    }

    /// Runs `atomic` where single-document updates are atomic and `locked` elsewhere, for writes
    /// whose safe form differs (an atomic `$push` guarded by its filter, or a read-modify-write
    /// that takes its turns with [`Exclusive::run`]).
    pub(crate) async fn either<T>(
        &self,
        atomic: impl Future<Output = Result<T>>,
        locked: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.locking().await? {
            locked.await
        } else {
            atomic.await
        }
    }
}
