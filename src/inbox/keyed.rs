//! Sends with an idempotency key ([`NewMessage::with_key`]).
//!
//! A keyed message's id is derived from its sender and key ([`crate::idempotency::id`]), so
//! every attempt of one send names the same message. [`super::FanOutOnRead`] stores the message
//! once under that `_id`; the strategies that copy it ([`super::FanOutOnWrite`],
//! [`super::BucketedFanOut`]) first record the send, `{_id: message id, from, to, sent,
//! idempotency_key, content_digest, done, skipped}`, in their recipients collection (whose
//! `_id` is the message id already, and whose shard key is that `_id`): the record's unique
//! `_id` settles which attempt's `sent` the copies carry, every attempt then delivers that one
//! message (deliveries are idempotent), and the record is marked done.

use bson::{doc, Document};
use mongodb::Collection;

use super::{Message, MessageId, NewMessage, Payload, Sent};
use crate::backend::Backend;
use crate::bson_ext;
use crate::idempotency::{self, CONTENT, KEY};
use crate::{error::Entity, Error, Result};

/// A keyed send's id and content digest.
#[derive(Debug)]
pub struct KeyedSend {
    pub(super) id: MessageId,
    pub(super) key: String,
    pub(super) content: String,
}

impl KeyedSend {
    /// The key of `message`, checked, with the id it gives and the digest of what is sent;
    /// `None` without a key.
    pub(super) fn of<P: Payload>(message: &NewMessage<P>) -> Result<Option<Self>> {
        let Some(key) = &message.key else {
            return Ok(None);
        };
        idempotency::check(Some(key))?;
        let content = idempotency::digest(&(&message.to, bson::to_bson(&message.payload)?))?;
        Ok(Some(Self {
            id: MessageId(idempotency::id(&message.from, key)),
            key: key.clone(),
            content,
        }))
    }

    /// Fails with [`Error::Conflict`] unless `stored` is this send's (the same sender, key and
    /// content).
    pub(super) fn check(&self, stored: &Document, from: &str) -> Result<()> {
        if stored.get_str("from") != Ok(from) {
            return Err(Error::Conflict {
                what: Entity::Message,
                id: self.key.clone(),
                reason: "its id is taken by another sender's message",
            });
        }
        idempotency::same(stored, Entity::Message, &self.key, &self.content)
    }

    /// The message sent at `sent`.
    pub(super) fn message<P>(&self, message: NewMessage<P>, sent: bson::DateTime) -> Message<P> {
        Message {
            id: self.id,
            from: message.from,
            to: message.to,
            sent,
            payload: message.payload,
            edited: None,
            read: false,
            starred: false,
        }
    }
}

/// The stored `sent` of a keyed message, or an error naming the document.
pub(super) fn sent_of(collection: &str, stored: &Document) -> Result<bson::DateTime> {
    stored
        .get_datetime("sent")
        .copied()
        .map_err(|_| crate::bson_ext::corrupt(collection, stored.get("_id").cloned(), "sent"))
}

/// One `find` by `_id`, retried.
pub(super) async fn find(
    backend: &Backend,
    collection: &Collection<Document>,
    id: MessageId,
) -> Result<Option<Document>> {
    backend
        .command("find keyed message", || {
            collection.find_one(doc! { "_id": id.0 })
        })
        .await
}

/// Sends `message` with `keyed`'s key through a strategy that copies it: the record first (in
/// `records`), then `deliver` (the strategy's idempotent delivery of the message to its
/// recipients, giving back the message and those who block the sender), then the record marked done. A send
/// whose record is done returns it without writing; one whose record is not (an attempt that
/// stopped half-way, or a concurrent one still running) delivers again, idempotently.
pub(super) async fn send_recorded<P, F, Fut>(
    backend: &Backend,
    records: &Collection<Document>,
    keyed: KeyedSend,
    message: NewMessage<P>,
    deliver: F,
) -> Result<Sent<P>>
where
    P: Payload,
    F: FnOnce(Message<P>) -> Fut,
    Fut: std::future::Future<Output = Result<(Message<P>, Vec<String>)>>,
{
    let record = match find(backend, records, keyed.id).await? {
        Some(record) => record,
        None => {
            let record = doc! {
                "_id": keyed.id.0,
                "from": &message.from,
                "to": &message.to,
                "sent": bson::DateTime::now(),
                KEY: &keyed.key,
                CONTENT: &keyed.content,
                "done": false,
            };
            if backend.insert_once(records, record.clone()).await? {
                record
            } else {
                // Recorded by a concurrent attempt (or by this one, whose reply was lost).
                find(backend, records, keyed.id)
                    .await?
                    .ok_or_else(|| Error::contention("record keyed message", 1))?
            }
        }
    };
    keyed.check(&record, &message.from)?;
    let sent = sent_of(records.name(), &record)?;
    let message = keyed.message(message, sent);
    if record.get_bool("done") == Ok(true) {
        let skipped = bson_ext::strings(&record, "skipped");
        return Ok(Sent { message, skipped });
    }
    let (message, skipped) = deliver(message).await?;
    // Only the first to finish sets it; a retry sets the same values.
    let filter = doc! { "_id": keyed.id.0, "done": false };
    let update = doc! { "$set": { "done": true, "skipped": &skipped } };
    backend
        .command("finish keyed message", || {
            records.update_one(filter.clone(), update.clone())
        })
        .await?;
    Ok(Sent { message, skipped })
}
