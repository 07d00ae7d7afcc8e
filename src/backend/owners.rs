//! One change to every owner's copy of something (every recipient's copy of a message, every
//! bucket holding it): one `update_many` where single-document updates are atomic; where they
//! are not (FerretDB 1.x), under the owners' locks, taken a round of owners at a time so no
//! caller holds some owners while waiting for others.

use bson::Document;
use futures::TryStreamExt;

use super::Backend;
use crate::error::Result;

impl Backend {
    /// Applies `update` to every document of `collection` matching `filter`, whose owner (the
    /// lock key) is in `owner_field`. Returns how many documents matched. `update` must set
    /// absolute values (it is retried, and a retry applies nothing twice).
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
        let mut owners: Vec<String> = self
            .retry("find owners", || async {
                Ok(collection
                    .find(filter.clone())
                    .projection(bson::doc! { owner_field: 1 })
                    .await?
                    .try_collect::<Vec<Document>>()
                    .await?)
            })
            .await?
            .iter()
            .filter_map(|found| found.get_str(owner_field).ok().map(str::to_owned))
            .collect();
        owners.sort_unstable();
        owners.dedup();
        let matched = std::sync::atomic::AtomicU64::new(0);
        let matched_ref = &matched;
        self.exclusive_in_rounds(&owners, |taken| async move {
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
