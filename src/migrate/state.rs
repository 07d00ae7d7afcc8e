//! Where a migration keeps its state: one document for the migration (its phase, its epoch,
//! how far the units were listed) and one per unit (an inbox's owner, a discussion) whose copy
//! started, in one collection. A unit's document keeps the unit's name in its `owner` field
//! (the name the inbox migration gave it first).
//!
//! The state machine leans on single-document atomicity: a write's dirty mark and a copy's
//! conditional finish must not overwrite each other. Where the server's updates are not atomic
//! (it reads, modifies and writes back whole documents), every update of a state
//! document takes that document's turn through [`Backend::exclusive`] (a leased lock in the
//! migration's `<name>_locks` collection, keyed by the document's `_id`); elsewhere the
//! updates run as they are, at no extra command.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use crate::backend::Backend;
use crate::error::{Entity, Error, Result};

/// The `_id` of the migration's own document.
const MIGRATION: &str = "migration";
/// How long a phase read is trusted by reads that go all at once.
const PHASE_TTL: Duration = Duration::from_secs(1);

/// Where a migration stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Dual writes; the copy runs; reads on the source (or the target, per owner).
    Copying,
    /// Every owner is ready and reads have moved to the target; writes still reach both.
    CutOver,
    /// The source is no longer written.
    Finished,
    /// Stopped; the target emptied.
    Aborted,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Copying => "copying",
            Phase::CutOver => "cut_over",
            Phase::Finished => "finished",
            Phase::Aborted => "aborted",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [
            Phase::Copying,
            Phase::CutOver,
            Phase::Finished,
            Phase::Aborted,
        ]
        .into_iter()
        .find(|phase| phase.name() == name)
    }
}

/// Where one unit's copy stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UnitState {
    /// Not listed yet, or new since the listing passed (no state document).
    Unknown,
    /// Listed, its copy not started: the copy will take everything from the source.
    Pending,
    /// Being copied: writes mark it dirty instead of reaching the target.
    Copying,
    /// Copied and verified: writes reach the target.
    Ready,
    /// To be copied again (a write the target refused, a prune): like `Pending` for reads.
    Stale,
}

impl UnitState {
    fn from_name(name: &str) -> Self {
        match name {
            "copying" => UnitState::Copying,
            "ready" => UnitState::Ready,
            "stale" => UnitState::Stale,
            _ => UnitState::Pending,
        }
    }
}

/// How far the copy has got, as stored.
#[derive(Clone, Debug, Default)]
pub(super) struct Counts {
    /// Owners copied and verified.
    pub(super) ready: u64,
    /// Owners known: listed, or met since by a write.
    pub(super) known: u64,
    pub(super) messages: u64,
    pub(super) listed: bool,
    pub(super) started_at: Option<bson::DateTime>,
}

fn owner_id(owner: &str) -> String {
    format!("o:{owner}")
}

/// A migration's state documents.
#[derive(Clone, Debug)]
pub(super) struct States {
    backend: Backend,
    collection: Collection<Document>,
    phase: Arc<Mutex<Option<(Instant, Phase)>>>,
}

impl States {
    pub(super) fn new(backend: Backend, collection: Collection<Document>) -> Self {
        Self {
            backend,
            collection,
            phase: Arc::default(),
        }
    }

    /// The phase as stored; `None` before [`States::begin`].
    pub(super) async fn phase(&self) -> Result<Option<Phase>> {
        let found = self
            .backend
            .command("read migration", || {
                self.collection.find_one(doc! { "_id": MIGRATION })
            })
            .await?;
        let phase = found
            .as_ref()
            .and_then(|d| d.get_str("phase").ok())
            .and_then(Phase::from_name);
        if let Some(phase) = phase {
            *self.phase.lock().expect("phase cache") = Some((Instant::now(), phase));
        }
        Ok(phase)
    }

    /// The phase, read at most once a [`PHASE_TTL`]: for routing reads all at once. Phases
    /// only move forward, but for an abort, which waits out the TTL before emptying the target.
    pub(super) async fn recent_phase(&self) -> Result<Option<Phase>> {
        if let Some((at, phase)) = *self.phase.lock().expect("phase cache") {
            if at.elapsed() < PHASE_TTL {
                return Ok(Some(phase));
            }
        }
        self.phase().await
    }

    pub(super) fn phase_ttl() -> Duration {
        PHASE_TTL
    }

    /// Records the migration's start: `false` if it had started already.
    pub(super) async fn begin(&self, source: &str, target: &str) -> Result<bool> {
        let document = doc! {
            "_id": MIGRATION,
            "phase": Phase::Copying.name(),
            "source": source,
            "target": target,
            "started": bson::DateTime::now(),
            "epoch": 0_i64,
            "listed": false,
        };
        self.backend.insert_once(&self.collection, document).await
    }

    /// Moves the phase from one of `from` to `to`: `false` when it was in none of them.
    pub(super) async fn set_phase(&self, from: &[Phase], to: Phase) -> Result<bool> {
        let names: Vec<&str> = from.iter().map(|p| p.name()).collect();
        let matched = self
            .update_state(
                MIGRATION,
                "set migration phase",
                doc! { "phase": { "$in": &names } },
                doc! { "$set": { "phase": to.name() } },
            )
            .await?;
        *self.phase.lock().expect("phase cache") = None;
        Ok(matched || self.phase().await? == Some(to))
    }

    /// The state of each of `owners` (one `find`).
    pub(super) async fn units(&self, owners: &[String]) -> Result<HashMap<String, UnitState>> {
        if owners.is_empty() {
            // No command: an empty `$in` matches nothing, and on the shard key it crashes a
            // sharded engine (see `src/server/family/`).
            return Ok(HashMap::new());
        }
        let ids: Vec<String> = owners.iter().map(|o| owner_id(o)).collect();
        let found: Vec<Document> = self
            .backend
            .find_all("read owner states", || {
                self.collection
                    .find(doc! { "_id": { "$in": &ids } })
                    .projection(doc! { "owner": 1, "state": 1 })
            })
            .await?;
        let mut states: HashMap<String, UnitState> = owners
            .iter()
            .map(|o| (o.clone(), UnitState::Unknown))
            .collect();
        for document in found {
            if let (Ok(owner), Ok(state)) = (document.get_str("owner"), document.get_str("state")) {
                states.insert(owner.to_owned(), UnitState::from_name(state));
            }
        }
        Ok(states)
    }

    /// Marks `owners` dirty where they are being copied (one `update`): their copy is checked
    /// again before it counts as done.
    pub(super) async fn mark_dirty(&self, owners: &[String]) -> Result<()> {
        self.update_owners(owners, Some("copying"), doc! { "$inc": { "dirty": 1_i64 } })
            .await
    }

    /// Marks `owners` to be copied again (their reads go back to the source meanwhile).
    pub(super) async fn mark_stale(&self, owners: &[String]) -> Result<()> {
        self.update_owners(
            owners,
            None,
            doc! { "$set": { "state": "stale" }, "$inc": { "dirty": 1_i64 } },
        )
        .await
    }

    async fn update_owners(
        &self,
        owners: &[String],
        state: Option<&str>,
        update: Document,
    ) -> Result<()> {
        if owners.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = owners.iter().map(|o| owner_id(o)).collect();
        let mut filter = doc! { "_id": { "$in": &ids } };
        if let Some(state) = state {
            filter.insert("state", state);
        }
        self.in_turn(&ids, "mark owners", || {
            self.collection.update_many(filter.clone(), update.clone())
        })
        .await
        .map(drop)
    }

    /// Moves the epoch: a change that may reach any owner (a retraction, an edit) happened.
    pub(super) async fn bump_epoch(&self) -> Result<()> {
        self.update_state(
            MIGRATION,
            "move migration epoch",
            doc! {},
            doc! { "$inc": { "epoch": 1_i64 } },
        )
        .await
        .map(drop)
    }

    /// The migration's epoch.
    pub(super) async fn epoch(&self) -> Result<i64> {
        let found = self
            .collection
            .find_one(doc! { "_id": MIGRATION })
            .projection(doc! { "epoch": 1 })
            .await?;
        Ok(found
            .as_ref()
            .and_then(|d| crate::bson_ext::integer(d, "epoch"))
            .unwrap_or(0))
    }

    /// Starts (or restarts) `owner`'s copy: its state `copying`; returns its dirty count.
    pub(super) async fn start_copy(&self, owner: &str) -> Result<i64> {
        let id = owner_id(owner);
        let found = self
            .in_turn(std::slice::from_ref(&id), "start owner copy", || {
                self.collection
                    .find_one_and_update(
                        doc! { "_id": &id },
                        doc! {
                            "$set": { "state": "copying", "owner": owner },
                            "$setOnInsert": { "dirty": 0_i64, "messages": 0_i64 },
                        },
                    )
                    .upsert(true)
                    .return_document(mongodb::options::ReturnDocument::After)
            })
            .await?;
        Ok(found
            .as_ref()
            .and_then(|d| crate::bson_ext::integer(d, "dirty"))
            .unwrap_or(0))
    }

    /// Marks `owner` ready if no write marked it dirty since [`States::start_copy`] returned
    /// `dirty`: `false` when one did (the copy is to be done again).
    pub(super) async fn finish_copy(&self, owner: &str, dirty: i64, messages: u64) -> Result<bool> {
        self.update_state(
            &owner_id(owner),
            "finish owner copy",
            doc! { "state": "copying", "dirty": dirty },
            doc! { "$set": {
                "state": "ready",
                "messages": messages as i64,
                "copied": bson::DateTime::now(),
            } },
        )
        .await
    }

    /// Where listing the source's owners got to: the last owner listed, and whether it is done.
    pub(super) async fn listing(&self) -> Result<(Option<String>, bool)> {
        let found = self
            .collection
            .find_one(doc! { "_id": MIGRATION })
            .projection(doc! { "listed_after": 1, "listed": 1 })
            .await?
            .ok_or_else(|| Error::not_found(Entity::Migration, MIGRATION))?;
        Ok((
            found.get_str("listed_after").ok().map(str::to_owned),
            found.get_bool("listed").unwrap_or(false),
        ))
    }

    /// Records `owners` as listed (pending, where they have no state yet: one `insert`, its
    /// duplicates refused), the listing's checkpoint after the last of them, and whether the
    /// listing is done.
    pub(super) async fn listed(&self, owners: &[String], done: bool) -> Result<()> {
        if !owners.is_empty() {
            self.listed_new(owners).await?;
        }
        let mut set = doc! { "listed": done };
        if let Some(after) = owners.last() {
            set.insert("listed_after", after);
        }
        self.update_state(MIGRATION, "record listing", doc! {}, doc! { "$set": set })
            .await
            .map(drop)
    }

    /// Records `owners` as pending where they have no state yet (one `insert`, duplicates
    /// refused): listed owners, and those a write met after the listing passed them.
    pub(super) async fn listed_new(&self, owners: &[String]) -> Result<()> {
        let pending: Vec<Document> = owners
            .iter()
            .map(|owner| {
                doc! {
                    "_id": owner_id(owner), "owner": owner, "state": "pending",
                    "dirty": 0_i64, "messages": 0_i64,
                }
            })
            .collect();
        self.backend
            .insert_many_once(&self.collection, pending)
            .await
    }

    /// How far the copy has got: one `find` of every owner's state and the migration's.
    pub(super) async fn counts(&self) -> Result<Counts> {
        let mut counts = Counts::default();
        let mut cursor = self
            .collection
            .find(doc! {})
            .projection(doc! { "state": 1, "messages": 1, "listed": 1, "started": 1 })
            .await?;
        while let Some(document) = cursor.try_next().await? {
            if document.get_str("_id") == Ok(MIGRATION) {
                counts.listed = document.get_bool("listed").unwrap_or(false);
                counts.started_at = document.get_datetime("started").ok().copied();
                continue;
            }
            counts.known += 1;
            if document.get_str("state") == Ok("ready") {
                counts.ready += 1;
                counts.messages +=
                    crate::bson_ext::integer(&document, "messages").unwrap_or(0) as u64;
            }
        }
        Ok(counts)
    }

    /// Removes every owner's state (the migration's own document stays).
    pub(super) async fn forget_units(&self) -> Result<()> {
        self.backend
            .command("forget owners", || {
                self.collection
                    .delete_many(doc! { "_id": { "$ne": MIGRATION } })
            })
            .await
            .map(drop)
    }

    /// Updates the state document `id` (the migration's, or a unit's) where it also matches
    /// `filter` (one `update`), in its turn: whether it matched.
    async fn update_state(
        &self,
        id: &str,
        what: &'static str,
        filter: Document,
        update: Document,
    ) -> Result<bool> {
        let mut selected = doc! { "_id": id };
        selected.extend(filter);
        let updated = self
            .in_turn(&[id.to_owned()], what, || {
                self.collection.update_one(selected.clone(), update.clone())
            })
            .await?;
        Ok(updated.matched_count == 1)
    }

    /// Runs `write`, a driver command updating the state documents `ids` (made again for each
    /// attempt), retried on transient failures as [`Backend::command`] runs it, in those
    /// documents' turn where the server's updates are not atomic (see the module docs).
    async fn in_turn<T, F, A>(&self, ids: &[String], what: &'static str, write: F) -> Result<T>
    where
        F: Fn() -> A,
        A: std::future::IntoFuture<Output = mongodb::error::Result<T>>,
    {
        self.backend
            .exclusive(ids, self.backend.command(what, write))
            .await
    }

    /// The collection, for indexes and shard keys.
    pub(super) fn collection(&self) -> &Collection<Document> {
        &self.collection
    }
}
