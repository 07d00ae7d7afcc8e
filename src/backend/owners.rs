//! One change to every owner's copy of something (every recipient's copy of a message, every
//! bucket holding it, every document one owner's state lives on): one `update_many` where
//! single-document updates are atomic; where they are not (FerretDB 1.x), under the owners'
//! locks, taken a round of owners at a time so no caller holds some owners while waiting for
//! others.

use bson::{Bson, Document};
use futures::TryStreamExt;

use super::Backend;
use crate::error::Result;

/// The lock key of a value of a lock field: a string as it is, an `ObjectId` in hex.
pub(crate) fn lock_key(value: &Bson) -> String {
    match value {
        Bson::String(text) => text.clone(),
        Bson::ObjectId(id) => id.to_hex(),
        other => other.to_string(),
    }
}

impl Backend {
    /// Applies `update` to every document of `collection` matching `filter`, whose lock key is
    /// the value of `owner_field` (an owner's name, or `_id` where owners share documents and
    /// each document is locked by itself; see [`lock_key`]). Returns how many documents
    /// matched. `update` must be idempotent (it is retried, and a retry applies nothing twice).
    ///
    /// Where writers take turns this costs a `find` of the owners first, then per round of
    /// owners a lock `insert`, the `update_many` and an unlock `delete`.
    pub(crate) async fn update_every_owner(
        &self,
        collection: &mongodb::Collection<Document>,
        filter: &Document,
        owner_field: &'static str,
        update: &Document,
    ) -> Result<u64> {
        if !self.locking().await? {
            return self
                .retry("update every owner", || async {
                    Ok(collection
                        .update_many(filter.clone(), update.clone())
                        .await?
                        .matched_count)
                })
                .await;
        }
        let found: Vec<Document> = self
            .retry("find owners", || async {
                Ok(collection
                    .find(filter.clone())
                    .projection(bson::doc! { owner_field: 1 })
                    .await?
                    .try_collect()
                    .await?)
            })
            .await?;
        let mut owners: Vec<(String, Bson)> = found
            .iter()
            .filter_map(|found| found.get(owner_field))
            .map(|value| (lock_key(value), value.clone()))
            .collect();
        owners.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        owners.dedup_by(|a, b| a.0 == b.0);
        let keys: Vec<String> = owners.iter().map(|(key, _)| key.clone()).collect();
        let values: std::collections::HashMap<&str, &Bson> = owners
            .iter()
            .map(|(key, value)| (key.as_str(), value))
            .collect();
        let matched = std::sync::atomic::AtomicU64::new(0);
        let (matched_ref, values) = (&matched, &values);
        self.exclusive_in_rounds(&keys, |taken| async move {
            let taken: Vec<Bson> = taken
                .iter()
                .filter_map(|key| values.get(key.as_str()).map(|value| (*value).clone()))
                .collect();
            let mut filter = filter.clone();
            filter.insert(owner_field, bson::doc! { "$in": taken });
            let n = self
                .retry("update every owner", || async {
                    Ok(collection
                        .update_many(filter.clone(), update.clone())
                        .await?
                        .matched_count)
                })
                .await?;
            matched_ref.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })
        .await?;
        Ok(matched.into_inner())
    }
}
