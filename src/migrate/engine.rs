//! What every migration shares, whatever it moves: the phases, the per-unit copy on the job
//! queue (a unit is an inbox's owner or a discussion), verification, dirty marks and the epoch,
//! where writes and reads go, progress, cut-over, finish and abort. [`super::InboxMigration`]
//! and [`super::CommentMigration`] each say what a unit is ([`Units`]) and run this.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, oid::ObjectId};
use mongodb::Database;

use super::state::{Phase, States, UnitState};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::jobs::{Job, JobHandler, JobQueue, Worker};
use crate::observe;
use crate::retry::RetryPolicy;

/// Units given a copy job per listing job.
const LIST_CHUNK: usize = 200;
/// Times one unit's copy is done again (a write marked it dirty, or it did not verify) before
/// its job fails and is retried later by the queue.
const COPY_ATTEMPTS: usize = 5;

/// How long a state document's turn lasts where updates are not atomic (see
/// [`super::state`]): one update's time, taken over after it if its holder died.
const STATE_LOCK_LEASE: Duration = Duration::from_secs(30);

/// When reads move from the source to the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reads {
    /// Each unit's reads (an owner's inbox, a discussion) move as soon as its copy is
    /// verified.
    #[default]
    PerOwner,
    /// Every unit's reads move at once, at the migration's `cut_over`.
    AllAtOnce,
}

/// What one kind of migration moves, unit by unit, from its source store to its target.
#[async_trait]
pub(super) trait Units: Send + Sync + 'static {
    /// The job kinds' prefix, such as `migrate-inbox`.
    fn kind(&self) -> &'static str;
    /// What a unit is called in errors: `owner`, `discussion`.
    fn unit(&self) -> &'static str;
    /// The source's and the target's strategy, as recorded.
    fn strategies(&self) -> (String, String);
    /// Creates both stores' indexes.
    async fn create_indexes(&self) -> Result<()>;
    /// Refuses a migration that cannot start (before anything is written): a target not empty.
    async fn check_start(&self) -> Result<()>;
    /// The source's units after `after`, in order, at most `limit`.
    async fn list(&self, after: Option<String>, limit: usize) -> Result<Vec<String>>;
    /// Copies `unit` from the source into the target, replacing what the target held of it;
    /// returns how many items it copied.
    async fn copy(&self, unit: &str) -> Result<u64>;
    /// Whether the target's `unit` is the source's.
    async fn verified(&self, unit: &str) -> Result<bool>;
    /// Removes what the migration wrote to the target.
    async fn purge_target(&self) -> Result<()>;
}

/// How far a migration's copy has got, for each migration's own progress type.
pub(super) struct Tally {
    pub(super) done: u64,
    pub(super) total: u64,
    pub(super) listed: bool,
    pub(super) items: u64,
    pub(super) rate: f64,
    pub(super) time_left: Option<Duration>,
}

/// Where a write goes.
pub(super) enum Writes {
    /// To the source, then the target for units that are ready.
    Both,
    /// To the source alone (aborted).
    Source,
    /// To the target alone (finished).
    Target,
}

/// What every migration's builder configures.
#[derive(Debug)]
pub(super) struct Config {
    pub(super) database: Database,
    pub(super) name: String,
    pub(super) reads: Reads,
    pub(super) retry: RetryPolicy,
    pub(super) job_lease: Duration,
}

impl Config {
    pub(super) fn new(database: &Database, name: String) -> Self {
        Self {
            database: database.clone(),
            name,
            reads: Reads::default(),
            retry: RetryPolicy::default(),
            job_lease: Duration::from_secs(60),
        }
    }

    /// The collection `<name>_<suffix>`, its name checked.
    pub(super) fn collection(&self, suffix: &str) -> Result<mongodb::Collection<bson::Document>> {
        let name = format!("{}_{suffix}", self.name);
        crate::validate::check_collection_name(&name)?;
        Ok(self.database.collection(&name))
    }

    /// The engine moving `units`: its state in `<name>_migration`, its jobs in `<name>_jobs`.
    pub(super) fn build<U>(&self, units: U) -> Result<Engine<U>> {
        let locks = self.collection("locks")?;
        let backend = Backend::new(
            &self.database,
            Some((locks.name(), STATE_LOCK_LEASE)),
            self.retry,
            None,
        );
        let states = States::new(backend, self.collection("migration")?);
        let jobs = JobQueue::builder(&self.database)
            .collection("jobs", format!("{}_jobs", self.name))
            .retry_policy(self.retry)
            .lease(self.job_lease)
            .build()?;
        Ok(Engine {
            units,
            states,
            reads: self.reads,
            jobs,
        })
    }
}

/// One migration's machinery, around what it moves.
pub(super) struct Engine<U> {
    pub(super) units: U,
    pub(super) states: States,
    pub(super) reads: Reads,
    jobs: JobQueue,
}

impl<U: std::fmt::Debug> std::fmt::Debug for Engine<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Migration")
            .field("units", &self.units)
            .field("state", &self.states.collection().name())
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

impl<U: Units> Engine<U> {
    fn list_kind(&self) -> String {
        format!("{}-list", self.units.kind())
    }

    fn copy_kind(&self) -> String {
        format!("{}-copy", self.units.kind())
    }

    /// Gives each of `units` (unknown: not listed) a copy job where the listing of the
    /// source's units has passed them: units new since (a first message to a new user, a new
    /// discussion) get theirs this way. One `find` of the listing, and for such units their
    /// state and an `insert` of each one's job (refused where it exists).
    pub(super) async fn copy_new(&self, units: &[String]) -> Result<()> {
        let (after, done) = self.states.listing().await?;
        let passed: Vec<String> = units
            .iter()
            .filter(|unit| done || after.as_deref().is_some_and(|after| unit.as_str() <= after))
            .cloned()
            .collect();
        if passed.is_empty() {
            return Ok(());
        }
        self.states.listed_new(&passed).await?;
        let kind = self.copy_kind();
        for unit in &passed {
            self.jobs
                .enqueue_once(job_id(&kind, unit), &kind, doc! { "owner": unit })
                .await?;
        }
        Ok(())
    }

    /// Has `units` copied again: their state `stale` (reads back on the source), and a new
    /// copy job each.
    pub(super) async fn copy_again(&self, units: &[String]) -> Result<()> {
        self.states.mark_stale(units).await?;
        let kind = self.copy_kind();
        for unit in units {
            self.jobs.enqueue(&kind, doc! { "owner": unit }).await?;
        }
        Ok(())
    }

    /// Where writes go now (the phase read at most once a second).
    pub(super) async fn writes(&self) -> Result<Writes> {
        Ok(match self.states.recent_phase().await? {
            Some(Phase::Aborted) => Writes::Source,
            Some(Phase::Finished) => Writes::Target,
            _ => Writes::Both,
        })
    }

    /// Whether the migration finished (the phase read at most once a second).
    pub(super) async fn finished(&self) -> Result<bool> {
        Ok(self.states.recent_phase().await? == Some(Phase::Finished))
    }

    /// Whether `unit`'s reads go to the target.
    pub(super) async fn reads_target(&self, unit: &str) -> Result<bool> {
        match self.states.recent_phase().await? {
            Some(Phase::Finished | Phase::CutOver) => return Ok(true),
            Some(Phase::Aborted) | None => return Ok(false),
            Some(Phase::Copying) => {}
        }
        if self.reads == Reads::AllAtOnce {
            return Ok(false);
        }
        let states = self.states.units(&[unit.to_owned()]).await?;
        Ok(states.get(unit) == Some(&UnitState::Ready))
    }

    /// After the source took a write concerning `units`: the units being copied are marked
    /// dirty (their copy is checked again), units new since the listing get a copy, and
    /// `apply` writes the target for those that are ready. A target failure marks its units to
    /// be copied again instead of failing.
    pub(super) async fn mirror<F, Fut, T>(&self, units: Vec<String>, apply: F) -> Result<()>
    where
        F: FnOnce(Vec<String>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if units.is_empty() {
            return Ok(());
        }
        let states = &self.states;
        let mut known = states.units(&units).await?;
        let copying = in_state(&units, &known, UnitState::Copying);
        if !copying.is_empty() {
            states.mark_dirty(&copying).await?;
            // A copy that finished meanwhile did not see the mark: read those again.
            known.extend(states.units(&copying).await?);
        }
        let unknown = in_state(&units, &known, UnitState::Unknown);
        if !unknown.is_empty() {
            self.copy_new(&unknown).await?;
        }
        let ready = in_state(&units, &known, UnitState::Ready);
        if ready.is_empty() {
            return Ok(());
        }
        match apply(ready.clone()).await {
            Ok(_) | Err(Error::NotFound { .. }) => Ok(()),
            Err(_) => self.copy_again(&ready).await,
        }
    }

    /// Records the migration and enqueues the listing; see `InboxMigration::start`.
    pub(super) async fn start(&self) -> Result<()> {
        observe::operation!("migrate.start", migration = self.name())
            .run(async move {
                self.units.create_indexes().await?;
                self.jobs.create_indexes().await?;
                if self.states.phase().await?.is_none() {
                    self.units.check_start().await?;
                    let (source, target) = self.units.strategies();
                    self.states.begin(&source, &target).await?;
                }
                let kind = self.list_kind();
                self.jobs
                    .enqueue_once(job_id(&kind, ""), &kind, doc! {})
                    .await?;
                Ok(())
            })
            .await
    }

    /// How far the copy has got, in the span of the handle's `progress`.
    pub(super) async fn progress(&self) -> Result<Tally> {
        observe::operation!("migrate.progress", migration = self.name())
            .run(self.tally())
            .await
    }

    /// The migration's name in spans: `inbox`, `comments`.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    fn name(&self) -> &'static str {
        self.units.kind().trim_start_matches("migrate-")
    }

    /// How far the copy has got.
    pub(super) async fn tally(&self) -> Result<Tally> {
        let counts = self.states.counts().await?;
        let total = counts.known;
        let elapsed = counts
            .started_at
            .map(|at| (bson::DateTime::now().timestamp_millis() - at.timestamp_millis()).max(1))
            .map_or(1.0, |ms| ms as f64 / 1000.0);
        let time_left = (counts.listed && counts.ready > 0).then(|| {
            let per_unit = elapsed / counts.ready as f64;
            Duration::from_secs_f64(per_unit * total.saturating_sub(counts.ready) as f64)
        });
        Ok(Tally {
            done: counts.ready,
            total,
            listed: counts.listed,
            items: counts.messages,
            rate: counts.messages as f64 / elapsed,
            time_left,
        })
    }

    /// Whether every unit of the source is listed and copied, and no copy is waiting.
    pub(super) async fn is_copied(&self) -> Result<bool> {
        let tally = self.tally().await?;
        Ok(tally.listed && tally.done == tally.total && self.jobs.pending().await? == 0)
    }

    pub(super) async fn cut_over(&self) -> Result<()> {
        let from = [Phase::Copying, Phase::CutOver];
        observe::operation!("migrate.cut_over", migration = self.name())
            .run(self.set_phase_once_copied(&from, Phase::CutOver, "cut over"))
            .await
    }

    pub(super) async fn finish(&self) -> Result<()> {
        let from = [Phase::Copying, Phase::CutOver, Phase::Finished];
        observe::operation!("migrate.finish", migration = self.name())
            .run(self.set_phase_once_copied(&from, Phase::Finished, "finish"))
            .await
    }

    /// [`Self::set_phase`] once every unit is copied ([`Self::require_copied`]): a cut-over
    /// or a finish.
    async fn set_phase_once_copied(&self, from: &[Phase], to: Phase, what: &str) -> Result<()> {
        self.require_copied(what).await?;
        self.set_phase(from, to, what).await
    }

    pub(super) async fn abort(&self) -> Result<()> {
        observe::operation!("migrate.abort", migration = self.name())
            .run(async move {
                self.set_phase(
                    &[Phase::Copying, Phase::CutOver, Phase::Aborted],
                    Phase::Aborted,
                    "abort",
                )
                .await?;
                // Processes trusting a phase read within its time-to-live stop writing the target.
                tokio::time::sleep(States::phase_ttl() * 2).await;
                self.units.purge_target().await?;
                self.states.forget_units().await?;
                Ok(())
            })
            .await
    }

    async fn require_copied(&self, what: &str) -> Result<()> {
        if !self.is_copied().await? {
            return Err(Error::Precondition {
                reason: format!(
                    "cannot {what} the migration before every {} is copied",
                    self.units.unit()
                ),
            });
        }
        Ok(())
    }

    async fn set_phase(&self, from: &[Phase], to: Phase, what: &str) -> Result<()> {
        if !self.states.set_phase(from, to).await? {
            return Err(Error::Precondition {
                reason: format!("cannot {what} the migration in its present phase"),
            });
        }
        Ok(())
    }
}

/// Those of `units` whose state in `known` is `state`, in order.
fn in_state(units: &[String], known: &HashMap<String, UnitState>, state: UnitState) -> Vec<String> {
    units
        .iter()
        .filter(|unit| known.get(*unit) == Some(&state))
        .cloned()
        .collect()
}

/// Runs the copy's jobs of `engine` until none is due; returns how many ran.
pub(super) async fn run_pending<U: Units>(engine: &Arc<Engine<U>>) -> Result<usize> {
    observe::operation!("migrate.run_pending", migration = engine.name())
        .run(engine.jobs.run_pending(&Copier(engine.clone())))
        .await
}

/// Runs the copy of `engine` in the background until the worker is stopped or dropped.
pub(super) fn start_worker<U: Units>(engine: &Arc<Engine<U>>) -> Worker {
    engine.jobs.start_worker(Arc::new(Copier(engine.clone())))
}

/// A job's id derived from its kind and unit, so enqueueing one twice enqueues it once, in
/// every process and every build: two FNV-1a hashes of the pair.
fn job_id(kind: &str, unit: &str) -> ObjectId {
    let fnv = |seed: u64| {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64 ^ seed;
        for byte in kind.bytes().chain([0]).chain(unit.bytes()) {
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
struct Copier<U>(Arc<Engine<U>>);

impl<U> std::fmt::Debug for Copier<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Copier")
            .field(&self.0.states.collection().name())
            .finish()
    }
}

#[async_trait]
impl<U: Units> JobHandler for Copier<U> {
    async fn handle(&self, job: &Job) -> Result<()> {
        let engine = &self.0;
        if job.kind == engine.list_kind() {
            self.list().await
        } else if job.kind == engine.copy_kind() {
            let unit = job
                .payload
                .get_str("owner")
                .map_err(|_| job.error("a copy job without its unit"))?;
            self.copy(unit).await
        } else {
            Err(job.error(format!("unknown job kind {}", job.kind)))
        }
    }
}

impl<U: Units> Copier<U> {
    /// Lists the next units of the source after the checkpoint, enqueues a copy job for each,
    /// and moves the checkpoint; enqueues itself again while units remain.
    ///
    /// Then reads the same range once more: a unit whose first write landed after the first
    /// read, but whose writer looked at the checkpoint before it moved (and so left the unit to
    /// the listing, [`Engine::copy_new`]), would otherwise be passed over unseen. A write after
    /// the checkpoint moved is seen by its writer as passed; one before, by the second read.
    async fn list(&self) -> Result<()> {
        let engine = &self.0;
        if engine.states.phase().await? != Some(Phase::Copying) {
            return Ok(());
        }
        let (after, done) = engine.states.listing().await?;
        if done {
            return Ok(());
        }
        let units = engine.units.list(after.clone(), LIST_CHUNK).await?;
        let kind = engine.copy_kind();
        for unit in &units {
            engine
                .jobs
                .enqueue_once(job_id(&kind, unit), &kind, doc! { "owner": unit })
                .await?;
        }
        let finished = units.len() < LIST_CHUNK;
        engine.states.listed(&units, finished).await?;
        let last = units.last().cloned();
        let late: Vec<String> = engine
            .units
            .list(after, LIST_CHUNK)
            .await?
            .into_iter()
            .filter(|unit| !units.contains(unit))
            .filter(|unit| finished || last.as_ref().is_some_and(|last| unit <= last))
            .collect();
        if !late.is_empty() {
            engine.states.listed_new(&late).await?;
            for unit in &late {
                engine
                    .jobs
                    .enqueue_once(job_id(&kind, unit), &kind, doc! { "owner": unit })
                    .await?;
            }
        }
        if !finished {
            let next = units.last().cloned().unwrap_or_default();
            let kind = engine.list_kind();
            engine
                .jobs
                .enqueue_once(job_id(&kind, &next), &kind, doc! {})
                .await?;
        }
        Ok(())
    }

    /// Copies one unit, again while writes or a failed check say the copy is not the
    /// source's.
    async fn copy(&self, unit: &str) -> Result<()> {
        observe::operation!(
            "migrate.copy",
            migration = self.0.name(),
            items = ::tracing::field::Empty
        )
        .run(async move {
            let engine = &self.0;
            if engine.states.phase().await? != Some(Phase::Copying) {
                return Ok(());
            }
            if engine.states.units(&[unit.to_owned()]).await?.get(unit) == Some(&UnitState::Ready) {
                return Ok(());
            }
            for _ in 0..COPY_ATTEMPTS {
                let dirty = engine.states.start_copy(unit).await?;
                let epoch = engine.states.epoch().await?;
                let items = engine.units.copy(unit).await?;
                if !engine.units.verified(unit).await? {
                    continue;
                }
                if engine.states.epoch().await? != epoch {
                    // A change that may reach any unit ran meanwhile: it may have missed this copy.
                    continue;
                }
                if engine.states.finish_copy(unit, dirty, items).await? {
                    observe::record("items", items);
                    return Ok(());
                }
            }
            Err(Error::contention("copy a migration's unit", COPY_ATTEMPTS))
        })
        .await
    }
}
