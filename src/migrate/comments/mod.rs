//! [`CommentMigration`]: the handle of a migration of discussions (start, progress, cut-over,
//! finish, abort), and what its copy does to one discussion.

mod mirror;
mod units;

pub use mirror::MigratingComments;

use std::sync::Arc;
use std::time::Duration;

use mongodb::Database;

use super::engine::Config;
use super::handle::{migration_builder_methods, migration_handle_methods};
use super::links::Links;
use crate::backend::lease_lock::LeaseLocks;
use crate::backend::Backend;
use crate::comments::DynCommentTransfer;
use crate::error::{Error, Result};
use units::{CommentMigrationEngine, Discussions};

/// How long a migrating store's lock of a discussion lasts if its holder dies.
const LOCK_LEASE: Duration = Duration::from_secs(30);

/// How far a comment migration's copy has got ([`CommentMigration::progress`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CommentProgress {
    /// Discussions whose copy is verified.
    pub discussions_done: u64,
    /// Discussions known so far: every one once the listing is done (`listed`).
    pub discussions_total: u64,
    /// Whether every discussion of the source (or of the migration's list) has been listed.
    pub listed: bool,
    /// Comments in the verified copies (tombstones included).
    pub comments_copied: u64,
    /// Comments copied per second since the migration started.
    pub rate: f64,
    /// The time left at that rate, by discussions; `None` until one is done or while listing.
    pub time_left: Option<Duration>,
}

/// Moves discussions (every one, or those listed) from one comment strategy's store to
/// another's while the application runs: see the [module docs](super).
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::Arc;
/// use mongo_social::comments::{Author, CommentStore, Embedded, NewComment, PerComment};
/// use mongo_social::migrate::CommentMigration;
///
/// let source = Arc::new(Embedded::new(&db));
/// let target = Arc::new(PerComment::builder(&db).collection_prefix("v2_").build()?);
/// let migration = CommentMigration::builder(&db, "comments-v2", source, target).build()?;
/// let comments = migration.store(); // what the application uses from now on
/// migration.start().await?;
/// let _worker = migration.start_worker(); // copies discussion by discussion
/// let rick = Author::new("u1", "Rick");
/// let first = comments.post("article-42", NewComment::new(rick, "First!")).await?;
/// assert_eq!(comments.get("article-42", &first.link).await?.text, "First!");
/// println!("{:?}", migration.progress().await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CommentMigration {
    inner: Arc<CommentMigrationEngine>,
}

impl std::fmt::Debug for CommentMigration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

/// Configures a [`CommentMigration`].
#[must_use = "a builder does nothing until `build()`"]
pub struct CommentMigrationBuilder {
    config: Config,
    source: Arc<DynCommentTransfer>,
    target: Arc<DynCommentTransfer>,
    scope: Option<Vec<String>>,
}

impl std::fmt::Debug for CommentMigrationBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommentMigrationBuilder")
            .field("name", &self.config.name)
            .field("reads", &self.config.reads)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl CommentMigrationBuilder {
    migration_builder_methods!("discussion");

    /// Moves these discussions only (default: every discussion of the source). The others stay
    /// on the source: the migrating store reads and writes them there, before and after the
    /// finish.
    pub fn discussions<I, S>(mut self, discussions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut scope: Vec<String> = discussions.into_iter().map(Into::into).collect();
        scope.sort();
        scope.dedup();
        self.scope = Some(scope);
        self
    }

    /// Builds the migration: its state in the collection `<name>_migration`, its jobs in
    /// `<name>_jobs`, its link map in `<name>_links`, its locks in `<name>_locks`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a name that cannot name a collection, for source and
    /// target stores that share a collection of comments or votes (give one a
    /// `collection_prefix`), and for a blank or too long discussion id in
    /// [`CommentMigrationBuilder::discussions`].
    pub fn build(self) -> Result<CommentMigration> {
        let source = self.source.data_collections();
        if let Some(shared) = self
            .target
            .data_collections()
            .into_iter()
            .find(|c| source.contains(c))
        {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "the migration's source and target stores share the collection {shared}: \
                     give the target its own (a collection_prefix)"
                ),
            });
        }
        for discussion in self.scope.iter().flatten() {
            crate::validate::id("discussion id", discussion).map_err(|error| {
                Error::InvalidConfig {
                    reason: format!("a discussion to migrate: {error}"),
                }
            })?;
        }
        let backend = Backend::new(&self.config.database, None, self.config.retry, None);
        let units = Discussions {
            source: self.source,
            target: self.target,
            links: Links::new(backend, self.config.collection("links")?),
            scope: self.scope,
            locks: LeaseLocks::new(
                self.config.collection("locks")?,
                LOCK_LEASE,
                self.config.retry,
            ),
        };
        Ok(CommentMigration {
            inner: Arc::new(self.config.build(units)?),
        })
    }
}

impl CommentMigration {
    /// Starts configuring the migration `name` (its collections are named after it) from
    /// `source` to `target`, its state kept in `database`.
    pub fn builder(
        database: &Database,
        name: impl Into<String>,
        source: Arc<DynCommentTransfer>,
        target: Arc<DynCommentTransfer>,
    ) -> CommentMigrationBuilder {
        CommentMigrationBuilder {
            config: Config::new(database, name.into()),
            source,
            target,
            scope: None,
        }
    }

    /// The store the application uses while the migration runs (and after it, while links
    /// given out before the finish circulate): writes reach both stores, reads go where the
    /// migration says, links are the source's until the finish.
    pub fn store(&self) -> Arc<MigratingComments> {
        Arc::new(MigratingComments::new(self.inner.clone()))
    }

    migration_handle_methods! {
        "discussion";
        /// Starts the migration: records it, creates both stores' indexes, the link map's and the
        /// queue's, and enqueues the listing of the discussions. Starting again does nothing.
        ///
        /// # Errors
        ///
        /// Before anything is recorded or written: [`Error::Precondition`] when the target holds
        /// comments already (of the migration's discussions, where it lists them);
        /// [`Error::Unsupported`] (`"replies"`) naming a discussion with replies when the target's
        /// strategy has no threads.
        start;
        /// Ends the migration: the source is no longer written, every read and write goes to the
        /// target. Links given out before keep working through [`CommentMigration::store`] (the
        /// link map translates them); the target store used directly knows only its own.
        ///
        /// # Errors
        ///
        /// [`Error::Precondition`] before every discussion is copied, or after an abort.
        finish;
        /// Stops the migration: writes and reads go to the source alone again, and what the target
        /// got (the migration's discussions, their votes, the link map) is removed once every
        /// process has seen the abort (within about a second). The source, written all along, is
        /// whole.
        ///
        /// # Errors
        ///
        /// [`Error::Precondition`] after [`CommentMigration::finish`].
        abort;
    }

    /// How far the copy has got.
    pub async fn progress(&self) -> Result<CommentProgress> {
        let tally = self.inner.progress().await?;
        Ok(CommentProgress {
            discussions_done: tally.done,
            discussions_total: tally.total,
            listed: tally.listed,
            comments_copied: tally.items,
            rate: tally.rate,
            time_left: tally.time_left,
        })
    }
}
