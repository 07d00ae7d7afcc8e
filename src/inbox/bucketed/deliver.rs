//! Delivery into buckets: heads read, the message recorded, guarded pushes in rounds, full
//! buckets checked and heads moved.

use super::*;

/// Where a recipient's next push goes: the bucket, and the earliest `sent` it may carry there
/// (the newest `sent` of the bucket before it, or of a later message seen in it); and whether
/// the recipient mutes the sender (the entry goes in hidden).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Target {
    sequence: i64,
    floor: Option<bson::DateTime>,
    muted: bool,
}

/// A message entry on its way into buckets: the document, its id, and the `sent` it carries
/// unless a bucket holds a later one.
#[derive(Clone, Copy, Debug)]
struct Entry<'a> {
    document: &'a Document,
    id: MessageId,
    sent: bson::DateTime,
    from: &'a str,
}

/// What [`BucketedFanOut::inspect`] saw of a target bucket.
#[derive(Clone, Copy, Debug)]
struct Seen {
    count: i64,
    holds: bool,
    last_sent: Option<bson::DateTime>,
}

/// Whether `bucket` (read with `messages.id`) holds message `id`.
fn holds(bucket: &Document, id: MessageId) -> bool {
    bucket.get_array("messages").is_ok_and(|messages| {
        messages
            .iter()
            .any(|m| matches!(m, Bson::Document(m) if m.get_object_id("id") == Ok(id.0)))
    })
}

/// The `sent` a push of a message sent at `sent` carries to a target with `floor`.
fn stamp(sent: bson::DateTime, floor: Option<bson::DateTime>) -> bson::DateTime {
    floor.map_or(sent, |floor| floor.max(sent))
}

/// A bucket's sequence and count (0 where missing).
pub(super) fn sequence_and_count(bucket: &Document) -> (i64, i64) {
    (
        integer(bucket, "sequence").unwrap_or(0),
        integer(bucket, "count").unwrap_or(0),
    )
}

impl Buckets {
    /// The fields `projection` names of `owner`'s newest bucket: one `find` of one document.
    pub(super) async fn newest_of(
        &self,
        owner: &str,
        projection: Document,
    ) -> Result<Option<Document>> {
        Ok(self
            .buckets
            .find_one(owner_buckets(owner, 0, None))
            .sort(doc! { "_id": -1 })
            .projection(projection)
            .await?)
    }

    /// The sequence and count of `owner`'s newest bucket: one `find` of one document.
    pub(super) async fn newest_bucket(&self, owner: &str) -> Result<Option<(i64, i64)>> {
        let projection = doc! { "_id": 0, "sequence": 1, "count": 1 };
        let newest = self.newest_of(owner, projection).await?;
        Ok(newest.as_ref().map(sequence_and_count))
    }

    /// The largest encoded message this store accepts.
    pub(super) fn max_message_bytes(&self) -> usize {
        (MAX_DOCUMENT_BYTES - BUCKET_OVERHEAD) / self.bucket_size as usize - 16
    }

    /// How many buckets hold the newest `limit` messages at most.
    pub(super) fn buckets_for(&self, limit: usize) -> usize {
        1 + (limit.saturating_sub(1)).div_ceil(self.bucket_size as usize)
    }

    /// Pushes `message` to every one of `recipients` but those who block its sender (returned).
    ///
    /// Reads the recipients' heads (one `find`), records the message with where it goes
    /// ([`Buckets::record`], one `update`), then delivers in rounds of guarded pushes
    /// ([`Buckets::deliver`]). Where updates are not atomic the rounds hold the recipients'
    /// locks, 50 recipients at a time; elsewhere all go at once.
    pub(super) async fn deliver_entry<P: Payload>(
        &self,
        message: &Message<P>,
        recipients: Vec<String>,
    ) -> Result<Vec<String>> {
        let mut entry = message.to_document()?;
        let to = entry.get("to").cloned().unwrap_or(Bson::Array(Vec::new()));
        // The list in the entry, or only in the record; the record always keeps it.
        self.recipients.share(&mut entry, message.id)?;
        validate::check_message_size(&entry, self.max_message_bytes())?;
        let entry = Entry {
            document: &entry,
            id: message.id,
            sent: message.sent,
            from: &message.from,
        };
        let (targets, blocked, pending) = self.sort_recipients(recipients, &entry).await?;
        if pending.is_empty() {
            return Ok(blocked);
        }
        self.record(message, to, &targets).await?;
        let (entry, targets) = (&entry, &targets);
        self.backend
            .exclusive_in_rounds(&pending, |taken| async move {
                self.deliver(taken, targets.clone(), entry).await
            })
            .await?;
        Ok(blocked)
    }

    /// Records `message` before its entries land: `{_id: message id, from, sent, to, placed}`,
    /// where `placed.<owner in hex>` is a bucket at or before the one the owner's entry goes to
    /// (their head as read), for recipients in `to` and those a later
    /// [`deliver`](InboxStore::deliver) adds alike. One `update`, upserting; `$min` keeps the earliest bucket a retry
    /// or another delivery names, so every entry stays at or after it.
    async fn record<P>(
        &self,
        message: &Message<P>,
        to: Bson,
        targets: &HashMap<String, Target>,
    ) -> Result<()> {
        let placed: Document = targets
            .iter()
            .map(|(recipient, target)| {
                (
                    format!("{PLACED}.{}", owner_hex(recipient)),
                    Bson::Int64(target.sequence),
                )
            })
            .collect();
        let filter = doc! { "_id": message.id.0 };
        let mut update = doc! {
            "$setOnInsert": { "from": &message.from, "sent": message.sent, "to": to },
        };
        if !placed.is_empty() {
            update.insert("$min", placed);
        }
        let records = self.recipients.collection();
        self.backend
            .command("record message", || {
                records
                    .update_one(filter.clone(), update.clone())
                    .upsert(true)
            })
            .await
            .map(drop)
    }

    /// The recipients whose buckets from their head back by one already hold message `id` (one
    /// `find` of heads, one `find` of a range of buckets per recipient), and those who block
    /// `sender`.
    pub(super) async fn holders(
        &self,
        id: MessageId,
        sender: &str,
        recipients: &[String],
    ) -> Result<(std::collections::HashSet<String>, Vec<String>)> {
        let names: Vec<&str> = recipients.iter().map(String::as_str).collect();
        let (heads, blocked) = self.read_heads(&names, sender).await?;
        let clauses: Vec<Bson> = heads
            .iter()
            .map(|(owner, head)| Bson::Document(owner_buckets(owner, head.sequence - 1, None)))
            .collect();
        let found: Vec<Document> = self
            .buckets
            .find(doc! { "$or": clauses, "messages.id": id.0 })
            .projection(doc! { "owner": 1 })
            .await?
            .try_collect()
            .await?;
        let holders = found
            .iter()
            .filter_map(|bucket| bucket.get_str("owner").ok().map(str::to_owned))
            .collect();
        Ok((holders, blocked))
    }

    /// Delivers `entry` to every one of `pending`, each to the bucket `targets` names: the
    /// pushes in one round of guarded updates (one `update` where updates are atomic), and for
    /// recipients whose bucket was full or held a later message, a check and another round.
    ///
    /// A push whose command failed transiently is never sent again blindly: its recipients are
    /// checked like any other suspect (the check reads whether their bucket holds the message),
    /// after a backoff under the store's [`RetryPolicy`](crate::retry::RetryPolicy).
    async fn deliver(
        &self,
        mut pending: Vec<String>,
        mut targets: HashMap<String, Target>,
        entry: &Entry<'_>,
    ) -> Result<()> {
        let mut moves: HashMap<String, u32> = HashMap::new();
        let mut backoff = Backoff::new(self.backend.retry_policy(), "deliver to buckets");
        for _ in 0..MAX_ROUNDS {
            let pushes: Vec<GuardedUpdate> = pending
                .iter()
                .map(|owner| self.push(owner, targets[owner], entry))
                .collect();
            let pushed = self.backend.guarded_updates(&self.buckets, &pushes).await?;
            if pushed.suspects.is_empty() {
                return Ok(());
            }
            if let Some(error) = pushed.transient {
                backoff.wait(error).await?;
            }
            let suspects: Vec<String> = pushed
                .suspects
                .iter()
                .map(|&index| pending[index].clone())
                .collect();
            let (waiting, mut moved) = self
                .backend
                .retry("check buckets", || self.inspect(&suspects, &targets, entry))
                .await?;
            let mut pending_next = Vec::with_capacity(waiting.len());
            for (owner, target) in waiting {
                targets.insert(owner.clone(), target);
                pending_next.push(owner);
            }
            for (owner, target) in &mut moved {
                let count = moves.entry(owner.clone()).or_default();
                *count += 1;
                // A head that lags by more than one bucket (its update was lost to a race) is
                // resynchronised from the newest bucket instead of walked one bucket per round.
                if *count >= 2 {
                    let newest = self
                        .backend
                        .retry("read newest bucket", || self.newest_bucket(owner))
                        .await?;
                    if let Some((sequence, _)) = newest {
                        if sequence > target.sequence {
                            // The floor stays: every bucket after the one it came from holds
                            // later messages.
                            target.sequence = sequence;
                            targets.insert(owner.clone(), *target);
                        }
                    }
                }
            }
            if !moved.is_empty() {
                self.advance_heads(&moved).await?;
            }
            if pending_next.is_empty() {
                return Ok(());
            }
            pending = pending_next;
        }
        Err(Error::contention("bucketed send", MAX_ROUNDS))
    }

    /// The heads of `recipients` (read under the retry policy), and the recipients parted into
    /// those who block the entry's sender and those it goes to.
    async fn sort_recipients(
        &self,
        recipients: Vec<String>,
        entry: &Entry<'_>,
    ) -> Result<(HashMap<String, Target>, Vec<String>, Vec<String>)> {
        let names: Vec<&str> = recipients.iter().map(String::as_str).collect();
        let (targets, blocked) = self
            .backend
            .retry("read heads", || self.read_heads(&names, entry.from))
            .await?;
        let (blocked, pending) = recipients
            .into_iter()
            .partition(|recipient| blocked.contains(recipient));
        Ok((targets, blocked, pending))
    }

    /// Each recipient's newest bucket, from the heads collection (bucket 0 when unknown), with
    /// the newest `sent` of the bucket before it and whether the recipient mutes `sender`; and
    /// the recipients who block `sender`.
    async fn read_heads(
        &self,
        recipients: &[&str],
        sender: &str,
    ) -> Result<(HashMap<String, Target>, Vec<String>)> {
        let mut heads: HashMap<String, Target> = recipients
            .iter()
            .map(|r| (r.to_string(), Target::default()))
            .collect();
        let found: Vec<Document> = self
            .heads
            .find(doc! { "_id": { "$in": recipients } })
            .batch_size(recipients.len() as u32 + 1)
            .await?
            .try_collect()
            .await?;
        let mut blocked = Vec::new();
        for head in found {
            let Ok(owner) = head.get_str("_id") else {
                continue;
            };
            if filters::lists(&head, Filter::Block, sender) {
                blocked.push(owner.to_owned());
            }
            let target = Target {
                sequence: integer(&head, "head").unwrap_or(0),
                floor: date(&head, FLOOR),
                muted: filters::lists(&head, Filter::Mute, sender),
            };
            heads.insert(owner.to_owned(), target);
        }
        Ok((heads, blocked))
    }

    /// The push of `entry` into `owner`'s bucket `target`: opening the bucket if it does not
    /// exist (by its `_id`), never past `bucket_size` and never below a later `sent` (the
    /// guards), with `sent` raised to the target's floor.
    fn push(&self, owner: &str, target: Target, entry: &Entry<'_>) -> GuardedUpdate {
        let stamp = stamp(entry.sent, target.floor);
        let mut stamped = entry.document.clone();
        stamped.insert("sent", stamp);
        // A muted sender's entry is hidden as it lands, and counted as such.
        let counted = if target.muted {
            stamped.insert(Filter::Mute.field(), true);
            doc! { "count": 1_i64, "hidden": 1_i64 }
        } else {
            doc! { "count": 1_i64, "unread": 1_i64 }
        };
        GuardedUpdate {
            id: Bson::String(bucket_id(owner, target.sequence)),
            shard_key: doc! { "owner": owner, "sequence": target.sequence },
            guards: vec![
                Guard::Below("count", i64::from(self.bucket_size)),
                // Never below a later message: position order is `sent` order.
                Guard::InOrder {
                    array: "messages",
                    stamp: "sent",
                    newest: LAST_SENT,
                    at: stamp,
                },
                // Never a second entry in one bucket: a repeated delivery finds it here.
                Guard::Lacks {
                    array: "messages",
                    field: "id",
                    value: Bson::ObjectId(entry.id.0),
                },
            ],
            update: doc! {
                "$push": { "messages": stamped },
                "$inc": counted,
                "$max": { LAST_SENT: stamp },
            },
            upsert: true,
        }
    }

    /// Looks at the target bucket of each suspect (one `find` by `_id`). Returns the recipients
    /// still waiting for the message, each with the target to try next, and the heads that
    /// moved. Changes nothing, so it is retried freely.
    ///
    /// A recipient's next push is raised to the newest `sent` of the full bucket it leaves, or,
    /// when a later message reached a bucket with room first, to now.
    async fn inspect(
        &self,
        suspects: &[String],
        targets: &HashMap<String, Target>,
        entry: &Entry<'_>,
    ) -> Result<(Vec<(String, Target)>, Vec<(String, Target)>)> {
        let (id, entry_sent) = (entry.id, entry.sent);
        let keys: Vec<(Bson, Document)> = suspects
            .iter()
            .map(|owner| {
                let sequence = targets[owner].sequence;
                (
                    Bson::String(bucket_id(owner, sequence)),
                    doc! { "owner": owner, "sequence": sequence },
                )
            })
            .collect();
        let buckets = self
            .backend
            .find_by_ids(
                &self.buckets,
                &keys,
                doc! { "owner": 1, "count": 1, "messages.id": 1, LAST_SENT: 1 },
            )
            .await?;
        let mut seen: HashMap<String, Seen> = HashMap::with_capacity(buckets.len());
        for bucket in &buckets {
            let Ok(owner) = bucket.get_str("owner") else {
                continue;
            };
            seen.insert(
                owner.to_owned(),
                Seen {
                    count: integer(bucket, "count").unwrap_or(0),
                    holds: holds(bucket, id),
                    last_sent: date(bucket, LAST_SENT),
                },
            );
        }
        let mut waiting = Vec::new();
        let mut moved = Vec::new();
        for owner in suspects {
            let target = targets[owner];
            match seen.get(owner) {
                Some(Seen { holds: true, .. }) => {}
                Some(bucket) if bucket.count >= self.bucket_size as i64 => {
                    let next = Target {
                        sequence: target.sequence + 1,
                        floor: later(target.floor, bucket.last_sent),
                        ..target
                    };
                    moved.push((owner.clone(), next));
                    waiting.push((owner.clone(), next));
                }
                // With room: a later message got there first, or this sender did not reach it.
                Some(bucket) => {
                    let mut next = target;
                    if bucket.last_sent > Some(stamp(entry_sent, target.floor)) {
                        // Raised to now, not just to the newest time seen: senders that
                        // stamped between the two would otherwise keep landing first.
                        next.floor = Some(now_or_after(later(target.floor, bucket.last_sent)));
                    }
                    waiting.push((owner.clone(), next));
                }
                // Missing: opened by another sender meanwhile, or not reached by this one.
                None => waiting.push((owner.clone(), target)),
            }
        }
        Ok((waiting, moved))
    }

    /// Records moved heads, each with the newest `sent` of the bucket before it. Heads and
    /// floors only move forward (`$max`), so concurrent senders agree.
    async fn advance_heads(&self, moved: &[(String, Target)]) -> Result<()> {
        let mut batch = self.backend.update_batch(self.heads.name());
        for (owner, head) in moved {
            let mut max = doc! { "head": head.sequence };
            if let Some(floor) = head.floor {
                max.insert(FLOOR, floor);
            }
            batch.push(doc! { "_id": owner }, doc! { "$max": max }, true)?;
        }
        // A duplicate key here is a concurrent first upsert of the same head: it is only a hint.
        batch.run().await?;
        Ok(())
    }
}
