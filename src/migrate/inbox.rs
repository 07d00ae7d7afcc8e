//! [`InboxMigration`]: the migration's handle (start, progress, cut-over, finish, abort) and
//! its copy, run as jobs.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, oid::ObjectId};
use futures::{StreamExt, TryStreamExt};
use mongodb::Database;

use super::mirror::MigratingInbox;
use super::state::{OwnerState, Phase, States};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::inbox::{DynInboxTransfer, HeldMessage, Payload};
use crate::jobs::{Job, JobHandler, JobQueue, Worker};
use crate::retry::RetryPolicy;

/// Messages imported at a time.
const IMPORT_CHUNK: usize = 500;
/// Owners given a copy job per listing job.
const LIST_CHUNK: usize = 200;
/// Times one owner's copy is done again (a write marked it dirty, or it did not verify) before
/// its job fails and is retried later by the queue.
const COPY_ATTEMPTS: usize = 5;
/// The job kinds.
const LIST: &str = "migrate-inbox-list";
const COPY: &str = "migrate-inbox-copy";

/// When reads move from the source to the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reads {
    /// Each owner's reads move as soon as their copy is verified.
    #[default]
    PerOwner,
    /// Every owner's reads move at once, at [`InboxMigration::cut_over`].
    AllAtOnce,
}

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
    inner: Arc<Inner<P>>,
}

impl<P> Clone for InboxMigration<P> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<P> std::fmt::Debug for InboxMigration<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<P> std::fmt::Debug for Inner<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxMigration")
            .field("source", &self.source)
            .field("target", &self.target)
            .field("state", &self.states.collection().name())
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

pub(super) struct Inner<P> {
    pub(super) source: Arc<DynInboxTransfer<P>>,
    pub(super) target: Arc<DynInboxTransfer<P>>,
    pub(super) states: States,
    pub(super) reads: Reads,
    jobs: JobQueue,
}

impl<P: Payload> Inner<P> {
    /// Gives each of `owners` (unknown: not listed) a copy job where the listing of the
    /// source's owners has passed them: owners new since (a first message to a new user) get
    /// theirs this way. One `find` of the listing, and for such owners their state and an
    /// `insert` of each one's job (refused where it exists).
    pub(super) async fn copy_new(&self, owners: &[String]) -> Result<()> {
        let (after, done) = self.states.listing().await?;
        let passed: Vec<String> = owners
            .iter()
            .filter(|owner| {
                done || after
                    .as_deref()
                    .is_some_and(|after| owner.as_str() <= after)
            })
            .cloned()
            .collect();
        if passed.is_empty() {
            return Ok(());
        }
        self.states.listed_new(&passed).await?;
        for owner in &passed {
            self.jobs
                .enqueue_once(job_id(COPY, owner), COPY, doc! { "owner": owner })
                .await?;
        }
        Ok(())
    }

    /// Has `owners` copied again: their state `stale` (reads back on the source), and a new
    /// copy job each.
    pub(super) async fn copy_again(&self, owners: &[String]) -> Result<()> {
        self.states.mark_stale(owners).await?;
        for owner in owners {
            self.jobs.enqueue(COPY, doc! { "owner": owner }).await?;
        }
        Ok(())
    }
}

/// Configures an [`InboxMigration`].
#[must_use = "a builder does nothing until `build()`"]
pub struct InboxMigrationBuilder<P> {
    database: Database,
    name: String,
    source: Arc<DynInboxTransfer<P>>,
    target: Arc<DynInboxTransfer<P>>,
    reads: Reads,
    retry: RetryPolicy,
    job_lease: Duration,
}

impl<P> std::fmt::Debug for InboxMigrationBuilder<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxMigrationBuilder")
            .field("name", &self.name)
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

impl<P: Payload> InboxMigrationBuilder<P> {
    /// When reads move (default [`Reads::PerOwner`]).
    pub fn reads(mut self, reads: Reads) -> Self {
        self.reads = reads;
        self
    }

    /// The retry policy of the migration's own writes (default [`RetryPolicy::default`]).
    pub fn retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// How long a copy job is its worker's before another may take it over, if that worker
    /// stops answering (default 60 s; see [`crate::jobs::JobQueueBuilder::lease`]). An owner's
    /// copy must fit in it.
    pub fn job_lease(mut self, lease: Duration) -> Self {
        self.job_lease = lease;
        self
    }

    /// Builds the migration: its state in the collection `<name>_migration`, its jobs in
    /// `<name>_jobs`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a name that cannot name a collection.
    pub fn build(self) -> Result<InboxMigration<P>> {
        crate::validate::check_collection_name(&format!("{}_migration", self.name))?;
        let backend = Backend::new(&self.database, None, self.retry, None);
        let states = States::new(
            backend,
            self.database
                .collection(&format!("{}_migration", self.name)),
        );
        let jobs = JobQueue::builder(&self.database)
            .collection("jobs", format!("{}_jobs", self.name))
            .retry_policy(self.retry)
            .lease(self.job_lease)
            .build()?;
        Ok(InboxMigration {
            inner: Arc::new(Inner {
                source: self.source,
                target: self.target,
                states,
                reads: self.reads,
                jobs,
            }),
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
            database: database.clone(),
            name: name.into(),
            source,
            target,
            reads: Reads::default(),
            retry: RetryPolicy::default(),
            job_lease: Duration::from_secs(60),
        }
    }

    /// The store the application uses while the migration runs (and after it, until it
    /// switches to the target store itself): writes reach both stores, reads go where the
    /// migration says.
    pub fn store(&self) -> Arc<MigratingInbox<P>> {
        Arc::new(MigratingInbox::new(self.inner.clone()))
    }

    /// Starts the migration: records it, creates both stores' indexes and the queue's, and
    /// enqueues the listing of the source's owners. Starting again does nothing.
    ///
    /// # Errors
    ///
    /// [`Error::Precondition`] when the target holds messages and the migration had not started
    /// (a target must start empty; an aborted migration empties it).
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        inner.source.create_indexes().await?;
        inner.target.create_indexes().await?;
        inner.jobs.create_indexes().await?;
        if inner.states.phase().await?.is_none() {
            if !inner.target.is_empty().await? {
                return Err(Error::Precondition {
                    reason: "the migration's target store holds messages already: a target \
                             starts empty"
                        .to_owned(),
                });
            }
            let source = format!("{:?}", inner.source.strategy());
            let target = format!("{:?}", inner.target.strategy());
            inner.states.begin(&source, &target).await?;
        }
        inner
            .jobs
            .enqueue_once(job_id(LIST, ""), LIST, doc! {})
            .await?;
        Ok(())
    }

    /// Runs the copy's due jobs in this task until none is left; returns how many ran (see
    /// [`JobQueue::run_pending`]).
    pub async fn run_pending(&self) -> Result<usize> {
        self.inner
            .jobs
            .run_pending(&Copier(self.inner.clone()))
            .await
    }

    /// Runs the copy in the background until the returned worker is stopped or dropped.
    pub fn start_worker(&self) -> Worker {
        self.inner
            .jobs
            .start_worker(Arc::new(Copier(self.inner.clone())))
    }

    /// How far the copy has got.
    pub async fn progress(&self) -> Result<Progress> {
        let counts = self.inner.states.counts().await?;
        let total = counts.known;
        let elapsed = counts
            .started_at
            .map(|at| (bson::DateTime::now().timestamp_millis() - at.timestamp_millis()).max(1))
            .map_or(1.0, |ms| ms as f64 / 1000.0);
        let time_left = (counts.listed && counts.ready > 0).then(|| {
            let per_owner = elapsed / counts.ready as f64;
            Duration::from_secs_f64(per_owner * total.saturating_sub(counts.ready) as f64)
        });
        Ok(Progress {
            owners_done: counts.ready,
            owners_total: total,
            listed: counts.listed,
            messages_copied: counts.messages,
            rate: counts.messages as f64 / elapsed,
            time_left,
        })
    }

    /// Whether every owner of the source is listed and copied, and no copy is waiting.
    pub async fn is_copied(&self) -> Result<bool> {
        let progress = self.progress().await?;
        Ok(progress.listed
            && progress.owners_done == progress.owners_total
            && self.inner.jobs.pending().await? == 0)
    }

    /// Moves every owner's reads to the target at once ([`Reads::AllAtOnce`]); writes still
    /// reach both stores.
    ///
    /// # Errors
    ///
    /// [`Error::Precondition`] before every owner is copied, or after an abort.
    pub async fn cut_over(&self) -> Result<()> {
        self.require_copied("cut over").await?;
        self.set_phase(
            &[Phase::Copying, Phase::CutOver],
            Phase::CutOver,
            "cut over",
        )
        .await
    }

    /// Ends the migration: the source is no longer written, every read and write goes to the
    /// target. The application may then use the target store directly.
    ///
    /// # Errors
    ///
    /// [`Error::Precondition`] before every owner is copied, or after an abort.
    pub async fn finish(&self) -> Result<()> {
        self.require_copied("finish").await?;
        self.set_phase(
            &[Phase::Copying, Phase::CutOver, Phase::Finished],
            Phase::Finished,
            "finish",
        )
        .await
    }

    /// Stops the migration: writes go to the source alone again, reads too, and the target is
    /// emptied (once every process has seen the abort, within about a second). The source,
    /// written all along, is whole.
    ///
    /// # Errors
    ///
    /// [`Error::Precondition`] after [`InboxMigration::finish`].
    pub async fn abort(&self) -> Result<()> {
        self.set_phase(
            &[Phase::Copying, Phase::CutOver, Phase::Aborted],
            Phase::Aborted,
            "abort",
        )
        .await?;
        // Processes trusting a phase read within its time-to-live stop writing the target.
        tokio::time::sleep(States::phase_ttl() * 2).await;
        self.inner.target.purge_all().await?;
        self.inner.states.forget_owners().await?;
        Ok(())
    }

    async fn require_copied(&self, what: &str) -> Result<()> {
        if !self.is_copied().await? {
            return Err(Error::Precondition {
                reason: format!("cannot {what} the migration before every owner is copied"),
            });
        }
        Ok(())
    }

    async fn set_phase(&self, from: &[Phase], to: Phase, what: &str) -> Result<()> {
        if !self.inner.states.set_phase(from, to).await? {
            return Err(Error::Precondition {
                reason: format!("cannot {what} the migration in its present phase"),
            });
        }
        Ok(())
    }
}

/// A job's id derived from its kind and owner, so enqueueing one twice enqueues it once, in
/// every process and every build: two FNV-1a hashes of the pair.
fn job_id(kind: &str, owner: &str) -> ObjectId {
    let fnv = |seed: u64| {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64 ^ seed;
        for byte in kind.bytes().chain([0]).chain(owner.bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash
    };
    let mut bytes = [0u8; 12];
    bytes[..8].copy_from_slice(&fnv(0).to_be_bytes());
    bytes[8..].copy_from_slice(&fnv(1).to_be_bytes()[..4]);
    ObjectId::from_bytes(bytes)
}

/// The copy's job handler.
struct Copier<P>(Arc<Inner<P>>);

impl<P> std::fmt::Debug for Copier<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Copier").field(&self.0).finish()
    }
}

#[async_trait]
impl<P: Payload> JobHandler for Copier<P> {
    async fn handle(&self, job: &Job) -> Result<()> {
        match job.kind.as_str() {
            LIST => self.list().await,
            COPY => {
                let owner = job
                    .payload
                    .get_str("owner")
                    .map_err(|_| job.error("a copy job without an owner"))?;
                self.copy(owner).await
            }
            other => Err(job.error(format!("unknown job kind {other}"))),
        }
    }
}

impl<P: Payload> Copier<P> {
    /// Lists the next owners of the source after the checkpoint, enqueues a copy job for each,
    /// and moves the checkpoint; enqueues itself again while owners remain.
    async fn list(&self) -> Result<()> {
        let inner = &self.0;
        if inner.states.phase().await? != Some(Phase::Copying) {
            return Ok(());
        }
        let (after, done) = inner.states.listing().await?;
        if done {
            return Ok(());
        }
        let owners: Vec<String> = inner
            .source
            .owners(after)
            .await?
            .take(LIST_CHUNK)
            .try_collect()
            .await?;
        for owner in &owners {
            inner
                .jobs
                .enqueue_once(job_id(COPY, owner), COPY, doc! { "owner": owner })
                .await?;
        }
        let finished = owners.len() < LIST_CHUNK;
        inner.states.listed(&owners, finished).await?;
        if !finished {
            let next = owners.last().cloned().unwrap_or_default();
            inner
                .jobs
                .enqueue_once(job_id(LIST, &next), LIST, doc! {})
                .await?;
        }
        Ok(())
    }

    /// Copies one owner (see the [module docs](super)), again while writes or a failed check
    /// say the copy is not the source's.
    async fn copy(&self, owner: &str) -> Result<()> {
        let inner = &self.0;
        if inner.states.phase().await? != Some(Phase::Copying) {
            return Ok(());
        }
        if inner.states.owners(&[owner.to_owned()]).await?.get(owner) == Some(&OwnerState::Ready) {
            return Ok(());
        }
        for _ in 0..COPY_ATTEMPTS {
            let dirty = inner.states.start_copy(owner).await?;
            let epoch = inner.states.epoch().await?;
            inner.target.purge(owner).await?;
            let mut exported = inner.source.export(owner).await?;
            let mut chunk = Vec::with_capacity(IMPORT_CHUNK);
            let mut messages = 0;
            while let Some(held) = exported.try_next().await? {
                chunk.push(held);
                if chunk.len() == IMPORT_CHUNK {
                    inner.target.import(owner, &chunk).await?;
                    messages += chunk.len() as u64;
                    chunk.clear();
                }
            }
            drop(exported);
            if !chunk.is_empty() {
                inner.target.import(owner, &chunk).await?;
                messages += chunk.len() as u64;
            }
            let filters = inner.source.filters(owner).await?;
            for sender in &filters.muted {
                inner.target.mute(owner, sender).await?;
            }
            for sender in &filters.blocked {
                inner.target.block(owner, sender).await?;
            }
            if !verified(&*inner.source, &*inner.target, owner).await? {
                continue;
            }
            if inner.states.epoch().await? != epoch {
                // A retraction or an edit ran meanwhile: it may have missed this copy.
                continue;
            }
            if inner.states.finish_copy(owner, dirty, messages).await? {
                return Ok(());
            }
        }
        Err(Error::contention("copy an owner's inbox", COPY_ATTEMPTS))
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
