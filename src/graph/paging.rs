//! Keyset pages over the graph's collections, ordered by user id: a cursor (tag `g`) holds the
//! last user id of the previous page.

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use crate::page::{invalid, Cursor};
use crate::{Page, PageRequest, Result};

/// The tag of the graph's cursors.
const TAG: &str = "g";

/// A cursor after the user `id`.
pub(crate) fn after(id: &str) -> Cursor {
    Cursor::new(TAG, &[id])
}

/// The user id after which the next page starts.
fn id(cursor: &Cursor) -> Result<String> {
    let [id] = cursor.fields(TAG)?;
    if id.is_empty() {
        return Err(invalid("not a follow graph cursor"));
    }
    Ok(id)
}

/// Up to `limit + 1` documents matching `filter`, after the cursor, in `field` order.
pub(super) async fn page_of(
    collection: &Collection<Document>,
    mut filter: Document,
    field: &str,
    page: &PageRequest,
) -> Result<Vec<Document>> {
    page.check()?;
    if let Some(cursor) = &page.after {
        filter.insert(field, doc! { "$gt": id(cursor)? });
    }
    Ok(collection
        .find(filter)
        .sort(doc! { field: 1 })
        .limit(page.fetch() as i64)
        .await?
        .try_collect()
        .await?)
}

/// The page of `items` read by [`page_of`], with the cursor after the last kept one's user id
/// (`id`) if more followed.
pub(super) fn trim<T>(items: Vec<T>, limit: usize, id: impl Fn(&T) -> &str) -> Page<T> {
    Page::from_overfetch(items, limit, |last| after(id(last)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_hold_any_user_id() {
        for user in ["ann", "a.b", "user with spaces", "名前", "%2E"] {
            assert_eq!(id(&after(user)).unwrap(), user);
        }
        assert!(id(&Cursor::new(TAG, &[""])).is_err());
        assert!(id(&Cursor::new("ir", &["ann"])).is_err());
    }
}
