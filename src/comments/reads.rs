//! Reads retried whole on transient failures, written once for the strategies: one document
//! (what a write reads before it writes), or every document a filter selects (what an export
//! reads).

use bson::Document;
use futures::TryStreamExt;
use mongodb::Collection;

use crate::backend::Backend;
use crate::Result;

/// The first document of `collection` that `filter` selects, with the fields of `projection`
/// (every field for `None`): one `find`, retried whole (as `operation`).
pub(super) async fn find_one(
    backend: &Backend,
    operation: &'static str,
    collection: &Collection<Document>,
    filter: Document,
    projection: Option<Document>,
) -> Result<Option<Document>> {
    backend
        .retry(operation, || async {
            let mut find = collection.find_one(filter.clone());
            if let Some(projection) = &projection {
                find = find.projection(projection.clone());
            }
            Ok(find.await?)
        })
        .await
}

/// Every document of `collection` that `filter` selects, in `sort`'s order: one `find`, read
/// whole and retried whole (as `operation`).
pub(super) async fn find_all(
    backend: &Backend,
    operation: &'static str,
    collection: &Collection<Document>,
    filter: Document,
    sort: Document,
) -> Result<Vec<Document>> {
    backend
        .retry(operation, || async {
            Ok(collection
                .find(filter.clone())
                .sort(sort.clone())
                .await?
                .try_collect()
                .await?)
        })
        .await
}
