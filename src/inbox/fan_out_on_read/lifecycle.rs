//! The lifecycle of a fan-out-on-read inbox: owners share one document per message, so each
//! owner's state is their name in an array on it (`read_by`, `starred_by`, `gone_for`,
//! `muted_for`, `blocked_for`), and the sender's tombstone is `retracted`.
//!
//! One `update` per change of one owner's state of one message (found by `_id`: the message's
//! id, or the one derived from it and the owner for a delivered copy), one `update_many` per range or per message (retract and edit
//! filter on `{id, from}`, so they reach the sender's shard only), one `count` per count. Every
//! write is an `$addToSet`, `$pull`, `$set` or `$unset`: applied twice, it applies once, so a
//! retry after a lost reply changes nothing more. Where updates are not atomic, every lifecycle
//! write holds the locks of the documents it changes (each document locked by its `_id`; a
//! write of many first finds them): two owners' marks on one shared document would otherwise
//! overwrite each other, and writes on different messages never wait for each other.

use async_trait::async_trait;
use bson::{doc, Bson, Document};

use super::{FanOutOnRead, LAYOUT};
use crate::backend::lock_key;
use crate::bson_ext::derived_id;
use crate::error::Result;
use crate::inbox::cursor;
use crate::inbox::engine::LifecycleEngine;
use crate::inbox::lifecycle::{message_not_found, not_sender, Filter, Retention, UpTo};
use crate::inbox::{time_ordered, validate, MessageId, Payload, Strategy, MAX_DOCUMENT_BYTES};

/// Where updates are not atomic, each document is locked by itself (its `_id` as a
/// [`lock_key`]): owners share documents, so a write of one owner's state and another's on the
/// same message take turns, and writes on different messages never wait for each other.
///
/// The lock keys of `owner`'s document of message `id`: the message's own document and the one
/// delivered to `owner`, whichever holds it.
fn lock_keys(owner: &str, id: MessageId) -> Vec<String> {
    [id.0, derived_id(id.0, owner)]
        .map(|id| lock_key(&Bson::ObjectId(id)))
        .to_vec()
}

/// The lock key of `owner`'s mute and block lists.
fn filters_lock(owner: &str) -> String {
    format!("filters/{owner}")
}

/// The field of a shared document naming the owners a filter hides it from.
fn hidden_for(filter: Filter) -> &'static str {
    match filter {
        Filter::Mute => "muted_for",
        Filter::Block => "blocked_for",
    }
}

/// `owner`'s document of message `id`: the sent one (`_id` the message's id) or the one
/// delivered to `owner` (`_id` derived from both), found by `_id`, the one index every server
/// uses.
fn of(owner: &str, id: MessageId) -> Document {
    doc! { "_id": { "$in": [id.0, derived_id(id.0, owner)] }, "to": owner }
}

/// [`of`], if the message is in `owner`'s inbox (not deleted by them, not retracted).
fn held(owner: &str, id: MessageId) -> Document {
    let mut filter = of(owner, id);
    filter.insert("retracted", doc! { "$exists": false });
    filter.insert("gone_for", doc! { "$ne": owner });
    filter
}

impl<P: Payload> FanOutOnRead<P> {
    /// Runs `update` on every document `filter` matches, retried, each document locked where
    /// updates are not atomic. Returns how many matched.
    async fn update_all(&self, filter: Document, update: Document) -> Result<u64> {
        self.backend
            .update_every_owner(&self.messages, &filter, "_id", &update)
            .await
    }

    /// Runs `update` on `owner`'s document of message `id` that `filter` matches, retried, that
    /// document locked where updates are not atomic. Returns how many matched (0 or 1).
    ///
    /// Sent as a multi-document update although it changes one document: the filter names two
    /// `_id`s (the shared document and the owner's delivered copy) and not the sender, the shard
    /// key, which a sharded cluster may require of a single-document update (MongoDB before
    /// 7.1 does) and a multi-document one does not.
    async fn update_one(
        &self,
        owner: &str,
        id: MessageId,
        filter: Document,
        update: Document,
    ) -> Result<u64> {
        let work = self.backend.retry("update message", || async {
            Ok(self
                .messages
                .update_many(filter.clone(), update.clone())
                .await?
                .matched_count)
        });
        self.backend.exclusive(&lock_keys(owner, id), work).await
    }

    /// Applies `update` to `owner`'s document of message `id`: one `update`.
    ///
    /// # Errors
    ///
    /// [`crate::Error::NotFound`] when it is not in `owner`'s inbox (nothing written).
    async fn update_held(&self, owner: &str, id: MessageId, update: Document) -> Result<()> {
        if self.update_one(owner, id, held(owner, id), update).await? == 0 {
            return Err(message_not_found(id));
        }
        Ok(())
    }
}

#[async_trait]
impl<P: Payload> LifecycleEngine<P> for FanOutOnRead<P> {
    async fn mark_read(&self, owner: &str, id: MessageId) -> Result<()> {
        self.update_held(owner, id, doc! { "$addToSet": { "read_by": owner } })
            .await
    }

    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()> {
        self.update_held(owner, id, doc! { "$pull": { "read_by": owner } })
            .await
    }

    async fn set_starred(&self, owner: &str, id: MessageId, starred: bool) -> Result<()> {
        let update = if starred {
            doc! { "$addToSet": { "starred_by": owner } }
        } else {
            doc! { "$pull": { "starred_by": owner } }
        };
        self.update_held(owner, id, update).await
    }

    /// One `update_many` over the owner's visible unread documents at or below the point; a
    /// [`UpTo::Message`] first reads that document's `(sent, id)` (one `find`).
    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()> {
        let point = match up_to {
            UpTo::Newest => None,
            UpTo::Cursor(after) => Some(cursor::time_key(&after, Strategy::FanOutOnRead, owner)?),
            UpTo::Message(id) => {
                let found = self
                    .messages
                    .find_one(held(owner, id))
                    .projection(doc! { "sent": 1 })
                    .await?
                    .ok_or_else(|| message_not_found(id))?;
                let sent = found
                    .get_datetime("sent")
                    .map_err(|_| message_not_found(id))?;
                Some((*sent, id))
            }
        };
        let mut filter = doc! { "to": owner };
        filter.extend(LAYOUT.state.unread(owner));
        filter.extend(LAYOUT.state.visible(owner));
        if let Some((sent, id)) = point {
            filter.extend(cursor::at_or_older(sent, id, "id"));
        }
        self.update_all(filter, doc! { "$addToSet": { "read_by": owner } })
            .await?;
        Ok(())
    }

    async fn unread_count(&self, owner: &str, cap: Option<u64>) -> Result<u64> {
        time_ordered::unread_count(&self.backend, &self.messages, LAYOUT, owner, cap).await
    }

    /// One `update` adding the owner to `gone_for` (a retracted message matches too: deleting
    /// it changes nothing more).
    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        let update = doc! {
            "$addToSet": { "gone_for": owner },
            "$pull": { "read_by": owner, "starred_by": owner },
        };
        if self.update_one(owner, id, of(owner, id), update).await? == 0 {
            return Err(message_not_found(id));
        }
        Ok(())
    }

    /// One `update_many` (`{id, from}`: the sender's shard); when it matches nothing, one
    /// `find` tells a message retracted before from someone else's or none.
    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        let filter = doc! { "id": id.0, "from": sender, "retracted": { "$exists": false } };
        let retracted = bson::DateTime::now();
        let update = doc! { "$set": { "retracted": retracted }, "$unset": { "message": "" } };
        if self.update_all(filter, update).await? == 0 {
            let found = self
                .messages
                .find_one(doc! { "id": id.0 })
                .projection(doc! { "from": 1 })
                .await?
                .ok_or_else(|| message_not_found(id))?;
            if found.get_str("from") != Ok(sender) {
                return Err(not_sender(sender, id));
            }
        }
        Ok(())
    }

    /// One `find` (the sender and the size check, before anything is written), one
    /// `update_many`.
    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        // The payload alone first, before any command; the message with it once read.
        let payload = bson::to_bson(&payload)?;
        validate::check_message_size(&payload, MAX_DOCUMENT_BYTES - 1024)?;
        let found = self
            .messages
            .find_one(doc! { "id": id.0, "retracted": { "$exists": false } })
            .projection(doc! { "message": 0 })
            .await?;
        let Some(mut found) = found else {
            return Err(message_not_found(id));
        };
        if found.get_str("from") != Ok(sender) {
            return Err(not_sender(sender, id));
        }
        let edited = bson::DateTime::now();
        found.insert("message", payload.clone());
        found.insert("edited", edited);
        validate::check_message_size(&found, MAX_DOCUMENT_BYTES - 1024)?;
        let filter = doc! { "id": id.0, "from": sender, "retracted": { "$exists": false } };
        let update = doc! { "$set": { "message": payload, "edited": edited } };
        if self.update_all(filter, update).await? == 0 {
            // Retracted since the `find`.
            return Err(message_not_found(id));
        }
        Ok(edited)
    }

    /// The owner's list (one `update`), then the owner's name on the sender's documents in
    /// their inbox (one `update_many`).
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        let mark = if on {
            doc! { "$addToSet": { hidden_for(filter): owner } }
        } else {
            doc! { "$pull": { hidden_for(filter): owner } }
        };
        let set = self.filters.set(&self.backend, owner, sender, filter, on);
        self.backend
            .exclusive_one(&filters_lock(owner), set)
            .await?;
        self.update_all(doc! { "to": owner, "from": sender }, mark)
            .await?;
        Ok(())
    }

    fn retention(&self) -> Retention {
        self.retention
    }

    /// One `find` of the newest document past the limit (with `keep_newest`); then the older
    /// documents addressed to the owner alone are deleted (one `delete_many`) and the older ones
    /// they share get the owner in `gone_for` (one `update_many`): a shared document stays for
    /// its other recipients. Returns both together.
    async fn prune(&self, owner: &str) -> Result<u64> {
        let older =
            time_ordered::past_retention(&self.messages, LAYOUT, owner, &self.retention).await?;
        if older.is_empty() {
            return Ok(0);
        }
        let alone = doc! { "to": owner, "to.1": { "$exists": false }, "$or": older.clone() };
        let deleted = self
            .backend
            .retry("prune", || async {
                Ok(self
                    .messages
                    .delete_many(alone.clone())
                    .await?
                    .deleted_count)
            })
            .await?;
        let shared = doc! {
            "to": owner,
            "to.1": { "$exists": true },
            "gone_for": { "$ne": owner },
            "$or": older,
        };
        let hidden = self
            .update_all(shared, doc! { "$addToSet": { "gone_for": owner } })
            .await?;
        Ok(deleted + hidden)
    }
}
