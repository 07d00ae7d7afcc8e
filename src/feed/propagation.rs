//! Chunk propagation: copying a user's current [`UserChunk`](super::UserChunk) into every
//! document that embeds it. Run by [`super::Users`] (a rename, a repair, a resume) and by the
//! `propagate` job.
//!
//! A chunk is copied into every post (and every document of the collections added with
//! [`super::FeedStoreBuilder::chunk_target`]). When a chunk field changes, the user's `revision`
//! goes up by one, and a propagation document `{_id, user, target, last_id, done}` records the
//! work. Each batch then costs three commands:
//!
//! 1. `find` the next `propagation_batch` ids of documents embedding the user's chunk, after
//!    `last_id`, in `_id` order (index `{<field>.id: 1, _id: 1}`);
//! 2. `update` those with a lower `revision` to the current chunk (one `update` with `$in`);
//! 3. `update` the propagation document with the batch's last `_id`.
//!
//! A propagation interrupted anywhere resumes from the last recorded `_id`
//! ([`super::Users::resume_propagations`]); redoing a batch changes nothing, since only copies
//! with a lower revision are written, and the chunk written is the user's current one, read when
//! the run starts, so two renames in a row end with the newest name whatever order their runs
//! finish in. Every copy is updated after `5 + 3 * ceil(copies / batch)` commands per target
//! collection (the 5: record, rename, read the record, read the chunk, mark done; one more empty
//! batch when the copies are an exact multiple of the batch). At 100 copies a batch and a few
//! milliseconds a command on MongoDB, that is about a second per 10,000 posts of the user;
//! measured where updates are not atomic in `cargo run --example social_feed`: 8 commands for a
//! user with 2 posts.
//!
//! A post created from a chunk read just before a rename, and inserted after that rename's
//! batches passed its `_id`, keeps the old chunk until the next propagation of that user (run
//! [`super::Users::propagate`] again to repair; it is idempotent). On servers whose updates are
//! not atomic, the rename's `findAndModify` and each batch's `update` run under a
//! leased lock on the user ([`user_lock`], +2 commands each), so concurrent renames get distinct
//! revisions and two propagations of the same user cannot interleave within one copy.

use std::time::Instant;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use super::state::FeedState;
use super::types::UserChunk;
use crate::{error::Entity, Error, Result};

/// How far a propagation got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PropagationStatus {
    /// The propagation's id (see [`super::Users::run_propagation`]).
    pub id: ObjectId,
    /// Whether every copy is updated.
    pub done: bool,
    /// Batches run by this call.
    pub batches: usize,
    /// Copies rewritten by this call.
    pub updated: u64,
}

/// The lock serializing a user's renames and propagation batches where updates are not atomic.
pub(super) fn user_lock(id: &str) -> String {
    format!("user:{id}")
}

/// Records a propagation of `user`'s chunk, to run from the first copy (one `insert`).
pub(super) async fn record(inner: &FeedState, user: &str) -> Result<ObjectId> {
    let id = ObjectId::new();
    inner
        .collections
        .propagations
        .insert_one(doc! {
            "_id": id, "user": user, "target": 0, "last_id": Bson::Null, "done": false,
            "created": inner.clock.now(),
        })
        .await?;
    Ok(id)
}

/// Runs recorded propagation `propagation` from where it stopped, for at most `max_batches`
/// batches (`None`: to the end), starting no batch after `deadline` but the first.
///
/// # Errors
///
/// [`Error::NotFound`] for an unknown propagation or a user deleted meanwhile.
pub(super) async fn run(
    inner: &FeedState,
    propagation: ObjectId,
    max_batches: Option<usize>,
    deadline: Option<Instant>,
) -> Result<PropagationStatus> {
    let propagations = &inner.collections.propagations;
    let record = propagations
        .find_one(doc! { "_id": propagation })
        .await?
        .ok_or_else(|| Error::not_found(Entity::Propagation, propagation.to_hex()))?;
    let mut status = PropagationStatus {
        id: propagation,
        done: record.get_bool("done").unwrap_or(false),
        batches: 0,
        updated: 0,
    };
    if status.done {
        return Ok(status);
    }
    let user_id = record.get_str("user").unwrap_or_default().to_owned();
    let chunk = inner.user(&user_id).await?.chunk();
    let chunk_bson = bson::to_bson(&chunk)?;
    let mut target = record.get_i32("target").unwrap_or(0).max(0) as usize;
    let mut last_id = record.get("last_id").cloned().unwrap_or(Bson::Null);
    let batch = inner.settings.propagation_batch;
    while let Some((collection, field)) = inner.settings.chunk_targets.get(target) {
        if max_batches.is_some_and(|max| status.batches >= max) {
            return Ok(status);
        }
        let late = deadline.is_some_and(|deadline| Instant::now() >= deadline);
        if status.batches > 0 && late {
            return Ok(status);
        }
        let copies = inner.backend.database().collection::<Document>(collection);
        let ids = next_copies(&copies, field, &user_id, &last_id, batch).await?;
        if let Some(last) = ids.last() {
            status.updated +=
                update_copies(inner, &copies, field, &ids, &user_id, &chunk, &chunk_bson).await?;
            last_id = last.clone();
        }
        if ids.len() < batch {
            target += 1;
            last_id = Bson::Null;
        }
        status.batches += 1;
        propagations
            .update_one(
                doc! { "_id": propagation },
                doc! { "$set": { "target": target as i32, "last_id": last_id.clone() } },
            )
            .await?;
    }
    propagations
        .update_one(
            doc! { "_id": propagation },
            doc! { "$set": { "done": true, "finished": inner.clock.now() } },
        )
        .await?;
    status.done = true;
    Ok(status)
}

/// The ids of the next `batch` copies of `user_id`'s chunk (at `field`) in `copies`, after
/// `last_id` (`Null`: from the first).
async fn next_copies(
    copies: &mongodb::Collection<Document>,
    field: &str,
    user_id: &str,
    last_id: &Bson,
    batch: usize,
) -> Result<Vec<Bson>> {
    let mut filter = doc! { format!("{field}.id"): user_id };
    if *last_id != Bson::Null {
        filter.insert("_id", doc! { "$gt": last_id.clone() });
    }
    Ok(copies
        .find(filter)
        .sort(doc! { "_id": 1 })
        .projection(doc! { "_id": 1 })
        .limit(batch as i64)
        .await?
        .try_collect::<Vec<Document>>()
        .await?
        .into_iter()
        .filter_map(|mut copy| copy.remove("_id"))
        .collect())
}

/// Writes `chunk` (encoded as `chunk_bson`) of `user_id` at `field` of the copies `ids` that
/// hold an older revision (one `update_many`): how many it changed.
async fn update_copies(
    inner: &FeedState,
    copies: &mongodb::Collection<Document>,
    field: &str,
    ids: &[Bson],
    user_id: &str,
    chunk: &UserChunk,
    chunk_bson: &Bson,
) -> Result<u64> {
    let revision = format!("{field}.revision");
    // Where updates are not atomic, under the user's lock, so that two runs cannot
    // interleave within one copy (an older chunk written over a newer one).
    let updated = inner
        .backend
        .exclusive(&[user_lock(user_id)], async {
            Ok(copies
                .update_many(
                    doc! {
                        "_id": { "$in": ids },
                        "$or": [
                            { &revision: { "$lt": chunk.revision } },
                            { &revision: { "$exists": false } },
                        ],
                    },
                    doc! { "$set": { field: chunk_bson.clone() } },
                )
                .await?)
        })
        .await?;
    Ok(updated.modified_count)
}
