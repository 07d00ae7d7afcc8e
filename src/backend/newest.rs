//! The newest documents of several keys at once, newest first by `(sent, _id)`: what a timeline
//! merges from the authors it follows.
//!
//! Where the server merges sorted index ranges
//! ([`Capabilities::merged_key_ranges`](crate::server::Capabilities::merged_key_ranges),
//! MongoDB) this is one `find` with `$in`, which reads about `limit` index entries per key.
//! Elsewhere such a `find` sorts everything the keys match, so each key's newest `limit` are
//! read apart (a few `find`s in flight at once) and merged here: the cost follows the keys and
//! the page, never everything the keys ever wrote.

use std::cmp::Reverse;

use bson::{doc, Bson, Document};
use futures::{StreamExt, TryStreamExt};
use mongodb::Collection;

use super::Backend;
use crate::error::Result;

/// How many of one read's per-key `find`s are in flight at once.
const KEYS_IN_FLIGHT: usize = 8;

impl Backend {
    /// The newest `limit` documents of `collection` whose `field` is one of `keys` and that
    /// match `filter`, newest first by `(sent, _id)`; an index on `{field, sent, _id}` serves
    /// each key.
    pub(crate) async fn newest_of_keys(
        &self,
        collection: &Collection<Document>,
        field: &str,
        keys: &[String],
        filter: Document,
        limit: usize,
    ) -> Result<Vec<Document>> {
        if keys.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let newest = |keys: Bson| {
            let mut filter = filter.clone();
            filter.insert(field, keys);
            async move {
                let found: Vec<Document> = collection
                    .find(filter)
                    .sort(doc! { "sent": -1, "_id": -1 })
                    .limit(limit as i64)
                    .await?
                    .try_collect()
                    .await?;
                Result::Ok(found)
            }
        };
        if keys.len() == 1 || self.capabilities().await?.merged_key_ranges {
            let keys = match keys {
                [key] => Bson::from(key.as_str()),
                _ => Bson::from(doc! { "$in": keys }),
            };
            return newest(keys).await;
        }
        let reads: Vec<_> = keys
            .iter()
            .map(|key| newest(Bson::from(key.as_str())))
            .collect();
        let mut found: Vec<Document> = futures::stream::iter(reads)
            .buffer_unordered(KEYS_IN_FLIGHT)
            .try_concat()
            .await?;
        found.sort_by_cached_key(|document| Reverse(time_order(document)));
        found.truncate(limit);
        Ok(found)
    }
}

/// A document's place in time order: `sent`, then `_id` (as the server sorts them: a missing
/// field first).
fn time_order(document: &Document) -> (Option<bson::DateTime>, Option<bson::oid::ObjectId>) {
    (
        document.get_datetime("sent").ok().copied(),
        document.get_object_id("_id").ok(),
    )
}
