//! Long recipient lists, stored once per message instead of once per copy.
//!
//! A copy ([`super::FanOutOnWrite`]) or bucket entry ([`super::BucketedFanOut`]) of a message
//! carries the message's `to`. For a message to N recipients that is N copies of N names, N²
//! names in all: a message to 10,000 users would store 1.4 GB and take some 40 `insert`
//! commands of 48 MB, and a send to 100 writes 10,000 names. Past a threshold
//! (`max_inline_recipients`, 16 by default) the list is
//! instead stored once, as `{_id: message id, to: [..]}` in the strategy's recipients
//! collection, and each copy carries `to_count: N` in place of `to`. Pages put the list back
//! with one `find` by `_id` for all the page's shared lists, and none when the page has none.
//! (The bucketed strategy records every message there, with its list; see
//! [`super::BucketedFanOut`].)
//!
//! The list is written before any copy, so a reader never meets a copy without its list. A
//! retried send or delivery finds the list already there (an `insert` refused by the unique
//! `_id`, taken as done). A crash between the list and the copies leaves a list that no copy
//! names: harmless, and small next to the copies it saved.

use std::collections::HashMap;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use super::{MessageId, MAX_DOCUMENT_BYTES};
use crate::backend::Backend;
use crate::error::{Error, Result};

/// The field that replaces `to` in a copy whose list is stored apart: how many recipients.
const SHARED: &str = "to_count";

/// A message's list, to store before its copies.
#[derive(Debug)]
pub(super) struct SharedList(Document);

/// Where long recipient lists go, and how long a list may be and still ride in every copy.
#[derive(Clone, Debug)]
pub(super) struct RecipientLists {
    lists: Collection<Document>,
    /// The longest list kept in every copy.
    max_inline: usize,
}

impl RecipientLists {
    /// The default longest list kept in every copy: a small group's list rides along, a
    /// larger one is stored once. Measured on an engine over PostgreSQL (docs/BENCHMARKS.md), a send to 100
    /// with its list in every copy took 21 ms (fan out on write) and 31 ms (buckets), and 15 ms
    /// for both with it stored once; a page holding such messages pays one `find` by `_id`.
    pub(super) const DEFAULT_MAX_INLINE: usize = 16;
    /// The default collection of shared lists.
    pub(super) const DEFAULT_COLLECTION: &'static str = "inbox_recipients";

    /// Lists in `lists`; `max_inline` `None` takes the default.
    pub(super) fn new(lists: Collection<Document>, max_inline: Option<usize>) -> Self {
        Self {
            lists,
            max_inline: max_inline.unwrap_or(Self::DEFAULT_MAX_INLINE),
        }
    }

    /// The collection of lists (and of keyed sends' records, see [`super::keyed`]).
    pub(super) fn collection(&self) -> &Collection<Document> {
        &self.lists
    }

    /// The lists' shard key: one list per message, read by id.
    pub(super) fn shard_key(&self) -> crate::sharding::ShardKey {
        crate::sharding::ShardKey::hashed_id(
            self.lists.name(),
            "long recipient lists, one per message, read by id",
        )
    }

    /// Turns `entry` (message `id` as stored, with `to`) into what each copy stores. A list
    /// longer than the longest kept inline moves out of `entry` (which gets `to_count`) into the
    /// returned [`SharedList`], to [`RecipientLists::store`] before the copies. Writes nothing.
    ///
    /// # Errors
    ///
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"recipient list"`) when the list would not fit one document.
    pub(super) fn share(&self, entry: &mut Document, id: MessageId) -> Result<Option<SharedList>> {
        let long = matches!(entry.get("to"), Some(Bson::Array(to)) if to.len() > self.max_inline);
        if !long {
            return Ok(None);
        }
        let Some(Bson::Array(to)) = entry.remove("to") else {
            return Ok(None);
        };
        let count = to.len() as i64;
        let list = doc! { "_id": id.0, "to": to };
        crate::validate::encoded_size("recipient list", &list, MAX_DOCUMENT_BYTES)?;
        entry.insert(SHARED, count);
        Ok(Some(SharedList(list)))
    }

    /// Stores `list` (one `insert`; nothing for `None`), retrying transient failures under the
    /// store's policy. A list already stored, by a retry or an earlier delivery of the same
    /// message, is taken as done.
    pub(super) async fn store(&self, list: Option<SharedList>, backend: &Backend) -> Result<()> {
        if let Some(SharedList(list)) = list {
            backend.insert_once(&self.lists, list).await?;
        }
        Ok(())
    }

    /// Puts `to` back into every entry that shares its list: one `find` by `_id` for all of
    /// them, no command when none does. `id_field` names where entries keep the message id.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for a list that is missing (deleted by hand).
    pub(super) async fn restore(&self, entries: &mut [Document], id_field: &str) -> Result<()> {
        let ids: Vec<ObjectId> = entries
            .iter()
            .filter(|entry| entry.contains_key(SHARED))
            .filter_map(|entry| entry.get_object_id(id_field).ok())
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let lists: HashMap<ObjectId, Bson> = self
            .lists
            .find(doc! { "_id": { "$in": &ids } })
            .batch_size(ids.len() as u32 + 1)
            .await?
            .try_collect::<Vec<Document>>()
            .await?
            .into_iter()
            .filter_map(|mut list| Some((list.get_object_id("_id").ok()?, list.remove("to")?)))
            .collect();
        for entry in entries
            .iter_mut()
            .filter(|entry| entry.contains_key(SHARED))
        {
            let Ok(id) = entry.get_object_id(id_field) else {
                continue;
            };
            let to = lists.get(&id).cloned().ok_or_else(|| Error::NotFound {
                what: crate::error::Entity::RecipientList,
                id: id.to_hex(),
            })?;
            entry.remove(SHARED);
            entry.insert("to", to);
        }
        Ok(())
    }
}
