//! Filling a big bucketed inbox in bulk, for the benches and `examples/compare`.
//!
//! On servers without atomic updates (FerretDB 1.x) every bucketed `send` scans the whole
//! buckets collection, so filling an inbox of M messages through it takes time growing with M²
//! (about an hour for 10,000). [`load_buckets`] writes instead what those sends would have left.
//! The benches and `compare` fill bucketed inboxes through `send` while [`fill_through_send`]
//! says so, and past that load all but the last message in bulk and send the last one.

/// The largest bucketed inbox filled through `send` on a server without atomic updates.
pub const SEND_FILL_MAX: u64 = 1000;

/// Whether a bucketed inbox of `m` messages is filled through `send` (else loaded in bulk but
/// for its last message).
pub fn fill_through_send(m: u64, atomic_updates: bool) -> bool {
    atomic_updates || m <= SEND_FILL_MAX
}

use bson::{doc, Bson, Document};
use mongo_social::inbox::MessageId;
use mongodb::Database;

/// Writes what sending `messages` (`(from, text)` pairs, oldest first) to `owner` one at a time
/// would leave in a `BucketedFanOut` with `bucket_size`: buckets `{_id, owner, sequence, count,
/// unread, last_sent, messages}` (every message unread; no per-message records, so a sender's
/// retract or edit does not find these messages), every one full but the last, and, once there are two buckets, the owner's head
/// `{_id: owner, head}` (the first bucket needs none); `sent` one millisecond apart,
/// increasing. Bulk `insert`s; `owner`'s inbox must be empty.
pub async fn load_buckets(
    db: &Database,
    buckets_collection: &str,
    heads_collection: &str,
    bucket_size: u32,
    owner: &str,
    messages: &[(String, String)],
) -> mongodb::error::Result<()> {
    let start = bson::DateTime::now().timestamp_millis() - messages.len() as i64;
    let mut buckets = Vec::new();
    for (sequence, chunk) in messages.chunks(bucket_size as usize).enumerate() {
        let first = sequence * bucket_size as usize;
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(j, (from, text))| {
                Bson::Document(doc! {
                    "id": MessageId::new().0,
                    "from": from.as_str(),
                    "to": [owner],
                    "sent": bson::DateTime::from_millis(start + (first + j) as i64),
                    "message": text.as_str(),
                })
            })
            .collect::<Vec<Bson>>();
        let last_sent = bson::DateTime::from_millis(start + (first + chunk.len() - 1) as i64);
        buckets.push(doc! {
            "_id": mongo_social_lab::bucket_id(owner, sequence as i64),
            "owner": owner,
            "sequence": sequence as i64,
            "count": entries.len() as i64,
            "unread": entries.len() as i64,
            "last_sent": last_sent,
            "messages": entries,
        });
    }
    let head = buckets.len().saturating_sub(1);
    if buckets.is_empty() {
        return Ok(());
    }
    db.collection::<Document>(buckets_collection)
        .insert_many(buckets)
        .await?;
    if head > 0 {
        db.collection::<Document>(heads_collection)
            .insert_one(doc! { "_id": owner, "head": head as i64 })
            .await?;
    }
    Ok(())
}
