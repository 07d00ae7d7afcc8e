//! Moving a bucketed inbox ([`InboxTransfer`]): an owner's bucket entries in position order.
//!
//! An import appends: it fills the owner's newest bucket and opens full ones after it, every
//! bucket but the newest full, as sends leave them, with each message's record (`placed`, for
//! retract and edit) written first. It expects to be the owner's only writer meanwhile (a
//! migration's copy holds the owner while it runs); a repeat after a lost reply finds its
//! entries in the newest bucket and leaves them, and a bucket it opened already there.

use std::collections::HashSet;

use super::deliver::sequence_and_count;
use super::*;
use crate::inbox::engine::TransferEngine;
use crate::inbox::held::{Gone, HeldMessage};
use crate::inbox::transfer::held_in_groups;
use futures::stream::BoxStream;

/// An entry of a bucket as the owner holds it.
fn held(collection: &str, entry: &Document) -> Result<HeldMessage> {
    let flag = |name: &str| entry.get_bool(name).unwrap_or(false);
    let mut message = HeldMessage::from_document(collection, entry, "id")?;
    message.read = flag("read");
    message.starred = flag("starred");
    message.muted = flag(Filter::Mute.field());
    message.blocked = flag(Filter::Block.field());
    message.gone = entry.get_str("gone").ok().map(Gone::from_name);
    Ok(message)
}

/// The entries of `bucket`, taken out of it.
fn entries_of(mut bucket: Document) -> Vec<Document> {
    match bucket.remove("messages") {
        Some(Bson::Array(entries)) => entries
            .into_iter()
            .filter_map(|entry| match entry {
                Bson::Document(entry) => Some(entry),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The entry a bucket keeps of `message`, with the owner's state.
fn entry(message: &HeldMessage) -> Document {
    let mut entry = message.message_document();
    match message.gone {
        Some(gone) => {
            entry.insert("gone", gone.name());
        }
        None => {
            if message.read {
                entry.insert("read", true);
            }
            if message.starred {
                entry.insert("starred", true);
            }
        }
    }
    if message.muted {
        entry.insert(Filter::Mute.field(), true);
    }
    if message.blocked {
        entry.insert(Filter::Block.field(), true);
    }
    entry
}

/// What `messages` add to a bucket's counters: `(unread, hidden)`.
fn counted(messages: &[&HeldMessage]) -> (i64, i64) {
    let unread = messages.iter().filter(|m| m.is_shown() && !m.read).count();
    let hidden = messages.iter().filter(|m| !m.is_shown()).count();
    (unread as i64, hidden as i64)
}

/// The owner's newest bucket as an import finds it.
struct NewestBucket {
    /// Whether the owner has any bucket.
    exists: bool,
    sequence: i64,
    count: i64,
    /// The messages it already holds: a repeated import leaves them.
    present: HashSet<bson::oid::ObjectId>,
}

/// Messages grouped by the bucket sequence they go to, in order.
type Placement<'a> = Vec<(i64, Vec<&'a HeldMessage>)>;

/// Where each of `fresh` goes: the newest bucket (`sequence`, holding `count`) until it is full,
/// then new ones of `bucket_size`; with the sequence of the last bucket used.
fn place(
    fresh: Vec<&HeldMessage>,
    mut sequence: i64,
    mut count: i64,
    bucket_size: u32,
) -> (Placement<'_>, i64) {
    let size = i64::from(bucket_size);
    let mut placed: Placement<'_> = Vec::new();
    for message in fresh {
        if count >= size {
            sequence += 1;
            count = 0;
        }
        match placed.last_mut() {
            Some((at, group)) if *at == sequence => group.push(message),
            _ => placed.push((sequence, vec![message])),
        }
        count += 1;
    }
    (placed, sequence)
}

impl Buckets {
    /// One `find` of the owner's newest bucket: its sequence, count and message ids.
    async fn newest_for_import(&self, owner: &str) -> Result<NewestBucket> {
        let projection = doc! { "sequence": 1, "count": 1, "messages.id": 1 };
        let newest = self.newest_of(owner, projection).await?;
        let (sequence, count) = newest.as_ref().map_or((0, 0), sequence_and_count);
        let present = newest
            .as_ref()
            .and_then(|bucket| bucket.get_array("messages").ok())
            .map(|entries| {
                entries
                    .iter()
                    .filter_map(|entry| entry.as_document()?.get_object_id("id").ok())
                    .collect()
            })
            .unwrap_or_default();
        Ok(NewestBucket {
            exists: newest.is_some(),
            sequence,
            count,
            present,
        })
    }

    /// One `update` of the placed messages' records: retract and edit find every entry through
    /// them, so they are written before the entries.
    async fn import_records(&self, owner: &str, placed: &Placement<'_>) -> Result<()> {
        let hex = owner_hex(owner);
        let mut records = self
            .backend
            .update_batch(self.recipients.collection().name());
        for (at, group) in placed {
            for message in group {
                records.push(
                    doc! { "_id": message.id.0 },
                    doc! {
                        "$setOnInsert": { "from": &message.from, "sent": message.sent, "to": &message.to },
                        "$min": { format!("{PLACED}.{hex}"): *at },
                    },
                    true,
                )?;
            }
        }
        records.run().await?;
        Ok(())
    }

    /// Fills the newest bucket (one `update` guarded by its count) and inserts the buckets
    /// opened after it (one `insert`): the newest `sent` of the bucket before the head, or `None`
    /// when the newest bucket changed meanwhile and the import must read it again.
    async fn import_entries(
        &self,
        owner: &str,
        newest: &NewestBucket,
        placed: &Placement<'_>,
        sequence: i64,
    ) -> Result<Option<Option<bson::DateTime>>> {
        let mut opened = Vec::new();
        // The newest `sent` of the bucket before the head, for a push that opens the next.
        let mut floor = None;
        for (at, group) in placed {
            let mut entries = Vec::with_capacity(group.len());
            for message in group {
                let mut entry = entry(message);
                // A long list rides in the record (written above), not in every bucket.
                self.recipients.share(&mut entry, message.id)?;
                entries.push(Bson::Document(entry));
            }
            let newest_sent = group.iter().map(|m| m.sent).max();
            if *at < sequence {
                floor = newest_sent.or(floor);
            }
            let (unread, hidden) = counted(group);
            if *at == newest.sequence && newest.exists {
                let filter =
                    doc! { "_id": bucket_id(owner, *at), "owner": owner, "count": newest.count };
                let update = doc! {
                    "$push": { "messages": { "$each": entries } },
                    "$inc": { "count": group.len() as i64, "unread": unread, "hidden": hidden },
                    "$max": { LAST_SENT: newest_sent },
                };
                if !self.import_into_newest(filter, update).await? {
                    return Ok(None);
                }
            } else {
                opened.push(doc! {
                    "_id": bucket_id(owner, *at),
                    "owner": owner,
                    "sequence": *at,
                    "count": group.len() as i64,
                    "unread": unread,
                    "hidden": hidden,
                    LAST_SENT: newest_sent,
                    "messages": entries,
                });
            }
        }
        if !opened.is_empty() {
            self.backend.insert_many_once(&self.buckets, opened).await?;
        }
        Ok(Some(floor))
    }

    /// One `update` of the newest bucket (retried): whether it matched.
    async fn import_into_newest(&self, filter: Document, update: Document) -> Result<bool> {
        let result = self
            .backend
            .command("import into bucket", || {
                self.buckets.update_one(filter.clone(), update.clone())
            })
            .await?;
        Ok(result.matched_count != 0)
    }

    /// One `update` raising the owner's head to `sequence` (and its floor).
    async fn import_head(
        &self,
        owner: &str,
        sequence: i64,
        floor: Option<bson::DateTime>,
    ) -> Result<()> {
        let mut max = doc! { "head": sequence };
        if let Some(floor) = floor {
            max.insert(FLOOR, floor);
        }
        self.backend
            .command("import head", || {
                self.heads
                    .update_one(doc! { "_id": owner }, doc! { "$max": max.clone() })
                    .upsert(true)
            })
            .await
            .map(drop)
    }
}

#[async_trait]
impl<P: Payload> TransferEngine<P> for BucketedFanOut<P> {
    /// One `aggregate` grouping the buckets by owner.
    async fn owners(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        crate::inbox::transfer::distinct_owners(&self.buckets.buckets, "owner", false, after).await
    }

    /// One `find` of the owner's buckets by `_id` (position order), read in batches, with one
    /// `find` of shared lists per bucket holding entries that have one.
    async fn export(&self, owner: &str) -> Result<BoxStream<'_, Result<HeldMessage>>> {
        let buckets = &self.buckets;
        let cursor = buckets
            .buckets
            .find(owner_buckets(owner, 0, None))
            .sort(doc! { "_id": 1 })
            .projection(doc! { "messages": 1 })
            .await?;
        let entries = cursor.map_err(Error::from).map_ok(entries_of);
        let collection = buckets.buckets.name();
        Ok(held_in_groups(
            entries,
            &buckets.recipients,
            collection,
            held,
        ))
    }

    /// One `find` of the owner's newest bucket; one `update` of the messages' records; one
    /// `update` filling the newest bucket (guarded by its count) and one `insert` of the full
    /// buckets after it; one `update` of the owner's head.
    async fn import(&self, owner: &str, messages: &[HeldMessage]) -> Result<()> {
        let buckets = &self.buckets;
        let newest = buckets.newest_for_import(owner).await?;
        let fresh: Vec<&HeldMessage> = messages
            .iter()
            .filter(|message| !newest.present.contains(&message.id.0))
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let (placed, sequence) = place(fresh, newest.sequence, newest.count, buckets.bucket_size);
        // The records first: retract and edit find every entry through them.
        buckets.import_records(owner, &placed).await?;
        let Some(floor) = buckets
            .import_entries(owner, &newest, &placed, sequence)
            .await?
        else {
            // Another writer (or a lost reply's first attempt) changed it: read again.
            return Box::pin(TransferEngine::<P>::import(self, owner, messages)).await;
        };
        if sequence > 0 {
            buckets.import_head(owner, sequence, floor).await?;
        }
        Ok(())
    }

    /// One `delete_many` of the owner's buckets and one `delete_one` of their head (and lists).
    /// The messages' records keep where the owner's entries were: harmless, a retract or edit
    /// finds nothing there.
    async fn purge(&self, owner: &str) -> Result<()> {
        let buckets = &self.buckets;
        buckets
            .backend
            .retry("purge owner", || async {
                buckets
                    .buckets
                    .delete_many(owner_buckets(owner, 0, None))
                    .await?;
                buckets.heads.delete_one(doc! { "_id": owner }).await?;
                Ok(())
            })
            .await
    }

    async fn purge_all(&self) -> Result<()> {
        let buckets = &self.buckets;
        crate::inbox::transfer::delete_all(
            &buckets.backend,
            &[
                &buckets.buckets,
                &buckets.heads,
                buckets.recipients.collection(),
            ],
        )
        .await
    }

    async fn is_empty(&self) -> Result<bool> {
        crate::inbox::transfer::holds_nothing(&self.buckets.buckets).await
    }

    async fn send_stamped(
        &self,
        message: &Message<P>,
        recipients: &[String],
    ) -> Result<Vec<String>> {
        self.buckets
            .deliver_entry(message, recipients.to_vec())
            .await
    }
}
