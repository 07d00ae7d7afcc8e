//! Keyset pages over the graph's collections, ordered by user id.

use std::fmt;

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use crate::{Error, Result};

/// Which page of a graph query to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphQuery {
    /// At most this many items (1 to [`GraphQuery::MAX_LIMIT`]).
    pub limit: usize,
    /// Continue after the page that returned this cursor.
    pub after: Option<GraphCursor>,
}

impl GraphQuery {
    /// The largest page a query returns.
    pub const MAX_LIMIT: usize = 10_000;

    /// The first `limit` items.
    pub fn first(limit: usize) -> Self {
        Self { limit, after: None }
    }

    /// The `limit` items after the page that returned `cursor`.
    pub fn after(limit: usize, cursor: GraphCursor) -> Self {
        Self {
            limit,
            after: Some(cursor),
        }
    }
}

/// Where the next page of a graph query starts: after the last user id of the previous page
/// (results are ordered by user id). Opaque; it can be stored as text and parsed back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GraphCursor(String);

impl GraphCursor {
    /// The cursor as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn after(id: &str) -> Self {
        Self(format!("g.{id}"))
    }

    fn id(&self) -> Result<&str> {
        self.0
            .strip_prefix("g.")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| Error::InvalidCursor {
                reason: "not a follow graph cursor".to_owned(),
            })
    }
}

impl fmt::Display for GraphCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for GraphCursor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let cursor = Self(s.to_owned());
        cursor.id()?;
        Ok(cursor)
    }
}

/// One page of a graph query, ordered by user id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphPage<T> {
    /// The items on this page.
    pub items: Vec<T>,
    /// Pass to [`GraphQuery::after`] for the next page; `None` on the last page.
    pub next: Option<GraphCursor>,
}

/// Up to `limit + 1` documents matching `filter`, after the cursor, in `field` order.
pub(super) async fn page_of(
    collection: &Collection<Document>,
    mut filter: Document,
    field: &str,
    query: &GraphQuery,
) -> Result<Vec<Document>> {
    crate::validate::page_limit(query.limit, GraphQuery::MAX_LIMIT)?;
    if let Some(cursor) = &query.after {
        filter.insert(field, doc! { "$gt": cursor.id()? });
    }
    Ok(collection
        .find(filter)
        .sort(doc! { field: 1 })
        .limit(query.limit as i64 + 1)
        .await?
        .try_collect()
        .await?)
}

/// Cuts `items` to `limit`, returning the cursor after the last kept one if more followed.
pub(super) fn trim<T>(
    items: &mut Vec<T>,
    limit: usize,
    id: impl Fn(&T) -> String,
) -> Option<GraphCursor> {
    let more = items.len() > limit;
    items.truncate(limit);
    more.then(|| items.last().map(|last| GraphCursor::after(&id(last))))
        .flatten()
}
