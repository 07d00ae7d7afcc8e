//! Reading comments: by link, by page of an index range, and the positions pages continue after.

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::options::FindOptions;

use super::stored::Stored;
use super::{PerComment, STRATEGY};
use crate::comments::cursor::{self, page_from, View};
use crate::comments::{slug, validate, Comment, Order};
use crate::page::{invalid, Scope};
use crate::{bson_ext, error::Entity, Cursor, Page, PageRequest, Result};

impl PerComment {
    pub(super) async fn find_one(&self, filter: Document) -> Result<Option<Stored>> {
        let found = self.comments.find_one(filter).await?;
        found
            .map(|found| bson_ext::decode(self.comments.name(), found))
            .transpose()
    }

    /// The comment at `link`.
    pub(super) async fn find_link(
        &self,
        discussion: &str,
        link: &str,
        what: Entity,
    ) -> Result<Stored> {
        validate::check_discussion(discussion)?;
        slug::parse_slug(link)?;
        self.find_one(doc! { "discussion_id": discussion, "slug": link })
            .await?
            .ok_or_else(|| validate::no_comment(what, link))
    }

    /// Whether anything replies to `stored`.
    pub(super) async fn has_replies(&self, stored: &Stored) -> Result<bool> {
        let replies = self
            .comments
            .find_one(doc! {
                "discussion_id": &stored.discussion_id,
                "full_slug": {
                    "$gt": format!("{}/", stored.full_slug),
                    "$lt": format!("{}0", stored.full_slug),
                },
            })
            .projection(doc! { "_id": 1 })
            .await?;
        Ok(replies.is_some())
    }

    /// Runs a page query: `filter`, sorted by `sort`, `limit + 1` documents.
    pub(super) async fn page(
        &self,
        discussion: &str,
        page: &PageRequest,
        filter: Document,
        sort: Document,
        cursor: impl FnOnce(&Stored) -> Cursor,
    ) -> Result<Page<Comment>> {
        let options = FindOptions::builder()
            .sort(sort)
            .limit(page.fetch() as i64)
            .build();
        let found: Vec<Document> = self
            .comments
            .find(filter)
            .with_options(options)
            .await?
            .try_collect()
            .await?;
        let stored = found
            .into_iter()
            .map(|found| bson_ext::decode(self.comments.name(), found))
            .collect::<Result<Vec<Stored>>>()?;
        if stored.is_empty()
            && page.after.is_none()
            && self.registry.find(discussion).await?.is_none()
        {
            return Err(validate::no_discussion(discussion));
        }
        Ok(page_from(stored, page.limit, Stored::comment, cursor))
    }

    /// The field a threaded page in `order` sorts by.
    pub(super) fn thread_field(order: Order) -> &'static str {
        match order {
            Order::OldestFirst => "full_slug",
            Order::NewestFirst => "thread_key",
        }
    }

    /// The sort key after which a threaded or sub-thread page (of `scope`) continues.
    pub(super) fn sort_key_after(
        page: &PageRequest,
        view: View,
        order: Order,
        scope: Scope,
    ) -> Result<Option<String>> {
        let Some(after) = &page.after else {
            return Ok(None);
        };
        let [key] = cursor::position(after, STRATEGY, view, order, scope)?;
        if !slug::is_sort_key(&key) {
            return Err(invalid("not a thread position"));
        }
        Ok(Some(key))
    }
}
