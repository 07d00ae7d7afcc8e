//! The lifecycle of a fan-out-on-write inbox: every owner's state is on their own copy.
//!
//! One `update` per change of one owner's copy (found by its `_id`, derived from the message and
//! the owner, with `recipient` for the shard key), one
//! `update_many` for a range of it or for all of a message's copies (retract and edit, one range
//! of `_id`), one `count` per count. Every write is a `$set` or `$unset` of
//! absolute values, so a retry after a lost reply applies nothing twice; a write that matched
//! nothing reads once to tell an unknown message from one whose work is done.
//!
//! What both time-ordered layouts do alike is written once, in
//! [`crate::inbox::time_ordered::lifecycle`]; here is what this layout says of itself.

use async_trait::async_trait;
use bson::{doc, Document};

use super::{copies_of, copy_id, FanOutOnWrite, LAYOUT};
use crate::inbox::filters::Filter;
use crate::inbox::lifecycle::message_not_found;
use crate::inbox::time_ordered::lifecycle::{time_ordered_fields, TimeOrderedStore};
use crate::inbox::time_ordered::{self, Mark};
use crate::inbox::{MessageId, Payload};
use crate::Result;

/// What a tombstone keeps of a copy: no payload, no recipients, no state.
fn tombstone(reason: &str) -> Document {
    doc! {
        "$set": { "gone": reason },
        "$unset": { "message": "", "to": "", "to_count": "", "unread": "", "starred": "" },
    }
}

impl<P: Payload> FanOutOnWrite<P> {
    /// Applies `update` to `owner`'s copies `filter` matches (`every` one, or the first),
    /// retried as `operation`, holding `owner`'s lock where updates are not atomic: one
    /// `update`. Returns how many matched.
    async fn update_locked(
        &self,
        owner: &str,
        operation: &'static str,
        filter: Document,
        update: Document,
        every: bool,
    ) -> Result<u64> {
        let write = || async {
            let (filter, update) = (filter.clone(), update.clone());
            let result = if every {
                self.copies.update_many(filter, update).await?
            } else {
                self.copies.update_one(filter, update).await?
            };
            Ok(result.matched_count)
        };
        let retried = self.backend.retry(operation, write);
        self.backend.exclusive_one(owner, retried).await
    }
}

#[async_trait]
impl<P: Payload> TimeOrderedStore for FanOutOnWrite<P> {
    time_ordered_fields!(LAYOUT, copies);

    /// Its `_id`, and its owner (the shard key's prefix).
    fn document_of(owner: &str, id: MessageId) -> Document {
        doc! { "_id": copy_id(id, owner), "recipient": owner }
    }

    fn documents_of(id: MessageId) -> Document {
        copies_of(id)
    }

    fn retraction() -> Document {
        tombstone("retracted")
    }

    /// Holding `owner`'s lock where updates are not atomic. Retried: every update given here
    /// sets or unsets absolute values.
    async fn update_held(&self, owner: &str, id: MessageId, update: Document) -> Result<u64> {
        let filter = Self::held(owner, id);
        self.update_locked(owner, "update copy", filter, update, false)
            .await
    }

    /// One `update_many`, holding `owner`'s lock where updates are not atomic.
    async fn update_owned(&self, owner: &str, filter: Document, update: Document) -> Result<u64> {
        self.update_locked(owner, "mark read up to", filter, update, true)
            .await
    }

    /// One `update` turning the copy into a tombstone; when it matches nothing, one `find` tells
    /// a copy already gone (done) from none at all.
    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        if self.update_held(owner, id, tombstone("deleted")).await? != 0 {
            return Ok(());
        }
        let held = self
            .copies
            .find_one(Self::document_of(owner, id))
            .projection(doc! { "_id": 1 })
            .await?;
        match held {
            Some(_) => Ok(()),
            None => Err(message_not_found(id)),
        }
    }

    /// The owner's list (one `update`), then the mark on the sender's copies in their inbox
    /// (one `update_many`), holding the owner's lock where updates are not atomic.
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        let mark = LAYOUT.state.mark(owner, Mark::Hidden(filter), on);
        let work = async {
            self.filters
                .set(&self.backend, owner, sender, filter, on)
                .await?;
            time_ordered::mark_sender(&self.backend, &self.copies, LAYOUT, owner, sender, mark)
                .await
        };
        self.backend.exclusive_one(owner, work).await
    }

    /// One `delete_many` of the newest copy past the limit and everything older (and of
    /// everything past `max_age`). Retried: deleting twice deletes once (a retry may then
    /// report fewer).
    async fn drop_older(&self, owner: &str, older: Vec<Document>) -> Result<u64> {
        let filter = doc! { "recipient": owner, "$or": older };
        self.backend
            .retry("prune", || async {
                Ok(self.copies.delete_many(filter.clone()).await?.deleted_count)
            })
            .await
    }
}
