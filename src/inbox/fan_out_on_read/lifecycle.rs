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
//!
//! What both time-ordered layouts do alike is written once, in
//! [`crate::inbox::time_ordered::lifecycle`]; here is what this layout says of itself.

use async_trait::async_trait;
use bson::{doc, Bson, Document};

use super::{FanOutOnRead, LAYOUT};
use crate::backend::lock_key;
use crate::bson_ext::derived_id;
use crate::error::Result;
use crate::inbox::filters::Filter;
use crate::inbox::lifecycle::message_not_found;
use crate::inbox::time_ordered::lifecycle::{time_ordered_fields, TimeOrderedStore};
use crate::inbox::time_ordered::Mark;
use crate::inbox::{MessageId, Payload};

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

impl<P: Payload> FanOutOnRead<P> {
    /// Runs `update` on every document `filter` matches, retried, each document locked where
    /// updates are not atomic. Returns how many matched.
    async fn update_all(&self, filter: Document, update: Document) -> Result<u64> {
        self.backend
            .update_every_owner(&self.messages, &filter, LAYOUT.lock_field(), &update)
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
}

#[async_trait]
impl<P: Payload> TimeOrderedStore for FanOutOnRead<P> {
    time_ordered_fields!(LAYOUT, messages);

    /// The sent one (`_id` the message's id) or the one delivered to `owner` (`_id` derived
    /// from both).
    fn document_of(owner: &str, id: MessageId) -> Document {
        doc! { "_id": { "$in": [id.0, derived_id(id.0, owner)] }, "to": owner }
    }

    /// By `id` (`{id, from}` once the sender is named: the sender's shard).
    fn documents_of(id: MessageId) -> Document {
        doc! { "id": id.0 }
    }

    fn retraction() -> Document {
        let retracted = bson::DateTime::now();
        doc! { "$set": { "retracted": retracted }, "$unset": { "message": "" } }
    }

    async fn update_held(&self, owner: &str, id: MessageId, update: Document) -> Result<u64> {
        self.update_one(owner, id, Self::held(owner, id), update)
            .await
    }

    /// Each document locked by itself (the owner shares it).
    async fn update_owned(&self, _owner: &str, filter: Document, update: Document) -> Result<u64> {
        self.update_all(filter, update).await
    }

    /// One `update` adding the owner to `gone_for` (a retracted message matches too: deleting
    /// it changes nothing more).
    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        let update = doc! {
            "$addToSet": { "gone_for": owner },
            "$pull": { "read_by": owner, "starred_by": owner },
        };
        if self
            .update_one(owner, id, Self::document_of(owner, id), update)
            .await?
            == 0
        {
            return Err(message_not_found(id));
        }
        Ok(())
    }

    /// The owner's list (one `update`), then the owner's name on the sender's documents in
    /// their inbox (one `update_many`).
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        let mark = LAYOUT.state.mark(owner, Mark::Hidden(filter), on);
        let set = self.filters.set(&self.backend, owner, sender, filter, on);
        self.backend
            .exclusive_one(&filters_lock(owner), set)
            .await?;
        self.update_all(doc! { "to": owner, "from": sender }, mark)
            .await?;
        Ok(())
    }

    /// The older documents addressed to the owner alone are deleted (one `delete_many`) and
    /// the older ones they share get the owner in `gone_for` (one `update_many`): a shared
    /// document stays for its other recipients. Returns both together.
    async fn drop_older(&self, owner: &str, older: Vec<Document>) -> Result<u64> {
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
