//! The lifecycle of a fan-out-on-write inbox: every owner's state is on their own copy.
//!
//! One `update` per change of one owner's copy (found by its `_id`, derived from the message and
//! the owner, with `recipient` for the shard key), one
//! `update_many` for a range of it or for all of a message's copies (retract and edit, one range
//! of `_id`), one `count` per count. Every write is a `$set` or `$unset` of
//! absolute values, so a retry after a lost reply applies nothing twice; a write that matched
//! nothing reads once to tell an unknown message from one whose work is done.

use async_trait::async_trait;
use bson::{doc, Document};

use super::{copies_of, copy_id, FanOutOnWrite, LAYOUT};
use crate::inbox::cursor;
use crate::inbox::engine::LifecycleEngine;
use crate::inbox::lifecycle::{message_not_found, not_sender, Filter, Retention, UpTo};
use crate::inbox::{time_ordered, validate, MessageId, Payload, Strategy, MAX_DOCUMENT_BYTES};
use crate::Result;

/// What a tombstone keeps of a copy: no payload, no recipients, no state.
fn tombstone(reason: &str) -> Document {
    doc! {
        "$set": { "gone": reason },
        "$unset": { "message": "", "to": "", "to_count": "", "unread": "", "starred": "" },
    }
}

/// `owner`'s copy of message `id`: its `_id`, and its owner (the shard key's prefix).
fn copy_of(owner: &str, id: MessageId) -> Document {
    doc! { "_id": copy_id(id, owner), "recipient": owner }
}

impl<P: Payload> FanOutOnWrite<P> {
    /// Applies `update` to `owner`'s copy of message `id`, unless it is a tombstone, holding
    /// `owner`'s lock where updates are not atomic: one `update`. Retried: every update given
    /// here sets or unsets absolute values.
    ///
    /// # Errors
    ///
    /// [`crate::Error::NotFound`] when `owner` holds no such copy (nothing written).
    async fn update_copy(&self, owner: &str, id: MessageId, update: Document) -> Result<()> {
        let mut filter = copy_of(owner, id);
        filter.insert("gone", doc! { "$exists": false });
        let matched = self
            .backend
            .exclusive_one(
                owner,
                self.backend.retry("update copy", || async {
                    Ok(self
                        .copies
                        .update_one(filter.clone(), update.clone())
                        .await?
                        .matched_count)
                }),
            )
            .await?;
        if matched == 0 {
            return Err(message_not_found(id));
        }
        Ok(())
    }

    /// Whether `user` may change message `id`: [`crate::Error::NotFound`] when no copy of it
    /// is stored, [`Forbidden::NotSender`](crate::error::Forbidden::NotSender) when someone else sent it. One `find`.
    async fn check_sender(&self, user: &str, id: MessageId) -> Result<()> {
        let copy = self
            .copies
            .find_one(copies_of(id))
            .projection(doc! { "from": 1 })
            .await?
            .ok_or_else(|| message_not_found(id))?;
        if copy.get_str("from") != Ok(user) {
            return Err(not_sender(user, id));
        }
        Ok(())
    }

    /// Applies `update` to every copy of message `id` from `sender` that is not a tombstone
    /// ([`Backend::update_every_owner`](crate::backend::Backend::update_every_owner): one
    /// `update_many` where updates are atomic). Returns how many copies matched. Retried:
    /// `update` sets absolute values.
    async fn update_message(&self, sender: &str, id: MessageId, update: Document) -> Result<u64> {
        let mut filter = copies_of(id);
        filter.insert("from", sender);
        filter.insert("gone", doc! { "$exists": false });
        self.backend
            .update_every_owner(&self.copies, &filter, "recipient", &update)
            .await
    }
}

#[async_trait]
impl<P: Payload> LifecycleEngine<P> for FanOutOnWrite<P> {
    async fn mark_read(&self, owner: &str, id: MessageId) -> Result<()> {
        self.update_copy(owner, id, doc! { "$unset": { "unread": "" } })
            .await
    }

    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()> {
        self.update_copy(owner, id, doc! { "$set": { "unread": true } })
            .await
    }

    async fn set_starred(&self, owner: &str, id: MessageId, starred: bool) -> Result<()> {
        let update = if starred {
            doc! { "$set": { "starred": true } }
        } else {
            doc! { "$unset": { "starred": "" } }
        };
        self.update_copy(owner, id, update).await
    }

    /// One `update_many` over the owner's unread copies at or below the point; a
    /// [`UpTo::Message`] first reads that copy's `(sent, id)` (one `find`).
    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()> {
        let point = match up_to {
            UpTo::Newest => None,
            UpTo::Cursor(after) => Some(cursor::time_key(&after, Strategy::FanOutOnWrite, owner)?),
            UpTo::Message(id) => {
                let mut filter = copy_of(owner, id);
                filter.insert("gone", doc! { "$exists": false });
                let copy = self
                    .copies
                    .find_one(filter)
                    .projection(doc! { "sent": 1 })
                    .await?
                    .ok_or_else(|| message_not_found(id))?;
                let sent = copy
                    .get_datetime("sent")
                    .map_err(|_| message_not_found(id))?;
                Some((*sent, id))
            }
        };
        let mut filter = doc! {
            "recipient": owner,
            "unread": true,
            "muted": { "$exists": false },
            "blocked": { "$exists": false },
        };
        if let Some((sent, id)) = point {
            filter.extend(cursor::at_or_older(sent, id, "id"));
        }
        let unset = doc! { "$unset": { "unread": "" } };
        self.backend
            .exclusive_one(
                owner,
                self.backend.retry("mark read up to", || async {
                    self.copies
                        .update_many(filter.clone(), unset.clone())
                        .await?;
                    Ok(())
                }),
            )
            .await
    }

    async fn unread_count(&self, owner: &str, cap: Option<u64>) -> Result<u64> {
        time_ordered::unread_count(&self.backend, &self.copies, LAYOUT, owner, cap).await
    }

    /// One `update` turning the copy into a tombstone; when it matches nothing, one `find` tells
    /// a copy already gone (done) from none at all.
    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        match self.update_copy(owner, id, tombstone("deleted")).await {
            Err(error) if error.is_not_found() => {
                let held = self
                    .copies
                    .find_one(copy_of(owner, id))
                    .projection(doc! { "_id": 1 })
                    .await?;
                if held.is_none() {
                    return Err(error);
                }
                Ok(())
            }
            done => done,
        }
    }

    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        if self
            .update_message(sender, id, tombstone("retracted"))
            .await?
            == 0
        {
            // Nothing left to retract: retracted before (or by a lost reply), or not theirs.
            self.check_sender(sender, id).await?;
        }
        Ok(())
    }

    /// One `find` of a copy (the sender and the size check, before anything is written), then
    /// one `update_many`.
    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        // The payload alone first, before any command; the copy with it once read.
        let payload = bson::to_bson(&payload)?;
        validate::check_message_size(&payload, MAX_DOCUMENT_BYTES - 64)?;
        let copy = self
            .copies
            .find_one({
                let mut filter = copies_of(id);
                filter.insert("gone", doc! { "$exists": false });
                filter
            })
            .projection(doc! { "message": 0 })
            .await?;
        let Some(mut copy) = copy else {
            return Err(message_not_found(id));
        };
        if copy.get_str("from") != Ok(sender) {
            return Err(not_sender(sender, id));
        }
        let edited = bson::DateTime::now();
        copy.insert("message", payload.clone());
        copy.insert("edited", edited);
        validate::check_message_size(&copy, MAX_DOCUMENT_BYTES - 64)?;
        let update = doc! { "$set": { "message": payload, "edited": edited } };
        if self.update_message(sender, id, update).await? == 0 {
            // Retracted since the `find`.
            return Err(message_not_found(id));
        }
        Ok(edited)
    }

    /// The owner's list (one `update`), then the mark on the sender's copies in their inbox
    /// (one `update_many`), holding the owner's lock where updates are not atomic.
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        let mark = if on {
            doc! { "$set": { filter.field(): true } }
        } else {
            doc! { "$unset": { filter.field(): "" } }
        };
        let work = async {
            self.filters
                .set(&self.backend, owner, sender, filter, on)
                .await?;
            time_ordered::mark_sender(&self.backend, &self.copies, LAYOUT, owner, sender, mark)
                .await
        };
        self.backend.exclusive_one(owner, work).await
    }

    fn retention(&self) -> Retention {
        self.retention
    }

    /// One `find` of the newest copy past the limit (with `keep_newest`), one `delete_many` of
    /// it and everything older (and of everything past `max_age`). Retried: deleting twice
    /// deletes once (a retry may then report fewer).
    async fn prune(&self, owner: &str) -> Result<u64> {
        let older =
            time_ordered::past_retention(&self.copies, LAYOUT, owner, &self.retention).await?;
        if older.is_empty() {
            return Ok(0);
        }
        let filter = doc! { "recipient": owner, "$or": older };
        self.backend
            .retry("prune", || async {
                Ok(self.copies.delete_many(filter.clone()).await?.deleted_count)
            })
            .await
    }
}
