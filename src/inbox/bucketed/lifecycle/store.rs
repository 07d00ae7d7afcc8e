//! [`InboxLifecycle`] for [`BucketedFanOut`].

use super::*;
use crate::inbox::engine::LifecycleEngine;

#[async_trait]
impl<P: Payload> LifecycleEngine<P> for BucketedFanOut<P> {
    async fn mark_read(&self, owner: &str, id: MessageId) -> Result<()> {
        self.buckets
            .change_entry(owner, id, Op::Read(true), false)
            .await
    }

    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()> {
        self.buckets
            .change_entry(owner, id, Op::Read(false), false)
            .await
    }

    async fn set_starred(&self, owner: &str, id: MessageId, starred: bool) -> Result<()> {
        self.buckets
            .change_entry(owner, id, Op::Star(starred), false)
            .await
    }

    /// Marks the visible unread entries at or below the point, in the owner's buckets that have
    /// any (`unread > 0`): one `find` and one `update` command; a [`UpTo::Message`] first finds
    /// the message's position (one `find`).
    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()> {
        let size = self.buckets.bucket_size as u64;
        // The point, as (sequence, index); -1 until known (`Newest`: from the first read).
        let point = (AtomicI64::new(-1), AtomicI64::new(-1));
        match up_to {
            UpTo::Newest => {}
            UpTo::Cursor(after) => {
                let position = cursor::position(&after, owner)?;
                point.0.store((position / size) as i64, Ordering::Relaxed);
                point.1.store((position % size) as i64, Ordering::Relaxed);
            }
            UpTo::Message(id) => {
                let mut filter = owner_buckets(owner, 0, None);
                filter.insert("messages.id", id.0);
                let found = self.buckets.read_buckets(&filter, Read::Flags).await?;
                let (sequence, index) = found
                    .iter()
                    .find_map(|bucket| {
                        let seen = bucket.entries.iter().find(|s| s.is(id) && !s.gone)?;
                        Some((bucket.sequence, seen.index as i64))
                    })
                    .ok_or_else(|| message_not_found(id))?;
                point.0.store(sequence, Ordering::Relaxed);
                point.1.store(index, Ordering::Relaxed);
            }
        }
        let point = &point;
        let check = move |buckets: &[Bucket]| {
            if point.0.load(Ordering::Relaxed) < 0 {
                // `Newest`: everything there at the first read, and nothing that lands after.
                let newest = buckets.iter().max_by_key(|b| b.sequence);
                let (sequence, index) = newest.map_or((i64::MAX, i64::MAX), |b| {
                    (b.sequence, b.entries.len() as i64 - 1)
                });
                point.1.store(index, Ordering::Relaxed);
                point.0.store(sequence, Ordering::Relaxed);
            }
            Ok(())
        };
        let select = move |bucket: &Bucket, seen: &Seen| {
            let (sequence, index) = (
                point.0.load(Ordering::Relaxed),
                point.1.load(Ordering::Relaxed),
            );
            seen.visible()
                && (bucket.sequence < sequence
                    || (bucket.sequence == sequence && seen.index as i64 <= index))
        };
        let sequence = point.0.load(Ordering::Relaxed);
        let mut filter = owner_buckets(owner, 0, (sequence >= 0).then_some(sequence));
        filter.insert("unread", doc! { "$gt": 0 });
        let write = Write {
            filter,
            read: Read::Flags,
            check: &check,
            select: &select,
            op: Op::Read(true),
        };
        self.buckets.converge_owner(owner, &write).await
    }

    /// `unread` summed over the owner's buckets: where the server has partial indexes, the full
    /// buckets that have any (one `find` of the partial index) and the newest bucket (one `find`
    /// of one bucket by `_id`), at the same time; elsewhere one `find` of the owner's buckets.
    /// Every bucket but the newest is full. Under a `cap`, at most `cap` full buckets are
    /// read, the newest first, in the partial index's order (named in a hint where the server
    /// needs one, [`Dialect::names_ordered_indexes`]): each counts at least one unread message.
    ///
    /// [`Dialect::names_ordered_indexes`]: crate::backend::dialect::Dialect::names_ordered_indexes
    async fn unread_count(&self, owner: &str, cap: Option<u64>) -> Result<u64> {
        let buckets = &self.buckets;
        let dialect = buckets.backend.dialect().await?;
        let unread = |found: Vec<Document>| {
            found
                .iter()
                .map(|b| integer(b, "unread").unwrap_or(0).max(0))
                .sum::<i64>() as u64
        };
        let size = i64::from(buckets.bucket_size);
        // Every bucket but the newest is full: the full ones still counting unread messages
        // (by the partial index on `{owner, sequence}`, which no push into the newest bucket
        // maintains; by the owner's `_id` range where the server has no partial indexes), and
        // the newest.
        let mut full =
            dialect.through_partial_index(doc! { "owner": owner }, owner_buckets(owner, 0, None));
        full.insert("count", doc! { "$gte": size });
        full.insert("unread", doc! { "$gt": 0_i64 });
        let hint = (cap.is_some() && dialect.names_ordered_indexes()).then_some(FULL_UNREAD_INDEX);
        if hint.is_some() {
            buckets.backend.ensure_indexes().await?;
        }
        let newest = owner_buckets(owner, 0, None);
        // The newest full buckets by the partial index's order; the newest bucket by `_id`.
        let newest_full = cap.map(|cap| (doc! { "sequence": -1 }, cap.min(i64::MAX as u64) as i64));
        let (full, newest) = futures::future::try_join(
            buckets.read_counts(full, newest_full, hint),
            buckets.read_counts(newest, Some((doc! { "_id": -1 }, 1)), None),
        )
        .await?;
        let newest = newest
            .into_iter()
            .filter(|bucket| integer(bucket, "count").unwrap_or(0) < size)
            .collect();
        let count = unread(full) + unread(newest);
        Ok(cap.map_or(count, |cap| count.min(cap)))
    }

    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        self.buckets
            .change_entry(owner, id, Op::Gone("deleted"), true)
            .await
    }

    /// Tombstones the message's entry in every bucket holding it (one `find` of its record, one
    /// `find` of its recipients' buckets from where it went, one `update`), positions unchanged.
    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        let check = move |buckets: &[Bucket]| check_sender(buckets, sender, id);
        let op = Op::Gone("retracted");
        self.buckets
            .converge_message(id, Read::Flags, &check, op)
            .await
    }

    /// Replaces the payload in every entry of the message (one `find` of its record, one `find`
    /// of its recipients' buckets read without payloads for the size check, one `update`).
    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        let edited = bson::DateTime::now();
        let payload = bson::to_bson(&payload)?;
        let limit = self.buckets.max_message_bytes();
        // The payload alone first, before any command; the entry with it once read.
        validate::check_message_size(&payload, limit)?;
        let check = {
            let payload = payload.clone();
            move |buckets: &[Bucket]| {
                check_sender(buckets, sender, id)?;
                let mut live = buckets.iter().flat_map(|bucket| {
                    bucket
                        .entries
                        .iter()
                        .filter(|seen| seen.is(id) && !seen.gone)
                        .map(|seen| &bucket.stored[seen.index])
                });
                let Some(entry) = live.next() else {
                    return Err(message_not_found(id));
                };
                let mut entry = entry.clone();
                entry.insert("message", payload.clone());
                entry.insert("edited", edited);
                validate::check_message_size(&entry, limit)?;
                Ok(())
            }
        };
        let op = Op::Edit(payload, edited);
        self.buckets
            .converge_message(id, Read::WithoutPayloads, &check, op)
            .await?;
        Ok(edited)
    }

    /// The owner's list on their heads document (one `update`), then the flag on the sender's
    /// entries in their buckets (one `find`, one `update`).
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        let lists = FilterLists::new(self.buckets.heads.clone());
        let check = |_: &[Bucket]| Ok(());
        let select = move |_: &Bucket, seen: &Seen| seen.from == sender;
        let mut buckets_of_sender = owner_buckets(owner, 0, None);
        buckets_of_sender.insert("messages.from", sender);
        let write = Write {
            filter: buckets_of_sender,
            read: Read::Flags,
            check: &check,
            select: &select,
            op: Op::Filter(filter, on),
        };
        let work = async {
            lists
                .set(&self.buckets.backend, owner, sender, filter, on)
                .await?;
            self.buckets.converge(&write).await
        };
        self.buckets.backend.exclusive_one(owner, work).await
    }

    fn retention(&self) -> Retention {
        self.buckets.retention
    }

    /// One `find` of the newest bucket, one `delete_many` of the whole buckets before it that
    /// hold only messages past `keep_newest` or older than `max_age`. The newest bucket always
    /// stays: the next message goes there, at the next position. Retried: deleting twice deletes
    /// once.
    async fn prune(&self, owner: &str) -> Result<u64> {
        let retention = self.buckets.retention;
        if retention.is_unbounded() {
            return Ok(0);
        }
        let Some((newest, count)) = self.buckets.newest_bucket(owner).await? else {
            return Ok(0);
        };
        let size = i64::from(self.buckets.bucket_size);
        let mut dropped = Vec::new();
        if let Some(keep) = retention.newest() {
            let total = newest * size + count;
            let keep = i64::try_from(keep).unwrap_or(i64::MAX);
            if total > keep {
                // Bucket s holds positions [s * size, (s + 1) * size).
                dropped.push(doc! { "sequence": { "$lt": (total - keep) / size } });
            }
        }
        if let Some(cutoff) = retention.cutoff() {
            dropped.push(doc! { "last_sent": { "$lt": cutoff } });
        }
        if dropped.is_empty() {
            return Ok(0);
        }
        let mut filter = owner_buckets(owner, 0, Some(newest - 1));
        filter.insert("$or", dropped);
        let deleted = self
            .buckets
            .backend
            .command("prune", || self.buckets.buckets.delete_many(filter.clone()))
            .await?;
        // Every bucket but the newest is full.
        Ok(deleted.deleted_count * size as u64)
    }
}
