//! One change to every owner's copy of something (every recipient's copy of a message, every
//! bucket holding it, every document one owner's state lives on): one `update_many` where
//! single-document updates are atomic; where a write command is one transaction holding its
//! row locks to the end (DocumentDB), document by document in `_id` order, so two such changes
//! of overlapping documents wait for each other briefly instead of deadlocking (measured under
//! the load benchmark on DocumentDB: fan out on read's `mark_read_up_to`, one `update_many`
//! over messages its owner shares, took p99 10.9 s and failed 4 times of 187 with "deadlock
//! detected"); where updates are not atomic (FerretDB 1.x), under the owners' locks, taken a
//! round of owners at a time so no caller holds some owners while waiting for others.

use bson::{Bson, Document};
use futures::{StreamExt, TryStreamExt};

use super::Backend;
use crate::error::Result;

/// The documents one `update_many` changes where a command is one transaction (see
/// [`Backend::update_every_owner`]): few enough that its row locks are held briefly. Under the
/// load benchmark on DocumentDB (fan out on read, whose every update rewrites a shared message
/// and its index entries), 100 a command made `mark_read_up_to` p99 2.8 to 6.4 s, 16 made it
/// 1.0 to 1.1 s.
const IDS_PER_UPDATE: usize = 16;

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
    /// owners a lock `insert`, the `update_many` and an unlock `delete`; where a command is one
    /// transaction, a `find` of the documents' `_id`s, then an `update_many` per 16 of them.
    pub(crate) async fn update_every_owner(
        &self,
        collection: &mongodb::Collection<Document>,
        filter: &Document,
        owner_field: &'static str,
        update: &Document,
    ) -> Result<u64> {
        if self.capabilities().await?.write_commands_are_transactions {
            return self.update_in_id_order(collection, filter, update).await;
        }
        if !self.locking().await? {
            return self
                .update_many_retried(collection, filter.clone(), update)
                .await;
        }
        let found: Vec<Document> = self
            .find_all("find owners", || {
                collection
                    .find(filter.clone())
                    .projection(bson::doc! { owner_field: 1 })
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
            let n = self.update_many_retried(collection, filter, update).await?;
            matched_ref.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })
        .await?;
        Ok(matched.into_inner())
    }

    /// [`Backend::update_every_owner`] where a command is one transaction: the matching
    /// documents' `_id`s (one `find`), sorted, then one `update_many` of `{_id: {$in: ids},
    /// ..filter}` per [`IDS_PER_UPDATE`] of them, each its own transaction locking its rows in
    /// `_id` order (the server's `_id` index returns them so), so every such change locks in
    /// one order. A document changed meanwhile so that `filter` no longer matches it is left as
    /// it is, as `update_many` would; one that starts matching after the `find` is left out, as
    /// it would be had `update_many` run first.
    async fn update_in_id_order(
        &self,
        collection: &mongodb::Collection<Document>,
        filter: &Document,
        update: &Document,
    ) -> Result<u64> {
        let found = self
            .find_all("find documents to update", || {
                collection
                    .find(filter.clone())
                    .projection(bson::doc! { "_id": 1 })
            })
            .await?;
        let mut ids: Vec<Bson> = found
            .into_iter()
            .filter_map(|mut document| document.remove("_id"))
            .collect();
        ids.sort_unstable_by_key(lock_key);
        let in_flight = self.capabilities().await?.update_commands_in_flight.max(1);
        let filters: Vec<Document> = ids
            .chunks(IDS_PER_UPDATE)
            .map(|chunk| {
                let mut chunk_filter = bson::doc! { "_id": { "$in": chunk } };
                chunk_filter.extend(filter.clone());
                chunk_filter
            })
            .collect();
        let matched: Vec<u64> = futures::stream::iter(filters)
            .map(|chunk_filter| self.update_many_retried(collection, chunk_filter, update))
            .buffer_unordered(in_flight)
            .try_collect()
            .await?;
        Ok(matched.into_iter().sum())
    }

    /// One `update_many`, retried (`update` is idempotent): how many documents matched.
    async fn update_many_retried(
        &self,
        collection: &mongodb::Collection<Document>,
        filter: Document,
        update: &Document,
    ) -> Result<u64> {
        let updated = self
            .command("update every owner", || {
                collection.update_many(filter.clone(), update.clone())
            })
            .await?;
        Ok(updated.matched_count)
    }
}
