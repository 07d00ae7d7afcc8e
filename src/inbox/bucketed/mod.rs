//! Fan out on write with buckets: each recipient's messages grouped into time-ordered documents.

mod builder;
mod deliver;
mod layout;
pub(super) mod lifecycle;
mod read;
mod transfer;
mod watch;

pub use builder::BucketedFanOutBuilder;
pub(crate) use layout::bucket_id;
pub(in crate::inbox) use layout::{owner_buckets, owner_from_hex, owner_hex, PLACED};

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

use super::engine::{InboxEngine, WatchRequest};
use super::filters;
use super::keyed::KeyedSend;
use super::recipient_lists::RecipientLists;
use super::{
    cursor, validate, Message, MessageId, NewMessage, Payload, Sent, Strategy, MAX_DOCUMENT_BYTES,
};
use crate::backend::{Backend, Guard, GuardedUpdate};
use crate::bson_ext::{date, integer, later, now_or_after};
use crate::config::{store_builder_methods, StoreConfig};
use crate::error::{Error, Result};
use crate::inbox::filters::{Filter, Filters};
use crate::inbox::retention::Retention;
use crate::page::{Page, PageRequest};
use crate::phantom_impls::clone_fields;
use crate::retry::Backoff;
use crate::sharding::ShardKey;

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
/// The name of the unread count's partial index.
const FULL_UNREAD_INDEX: &str = "owner_1_sequence_-1_full_unread";

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

/// Fan out on write with buckets: each recipient's inbox is a run of documents holding up to
/// `bucket_size` messages (default 50), oldest bucket first.
///
/// Collections (default names; see [`BucketedFanOutBuilder::collection`]):
/// - `inbox_buckets`: `{_id, owner, sequence, count, last_sent, unread, hidden, rev,
///   messages: [..]}`, shard key `{owner: 1, sequence: 1}`. The `_id` is derived from owner and
///   sequence (the owner's bytes in hex, `.`, the sequence in 12 digits), so one bucket is found
///   by `_id` and an owner's buckets are one range of `_id`, oldest first: every read goes through
///   the `_id` index. The only other index holds the full buckets that still count unread
///   messages (`{owner: 1, sequence: -1}`, named `owner_1_sequence_-1_full_unread`, partial on
///   `count >= bucket_size` and `unread > 0`, where the server has partial indexes; a capped
///   unread count reads its newest entries in order and stops), which no push into the newest
///   bucket maintains: on engines that keep documents in PostgreSQL every index of a bucket is
///   rewritten by every push to it (a push into 1,000 buckets took 53 ms with the `_id` index
///   alone, 291 ms with a unique `{owner, sequence}` index, 882 ms with the indexes this store
///   had before). `unread`, `hidden` and `rev` are the lifecycle's counters and revision
///   ([`super::InboxLifecycle`]);
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
///   [`BucketedFanOutBuilder::max_inline_recipients`] recipients (16 by default), `to_count`
///   otherwise (a message to N users would put N names in each of N buckets), and a page holding
///   such messages takes one more `find` to put their lists back. A send with an idempotency key
///   ([`NewMessage::with_key`](super::NewMessage::with_key)) keeps its key here too (see
///   [`InboxStore::send`](crate::InboxStore::send)).
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
/// its newest `sent`. Where the server runs update pipelines, a push is a
/// pipeline that stamps its entry with the later of the message's `sent` and `last_sent`, in
/// the same atomic update that claims the position and moves `last_sent` up. Elsewhere a push
/// carries the message's `sent` only if no later one is in the bucket (`last_sent` not after
/// it); otherwise the push fails, the check that follows reads `last_sent`, and the next round
/// carries the later of that time and now. A bucket is opened with a `sent` no earlier than the
/// newest of the bucket before it (kept on the head, `floor`). Without
/// concurrent senders to an inbox, every entry carries the time the message was sent; under
/// contention the raise is the time between stamping and storing, milliseconds.
///
/// Reading the newest 50 messages is one `find` of at most 2 buckets; the newest 100, at most 3.
///
/// # Servers without atomic updates
///
/// Where a single-document update is not atomic (see docs/SERVERS.md), the guards of a push (room in the
/// bucket, no later `sent`) cannot be left to the server. There a send takes its recipients'
/// leased locks in `inbox_locks` (one `insert` per round of up to 50 recipients, one `delete`
/// after), and the pushes' guards are checked on the buckets as read under the locks, each push
/// then addressed by `_id` alone: one algorithm, whose guarded pushes the store's backend makes
/// safe the server's way (`src/backend/guarded.rs`). A lock whose holder died is taken over after a
/// 30-second lease.
///
/// # Setup and failures
///
/// Run [`InboxStore::create_indexes`](crate::InboxStore::create_indexes) at startup (the unread count's index; correctness
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

clone_fields!(BucketedFanOut<P> { buckets, _payload });

impl<P> fmt::Debug for BucketedFanOut<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketedFanOut")
            .field("buckets", &self.buckets.buckets.name())
            .field("heads", &self.buckets.heads.name())
            .field("bucket_size", &self.buckets.bucket_size)
            .finish_non_exhaustive()
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
        BucketedFanOutBuilder::new(database)
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

#[async_trait]
impl<P: Payload> InboxEngine<P> for BucketedFanOut<P> {
    fn strategy(&self) -> Strategy {
        Strategy::BucketedFanOut
    }

    async fn filters(&self, owner: &str) -> Result<Filters> {
        let head = self
            .buckets
            .heads
            .find_one(doc! { "_id": owner })
            .projection(doc! { "muted": 1, "blocked": 1 })
            .await?;
        Ok(filters::read(head.as_ref()))
    }

    async fn send(&self, message: NewMessage<P>, keyed: Option<KeyedSend>) -> Result<Sent<P>> {
        if let Some(keyed) = keyed {
            let records = self.buckets.recipients.collection().clone();
            // Recipients holding the message already (an earlier attempt's) are skipped.
            return super::keyed::send_recorded(
                &self.buckets.backend,
                &records,
                keyed,
                message,
                |m| async move {
                    let skipped = InboxEngine::deliver(self, &m, &m.to).await?;
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

    async fn remove_from(&self, _owner: &str, _sender: &str) -> Result<u64> {
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
            ShardKey::ranged_id(heads.name(), "one small document per owner, read by id"),
            recipients.shard_key(),
        ]
    }

    fn database(&self) -> &Database {
        self.buckets.backend.database()
    }

    fn watch(&self, request: WatchRequest<'_>) -> crate::realtime::Updates<Message<P>> {
        let WatchRequest {
            owner,
            from,
            options,
        } = request;
        let Buckets {
            backend,
            buckets,
            recipients,
            bucket_size,
            ..
        } = &self.buckets;
        crate::realtime::watch(
            watch::Bucketed {
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
