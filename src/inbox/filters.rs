//! Each owner's mute and block lists: one document `{_id: owner, muted: [..], blocked: [..]}`.
//!
//! [`super::FanOutOnWrite`] and [`super::FanOutOnRead`] keep them in their `inbox_filters`
//! collection and read them on every send (one `find` of the recipients that filter the
//! sender); [`super::BucketedFanOut`] keeps them on its heads documents, which every send reads
//! already.

use std::collections::HashSet;

use bson::{doc, Document};
use mongodb::Collection;

use crate::backend::Backend;
use crate::bson_ext;
use crate::error::Result;

/// The per-owner filters on senders: see [`InboxLifecycle::mute`](super::InboxLifecycle::mute) and [`InboxLifecycle::block`](super::InboxLifecycle::block).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Filter {
    /// The sender's messages are delivered, hidden.
    Mute,
    /// The sender's messages are not delivered; those already there are hidden.
    Block,
}

impl Filter {
    /// The field of the owner's filter document that lists the senders, and of a copy or
    /// bucket entry that marks what the filter hides.
    pub(crate) fn field(self) -> &'static str {
        match self {
            Filter::Mute => "muted",
            Filter::Block => "blocked",
        }
    }
}

/// The senders an owner mutes and blocks, as [`super::InboxStore::filters`] reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Filters {
    /// Senders whose messages are delivered hidden.
    pub muted: Vec<String>,
    /// Senders whose messages are not delivered.
    pub blocked: Vec<String>,
}

/// The default collection of the fan-out strategies' lists.
pub(super) const DEFAULT_COLLECTION: &str = "inbox_filters";

/// The recipients of one send that filter its sender.
#[derive(Debug, Default)]
pub(super) struct SenderFilters {
    /// Recipients who muted the sender: they receive the message hidden.
    pub(super) muted: HashSet<String>,
    /// Recipients who blocked the sender: they do not receive it.
    pub(super) blocked: HashSet<String>,
}

impl SenderFilters {
    /// Whether `recipient` filters the sender with `filter`.
    pub(super) fn has(&self, recipient: &str, filter: Filter) -> bool {
        match filter {
            Filter::Mute => self.muted.contains(recipient),
            Filter::Block => self.blocked.contains(recipient),
        }
    }
}

/// Whether the list `filter` of an owner's document names `sender`.
pub(super) fn lists(document: &Document, filter: Filter, sender: &str) -> bool {
    document
        .get_array(filter.field())
        .is_ok_and(|senders| senders.iter().any(|s| s.as_str() == Some(sender)))
}

/// The lists of an owner's document.
pub(super) fn read(document: Option<&Document>) -> Filters {
    let names = |field: &str| {
        document
            .map(|d| bson_ext::strings(d, field))
            .unwrap_or_default()
    };
    Filters {
        muted: names(Filter::Mute.field()),
        blocked: names(Filter::Block.field()),
    }
}

/// The lists, in a collection of documents keyed by owner.
#[derive(Clone, Debug)]
pub(super) struct FilterLists {
    lists: Collection<Document>,
}

impl FilterLists {
    pub(super) fn new(lists: Collection<Document>) -> Self {
        Self { lists }
    }

    /// The collection of the lists.
    pub(super) fn collection(&self) -> &Collection<Document> {
        &self.lists
    }

    /// Deletes `owner`'s lists: one `delete_one`.
    pub(super) async fn forget(&self, owner: &str) -> Result<()> {
        self.lists.delete_one(doc! { "_id": owner }).await?;
        Ok(())
    }

    /// Adds `sender` to (`on`) or removes them from `owner`'s list `filter`: one `update`
    /// (upserting). Retried: `$addToSet` and `$pull` applied twice apply once.
    pub(super) async fn set(
        &self,
        backend: &Backend,
        owner: &str,
        sender: &str,
        filter: Filter,
        on: bool,
    ) -> Result<()> {
        let change = if on {
            doc! { "$addToSet": { filter.field(): sender } }
        } else {
            doc! { "$pull": { filter.field(): sender } }
        };
        backend
            .retry("set filter", || async {
                match self
                    .lists
                    .update_one(doc! { "_id": owner }, change.clone())
                    .upsert(true)
                    .await
                {
                    Ok(_) => Ok(()),
                    // Two first upserts of one owner's document: the other one created it.
                    Err(error) if crate::backend::update_batch::is_duplicate_key(&error) => {
                        self.lists
                            .update_one(doc! { "_id": owner }, change.clone())
                            .await?;
                        Ok(())
                    }
                    Err(error) => Err(error.into()),
                }
            })
            .await
    }

    /// `owner`'s lists: one `find`.
    pub(super) async fn get(&self, owner: &str) -> Result<Filters> {
        let found = self
            .lists
            .find_one(doc! { "_id": owner })
            .projection(doc! { "muted": 1, "blocked": 1 })
            .await?;
        Ok(read(found.as_ref()))
    }

    /// Which of `recipients` mute or block `sender`: one `find` of the documents that name
    /// `sender`, retried (a read).
    pub(super) async fn for_sender(
        &self,
        backend: &Backend,
        sender: &str,
        recipients: &[String],
    ) -> Result<SenderFilters> {
        if recipients.is_empty() {
            // No command: an empty `$in` matches nothing, and on the shard key it crashes a
            // sharded engine (see `src/server/family/`).
            return Ok(SenderFilters::default());
        }
        let found: Vec<Document> = backend
            .find_all("read filters", || {
                self.lists.find(doc! {
                    "_id": { "$in": recipients },
                    "$or": [{ "muted": sender }, { "blocked": sender }],
                })
            })
            .await?;
        let mut filters = SenderFilters::default();
        for document in &found {
            let Ok(owner) = document.get_str("_id") else {
                continue;
            };
            if lists(document, Filter::Mute, sender) {
                filters.muted.insert(owner.to_owned());
            }
            if lists(document, Filter::Block, sender) {
                filters.blocked.insert(owner.to_owned());
            }
        }
        Ok(filters)
    }

    /// The lists' shard key: one small document per owner, read by id.
    pub(super) fn shard_key(&self) -> crate::sharding::ShardKey {
        crate::sharding::ShardKey::hashed_id(
            self.lists.name(),
            "one small document per owner, read by id",
        )
    }
}
