//! Serialises the writes of one discussion on servers whose updates are not atomic.

use std::future::Future;
use std::time::Duration;

use mongodb::Database;

use crate::lease_lock::LeaseLocks;
use crate::retry::RetryPolicy;
use crate::server::{Capabilities, DetectedCapabilities};
use crate::Result;

/// How long a discussion lock lasts if its holder dies.
const LEASE: Duration = Duration::from_secs(30);

/// Runs a discussion's read-modify-write sequences one at a time where the server needs it.
///
/// On MongoDB every single-document update is atomic and the designs' filters make each write
/// safe on its own, so [`WriteGuard::run`] adds nothing. On servers without atomic updates
/// (FerretDB 1.x reads, modifies and writes back whole documents without isolation) it holds a
/// leased lock document `{_id: "<design>:<discussion>"}` in the locks collection for the
/// duration: one `insert` to take it, one `delete` to release it. A holder that dies leaves the
/// lock to be taken over after 30 seconds.
#[derive(Clone, Debug)]
pub(super) struct WriteGuard {
    database: Database,
    locks: LeaseLocks,
    capabilities: DetectedCapabilities,
    design: &'static str,
}

impl WriteGuard {
    pub(super) fn new(
        database: &Database,
        locks: &str,
        design: &'static str,
        retry: RetryPolicy,
    ) -> Self {
        Self {
            database: database.clone(),
            locks: LeaseLocks::new(database.collection(locks), LEASE, retry),
            capabilities: DetectedCapabilities::default(),
            design,
        }
    }

    /// The server's capabilities (detected once).
    pub(super) async fn capabilities(&self) -> Result<Capabilities> {
        self.capabilities.get(&self.database).await
    }

    /// Runs `work`, alone among this discussion's guarded writers if the server needs it.
    pub(super) async fn run<T>(
        &self,
        discussion: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.capabilities().await?.atomic_updates {
            return work.await;
        }
        let key = format!("{}:{discussion}", self.design);
        self.locks.with_lock(&key, work).await
    }
}
