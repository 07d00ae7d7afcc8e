//! Serialises the writes of one discussion on servers whose updates are not atomic.

use std::future::Future;
use std::time::Duration;

use mongodb::Database;

use crate::backend::Exclusive;
use crate::retry::RetryPolicy;
use crate::server::Capabilities;
use crate::Result;

/// How long a discussion lock lasts if its holder dies.
const LEASE: Duration = Duration::from_secs(30);

/// Runs a discussion's read-modify-write sequences one at a time where the server needs it.
///
/// On MongoDB every single-document update is atomic and the designs' filters make each write
/// safe on its own, so [`WriteGuard::run`] adds nothing. On servers without atomic updates it
/// holds the leased lock `{_id: "<design>:<discussion>"}` in the locks collection for the
/// duration (see [`Exclusive`]).
#[derive(Clone, Debug)]
pub(super) struct WriteGuard {
    exclusive: Exclusive,
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
            exclusive: Exclusive::new(database, locks, LEASE, retry),
            design,
        }
    }

    /// The server's capabilities (detected once).
    pub(super) async fn capabilities(&self) -> Result<Capabilities> {
        self.exclusive.capabilities().await
    }

    /// Runs `work`, alone among this discussion's guarded writers if the server needs it.
    pub(super) async fn run<T>(
        &self,
        discussion: &str,
        work: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let key = format!("{}:{discussion}", self.design);
        self.exclusive.run_one(&key, work).await
    }
}
