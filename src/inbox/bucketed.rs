//! Fan out on write with buckets: each recipient's messages grouped into time-ordered documents.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

use super::recipient_lists::RecipientLists;
use super::{
    cursor, validate, InboxStore, Message, MessageId, NewMessage, Payload, Strategy,
    MAX_DOCUMENT_BYTES,
};
use crate::backend::Exclusive;
use crate::bson_ext::{date, integer, later, now_or_after};
use crate::indexes::Indexes;
use crate::retry::{retry, Backoff};
use crate::server::Capabilities;
use crate::sharding::ShardKey;
use crate::update_batch::UpdateBatch;
use crate::{Error, Page, PageRequest, Result, RetryPolicy};

/// Rounds of delivery a send tries before giving up with [`Error::Contention`]. A round only
/// repeats for recipients whose bucket filled or appeared while the round ran.
const MAX_ROUNDS: usize = 32;
/// Bytes of a bucket not available to messages: owner, sequence, count, field names.
const BUCKET_OVERHEAD: usize = 4096;
/// How long a recipient lock lasts if its holder dies.
const LOCK_LEASE: Duration = Duration::from_secs(30);
/// A bucket's newest `sent`: a push never puts an older one after it.
const LAST_SENT: &str = "last_sent";
/// A head's floor: the newest `sent` of the bucket before the head, for a push that opens it.
const FLOOR: &str = "floor";

/// Where a recipient's next push goes: the bucket, and the earliest `sent` it may carry there
/// (the newest `sent` of the bucket before it, or of a later message seen in it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Target {
    sequence: i64,
    floor: Option<bson::DateTime>,
}

/// A message entry on its way into buckets: the document, its id, and the `sent` it carries
/// unless a bucket holds a later one.
#[derive(Clone, Copy, Debug)]
struct Entry<'a> {
    document: &'a Document,
    id: MessageId,
    sent: bson::DateTime,
}

/// What [`BucketedFanOut::inspect`] saw of a target bucket.
#[derive(Clone, Copy, Debug)]
struct Seen {
    count: i64,
    holds: bool,
    last_sent: Option<bson::DateTime>,
}

/// What one round of pushes left to check: the recipients whose push must be looked at, and the
/// transient failure to back off on first, if one left some of them unknown.
struct Pushed {
    suspects: Vec<String>,
    transient: Option<Error>,
}

/// The `sent` a push of a message sent at `sent` carries to a target with `floor`.
fn stamp(sent: bson::DateTime, floor: Option<bson::DateTime>) -> bson::DateTime {
    floor.map_or(sent, |floor| floor.max(sent))
}

/// Fan out on write with buckets: each recipient's inbox is a run of documents holding up to
/// `bucket_size` messages (default 50), oldest bucket first.
///
/// Collections (names configurable):
/// - `inbox_buckets`: `{owner, sequence, count, last_sent, messages: [..]}`, unique index
///   `{owner: 1, sequence: 1}`, shard key `{owner: 1, sequence: 1}`;
/// - `inbox_heads`: `{_id: owner, head, floor}`, the seed's `users` collection, holding the
///   sequence of each owner's newest bucket and the newest `sent` of the bucket before it (a
///   hint: a stale head costs a retry, never a wrong result);
/// - `inbox_recipients`: `{_id: message id, to: [..]}`, the recipient list of each message sent
///   to more than [`BucketedFanOutBuilder::max_inline_recipients`] users (100 by default),
///   stored once, written before the entries, which carry `to_count` instead of `to`; otherwise a
///   message to N users would put N names in each of N buckets. A page holding such messages
///   takes one more `find` to put their lists back.
///
/// # How it improves on the seed
/// - **Hard cap.** A message is pushed only into a bucket whose `count` is below the size, in the
///   same atomic update, so no bucket ever holds more than `bucket_size` messages. A new bucket is
///   opened only after the previous one was seen full, so every bucket but the newest is full
///   and a message's position in its inbox is `sequence * bucket_size + index`: counting is one
///   read and pages are exact keyset pages.
/// - **Commands that do not grow with N.** The seed costs a `findAndModify` and an update per
///   recipient. Here a send reads all recipients' heads in one `find` and pushes to every
///   recipient in one unordered `update` command (split only above 10,000 recipients or 8 MiB):
///   2 commands. When some recipients' buckets are full, one `find` checks them, one `update`
///   moves their heads, and one more `update` delivers: 5 commands, whatever N is.
/// - **No off-by-one.** The seed's first bucket holds 49 messages (`floor(count / 50)` with counts
///   starting at 1); here every bucket holds exactly `bucket_size`.
///
/// # Order
///
/// An inbox reads in arrival order, newest first, and each entry's `sent` says when the message
/// reached that inbox, so `sent` never increases down the inbox. Each bucket keeps `last_sent`,
/// its newest `sent`, and a push carries the message's `sent` only if no later one is in the
/// bucket (`last_sent` not after it, in the same atomic update that claims the position, which
/// also moves `last_sent` up with `$max`); otherwise the push fails, the check that follows reads
/// `last_sent`, and the next round carries the later of that time and now. A bucket is opened with a `sent`
/// no earlier than the newest of the bucket before it (kept on the head, `floor`). Without
/// concurrent senders to an inbox, every entry carries the time the message was sent; under
/// contention the raise is the time between stamping and storing, milliseconds.
///
/// Reading the newest 50 messages is one `find` of at most 2 buckets; the newest 100, at most 3.
///
/// # Servers without atomic updates
///
/// On FerretDB 1.x a single-document update is not atomic, so the hard cap alone cannot keep
/// concurrent senders from overwriting each other. There ([`Capabilities::atomic_updates`] is
/// false) each delivery first locks its recipients in `inbox_locks` (one `insert` of
/// `{_id: owner, token, expires}`; the unique `_id` is atomic everywhere) and unlocks them after
/// (one `delete`). A lock whose holder died is taken over after a 30-second lease; each locked
/// delivery covers at most one `update` command's worth of recipients, so it ends well inside the
/// lease. Lease times come from the senders' clocks, which are assumed to agree within seconds.
///
/// # Setup and failures
///
/// Run [`BucketedFanOut::create_indexes`] at startup: the unique `{owner, sequence}` index is
/// what turns a push into a full bucket into a detectable conflict, so a store that was not told
/// to create it creates it before its first write (once per store and its clones). A send that fails
/// part-way (server unreachable, [`Error::Contention`]) may have reached some recipients; the
/// error is returned and the deliveries already made stay.
///
/// A message must fit a bucket: its encoded size is limited to about `16 MiB / bucket_size`
/// (about 335 KB for 50), checked before anything is written ([`Error::TooLarge`]).
/// The bucket size is part of the stored layout: reopen a collection with the size it was written
/// with.
#[derive(Clone, Debug)]
pub struct BucketedFanOut {
    database: Database,
    buckets: Collection<Document>,
    heads: Collection<Document>,
    /// Recipients' writers, taking turns where updates are not atomic.
    exclusive: Exclusive,
    recipients: RecipientLists,
    bucket_size: u32,
    indexes: Indexes,
    retry: RetryPolicy,
}

/// Configures a [`BucketedFanOut`] store.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct BucketedFanOutBuilder {
    database: Database,
    buckets: String,
    heads: String,
    locks: String,
    recipients: String,
    max_inline: usize,
    bucket_size: u32,
    retry: RetryPolicy,
}

impl BucketedFanOutBuilder {
    /// Messages per bucket (default 50).
    pub fn bucket_size(mut self, size: u32) -> Self {
        self.bucket_size = size;
        self
    }

    /// How transient failures are retried (default [`RetryPolicy::default`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The buckets collection (default `inbox_buckets`).
    pub fn collection(mut self, name: impl Into<String>) -> Self {
        self.buckets = name.into();
        self
    }

    /// The collection of per-owner heads (default `inbox_heads`).
    pub fn heads_collection(mut self, name: impl Into<String>) -> Self {
        self.heads = name.into();
        self
    }

    /// The collection of recipient locks, used only on servers without atomic updates
    /// (default `inbox_locks`).
    pub fn locks_collection(mut self, name: impl Into<String>) -> Self {
        self.locks = name.into();
        self
    }

    /// The collection of recipient lists too long to store in every entry (default
    /// `inbox_recipients`).
    pub fn recipients_collection(mut self, name: impl Into<String>) -> Self {
        self.recipients = name.into();
        self
    }

    /// The longest recipient list stored in every bucket entry (default 100); a longer one is
    /// stored once, in the recipients collection. 0 stores every list once.
    pub fn max_inline_recipients(mut self, max: usize) -> Self {
        self.max_inline = max;
        self
    }

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a bucket size of 0 or above
    /// [`BucketedFanOut::MAX_BUCKET_SIZE`], an unusable collection name, or two collections
    /// given the same name.
    pub fn build(self) -> Result<BucketedFanOut> {
        if self.bucket_size == 0 || self.bucket_size > BucketedFanOut::MAX_BUCKET_SIZE {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "bucket size must be 1..={}, not {}",
                    BucketedFanOut::MAX_BUCKET_SIZE,
                    self.bucket_size
                ),
            });
        }
        super::check_collection_names(
            &[&self.buckets, &self.heads, &self.locks, &self.recipients],
            "buckets, heads, locks and recipients",
        )?;
        Ok(BucketedFanOut::with(
            &self.database,
            [&self.buckets, &self.heads, &self.locks],
            RecipientLists::new(self.database.collection(&self.recipients), self.max_inline),
            self.bucket_size,
            self.retry,
        ))
    }
}

impl BucketedFanOut {
    /// How many messages `owner` has received: every bucket but the newest is full, so one read
    /// of the newest bucket is enough.
    pub async fn count(&self, owner: &str) -> Result<u64> {
        validate::check_user_id("owner", owner)?;
        Ok(self
            .newest_bucket(owner)
            .await?
            .map_or(0, |(sequence, count)| {
                sequence as u64 * self.bucket_size as u64 + count as u64
            }))
    }

    /// The sequence and count of `owner`'s newest bucket: one `find` of one document.
    async fn newest_bucket(&self, owner: &str) -> Result<Option<(i64, i64)>> {
        let newest = self
            .buckets
            .find_one(doc! { "owner": owner })
            .sort(doc! { "sequence": -1 })
            .projection(doc! { "_id": 0, "sequence": 1, "count": 1 })
            .await?;
        Ok(newest.map(|bucket| {
            (
                integer(&bucket, "sequence").unwrap_or(0),
                integer(&bucket, "count").unwrap_or(0),
            )
        }))
    }

    /// Creates the indexes the strategy needs (idempotent, safe on every start). The unique
    /// `{owner, sequence}` index is what keeps a bucket from being opened twice, so a store that
    /// was not told to create it creates it before its first write.
    pub async fn create_indexes(&self) -> Result<()> {
        self.indexes.create().await
    }

    /// The shard key each of the strategy's collections should have.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::new(
                self.buckets.name(),
                doc! { "owner": 1, "sequence": 1 },
                "routes an inbox read to one shard; a long inbox may span two",
            ),
            ShardKey::new(
                self.heads.name(),
                doc! { "_id": 1 },
                "one small document per owner, read by id",
            ),
            ShardKey::new(
                self.recipients.name(),
                doc! { "_id": "hashed" },
                "long recipient lists, one per message, read by id",
            ),
        ]
    }

    /// The default number of messages per bucket, as in the seed.
    pub const DEFAULT_BUCKET_SIZE: u32 = 50;
    /// The largest bucket size accepted.
    pub const MAX_BUCKET_SIZE: u32 = 10_000;
    /// The default buckets collection name.
    pub const DEFAULT_COLLECTION: &'static str = "inbox_buckets";
    /// The default heads collection name.
    pub const DEFAULT_HEADS_COLLECTION: &'static str = "inbox_heads";
    /// The default locks collection name.
    pub const DEFAULT_LOCKS_COLLECTION: &'static str = "inbox_locks";

    /// A store with default settings in `database`.
    pub fn new(database: &Database) -> Self {
        Self::with(
            database,
            [
                Self::DEFAULT_COLLECTION,
                Self::DEFAULT_HEADS_COLLECTION,
                Self::DEFAULT_LOCKS_COLLECTION,
            ],
            RecipientLists::new(
                database.collection(RecipientLists::DEFAULT_COLLECTION),
                RecipientLists::DEFAULT_MAX_INLINE,
            ),
            Self::DEFAULT_BUCKET_SIZE,
            RetryPolicy::default(),
        )
    }

    /// A store over the `[buckets, heads, locks]` collections, checked already.
    fn with(
        database: &Database,
        [buckets, heads, locks]: [&str; 3],
        recipients: RecipientLists,
        bucket_size: u32,
        retry: RetryPolicy,
    ) -> Self {
        let buckets = database.collection(buckets);
        let unique = IndexModel::builder()
            .keys(doc! { "owner": 1, "sequence": 1 })
            .options(IndexOptions::builder().unique(true).build())
            .build();
        Self {
            indexes: Indexes::new().with(&buckets, unique),
            database: database.clone(),
            buckets,
            heads: database.collection(heads),
            exclusive: Exclusive::new(database, locks, LOCK_LEASE, retry),
            recipients,
            bucket_size,
            retry,
        }
    }

    /// Starts configuring a store in `database`.
    ///
    /// ```no_run
    /// # fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
    /// use mongo_social::BucketedFanOut;
    /// let store = BucketedFanOut::builder(&db).bucket_size(100).build()?;
    /// assert_eq!(store.bucket_size(), 100);
    /// assert!(BucketedFanOut::builder(&db).bucket_size(0).build().is_err());
    /// # Ok(()) }
    /// ```
    pub fn builder(database: &Database) -> BucketedFanOutBuilder {
        BucketedFanOutBuilder {
            database: database.clone(),
            buckets: Self::DEFAULT_COLLECTION.to_owned(),
            heads: Self::DEFAULT_HEADS_COLLECTION.to_owned(),
            locks: Self::DEFAULT_LOCKS_COLLECTION.to_owned(),
            recipients: RecipientLists::DEFAULT_COLLECTION.to_owned(),
            max_inline: RecipientLists::DEFAULT_MAX_INLINE,
            bucket_size: Self::DEFAULT_BUCKET_SIZE,
            retry: RetryPolicy::default(),
        }
    }

    /// Messages per bucket.
    pub fn bucket_size(&self) -> u32 {
        self.bucket_size
    }

    /// The largest encoded message this store accepts.
    pub fn max_message_bytes(&self) -> usize {
        (MAX_DOCUMENT_BYTES - BUCKET_OVERHEAD) / self.bucket_size as usize - 16
    }

    /// How many buckets hold the newest `limit` messages at most: the newest bucket may hold a
    /// single message, every older one is full.
    pub fn buckets_for(&self, limit: usize) -> usize {
        1 + (limit.saturating_sub(1)).div_ceil(self.bucket_size as usize)
    }

    /// Pushes `message` to every one of `recipients`, locking them where updates are not atomic.
    async fn deliver_entry<P: Payload>(
        &self,
        message: &Message<P>,
        recipients: Vec<String>,
    ) -> Result<()> {
        let mut entry = message.to_document()?;
        let list = self.recipients.share(&mut entry, message.id)?;
        validate::check_encoded_size(&entry, self.max_message_bytes())?;
        // The unique `{owner, sequence}` index is what turns a push into a full bucket into a
        // detectable conflict.
        self.indexes.ensure().await?;
        self.recipients.store(list, &self.retry).await?;
        let capabilities = self.exclusive.capabilities().await?;
        let entry = Entry {
            document: &entry,
            id: message.id,
            sent: message.sent,
        };
        // Where recipients are locked, a bounded round keeps each locked delivery to about one
        // `update` command, well inside the lease even on a slow server.
        let round = capabilities.max_update_statements.max(1);
        self.exclusive
            .in_rounds(&recipients, round, |taken| {
                self.deliver(taken, &entry, &capabilities)
            })
            .await
    }

    /// The recipients whose two newest buckets already hold message `id` (one `find` of heads,
    /// one `find` of at most two buckets per recipient).
    async fn holders(
        &self,
        id: MessageId,
        recipients: &[String],
    ) -> Result<std::collections::HashSet<String>> {
        let names: Vec<&str> = recipients.iter().map(String::as_str).collect();
        let heads = self.read_heads(&names).await?;
        let clauses: Vec<Bson> = heads
            .iter()
            .map(|(owner, head)| {
                Bson::Document(doc! { "owner": owner, "sequence": { "$gte": head.sequence - 1 } })
            })
            .collect();
        let found: Vec<Document> = self
            .buckets
            .find(doc! { "$or": clauses, "messages.id": id.0 })
            .projection(doc! { "owner": 1 })
            .await?
            .try_collect()
            .await?;
        Ok(found
            .iter()
            .filter_map(|bucket| bucket.get_str("owner").ok().map(str::to_owned))
            .collect())
    }

    /// Delivers `entry` to every recipient: heads in one `find`, pushes in one `update`, and for
    /// recipients whose bucket was full or contended, a check and another round.
    ///
    /// A push whose command failed transiently is never sent again blindly: its recipients are
    /// checked like any other suspect (the check reads whether their bucket holds the message),
    /// after a backoff under the store's [`RetryPolicy`]. The `messages.id $ne` guard of the push
    /// would make a resend harmless on MongoDB, but FerretDB 1.x evaluates it wrongly, and the
    /// check costs a `find` only when something failed.
    async fn deliver(
        &self,
        recipients: Vec<String>,
        entry: &Entry<'_>,
        capabilities: &Capabilities,
    ) -> Result<()> {
        let names: Vec<&str> = recipients.iter().map(String::as_str).collect();
        let mut targets = retry(&self.retry, "read heads", || self.read_heads(&names)).await?;
        let mut pending = recipients;
        let mut moves: HashMap<String, u32> = HashMap::new();
        let mut backoff = Backoff::new(&self.retry, "deliver to buckets");
        for _ in 0..MAX_ROUNDS {
            let pushed = self.push(&pending, &targets, entry, capabilities).await?;
            if pushed.suspects.is_empty() {
                return Ok(());
            }
            if let Some(error) = pushed.transient {
                backoff.wait(error).await?;
            }
            let (waiting, mut moved) = retry(&self.retry, "check buckets", || {
                self.inspect(&pushed.suspects, &targets, entry)
            })
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
                    let newest = retry(&self.retry, "read newest bucket", || {
                        self.newest_bucket(owner)
                    })
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
                self.advance_heads(&moved, capabilities).await?;
            }
            if pending_next.is_empty() {
                return Ok(());
            }
            pending = std::mem::take(&mut pending_next);
        }
        Err(Error::Contention {
            attempts: MAX_ROUNDS,
        })
    }

    /// Each recipient's newest bucket, from the heads collection (bucket 0 when unknown), with
    /// the newest `sent` of the bucket before it.
    async fn read_heads(&self, recipients: &[&str]) -> Result<HashMap<String, Target>> {
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
        for head in found {
            if let (Ok(owner), Some(sequence)) = (head.get_str("_id"), integer(&head, "head")) {
                let floor = date(&head, FLOOR);
                heads.insert(owner.to_owned(), Target { sequence, floor });
            }
        }
        Ok(heads)
    }

    /// Pushes `entry` into bucket `targets[r]` of each pending recipient `r`, opening the bucket
    /// if it does not exist and never past `bucket_size`, with `sent` raised to the target's
    /// floor and never below the bucket's `last_sent`. Returns the recipients whose push must be
    /// checked (their bucket was full, was opened by someone else meanwhile, or holds a later
    /// `sent`; or their push failed transiently and may or may not have landed).
    async fn push(
        &self,
        pending: &[String],
        targets: &HashMap<String, Target>,
        entry: &Entry<'_>,
        capabilities: &Capabilities,
    ) -> Result<Pushed> {
        let mut batch =
            UpdateBatch::new(&self.database, self.buckets.name(), &self.retry).report_unknown();
        for owner in pending {
            let target = targets[owner];
            let stamp = target
                .floor
                .map_or(entry.sent, |floor| floor.max(entry.sent));
            let mut stamped = entry.document.clone();
            stamped.insert("sent", stamp);
            batch.push(
                doc! {
                    "owner": owner,
                    "sequence": target.sequence,
                    "count": { "$lt": self.bucket_size as i64 },
                    // Never a second copy in one bucket: a retried delivery finds it here.
                    "messages.id": { "$ne": entry.id.0 },
                    // Never below a later message: position order is `sent` order.
                    LAST_SENT: { "$not": { "$gt": stamp } },
                },
                doc! {
                    "$push": { "messages": stamped },
                    "$inc": { "count": 1_i64 },
                    "$max": { LAST_SENT: stamp },
                },
                true,
            )?;
        }
        let outcome = batch.run(capabilities).await?;
        Ok(Pushed {
            suspects: outcome.suspects().map(|i| pending[i].clone()).collect(),
            transient: outcome.transient,
        })
    }

    /// Looks at the target bucket of each suspect. Returns the recipients still waiting for the
    /// message, each with the target to try next, and the heads that moved. Changes nothing, so
    /// it is retried freely.
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
        let clauses: Vec<Bson> = suspects
            .iter()
            .map(|owner| {
                Bson::Document(doc! { "owner": owner, "sequence": targets[owner].sequence })
            })
            .collect();
        let buckets: Vec<Document> = self
            .buckets
            .find(doc! { "$or": clauses })
            .projection(doc! {
                "owner": 1, "sequence": 1, "count": 1, "messages.id": 1, LAST_SENT: 1,
            })
            .batch_size(suspects.len() as u32 + 1)
            .await?
            .try_collect()
            .await?;
        let mut seen: HashMap<String, Seen> = HashMap::with_capacity(buckets.len());
        for bucket in &buckets {
            let Ok(owner) = bucket.get_str("owner") else {
                continue;
            };
            let holds = bucket.get_array("messages").is_ok_and(|messages| {
                messages
                    .iter()
                    .any(|m| matches!(m, Bson::Document(m) if m.get_object_id("id") == Ok(id.0)))
            });
            seen.insert(
                owner.to_owned(),
                Seen {
                    count: integer(bucket, "count").unwrap_or(0),
                    holds,
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
    async fn advance_heads(
        &self,
        moved: &[(String, Target)],
        capabilities: &Capabilities,
    ) -> Result<()> {
        let mut batch = UpdateBatch::new(&self.database, self.heads.name(), &self.retry);
        for (owner, head) in moved {
            let mut max = doc! { "head": head.sequence };
            if let Some(floor) = head.floor {
                max.insert(FLOOR, floor);
            }
            batch.push(doc! { "_id": owner }, doc! { "$max": max }, true)?;
        }
        // A duplicate key here is a concurrent first upsert of the same head: it is only a hint.
        batch.run(capabilities).await?;
        Ok(())
    }
}

#[async_trait]
impl<P: Payload> InboxStore<P> for BucketedFanOut {
    fn strategy(&self) -> Strategy {
        Strategy::BucketedFanOut
    }

    async fn send(&self, message: NewMessage<P>) -> Result<Message<P>> {
        validate::check_new_message(&message)?;
        let message = Message::stamp(message);
        let recipients = message.to.clone();
        self.deliver_entry(&message, recipients).await?;
        Ok(message)
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<()> {
        validate::check_recipients(recipients)?;
        let holders = self.holders(message.id, recipients).await?;
        let remaining: Vec<String> = recipients
            .iter()
            .filter(|recipient| !holders.contains(recipient.as_str()))
            .cloned()
            .collect();
        if remaining.is_empty() {
            return Ok(());
        }
        self.deliver_entry(message, remaining).await
    }

    fn max_message_bytes(&self) -> usize {
        BucketedFanOut::max_message_bytes(self)
    }

    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64> {
        validate::check_user_id("owner", owner)?;
        validate::check_user_id("sender", sender)?;
        Err(Error::NotSupported {
            feature: "removing messages from a bucketed inbox",
            reason: "every bucket but the newest is full, and positions (and cursors) depend on \
                     it; removing a message would shift them"
                .to_owned(),
        })
    }

    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        validate::check_page(owner, &page)?;
        let size = self.bucket_size as u64;
        let mut filter = doc! { "owner": owner };
        let before = match &page.after {
            Some(after) => {
                let position = cursor::position(after)?;
                filter.insert("sequence", doc! { "$lte": ((position - 1) / size) as i64 });
                Some(position)
            }
            None => None,
        };
        let wanted = self.buckets_for(page.limit);
        let buckets: Vec<Document> = self
            .buckets
            .find(filter)
            .sort(doc! { "sequence": -1 })
            .projection(doc! { "_id": 0, "sequence": 1, "messages": 1 })
            .limit(wanted as i64)
            .batch_size(wanted as u32)
            .await?
            .try_collect()
            .await?;

        let mut entries = Vec::with_capacity(page.limit);
        let mut last_position = None;
        'buckets: for mut bucket in buckets {
            let sequence = integer(&bucket, "sequence").unwrap_or(0) as u64;
            let Some(Bson::Array(messages)) = bucket.remove("messages") else {
                continue;
            };
            for (index, entry) in messages.into_iter().enumerate().rev() {
                let position = sequence * size + index as u64;
                if before.is_some_and(|before| position >= before) {
                    continue;
                }
                let Bson::Document(entry) = entry else {
                    continue;
                };
                entries.push(entry);
                last_position = Some(position);
                if entries.len() == page.limit {
                    break 'buckets;
                }
            }
        }
        self.recipients.restore(&mut entries, "id").await?;
        let items = entries
            .into_iter()
            .map(|entry| {
                let id = entry.get("id").cloned();
                crate::bson_ext::decode_with_id(self.buckets.name(), id, entry)
            })
            .collect::<Result<Vec<Message<P>>>>()?;
        let next = match last_position {
            Some(position) if position > 0 => Some(cursor::after_position(position)),
            _ => None,
        };
        Ok(Page { items, next })
    }

    async fn count(&self, owner: &str) -> Result<u64> {
        BucketedFanOut::count(self, owner).await
    }

    async fn create_indexes(&self) -> Result<()> {
        BucketedFanOut::create_indexes(self).await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        BucketedFanOut::shard_keys(self)
    }

    fn database(&self) -> &Database {
        &self.database
    }
}
