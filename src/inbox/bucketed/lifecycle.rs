//! The lifecycle of a bucketed inbox: the owner's state on each entry, counters per bucket.
//!
//! Each entry carries its owner's flags (`read`, `starred`, `muted`, `blocked`) and, once
//! deleted or retracted, `gone` (the payload and recipients are dropped; `id`, `from` and
//! `sent` stay, so a repeat finds its work done). Each bucket counts its visible unread entries
//! (`unread`) and the entries pages skip (`hidden`), changed in the same atomic update as the
//! entries they count: a push adds `unread: 1` (or `hidden: 1` for a muted sender), and every
//! lifecycle write below moves both by what it changed. So counts are exact under any
//! concurrency, and never negative: the unread count sums `unread` over the owner's full buckets
//! that have any (one `find` of a partial index) and the newest bucket (one `find` by `_id`, at
//! the same time), [`InboxStore::count`] sums `count - hidden` over the owner's buckets (one
//! `find` of a range of `_id`).
//!
//! A write finds its buckets by `_id`: the owner's range of it (an entry of the owner's, looked
//! for newest bucket first), or, for the sender's retract and edit, the range of each recipient
//! from the bucket the message's record says it went to or after.
//!
//! Entries are never moved: a write addresses one by its index in the bucket
//! (`messages.7.read`), so positions, pages and cursors stay as they were, and no positional
//! (`$`) or array-filter update is needed (FerretDB 1.x has neither). Every write is a round of
//! [`Buckets::converge`]: read the buckets concerned (one `find`, flags only), compute each
//! bucket's change from what was read, and send all of them in one `update` command, each
//! statement guarded by the bucket's revision as read (`rev`, incremented by each of these
//! writes). A statement whose bucket changed meanwhile matches nothing; the round is then read
//! and computed again, and what is already done drops out. The same holds after a lost reply:
//! a resent statement no longer matches its revision, and the next read finds the work done. So
//! a write costs 2 commands when nothing races it, and never applies twice. Pushes do not
//! change `rev`: they only append, and their `$inc` commutes with the lifecycle's.
//!
//! Where updates are not atomic (FerretDB 1.x), each write holds its owners' locks (the same
//! ones a send to them takes), so rounds never race.

use std::sync::atomic::{AtomicI64, Ordering};

use super::{owner_buckets, owner_from_hex, BucketedFanOut, Buckets, MAX_ROUNDS, PLACED};
use crate::bson_ext::integer;
use crate::inbox::filters::FilterLists;
use crate::inbox::lifecycle::{
    message_not_found, not_sender, Filter, InboxLifecycle, Retention, UpTo,
};
use crate::inbox::{cursor, validate, MessageId, Payload};
use crate::{Error, Result};
use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;

/// An entry's tombstone mark: `"deleted"` (by its owner) or `"retracted"` (by its sender).
const GONE: &str = "gone";

/// Whether pages show a stored entry: not a tombstone, not from a muted or blocked sender.
pub(in crate::inbox) fn shown(entry: &Document) -> bool {
    !entry.contains_key(GONE)
        && !flag(entry, Filter::Mute.field())
        && !flag(entry, Filter::Block.field())
}

fn flag(entry: &Document, name: &str) -> bool {
    entry.get_bool(name).unwrap_or(false)
}

/// What a lifecycle write reads of an entry.
#[derive(Clone, Debug, Default)]
struct Seen {
    index: usize,
    id: Option<ObjectId>,
    from: String,
    read: bool,
    starred: bool,
    gone: bool,
    muted: bool,
    blocked: bool,
}

impl Seen {
    fn parse(index: usize, entry: &Document) -> Self {
        Self {
            index,
            id: entry.get_object_id("id").ok(),
            from: entry.get_str("from").unwrap_or_default().to_owned(),
            read: flag(entry, "read"),
            starred: flag(entry, "starred"),
            gone: entry.contains_key(GONE),
            muted: flag(entry, Filter::Mute.field()),
            blocked: flag(entry, Filter::Block.field()),
        }
    }

    fn visible(&self) -> bool {
        !self.gone && !self.muted && !self.blocked
    }

    /// Whether the bucket's `unread` counts it.
    fn counted_unread(&self) -> bool {
        self.visible() && !self.read
    }

    fn is(&self, id: MessageId) -> bool {
        self.id == Some(id.0)
    }
}

/// A bucket as a lifecycle write reads it.
#[derive(Debug)]
struct Bucket {
    owner: String,
    sequence: i64,
    rev: Option<i64>,
    entries: Vec<Seen>,
    /// The entries as read, for an edit's size check (read without payloads).
    stored: Vec<Document>,
}

impl Bucket {
    fn parse(mut document: Document) -> Self {
        let stored: Vec<Document> = match document.remove("messages") {
            Some(Bson::Array(entries)) => entries
                .into_iter()
                .map(|entry| match entry {
                    Bson::Document(entry) => entry,
                    _ => Document::new(),
                })
                .collect(),
            _ => Vec::new(),
        };
        Self {
            owner: document.get_str("owner").unwrap_or_default().to_owned(),
            sequence: integer(&document, "sequence").unwrap_or(0),
            rev: integer(&document, "rev"),
            entries: stored
                .iter()
                .enumerate()
                .map(|(index, entry)| Seen::parse(index, entry))
                .collect(),
            stored,
        }
    }
}

/// How much of the buckets a round reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// The entries' ids, senders and flags.
    Flags,
    /// Everything but the payloads (an edit's size check).
    WithoutPayloads,
}

impl Read {
    fn projection(self) -> Document {
        match self {
            Read::Flags => doc! {
                "owner": 1, "sequence": 1, "rev": 1,
                "messages.id": 1, "messages.from": 1, "messages.read": 1,
                "messages.starred": 1, "messages.gone": 1, "messages.muted": 1,
                "messages.blocked": 1,
            },
            Read::WithoutPayloads => doc! { "messages.message": 0, "last_sent": 0 },
        }
    }
}

/// What a write does to each entry it selects.
#[derive(Clone, Debug)]
enum Op {
    Read(bool),
    Star(bool),
    Gone(&'static str),
    Filter(Filter, bool),
    Edit(Bson, bson::DateTime),
}

/// One bucket's change: its entries' fields, and its counters.
#[derive(Debug, Default)]
struct Change {
    set: Document,
    unset: Document,
    unread: i64,
    hidden: i64,
}

impl Change {
    fn set(&mut self, index: usize, field: &str, value: impl Into<Bson>) {
        self.set
            .insert(format!("messages.{index}.{field}"), value.into());
    }

    fn unset(&mut self, index: usize, field: &str) {
        self.unset.insert(format!("messages.{index}.{field}"), "");
    }

    /// Moves the counters by what turning `before` into `after` changed.
    fn recount(&mut self, before: &Seen, after: &Seen) {
        self.unread += i64::from(after.counted_unread()) - i64::from(before.counted_unread());
        self.hidden += i64::from(!after.visible()) - i64::from(!before.visible());
    }

    fn is_empty(&self) -> bool {
        self.set.is_empty() && self.unset.is_empty()
    }

    /// Applies `op` to the entry `seen` (nothing when it is done already).
    fn apply(&mut self, op: &Op, seen: &Seen) {
        let mut after = seen.clone();
        let i = seen.index;
        match op {
            Op::Read(read) if seen.read != *read && !seen.gone => {
                after.read = *read;
                if *read {
                    self.set(i, "read", true);
                } else {
                    self.unset(i, "read");
                }
            }
            Op::Star(starred) if seen.starred != *starred && !seen.gone => {
                if *starred {
                    self.set(i, "starred", true);
                } else {
                    self.unset(i, "starred");
                }
            }
            Op::Gone(reason) if !seen.gone => {
                after.gone = true;
                after.read = false;
                self.set(i, GONE, *reason);
                for field in ["message", "to", "to_count", "read", "starred"] {
                    self.unset(i, field);
                }
            }
            Op::Filter(filter, on) => {
                let field = filter.field();
                let current = match filter {
                    Filter::Mute => &mut after.muted,
                    Filter::Block => &mut after.blocked,
                };
                if *current == *on {
                    return;
                }
                *current = *on;
                if *on {
                    self.set(i, field, true);
                } else {
                    self.unset(i, field);
                }
            }
            Op::Edit(payload, edited) if !seen.gone => {
                self.set(i, "message", payload.clone());
                self.set(i, "edited", *edited);
            }
            _ => return,
        }
        self.recount(seen, &after);
    }

    /// The guarded statement: `{q, u}` for `bucket`, as read.
    fn statement(self, bucket: &Bucket) -> (Document, Document) {
        let mut filter = doc! {
            "_id": super::bucket_id(&bucket.owner, bucket.sequence),
            "owner": &bucket.owner,
            "sequence": bucket.sequence,
        };
        match bucket.rev {
            Some(rev) => filter.insert("rev", rev),
            None => filter.insert("rev", doc! { "$exists": false }),
        };
        let mut inc = doc! { "rev": 1_i64 };
        if self.unread != 0 {
            inc.insert("unread", self.unread);
        }
        if self.hidden != 0 {
            inc.insert("hidden", self.hidden);
        }
        let mut update = doc! { "$inc": inc };
        if !self.set.is_empty() {
            update.insert("$set", self.set);
        }
        if !self.unset.is_empty() {
            update.insert("$unset", self.unset);
        }
        (filter, update)
    }
}

/// Which entries of which buckets a write changes, and what it checks first.
struct Write<'a> {
    /// The buckets to read.
    filter: Document,
    read: Read,
    /// Fails the write, before anything is written, from what a round read.
    check: &'a (dyn Fn(&[Bucket]) -> Result<()> + Send + Sync),
    /// Whether the write changes this entry of this bucket.
    select: &'a (dyn Fn(&Bucket, &Seen) -> bool + Send + Sync),
    op: Op,
}

impl Buckets {
    /// The buckets `filter` selects, read as `read` says: one `find`.
    async fn read_buckets(&self, filter: &Document, read: Read) -> Result<Vec<Bucket>> {
        let found: Vec<Document> = self
            .buckets
            .find(filter.clone())
            .projection(read.projection())
            .batch_size(1000)
            .await?
            .try_collect()
            .await?;
        Ok(found.into_iter().map(Bucket::parse).collect())
    }

    /// Runs `write` in rounds until every change it computes has landed (see the module docs):
    /// one `find` and one `update` per round, usually one round.
    async fn converge(&self, write: &Write<'_>) -> Result<()> {
        for _ in 0..MAX_ROUNDS {
            // A read: retried freely.
            let buckets = self
                .backend
                .retry("read buckets", || {
                    self.read_buckets(&write.filter, write.read)
                })
                .await?;
            (write.check)(&buckets)?;
            let mut batch = self.backend.update_batch(self.buckets.name());
            let mut planned = 0_u64;
            for bucket in &buckets {
                let mut change = Change::default();
                for seen in &bucket.entries {
                    if (write.select)(bucket, seen) {
                        change.apply(&write.op, seen);
                    }
                }
                if !change.is_empty() {
                    let (filter, update) = change.statement(bucket);
                    batch.push(filter, update, false)?;
                    planned += 1;
                }
            }
            if planned == 0 {
                return Ok(());
            }
            // Each statement is guarded by its bucket's revision: resent after a lost reply, it
            // matches nothing, and the next round finds its change made.
            let outcome = batch.run().await?;
            if outcome.matched >= planned && outcome.unknown.is_empty() {
                return Ok(());
            }
        }
        Err(Error::contention("bucketed lifecycle", MAX_ROUNDS))
    }

    /// Runs `write` on `owner`'s buckets, holding `owner`'s lock where updates are not atomic.
    async fn converge_owner(&self, owner: &str, write: &Write<'_>) -> Result<()> {
        self.backend
            .exclusive_one(owner, self.converge(write))
            .await
    }

    /// Runs `write` (whose filter names what each bucket must hold) on every recipient's
    /// buckets of message `id`, found through its record: each recipient's buckets from the one
    /// the record says its entry went to or after. Holds the recipients' locks where updates are
    /// not atomic, a round of them at a time. Unknown (no record, or no entry) is
    /// [`Error::NotFound`].
    async fn converge_message(&self, id: MessageId, write: &Write<'_>) -> Result<()> {
        let record = self
            .backend
            .retry("read message record", || async {
                Ok(self
                    .recipients
                    .collection()
                    .find_one(doc! { "_id": id.0 })
                    .projection(doc! { PLACED: 1 })
                    .await?)
            })
            .await?
            .ok_or_else(|| message_not_found(id))?;
        let mut recipients: Vec<(String, i64)> = record
            .get_document(PLACED)
            .map(|placed| {
                placed
                    .keys()
                    .filter_map(|hex| Some((owner_from_hex(hex)?, integer(placed, hex)?)))
                    .collect()
            })
            .unwrap_or_default();
        if recipients.is_empty() {
            return Err(message_not_found(id));
        }
        recipients.sort();
        let owners: Vec<String> = recipients.iter().map(|(owner, _)| owner.clone()).collect();
        let first: std::collections::HashMap<&str, i64> = recipients
            .iter()
            .map(|(owner, first)| (owner.as_str(), *first))
            .collect();
        let (first, found_any) = (&first, &std::sync::atomic::AtomicBool::new(false));
        self.backend
            .exclusive_in_rounds(&owners, |taken| async move {
                let ranges: Vec<Bson> = taken
                    .iter()
                    .map(|owner| Bson::Document(owner_buckets(owner, first[owner.as_str()], None)))
                    .collect();
                let mut filter = write.filter.clone();
                filter.insert("$or", ranges);
                let write = Write {
                    filter,
                    read: write.read,
                    check: write.check,
                    select: write.select,
                    op: write.op.clone(),
                };
                match self.converge(&write).await {
                    Err(error) if error.is_not_found() => Ok(()),
                    Ok(()) => {
                        found_any.store(true, std::sync::atomic::Ordering::Relaxed);
                        Ok(())
                    }
                    Err(error) => Err(error),
                }
            })
            .await?;
        if found_any.load(std::sync::atomic::Ordering::Relaxed) {
            Ok(())
        } else {
            Err(message_not_found(id))
        }
    }

    /// Applies `op` to `owner`'s entry of message `id`. Unknown to `owner` (or, unless
    /// `gone_is_found`, deleted or retracted) is [`Error::NotFound`].
    async fn change_entry(
        &self,
        owner: &str,
        id: MessageId,
        op: Op,
        gone_is_found: bool,
    ) -> Result<()> {
        validate::check_user_id("owner", owner)?;
        let check = move |buckets: &[Bucket]| {
            let found = buckets
                .iter()
                .flat_map(|b| &b.entries)
                .any(|seen| seen.is(id) && (gone_is_found || !seen.gone));
            if found {
                Ok(())
            } else {
                Err(message_not_found(id))
            }
        };
        let select = move |_: &Bucket, seen: &Seen| seen.is(id);
        let mut filter = owner_buckets(owner, 0, None);
        filter.insert("messages.id", id.0);
        let write = Write {
            filter,
            read: Read::Flags,
            check: &check,
            select: &select,
            op,
        };
        self.converge_owner(owner, &write).await
    }

    /// The `count` and `unread` of the buckets `filter` selects (the newest `limit` of them, by
    /// `_id`, when given): one `find`, retried.
    async fn read_counts(&self, filter: Document, limit: Option<i64>) -> Result<Vec<Document>> {
        self.backend
            .retry("read counts", || async {
                let mut find = self
                    .buckets
                    .find(filter.clone())
                    .projection(doc! { "_id": 0, "count": 1, "unread": 1 })
                    .batch_size(100_000);
                if let Some(limit) = limit {
                    find = find.sort(doc! { "_id": -1 }).limit(limit);
                }
                Ok(find.await?.try_collect().await?)
            })
            .await
    }

    /// How many messages `owner`'s inbox shows: `count - hidden` summed over its buckets (one
    /// `find` of those two fields).
    pub(super) async fn count(&self, owner: &str) -> Result<u64> {
        validate::check_user_id("owner", owner)?;
        let buckets: Vec<Document> = self
            .buckets
            .find(owner_buckets(owner, 0, None))
            .projection(doc! { "_id": 0, "count": 1, "hidden": 1 })
            .batch_size(100_000)
            .await?
            .try_collect()
            .await?;
        Ok(buckets
            .iter()
            .map(|b| (integer(b, "count").unwrap_or(0) - integer(b, "hidden").unwrap_or(0)).max(0))
            .sum::<i64>() as u64)
    }
}

/// Fails with [`Error::NotFound`] when no bucket holds message `id`, with [`Forbidden::NotSender`](crate::error::Forbidden::NotSender)
/// when `sender` did not send it.
fn check_sender(buckets: &[Bucket], sender: &str, id: MessageId) -> Result<()> {
    let mut entries = buckets
        .iter()
        .flat_map(|b| &b.entries)
        .filter(|seen| seen.is(id))
        .peekable();
    if entries.peek().is_none() {
        return Err(message_not_found(id));
    }
    if entries.any(|seen| seen.from != sender) {
        return Err(not_sender(sender, id));
    }
    Ok(())
}

#[async_trait]
impl<P: Payload> InboxLifecycle<P> for BucketedFanOut<P> {
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
        validate::check_user_id("owner", owner)?;
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
    /// Every bucket but the newest is full.
    async fn unread_count(&self, owner: &str) -> Result<u64> {
        validate::check_user_id("owner", owner)?;
        let buckets = &self.buckets;
        let unread = |found: Vec<Document>| {
            found
                .iter()
                .map(|b| integer(b, "unread").unwrap_or(0).max(0))
                .sum::<i64>() as u64
        };
        let size = i64::from(buckets.bucket_size);
        // Every bucket but the newest is full: the full ones still counting unread messages
        // (by the partial index on `owner`, which no push into the newest bucket maintains;
        // by the owner's `_id` range where the server has no partial indexes), and the newest.
        let mut full = if buckets.backend.capabilities().await?.partial_indexes {
            doc! { "owner": owner }
        } else {
            owner_buckets(owner, 0, None)
        };
        full.insert("count", doc! { "$gte": size });
        full.insert("unread", doc! { "$gt": 0_i64 });
        let newest = owner_buckets(owner, 0, None);
        let (full, newest) = futures::future::try_join(
            buckets.read_counts(full, None),
            buckets.read_counts(newest, Some(1)),
        )
        .await?;
        let newest = newest
            .into_iter()
            .filter(|bucket| integer(bucket, "count").unwrap_or(0) < size)
            .collect();
        Ok(unread(full) + unread(newest))
    }

    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        self.buckets
            .change_entry(owner, id, Op::Gone("deleted"), true)
            .await
    }

    /// Tombstones the message's entry in every bucket holding it (one `find` of its record, one
    /// `find` of its recipients' buckets from where it went, one `update`), positions unchanged.
    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        validate::check_user_id("sender", sender)?;
        let check = move |buckets: &[Bucket]| check_sender(buckets, sender, id);
        let select = move |_: &Bucket, seen: &Seen| seen.is(id);
        let write = Write {
            filter: doc! { "messages.id": id.0 },
            read: Read::Flags,
            check: &check,
            select: &select,
            op: Op::Gone("retracted"),
        };
        self.buckets.converge_message(id, &write).await
    }

    /// Replaces the payload in every entry of the message (one `find` of its record, one `find`
    /// of its recipients' buckets read without payloads for the size check, one `update`).
    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        validate::check_user_id("sender", sender)?;
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
        let select = move |_: &Bucket, seen: &Seen| seen.is(id);
        let write = Write {
            filter: doc! { "messages.id": id.0 },
            read: Read::WithoutPayloads,
            check: &check,
            select: &select,
            op: Op::Edit(payload, edited),
        };
        self.buckets.converge_message(id, &write).await?;
        Ok(edited)
    }

    /// The owner's list on their heads document (one `update`), then the flag on the sender's
    /// entries in their buckets (one `find`, one `update`).
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        validate::check_user_id("owner", owner)?;
        validate::check_user_id("sender", sender)?;
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
        validate::check_user_id("owner", owner)?;
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
        let buckets = self
            .buckets
            .backend
            .retry("prune", || async {
                Ok(self
                    .buckets
                    .buckets
                    .delete_many(filter.clone())
                    .await?
                    .deleted_count)
            })
            .await?;
        // Every bucket but the newest is full.
        Ok(buckets * size as u64)
    }
}
