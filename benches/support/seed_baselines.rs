//! The seed blog post's three inbox designs, implemented literally with plain driver calls, as a
//! user who copied the post would write them. These are baselines to compare the library against,
//! not library code: no validation, no pagination cursor, no batching, and the seed's quirks kept
//! (one `insert` per recipient, one `findAndModify` plus one upsert per recipient, a first bucket
//! of 49 messages because `floor(count / 50)` starts counting at 1).
//!
//! Every function takes the `&Database` the design lives in, so a caller can loop over
//! [`SeedBaseline::ALL`]:
//!
//! | design | collections | send to N | read the newest n |
//! |---|---|---|---|
//! | fan-out on read | `inbox {from, to, sent, message}` | 1 `insert` | `find({to}).sort({sent: -1}).limit(n)` |
//! | fan-out on write | `inbox {recipient, from, to, sent, message}` | N `insert`s | `find({recipient}).sort({sent: -1}).limit(n)` |
//! | bucketed | `users {user_name, msg_count}`, `inbox {owner, sequence, messages}` | N `findAndModify` + N `update` | `find({owner}).sort({sequence: -1}).limit(n / 50 + 1)` |
//!
//! One deliberate deviation: the post's shell loop reuses one `msg` object for every recipient's
//! `insert`, which in the shell would give every copy the same `_id`; here each copy is a fresh
//! document, so the server gives each its own `_id`.

// Shared by `benches/inbox.rs` and `examples/compare`; each uses a part of it.
#![allow(dead_code)]

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::ReturnDocument;
use mongodb::{Database, IndexModel};

/// The seed's bucket size: `sequence = Math.floor(count / 50)`.
pub const SEED_BUCKET_SIZE: i64 = 50;

/// One of the seed's three designs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedBaseline {
    /// "Fan Out On Read": one document per message, read by `to`.
    FanOutOnRead,
    /// "Fan Out On Write": one `insert` per recipient, read by `recipient`.
    FanOutOnWrite,
    /// "Fan Out On Write With Buckets": `users` message counts and 50-message buckets.
    Bucketed,
}

impl SeedBaseline {
    /// The three designs, in the post's order.
    pub const ALL: [SeedBaseline; 3] = [
        SeedBaseline::FanOutOnRead,
        SeedBaseline::FanOutOnWrite,
        SeedBaseline::Bucketed,
    ];

    /// A display name, such as `"seed fan-out-on-read"`.
    pub fn name(self) -> &'static str {
        match self {
            SeedBaseline::FanOutOnRead => "seed fan-out-on-read",
            SeedBaseline::FanOutOnWrite => "seed fan-out-on-write",
            SeedBaseline::Bucketed => "seed bucketed",
        }
    }

    /// The collections the design writes.
    pub fn collections(self) -> &'static [&'static str] {
        match self {
            SeedBaseline::FanOutOnRead | SeedBaseline::FanOutOnWrite => &["inbox"],
            SeedBaseline::Bucketed => &["inbox", "users"],
        }
    }

    /// The indexes the post asks for: `ensureIndex({to: 1, sent: 1})` for fan-out on read, and the
    /// shard keys (which MongoDB backs with an index) for the other two.
    pub async fn create_indexes(self, db: &Database) -> mongodb::error::Result<()> {
        let inbox = db.collection::<Document>("inbox");
        match self {
            SeedBaseline::FanOutOnRead => {
                inbox
                    .create_index(
                        IndexModel::builder()
                            .keys(doc! { "to": 1, "sent": 1 })
                            .build(),
                    )
                    .await?;
            }
            SeedBaseline::FanOutOnWrite => {
                inbox
                    .create_index(
                        IndexModel::builder()
                            .keys(doc! { "recipient": 1, "sent": 1 })
                            .build(),
                    )
                    .await?;
            }
            SeedBaseline::Bucketed => {
                inbox
                    .create_index(
                        IndexModel::builder()
                            .keys(doc! { "owner": 1, "sequence": 1 })
                            .build(),
                    )
                    .await?;
                db.collection::<Document>("users")
                    .create_index(IndexModel::builder().keys(doc! { "user_name": 1 }).build())
                    .await?;
            }
        }
        Ok(())
    }

    /// Sends `message` from `from` to every one of `to`, the way the post does.
    pub async fn send(
        self,
        db: &Database,
        from: &str,
        to: &[String],
        message: &str,
    ) -> mongodb::error::Result<()> {
        match self {
            SeedBaseline::FanOutOnRead => fan_out_on_read_send(db, from, to, message).await,
            SeedBaseline::FanOutOnWrite => fan_out_on_write_send(db, from, to, message).await,
            SeedBaseline::Bucketed => bucketed_send(db, from, to, message).await,
        }
    }

    /// The newest `n` messages of `owner`'s inbox, newest first, the way the post reads them.
    pub async fn read(
        self,
        db: &Database,
        owner: &str,
        n: usize,
    ) -> mongodb::error::Result<Vec<Document>> {
        match self {
            SeedBaseline::FanOutOnRead => fan_out_on_read_read(db, owner, n).await,
            SeedBaseline::FanOutOnWrite => fan_out_on_write_read(db, owner, n).await,
            SeedBaseline::Bucketed => bucketed_read(db, owner, n).await,
        }
    }
}

/// `msg = {from, to, sent: new Date(), message}`.
fn seed_message(from: &str, to: &[String], message: &str) -> Document {
    doc! {
        "from": from,
        "to": to,
        "sent": bson::DateTime::now(),
        "message": message,
    }
}

/// `db.inbox.save(msg)`.
pub async fn fan_out_on_read_send(
    db: &Database,
    from: &str,
    to: &[String],
    message: &str,
) -> mongodb::error::Result<()> {
    let msg = seed_message(from, to, message);
    db.collection::<Document>("inbox").insert_one(msg).await?;
    Ok(())
}

/// `db.inbox.find({to: owner}).sort({sent: -1})`, limited to `n`.
pub async fn fan_out_on_read_read(
    db: &Database,
    owner: &str,
    n: usize,
) -> mongodb::error::Result<Vec<Document>> {
    db.collection::<Document>("inbox")
        .find(doc! { "to": owner })
        .sort(doc! { "sent": -1 })
        .limit(n as i64)
        .await?
        .try_collect()
        .await
}

/// `for (recipient in msg.to) { msg.recipient = msg.to[recipient]; db.inbox.insert(msg) }`.
pub async fn fan_out_on_write_send(
    db: &Database,
    from: &str,
    to: &[String],
    message: &str,
) -> mongodb::error::Result<()> {
    let inbox = db.collection::<Document>("inbox");
    let mut msg = seed_message(from, to, message);
    for recipient in to {
        msg.insert("recipient", recipient.as_str());
        inbox.insert_one(msg.clone()).await?;
    }
    Ok(())
}

/// `db.inbox.find({recipient: owner}).sort({sent: -1})`, limited to `n`.
pub async fn fan_out_on_write_read(
    db: &Database,
    owner: &str,
    n: usize,
) -> mongodb::error::Result<Vec<Document>> {
    db.collection::<Document>("inbox")
        .find(doc! { "recipient": owner })
        .sort(doc! { "sent": -1 })
        .limit(n as i64)
        .await?
        .try_collect()
        .await
}

/// Per recipient: `findAndModify` its `users` count (`$inc`, upsert, new), then
/// `update({owner, sequence: floor(count / 50)}, {$push: {messages: msg}}, {upsert: true})`.
pub async fn bucketed_send(
    db: &Database,
    from: &str,
    to: &[String],
    message: &str,
) -> mongodb::error::Result<()> {
    let users = db.collection::<Document>("users");
    let inbox = db.collection::<Document>("inbox");
    let msg = seed_message(from, to, message);
    for recipient in to {
        let user = users
            .find_one_and_update(
                doc! { "user_name": recipient.as_str() },
                doc! { "$inc": { "msg_count": 1 } },
            )
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await?;
        let count = user
            .as_ref()
            .and_then(|user| match user.get("msg_count") {
                Some(Bson::Int32(count)) => Some(i64::from(*count)),
                Some(Bson::Int64(count)) => Some(*count),
                Some(Bson::Double(count)) => Some(*count as i64),
                _ => None,
            })
            .ok_or_else(|| {
                mongodb::error::Error::custom(format!(
                    "findAndModify returned no msg_count for {recipient}: {user:?}"
                ))
            })?;
        let sequence = count / SEED_BUCKET_SIZE; // Math.floor(count / 50) for count >= 0
        inbox
            .update_one(
                doc! { "owner": recipient.as_str(), "sequence": sequence },
                doc! { "$push": { "messages": msg.clone() } },
            )
            .upsert(true)
            .await?;
    }
    Ok(())
}

/// Writes what `messages.len()` calls of [`bucketed_send`] to `owner` alone would leave, in a
/// few bulk `insert`s: the `users` document with `msg_count`, and the buckets, message `k`
/// (counting from 1, as `$inc` does) in bucket `floor(k / 50)`, `sent` one millisecond apart
/// and increasing. For filling big inboxes on servers where each `bucketed_send` scans the whole
/// `inbox` collection (FerretDB 1.x), which makes filling through it quadratic. `messages` are
/// `(from, text)` pairs, oldest first; the inbox must be empty.
pub async fn bucketed_load(
    db: &Database,
    owner: &str,
    messages: &[(String, String)],
) -> mongodb::error::Result<()> {
    let to = [owner.to_owned()];
    let start = bson::DateTime::now().timestamp_millis() - messages.len() as i64;
    let mut buckets: Vec<Document> = Vec::new();
    for (i, (from, text)) in messages.iter().enumerate() {
        let count = i as i64 + 1;
        let sequence = count / SEED_BUCKET_SIZE;
        let mut msg = seed_message(from, &to, text);
        msg.insert("sent", bson::DateTime::from_millis(start + i as i64));
        if buckets.len() as i64 <= sequence {
            buckets.push(doc! { "owner": owner, "sequence": sequence, "messages": [] });
        }
        if let Some(Bson::Array(bucket)) = buckets.last_mut().and_then(|b| b.get_mut("messages")) {
            bucket.push(Bson::Document(msg));
        }
    }
    if buckets.is_empty() {
        return Ok(());
    }
    db.collection::<Document>("inbox")
        .insert_many(buckets)
        .await?;
    // `$inc: {msg_count: 1}` leaves a 32-bit integer.
    let count = i32::try_from(messages.len()).map_err(mongodb::error::Error::custom)?;
    db.collection::<Document>("users")
        .insert_one(doc! { "user_name": owner, "msg_count": count })
        .await?;
    Ok(())
}

/// `db.inbox.find({owner}).sort({sequence: -1}).limit(k)` with `k = n / 50 + 1` buckets (the
/// post: "the most recent 50 messages ... at most two reads; 100 ... at most three"), then the
/// newest `n` messages of those buckets, newest first.
pub async fn bucketed_read(
    db: &Database,
    owner: &str,
    n: usize,
) -> mongodb::error::Result<Vec<Document>> {
    let buckets_needed = n.div_ceil(SEED_BUCKET_SIZE as usize) + 1;
    let buckets: Vec<Document> = db
        .collection::<Document>("inbox")
        .find(doc! { "owner": owner })
        .sort(doc! { "sequence": -1 })
        .limit(buckets_needed as i64)
        .await?
        .try_collect()
        .await?;
    let mut messages = Vec::with_capacity(n);
    for bucket in &buckets {
        let Ok(pushed) = bucket.get_array("messages") else {
            continue;
        };
        // Pushed oldest first; the newest bucket comes first.
        for message in pushed.iter().rev() {
            if messages.len() == n {
                return Ok(messages);
            }
            if let Bson::Document(message) = message {
                messages.push(message.clone());
            }
        }
    }
    Ok(messages)
}
