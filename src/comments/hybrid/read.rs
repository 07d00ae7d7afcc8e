//! Reads: walks over the pages, and finding one comment's page.

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::options::FindOptions;

use super::{
    check_slug, number, parse_place_parts, Entry, HybridPages, PageDocument, Place, STRATEGY,
};
use crate::bson_ext;
use crate::comments::cursor::{self, View};
use crate::comments::{validate, KeyedComment, Order};
use crate::page::Cursor;
use crate::{error::Entity, Result};

impl HybridPages {
    /// How many comments each page document of `discussion` holds, page 0 first (tombstones
    /// included). Every page but the last holds exactly [`HybridPages::page_size`].
    pub async fn page_counts(&self, discussion: &str) -> Result<Vec<(u64, usize)>> {
        validate::check_discussion(discussion)?;
        let counts = FindOptions::builder()
            .projection(doc! { "page": 1, "count": 1 })
            .sort(doc! { "page": 1 })
            .build();
        let pages = self.discussion_pages(discussion, counts).await?;
        Ok(pages
            .iter()
            .map(|page| (number(page, "page") as u64, number(page, "count") as usize))
            .collect())
    }

    /// Every page document of `discussion` (one `find`), read with `options` (what to
    /// project, how to sort).
    pub(super) async fn discussion_pages(
        &self,
        discussion: &str,
        options: FindOptions,
    ) -> Result<Vec<Document>> {
        Ok(self
            .pages
            .find(doc! { "discussion_id": discussion })
            .with_options(options)
            .await?
            .try_collect()
            .await?)
    }

    /// Up to `wanted` comments after `after` in `order`, with their places, in that order.
    ///
    /// Pages are read in page order and a comment's place is its page and its index there, never
    /// a position computed from the page size, so pages of any size read correctly: this
    /// strategy's (every page but the last holds exactly `page_size`) and the manual's (a page is
    /// left once it holds more than its soft limit, so concurrent writers overfill it). One
    /// `find` reads as many pages as hold `wanted` comments when every page but the last holds
    /// at least `page_size`; should some hold fewer, further `find`s read on.
    pub(super) async fn walk(
        &self,
        discussion: &str,
        order: Order,
        after: Option<Place>,
        wanted: usize,
    ) -> Result<Vec<(Place, Entry)>> {
        let size = self.page_size;
        let ascending = order == Order::OldestFirst;
        let mut pages_wanted = match (after, ascending) {
            (None, true) => wanted.div_ceil(size),
            // The cursor's page holds the `index + 1` comments up to the cursor first.
            (Some((_, index)), true) => (wanted + index + 1).div_ceil(size),
            // The newest page may hold a single comment.
            (None, false) => 1 + (wanted - 1).div_ceil(size),
            // The cursor's page holds `index` comments before the cursor.
            (Some((_, index)), false) => 1 + wanted.saturating_sub(index).div_ceil(size),
        };
        let range = if ascending { "$gte" } else { "$lte" };
        let mut pages_filter = after.map(|(page, _)| doc! { range: page });
        let mut entries = Vec::new();
        loop {
            let mut filter = doc! { "discussion_id": discussion };
            if let Some(pages_filter) = &pages_filter {
                filter.insert("page", pages_filter.clone());
            }
            let pages: Vec<Document> = self
                .pages
                .find(filter)
                .sort(doc! { "page": if ascending { 1 } else { -1 } })
                .limit(pages_wanted as i64)
                .await?
                .try_collect()
                .await?;
            let fetched = pages.len();
            let mut last_page = None;
            for page in pages {
                let page: PageDocument = bson_ext::decode(self.pages.name(), page)?;
                last_page = Some(page.page);
                let mut indexed: Vec<(usize, Entry)> =
                    page.comments.into_iter().enumerate().collect();
                if !ascending {
                    indexed.reverse();
                }
                for (index, entry) in indexed {
                    let place = (page.page, index);
                    let past_cursor = after.is_none_or(|cursor| {
                        if ascending {
                            place > cursor
                        } else {
                            place < cursor
                        }
                    });
                    if past_cursor {
                        entries.push((place, entry));
                    }
                }
            }
            let Some(last_page) = last_page else {
                break;
            };
            if entries.len() >= wanted || fetched < pages_wanted {
                break;
            }
            // Some page held fewer than `page_size`: read on past the last one read.
            pages_filter = Some(doc! { if ascending { "$gt" } else { "$lt" }: last_page });
            pages_wanted = (wanted - entries.len()).div_ceil(size);
        }
        entries.truncate(wanted);
        Ok(entries)
    }

    /// The comment `slug`, if a page holds it: how a post whose reply was lost finds out
    /// whether it landed.
    pub(super) async fn find_slug(&self, discussion: &str, slug: &str) -> Result<Option<Entry>> {
        let page = self
            .backend
            .command("read page", || {
                self.pages
                    .find_one(doc! { "discussion_id": discussion, "comments.slug": slug })
            })
            .await?;
        let Some(page) = page else {
            return Ok(None);
        };
        let page: PageDocument = bson_ext::decode(self.pages.name(), page)?;
        Ok(page.comments.into_iter().find(|entry| entry.slug == slug))
    }

    /// The keyed comment at `slug` (derived from `keyed`), if any (one `find`), checked against
    /// `keyed`: [`Error::Conflict`] when it was posted with other content.
    ///
    /// [`Error::Conflict`]: crate::Error::Conflict
    pub(super) async fn keyed_entry(
        &self,
        discussion: &str,
        slug: &str,
        keyed: &KeyedComment,
    ) -> Result<Option<Entry>> {
        let found = self.find_slug(discussion, slug).await?;
        keyed.repeat(found, |entry| &entry.key)
    }

    /// The page holding `slug`, and the comment's index in it.
    pub(super) async fn locate(
        &self,
        discussion: &str,
        slug: &str,
    ) -> Result<(PageDocument, usize)> {
        validate::check_discussion(discussion)?;
        check_slug(slug)?;
        let page = self
            .pages
            .find_one(doc! { "discussion_id": discussion, "comments.slug": slug })
            .await?
            .ok_or_else(|| validate::no_comment(Entity::Comment, slug))?;
        let page: PageDocument = bson_ext::decode(self.pages.name(), page)?;
        let index = page
            .comments
            .iter()
            .position(|entry| entry.slug == slug)
            .ok_or_else(|| validate::no_comment(Entity::Comment, slug))?;
        Ok((page, index))
    }
}

/// A chronological cursor of `discussion` in `order` after the comment at `place`.
pub(super) fn after_place(order: Order, discussion: &str, (page, index): Place) -> Cursor {
    let place = [page.to_string(), index.to_string()];
    cursor::new(
        STRATEGY,
        View::Chronological,
        order,
        cursor::discussion(discussion),
        &place.each_ref().map(String::as_str),
    )
}

/// The place in a chronological cursor of `discussion` in `order`: its page and index.
pub(super) fn parse_place(cursor: &Cursor, order: Order, discussion: &str) -> Result<Place> {
    let scope = cursor::discussion(discussion);
    let [page, index] = cursor::position(cursor, STRATEGY, View::Chronological, order, scope)?;
    parse_place_parts(&page, &index)
}
