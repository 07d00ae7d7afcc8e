//! Keyset pages over the graph's collections, ordered by user id: a cursor (tag `g`) holds the
//! last user id of the previous page, and is bound to its list ([`List`]: whose following or
//! followers, which group's members, whose block list), so another list refuses it.

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use crate::page::{invalid, Cursor, Scope};
use crate::{Page, PageRequest, Result};

/// The tag of the graph's cursors.
const TAG: &str = "g";

/// A paged list of the graph: what a cursor is bound to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum List<'a> {
    /// Whom a user follows.
    Following(&'a str),
    /// Who follows a user.
    Followers(&'a str),
    /// A group's members.
    Members(&'a str),
    /// Whom a user blocked.
    Blocked(&'a str),
}

impl List<'_> {
    fn scope(self) -> Scope {
        match self {
            List::Following(user) => Scope::new("user's following list", &[user]),
            List::Followers(user) => Scope::new("user's followers list", &[user]),
            List::Members(group) => Scope::new("group's member list", &[group]),
            List::Blocked(user) => Scope::new("user's block list", &[user]),
        }
    }
}

/// A cursor of `list` after the user `id`.
pub(crate) fn after(list: List<'_>, id: &str) -> Cursor {
    Cursor::new(TAG, list.scope(), &[id])
}

/// The user id after which the next page of `list` starts.
fn id(cursor: &Cursor, list: List<'_>) -> Result<String> {
    let [id] = cursor.fields(TAG, list.scope())?;
    if id.is_empty() {
        return Err(invalid("not a follow graph cursor"));
    }
    Ok(id)
}

/// Up to `limit + 1` documents of `list` matching `filter`, after the cursor, in `field` order.
pub(super) async fn page_of(
    collection: &Collection<Document>,
    mut filter: Document,
    field: &str,
    list: List<'_>,
    page: &PageRequest,
) -> Result<Vec<Document>> {
    page.check()?;
    if let Some(cursor) = &page.after {
        filter.insert(field, doc! { "$gt": id(cursor, list)? });
    }
    Ok(collection
        .find(filter)
        .sort(doc! { field: 1 })
        .limit(page.fetch() as i64)
        .await?
        .try_collect()
        .await?)
}

/// One page of the user ids (`user`) of `list`'s documents matching `filter`, in id order:
/// [`page_of`], trimmed.
pub(super) async fn user_page(
    collection: &Collection<Document>,
    filter: Document,
    list: List<'_>,
    page: &PageRequest,
) -> Result<Page<String>> {
    let documents = page_of(collection, filter, "user", list, page).await?;
    let ids: Vec<String> = documents
        .iter()
        .filter_map(|d| d.get_str("user").ok().map(str::to_owned))
        .collect();
    Ok(trim(ids, page.limit, list, String::as_str))
}

/// The page of `items` of `list` read by [`page_of`], with the cursor after the last kept one's
/// user id (`id`) if more followed.
pub(super) fn trim<T>(
    items: Vec<T>,
    limit: usize,
    list: List<'_>,
    id: impl Fn(&T) -> &str,
) -> Page<T> {
    Page::from_overfetch(items, limit, |last| after(list, id(last)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_hold_any_user_id() {
        let list = List::Followers("ann");
        for user in ["ann", "a.b", "user with spaces", "名前", "%2E", "~7E"] {
            assert_eq!(id(&after(list, user), list).unwrap(), user);
        }
        assert!(id(&Cursor::new(TAG, list.scope(), &[""]), list).is_err());
        assert!(id(&Cursor::new("ir", list.scope(), &["ann"]), list).is_err());
    }

    #[test]
    fn cursors_are_refused_by_another_list() {
        let cursor = after(List::Followers("ann"), "bob");
        for other in [
            List::Followers("bob"),
            List::Following("ann"),
            List::Members("ann"),
            List::Blocked("ann"),
        ] {
            assert!(id(&cursor, other).is_err(), "{other:?}");
        }
    }
}
