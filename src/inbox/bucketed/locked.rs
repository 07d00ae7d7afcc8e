//! Delivery into buckets where single-document updates are not atomic (FerretDB 1.x).
//!
//! There a recipient's writers take turns ([`crate::backend::Backend::exclusive_in_rounds`]), so
//! the guards that make a push safe on its own on MongoDB (room in the bucket, no copy yet, no
//! later `sent`) are checked by reading the target buckets first, and each push then addresses its
//! bucket by `_id` ([`crate::backend::Backend::by_id`]). That matters on FerretDB 1.x, which
//! evaluates any filter but `{_id}` by decoding every document of the collection: a guarded push
//! there cost a decode of every bucket, per recipient.

use std::collections::{HashMap, HashSet};

use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use super::{bucket_id, holds, stamp, Buckets, Entry, Target, LAST_SENT, MAX_ROUNDS};
use crate::bson_ext::{date, integer, later};
use crate::inbox::lifecycle::Filter;
use crate::retry::Backoff;
use crate::{Error, Result};

/// A target bucket as read under the recipient's lock.
#[derive(Debug)]
struct Found {
    /// Its stored `_id`: derived from owner and sequence, or an `ObjectId` for a bucket opened
    /// before `_id`s were derived.
    id: Bson,
    count: i64,
    holds: bool,
    last_sent: Option<bson::DateTime>,
}

/// One push of a round: the recipient, the `_id` of its bucket if the bucket exists, and the
/// `sent` the entry carries there.
struct Push {
    owner: String,
    existing: Option<Bson>,
    stamp: bson::DateTime,
}

impl Buckets {
    /// Delivers `entry` to `recipients`, whose locks the caller holds, so nothing else writes
    /// their buckets meanwhile: heads in one `find`, the target buckets read by `_id`, then
    /// every push in one `update` addressed by `_id`. A recipient whose bucket was full moves
    /// to the next bucket and is read again in the next round, as is one whose push may not have
    /// landed.
    ///
    /// Idempotent under retries, without the `messages.id $ne` guard that FerretDB 1.x evaluates
    /// wrongly: a push whose command failed transiently is never sent again blindly (the batch
    /// [reports it](crate::update_batch::UpdateBatch::report_unknown)), and the next round's read
    /// says whether its bucket holds the message.
    ///
    /// Recipients whose head lists the sender as blocked are returned and get nothing; those
    /// who mute the sender get the entry hidden.
    pub(super) async fn deliver_locked(
        &self,
        recipients: Vec<String>,
        entry: &Entry<'_>,
    ) -> Result<Vec<String>> {
        let (mut targets, blocked, mut pending) = self.sort_recipients(recipients, entry).await?;
        if pending.is_empty() {
            return Ok(blocked);
        }
        // Recipients whose push as a new bucket failed: their bucket may predate derived `_id`s.
        let mut by_key: HashSet<String> = HashSet::new();
        let mut moves: HashMap<String, u32> = HashMap::new();
        let mut backoff = Backoff::new(self.backend.retry_policy(), "deliver to buckets");
        for _ in 0..MAX_ROUNDS {
            let found = self
                .backend
                .retry("read buckets", || {
                    self.read_targets(&pending, &targets, entry, &by_key)
                })
                .await?;
            let mut pushes = Vec::with_capacity(pending.len());
            let mut moved = Vec::new();
            let mut next = Vec::new();
            for owner in pending {
                let target = targets[&owner];
                match found.get(&owner) {
                    Some(bucket) if bucket.holds => {}
                    Some(bucket) if bucket.count >= self.bucket_size as i64 => {
                        let mut next_target = Target {
                            sequence: target.sequence + 1,
                            floor: later(target.floor, bucket.last_sent),
                            ..target
                        };
                        let count = moves.entry(owner.clone()).or_default();
                        *count += 1;
                        // A head that lags by more than one bucket is resynchronised from the
                        // newest bucket instead of walked one bucket per round.
                        if *count >= 2 {
                            let newest = self
                                .backend
                                .retry("read newest bucket", || self.newest_bucket(&owner))
                                .await?;
                            if let Some((sequence, _)) = newest {
                                next_target.sequence = next_target.sequence.max(sequence);
                            }
                        }
                        targets.insert(owner.clone(), next_target);
                        moved.push((owner.clone(), next_target));
                        next.push(owner);
                    }
                    Some(bucket) => pushes.push(Push {
                        stamp: stamp(entry.sent, later(target.floor, bucket.last_sent)),
                        existing: Some(bucket.id.clone()),
                        owner,
                    }),
                    None => pushes.push(Push {
                        stamp: stamp(entry.sent, target.floor),
                        existing: None,
                        owner,
                    }),
                }
            }
            if !moved.is_empty() {
                self.advance_heads(&moved).await?;
            }
            if !pushes.is_empty() {
                let (suspects, transient) = self.push_by_id(&pushes, &targets, entry).await?;
                for index in suspects {
                    let push = &pushes[index];
                    if push.existing.is_none() {
                        by_key.insert(push.owner.clone());
                    }
                    next.push(push.owner.clone());
                }
                if let Some(error) = transient {
                    backoff.wait(error).await?;
                }
            }
            if next.is_empty() {
                return Ok(blocked);
            }
            pending = next;
        }
        Err(Error::contention("bucketed send", MAX_ROUNDS))
    }

    /// The target bucket of each of `owners`, read by its derived `_id`; for the owners in
    /// `by_key` that it misses, also by `{owner, sequence}` (a bucket opened before `_id`s were
    /// derived, found by one `find` that only a failed push can cost).
    async fn read_targets(
        &self,
        owners: &[String],
        targets: &HashMap<String, Target>,
        entry: &Entry<'_>,
        by_key: &HashSet<String>,
    ) -> Result<HashMap<String, Found>> {
        let projection = doc! { "owner": 1, "count": 1, "messages.id": 1, LAST_SENT: 1 };
        let keys: Vec<(Bson, Document)> = owners
            .iter()
            .map(|owner| {
                let sequence = targets[owner].sequence;
                (
                    Bson::String(bucket_id(owner, sequence)),
                    doc! { "owner": owner, "sequence": sequence },
                )
            })
            .collect();
        let mut buckets = self
            .backend
            .find_by_ids(&self.buckets, &keys, projection.clone())
            .await?;
        let seen: HashSet<&str> = buckets
            .iter()
            .filter_map(|bucket| bucket.get_str("owner").ok())
            .collect();
        let older: Vec<Bson> = owners
            .iter()
            .filter(|owner| by_key.contains(*owner) && !seen.contains(owner.as_str()))
            .map(|owner| {
                Bson::Document(doc! { "owner": owner, "sequence": targets[owner].sequence })
            })
            .collect();
        if !older.is_empty() {
            let found: Vec<Document> = self
                .buckets
                .find(doc! { "$or": older })
                .projection(projection)
                .await?
                .try_collect()
                .await?;
            buckets.extend(found);
        }
        Ok(buckets
            .into_iter()
            .filter_map(|bucket| {
                let owner = bucket.get_str("owner").ok()?.to_owned();
                let found = Found {
                    id: bucket.get("_id")?.clone(),
                    count: integer(&bucket, "count").unwrap_or(0),
                    holds: holds(&bucket, entry.id),
                    last_sent: date(&bucket, LAST_SENT),
                };
                Some((owner, found))
            })
            .collect())
    }

    /// Pushes each of `pushes` into its recipient's target bucket, addressed by `_id`, opening
    /// the bucket where it does not exist. Returns the pushes to check again (by index: their
    /// command failed, or a new bucket's key was taken) and the transient failure to back off
    /// on, if any.
    ///
    /// The statements carry no guard, so they are not idempotent by themselves: safe because
    /// the caller holds the recipients' locks and read their buckets just before, and because
    /// a statement whose fate is unknown is reported, never sent again.
    async fn push_by_id(
        &self,
        pushes: &[Push],
        targets: &HashMap<String, Target>,
        entry: &Entry<'_>,
    ) -> Result<(Vec<usize>, Option<Error>)> {
        let mut batch = self
            .backend
            .update_batch(self.buckets.name())
            .report_unknown();
        for push in pushes {
            let sequence = targets[&push.owner].sequence;
            let shard_key = doc! { "owner": &push.owner, "sequence": sequence };
            let id = push
                .existing
                .clone()
                .unwrap_or_else(|| Bson::String(bucket_id(&push.owner, sequence)));
            let filter = self.backend.by_id(id, &shard_key).await?;
            let mut stamped = entry.document.clone();
            stamped.insert("sent", push.stamp);
            // A muted sender's entry is hidden as it lands, and counted as such.
            let counted = if targets[&push.owner].muted {
                stamped.insert(Filter::Mute.field(), true);
                doc! { "count": 1_i64, "hidden": 1_i64 }
            } else {
                doc! { "count": 1_i64, "unread": 1_i64 }
            };
            let mut update = doc! {
                "$push": { "messages": stamped },
                "$inc": counted,
                "$max": { LAST_SENT: push.stamp },
            };
            // A new bucket takes its owner and sequence from the filter where it names them.
            let on_insert: Document = shard_key
                .into_iter()
                .filter(|(field, _)| !filter.contains_key(field))
                .collect();
            if !on_insert.is_empty() {
                update.insert("$setOnInsert", on_insert);
            }
            batch.push(filter, update, true)?;
        }
        let outcome = batch.run().await?;
        Ok((outcome.suspects().collect(), outcome.transient))
    }
}
