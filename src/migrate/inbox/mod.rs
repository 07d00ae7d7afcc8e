//! [`InboxMigration`]: the migration's handle (start, progress, cut-over, finish, abort) and
//! its copy, run as jobs.

mod mirror;
mod units;

pub use mirror::MigratingInbox;

use std::sync::Arc;
use std::time::Duration;

use mongodb::Database;

use super::engine::Config;
use super::handle::{migration_builder_methods, migration_handle_methods};
use crate::error::Result;
use crate::inbox::{DynInboxTransfer, Payload};
use crate::phantom_impls::clone_fields;
use units::{InboxMigrationEngine, Inboxes};

/// How far a migration's copy has got ([`InboxMigration::progress`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// Owners whose copy is verified.
    pub owners_done: u64,
    /// Owners known so far: every owner once the listing is done (`listed`).
    pub owners_total: u64,
    /// Whether every owner of the source has been listed.
    pub listed: bool,
    /// Messages in the verified copies.
    pub messages_copied: u64,
    /// Messages copied per second since the migration started.
    pub rate: f64,
    /// The time left at that rate, by owners; `None` until an owner is done or while listing.
    pub time_left: Option<Duration>,
}

/// Moves every owner's inbox from one strategy's store to another's while the application
/// runs: see the [module docs](super).
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::Arc;
/// use mongo_social::migrate::InboxMigration;
/// use mongo_social::{BucketedFanOut, FanOutOnRead, InboxStore, NewMessage, PageRequest};
///
/// let source = Arc::new(FanOutOnRead::<String>::new(&db));
/// let target = Arc::new(BucketedFanOut::<String>::builder(&db).collection_prefix("v2_").build()?);
/// let migration = InboxMigration::builder(&db, "inbox-v2", source, target).build()?;
/// let inbox = migration.store(); // what the application uses from now on
/// migration.start().await?;
/// let _worker = migration.start_worker(); // copies owner by owner, in the background
/// inbox.send(NewMessage::new("joe", ["bob"], "Hi!".to_string())).await?;
/// let page = inbox.inbox_page("bob", PageRequest::first(50)).await?;
/// println!("{:?}", migration.progress().await?);
/// # Ok(()) }
/// ```
pub struct InboxMigration<P> {
    inner: Arc<InboxMigrationEngine<P>>,
}

clone_fields!(InboxMigration<P> { inner });

impl<P: Payload> std::fmt::Debug for InboxMigration<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

/// Configures an [`InboxMigration`].
#[must_use = "a builder does nothing until `build()`"]
pub struct InboxMigrationBuilder<P> {
    config: Config,
    source: Arc<DynInboxTransfer<P>>,
    target: Arc<DynInboxTransfer<P>>,
}

impl<P> std::fmt::Debug for InboxMigrationBuilder<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxMigrationBuilder")
            .field("name", &self.config.name)
            .field("reads", &self.config.reads)
            .finish_non_exhaustive()
    }
}

impl<P: Payload> InboxMigrationBuilder<P> {
    migration_builder_methods!("owner");

    /// Builds the migration: its state in the collection `<name>_migration`, its jobs in
    /// `<name>_jobs`, and where the server's updates are not atomic, its state documents'
    /// turns in `<name>_locks`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a name that cannot name a collection.
    pub fn build(self) -> Result<InboxMigration<P>> {
        let units = Inboxes {
            source: self.source,
            target: self.target,
        };
        Ok(InboxMigration {
            inner: Arc::new(self.config.build(units)?),
        })
    }
}

impl<P: Payload> InboxMigration<P> {
    /// Starts configuring the migration `name` (its collections are named after it) from
    /// `source` to `target`, its state kept in `database`.
    pub fn builder(
        database: &Database,
        name: impl Into<String>,
        source: Arc<DynInboxTransfer<P>>,
        target: Arc<DynInboxTransfer<P>>,
    ) -> InboxMigrationBuilder<P> {
        InboxMigrationBuilder {
            config: Config::new(database, name.into()),
            source,
            target,
        }
    }

    /// The store the application uses while the migration runs (and after it, until it
    /// switches to the target store itself): writes reach both stores, reads go where the
    /// migration says.
    pub fn store(&self) -> Arc<MigratingInbox<P>> {
        Arc::new(MigratingInbox::new(self.inner.clone()))
    }

    migration_handle_methods! {
        "owner";
        /// Starts the migration: records it, creates both stores' indexes and the queue's, and
        /// enqueues the listing of the source's owners. Starting again does nothing.
        ///
        /// # Errors
        ///
        /// [`Error::Precondition`](crate::Error::Precondition) when the target holds messages
        /// and the migration had not started (a target must start empty; an aborted migration
        /// empties it).
        start;
        /// Ends the migration: the source is no longer written, every read and write goes to the
        /// target. The application may then use the target store directly.
        ///
        /// # Errors
        ///
        /// [`Error::Precondition`](crate::Error::Precondition) before every owner is copied, or
        /// after an abort.
        finish;
        /// Stops the migration: writes go to the source alone again, reads too, and the target is
        /// emptied (once every process has seen the abort, within about a second). The source,
        /// written all along, is whole.
        ///
        /// # Errors
        ///
        /// [`Error::Precondition`](crate::Error::Precondition) after [`InboxMigration::finish`].
        abort;
    }

    /// How far the copy has got.
    pub async fn progress(&self) -> Result<Progress> {
        let tally = self.inner.progress().await?;
        Ok(Progress {
            owners_done: tally.done,
            owners_total: tally.total,
            listed: tally.listed,
            messages_copied: tally.items,
            rate: tally.rate,
            time_left: tally.time_left,
        })
    }
}
