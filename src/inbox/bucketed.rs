//! Fan out on write with buckets: each recipient's messages grouped into time-ordered documents.

pub(super) mod lifecycle;

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

use super::filters;
use super::lifecycle::{Filter, Filters, Retention};
use super::recipient_lists::RecipientLists;
use super::{
    cursor, validate, InboxStore, Message, MessageId, NewMessage, Payload, Sent, Strategy,
    MAX_DOCUMENT_BYTES,
};
use crate::backend::{Backend, Guard, GuardedUpdate};
use crate::bson_ext::{date, integer, later, now_or_after};
use crate::config::{store_builder_methods, StoreConfig};
use crate::retry::Backoff;
use crate::sharding::ShardKey;
use crate::{Error, Page, PageRequest, Result};

/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 4] = [
    "inbox_buckets",
    "inbox_heads",
    "inbox_locks",
    RecipientLists::DEFAULT_COLLECTION,
];
/// The default number of messages per bucket, as in the seed.
pub const DEFAULT_BUCKET_SIZE: u32 = 50;
/// The largest bucket size accepted.
pub const MAX_BUCKET_SIZE: u32 = 10_000;

/// Rounds of delivery a send tries before giving up with [`Error::RetriesExhausted`]. A round only
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

/// The `_id` of `owner`'s bucket `sequence`: the owner's bytes in hex, a `.`, the sequence in 12
/// digits. Unique per bucket, so `_id`'s own uniqueness refuses a bucket opened twice; and in
/// `_id` order, an owner's buckets are one range, oldest first (the owner's hex is followed by
/// `.`, which sorts before every hex digit, so no owner's range holds another's), read by the
/// `_id` index every server has: the buckets need no other index to be found, and every index
/// is paid on every push.
pub(crate) fn bucket_id(owner: &str, sequence: i64) -> String {
    format!("{}.{sequence:012}", owner_hex(owner))
}

/// The record's field of where each owner's entry went, keyed by [`owner_hex`].
pub(in crate::inbox) const PLACED: &str = "placed";

pub(in crate::inbox) fn owner_hex(owner: &str) -> String {
    use std::fmt::Write;
    owner
        .bytes()
        .fold(String::with_capacity(owner.len() * 2), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// The owner whose bytes `hex` spells ([`owner_hex`]), if it spells one.
pub(in crate::inbox) fn owner_from_hex(hex: &str) -> Option<String> {
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// A filter for `owner`'s buckets from sequence `from` (inclusive, 0 for all) to `to` (inclusive,
/// `None` for the newest): the owner (the shard key's prefix, for routing) and a range of `_id`.
pub(in crate::inbox) fn owner_buckets(owner: &str, from: i64, to: Option<i64>) -> Document {
    let mut range = doc! { "$gte": bucket_id(owner, from.max(0)) };
    match to {
        Some(to) => range.insert("$lte", bucket_id(owner, to)),
        None => range.insert("$lt", format!("{}/", owner_hex(owner))),
    };
    doc! { "owner": owner, "_id": range }
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

/// Fan out on write with buckets: each recipient's inbox is a run of documents holding up to
/// `bucket_size` messages (default 50), oldest bucket first.
///
/// Collections (default names; see [`BucketedFanOutBuilder::collection`]):
/// - `inbox_buckets`: `{_id, owner, sequence, count, last_sent, unread, hidden, rev,
///   messages: [..]}`, shard key `{owner: 1, sequence: 1}`. The `_id` is derived from owner and
///   sequence (the owner's bytes in hex, `.`, the sequence in 12 digits), so one bucket is found
///   by `_id` and an owner's buckets are one range of `_id`, oldest first: every read goes through
///   the `_id` index. The only other index holds the full buckets that still count unread
///   messages (`{owner: 1}`, partial on `count >= bucket_size` and `unread > 0`, where the server
///   has partial indexes), which no push into the newest bucket maintains: on engines that keep
///   documents in PostgreSQL every index of a bucket is rewritten by every push to it (a push
///   into 1,000 buckets took 53 ms with the `_id` index alone, 291 ms with a unique
///   `{owner, sequence}` index, 882 ms with the indexes this store had before). `unread`,
///   `hidden` and `rev` are the lifecycle's counters and revision ([`super::InboxLifecycle`]);
/// - `inbox_heads`: `{_id: owner, head, floor, muted, blocked}`, the seed's `users` collection,
///   holding the sequence of each owner's newest bucket and the newest `sent` of the bucket
///   before it (a hint: a stale head costs a retry, never a wrong result), and the owner's mute
///   and block lists, which every send reads with the heads (no command more);
/// - `inbox_recipients`: `{_id: message id, from, sent, to: [..], placed: {"<owner in hex>":
///   sequence}}`, one record per message, written before its entries: its recipients, and for
///   each owner it was delivered to the bucket the entry went to or a bucket before it (their
///   head when it was delivered; the owner in hex, since an id may hold `.` or `$`), so
///   the sender's retract and edit find every entry by `_id` ranges, with no index on the
///   entries' ids. An entry carries `to` itself when the message has at most
///   [`BucketedFanOutBuilder::max_inline_recipients`] recipients (100 by default), `to_count`
///   otherwise (a message to N users would put N names in each of N buckets), and a page holding
///   such messages takes one more `find` to put their lists back. A send with an idempotency key
///   ([`NewMessage::with_key`](super::NewMessage::with_key)) keeps its key here too (see
///   [`InboxStore::send`]).
///
/// # How it improves on the seed
/// - **Hard cap.** A message is pushed only into a bucket whose `count` is below the size, in the
///   same atomic update, so no bucket ever holds more than `bucket_size` messages. A new bucket is
///   opened only after the previous one was seen full, so every bucket but the newest is full
///   and a message's position in its inbox is `sequence * bucket_size + index`: counting is one
///   read and pages are exact keyset pages.
/// - **Commands that do not grow with N.** The seed costs a `findAndModify` and an update per
///   recipient. Here a send reads all recipients' heads in one `find`, records the message in
///   one `update` (upserting its record) and pushes to every recipient in one unordered
///   `update` command (split only above the server's batch size or 8 MiB): 3 commands. When
///   some recipients' buckets are full, one `find` checks them, one `update` moves their heads,
///   and one more `update` delivers: 6 commands, whatever N is.
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
/// On FerretDB 1.x a single-document update is not atomic, so the guards of a push (room in the
/// bucket, no later `sent`) cannot be left to the server. There a send takes its recipients'
/// leased locks in `inbox_locks` (one `insert` per round of up to 50 recipients, one `delete`
/// after), and the pushes' guards are checked on the buckets as read under the locks, each push
/// then addressed by `_id` alone: one algorithm, whose guarded pushes the store's backend makes
/// safe the server's way (`src/backend/guarded.rs`). A lock whose holder died is taken over after a
/// 30-second lease.
///
/// # Setup and failures
///
/// Run [`BucketedFanOut::create_indexes`] at startup (the unread count's index; correctness
/// depends on no index: a bucket's `_id` keeps it from being opened twice). A send that fails
/// part-way (server unreachable, [`Error::RetriesExhausted`]) may have reached some recipients; the
/// error is returned and the deliveries already made stay.
///
/// A message must fit a bucket: its encoded size is limited to about `16 MiB / bucket_size`
/// (about 335 KB for 50), checked before anything is written ([`Invalid::TooLarge`](crate::error::Invalid::TooLarge)).
/// The bucket size is part of the stored layout: reopen a collection with the size it was written
/// with.
pub struct BucketedFanOut<P> {
    buckets: Buckets,
    _payload: PhantomData<fn() -> P>,
}

/// The store's state and logic, whatever the payload.
#[derive(Clone, Debug)]
struct Buckets {
    /// The server's differences: recipients' writers take turns where updates are not atomic.
    backend: Backend,
    buckets: Collection<Document>,
    heads: Collection<Document>,
    recipients: RecipientLists,
    bucket_size: u32,
    retention: Retention,
}

impl<P> Clone for BucketedFanOut<P> {
    fn clone(&self) -> Self {
        Self {
            buckets: self.buckets.clone(),
            _payload: PhantomData,
        }
    }
}

impl<P> fmt::Debug for BucketedFanOut<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketedFanOut")
            .field("buckets", &self.buckets.buckets.name())
            .field("heads", &self.buckets.heads.name())
            .field("bucket_size", &self.buckets.bucket_size)
            .finish_non_exhaustive()
    }
}

/// Configures a [`BucketedFanOut`] store.
#[must_use = "a builder does nothing until `build()`"]
pub struct BucketedFanOutBuilder<P> {
    config: StoreConfig,
    max_inline: Option<usize>,
    bucket_size: u32,
    retention: Retention,
    _payload: PhantomData<fn() -> P>,
}

impl<P> fmt::Debug for BucketedFanOutBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketedFanOutBuilder")
            .field("config", &self.config)
            .field("max_inline", &self.max_inline)
            .field("bucket_size", &self.bucket_size)
            .field("retention", &self.retention)
            .finish()
    }
}

impl<P: Payload> BucketedFanOutBuilder<P> {
    store_builder_methods!();

    /// How long owners' messages are kept, enforced by
    /// [`InboxLifecycle::prune`](super::InboxLifecycle::prune), which drops whole buckets
    /// (default: forever).
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Messages per bucket (default [`DEFAULT_BUCKET_SIZE`](super::DEFAULT_BUCKET_SIZE), 50).
    pub fn bucket_size(mut self, size: u32) -> Self {
        self.bucket_size = size;
        self
    }

    /// The longest recipient list stored in every bucket entry; a longer one is kept only in
    /// the message's record. 0 keeps every list there only. By default 100.
    pub fn max_inline_recipients(mut self, max: usize) -> Self {
        self.max_inline = Some(max);
        self
    }

    /// Builds the store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a bucket size of 0 or above
    /// [`MAX_BUCKET_SIZE`](super::MAX_BUCKET_SIZE), an unusable collection name, two
    /// collections given the same name, or a name given to a collection the store does not
    /// have.
    pub fn build(self) -> Result<BucketedFanOut<P>> {
        if self.bucket_size == 0 || self.bucket_size > MAX_BUCKET_SIZE {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "bucket size must be 1..={MAX_BUCKET_SIZE}, not {}",
                    self.bucket_size
                ),
            });
        }
        let [buckets, heads, locks, recipients] = self.config.names(COLLECTIONS)?;
        let database = self.config.database();
        let buckets = database.collection(&buckets);
        // The unread count's index: the full buckets with unread messages, which pushes (into
        // the newest bucket, not full) never maintain.
        let unread = IndexModel::builder()
            .keys(doc! { "owner": 1 })
            .options(
                IndexOptions::builder()
                    .name("owner_1_full_unread".to_owned())
                    .partial_filter_expression(doc! {
                        "count": { "$gte": i64::from(self.bucket_size) },
                        "unread": { "$gt": 0_i64 },
                    })
                    .build(),
            )
            .build();
        Ok(BucketedFanOut {
            buckets: Buckets {
                backend: self.config.backend(&locks, LOCK_LEASE).with_index_where(
                    |c| c.partial_indexes,
                    &buckets,
                    unread,
                ),
                buckets,
                heads: database.collection(&heads),
                recipients: RecipientLists::new(database.collection(&recipients), self.max_inline),
                bucket_size: self.bucket_size,
                retention: self.retention,
            },
            _payload: PhantomData,
        })
    }
}

impl<P: Payload> BucketedFanOut<P> {
    /// A store with default settings in `database`.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default settings are valid")
    }

    /// Starts configuring a store in `database`.
    ///
    /// ```no_run
    /// # fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
    /// use mongo_social::BucketedFanOut;
    /// let store: BucketedFanOut<String> = BucketedFanOut::builder(&db).bucket_size(100).build()?;
    /// assert_eq!(store.bucket_size(), 100);
    /// assert!(BucketedFanOut::<String>::builder(&db).bucket_size(0).build().is_err());
    /// # Ok(()) }
    /// ```
    pub fn builder(database: &Database) -> BucketedFanOutBuilder<P> {
        BucketedFanOutBuilder {
            config: StoreConfig::new(database),
            max_inline: None,
            bucket_size: DEFAULT_BUCKET_SIZE,
            retention: Retention::default(),
            _payload: PhantomData,
        }
    }

    /// Messages per bucket.
    pub fn bucket_size(&self) -> u32 {
        self.buckets.bucket_size
    }

    /// How many buckets hold the newest `limit` messages at most: the newest bucket may hold a
    /// single message, every older one is full.
    pub fn buckets_for(&self, limit: usize) -> usize {
        self.buckets.buckets_for(limit)
    }
}

impl Buckets {
    /// The sequence and count of `owner`'s newest bucket: one `find` of one document.
    async fn newest_bucket(&self, owner: &str) -> Result<Option<(i64, i64)>> {
        let newest = self
            .buckets
            .find_one(owner_buckets(owner, 0, None))
            .sort(doc! { "_id": -1 })
            .projection(doc! { "_id": 0, "sequence": 1, "count": 1 })
            .await?;
        Ok(newest.map(|bucket| {
            (
                integer(&bucket, "sequence").unwrap_or(0),
                integer(&bucket, "count").unwrap_or(0),
            )
        }))
    }

    /// The largest encoded message this store accepts.
    fn max_message_bytes(&self) -> usize {
        (MAX_DOCUMENT_BYTES - BUCKET_OVERHEAD) / self.bucket_size as usize - 16
    }

    /// How many buckets hold the newest `limit` messages at most.
    fn buckets_for(&self, limit: usize) -> usize {
        1 + (limit.saturating_sub(1)).div_ceil(self.bucket_size as usize)
    }

    /// Pushes `message` to every one of `recipients` but those who block its sender (returned).
    ///
    /// Reads the recipients' heads (one `find`), records the message with where it goes
    /// ([`Buckets::record`], one `update`), then delivers in rounds of guarded pushes
    /// ([`Buckets::deliver`]). Where updates are not atomic the rounds hold the recipients'
    /// locks, 50 recipients at a time; elsewhere all go at once.
    async fn deliver_entry<P: Payload>(
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
            .retry("record message", || async {
                records
                    .update_one(filter.clone(), update.clone())
                    .upsert(true)
                    .await?;
                Ok(())
            })
            .await
    }

    /// The recipients whose buckets from their head back by one already hold message `id` (one
    /// `find` of heads, one `find` of a range of buckets per recipient), and those who block
    /// `sender`.
    async fn holders(
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
    /// after a backoff under the store's [`RetryPolicy`](crate::RetryPolicy).
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
                Guard::NotAfter(LAST_SENT, stamp),
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

#[async_trait]
impl<P: Payload> InboxStore<P> for BucketedFanOut<P> {
    fn strategy(&self) -> Strategy {
        Strategy::BucketedFanOut
    }

    async fn filters(&self, owner: &str) -> Result<Filters> {
        validate::check_user_id("owner", owner)?;
        let head = self
            .buckets
            .heads
            .find_one(doc! { "_id": owner })
            .projection(doc! { "muted": 1, "blocked": 1 })
            .await?;
        Ok(filters::read(head.as_ref()))
    }

    async fn send(&self, message: NewMessage<P>) -> Result<Sent<P>> {
        validate::check_new_message(&message)?;
        if let Some(keyed) = super::keyed::Keyed::of(&message)? {
            let records = self.buckets.recipients.collection().clone();
            // Recipients holding the message already (an earlier attempt's) are skipped.
            return super::keyed::send_recorded(
                &self.buckets.backend,
                &records,
                keyed,
                message,
                |m| async move {
                    let skipped = self.deliver(&m, &m.to).await?;
                    Ok((m, skipped))
                },
            )
            .await;
        }
        let message = Message::stamp(message);
        let recipients = message.to.clone();
        let skipped = self.buckets.deliver_entry(&message, recipients).await?;
        Ok(Sent { message, skipped })
    }

    async fn deliver(&self, message: &Message<P>, recipients: &[String]) -> Result<Vec<String>> {
        validate::check_recipients(recipients)?;
        let (holders, mut blocked) = self
            .buckets
            .holders(message.id, &message.from, recipients)
            .await?;
        let remaining: Vec<String> = recipients
            .iter()
            .filter(|recipient| !holders.contains(recipient.as_str()))
            .filter(|recipient| !blocked.contains(recipient))
            .cloned()
            .collect();
        if !remaining.is_empty() {
            blocked.extend(self.buckets.deliver_entry(message, remaining).await?);
        }
        Ok(blocked)
    }

    fn max_message_bytes(&self) -> usize {
        self.buckets.max_message_bytes()
    }

    async fn remove_from(&self, owner: &str, sender: &str) -> Result<u64> {
        validate::check_user_id("owner", owner)?;
        validate::check_user_id("sender", sender)?;
        Err(Error::Unsupported {
            limit: crate::error::Limit::Strategy,
            feature: "removing messages from a bucketed inbox",
            reason: "every bucket but the newest is full, and positions (and cursors) depend on \
                     it; removing a message would shift them"
                .to_owned(),
        })
    }

    async fn inbox_page(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        self.buckets.page(owner, page).await
    }

    async fn count(&self, owner: &str) -> Result<u64> {
        self.buckets.count(owner).await
    }

    /// The unique `{owner, sequence}` index is what keeps a bucket from being opened twice, so
    /// a store that was not told to create it creates it before its first write.
    async fn create_indexes(&self) -> Result<()> {
        self.buckets.backend.create_indexes().await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        let Buckets {
            buckets,
            heads,
            recipients,
            ..
        } = &self.buckets;
        vec![
            ShardKey::new(
                buckets.name(),
                doc! { "owner": 1, "sequence": 1 },
                "routes an inbox read to one shard; a long inbox may span two",
            ),
            ShardKey::new(
                heads.name(),
                doc! { "_id": 1 },
                "one small document per owner, read by id",
            ),
            recipients.shard_key(),
        ]
    }

    fn database(&self) -> &Database {
        self.buckets.backend.database()
    }

    fn watch(
        &self,
        owner: &str,
        from: Option<crate::realtime::ResumeToken>,
        options: crate::realtime::WatchOptions,
    ) -> crate::realtime::Updates<Message<P>> {
        if let Err(error) = validate::check_user_id("owner", owner) {
            return crate::realtime::failed(error);
        }
        let Buckets {
            backend,
            buckets,
            recipients,
            bucket_size,
            ..
        } = &self.buckets;
        crate::realtime::watch(
            super::watch::Bucketed {
                backend: backend.clone(),
                buckets: buckets.clone(),
                recipients: recipients.clone(),
                bucket_size: *bucket_size,
                owner: owner.to_owned(),
                _payload: PhantomData,
            },
            from,
            options,
        )
    }
}

impl Buckets {
    /// One page of `owner`'s inbox: one `find` of the buckets holding it, skipping the entries
    /// pages do not show (tombstones, muted and blocked senders' messages); where those leave
    /// the page short, one more `find` of twice as many older buckets, and so on.
    async fn page<P: Payload>(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        validate::check_page(owner, &page)?;
        let size = self.bucket_size as u64;
        // Entries at or past this position were on earlier pages.
        let mut before = match &page.after {
            Some(after) => Some(cursor::position(after, owner)?),
            None => None,
        };
        let mut wanted = self.buckets_for(page.limit);
        let mut entries = Vec::with_capacity(page.limit);
        let mut last_position = None;
        'reads: loop {
            let newest = before.map(|before| ((before - 1) / size) as i64);
            let buckets: Vec<Document> = self
                .buckets
                .find(owner_buckets(owner, 0, newest))
                .sort(doc! { "_id": -1 })
                .projection(doc! { "_id": 0, "sequence": 1, "messages": 1 })
                .limit(wanted as i64)
                .batch_size(wanted as u32)
                .await?
                .try_collect()
                .await?;
            let exhausted = buckets.len() < wanted;
            let mut oldest = None;
            for mut bucket in buckets {
                let sequence = integer(&bucket, "sequence").unwrap_or(0) as u64;
                oldest = Some(sequence);
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
                    if !lifecycle::shown(&entry) {
                        continue;
                    }
                    entries.push(entry);
                    last_position = Some(position);
                    if entries.len() == page.limit {
                        break 'reads;
                    }
                }
            }
            match oldest {
                Some(oldest) if !exhausted && oldest > 0 => {
                    before = Some(oldest * size);
                    wanted *= 2;
                }
                _ => break,
            }
        }
        self.recipients.restore(&mut entries, "id").await?;
        let full = entries.len() == page.limit;
        let items = entries
            .into_iter()
            .map(|entry| {
                let id = entry.get("id").cloned();
                crate::bson_ext::decode_with_id(self.buckets.name(), id, entry)
            })
            .collect::<Result<Vec<Message<P>>>>()?;
        let next = match last_position {
            Some(position) if full && position > 0 => Some(cursor::after_position(owner, position)),
            _ => None,
        };
        Ok(Page { items, next })
    }
}
