//! [`ThreadedComments`] for [`PerComment`]: replies, the threaded view, sub-threads and ranked
//! threads.

use std::collections::HashMap;

use async_trait::async_trait;
use bson::{doc, Document};
use futures::TryStreamExt;

use super::stored::Stored;
use super::{PerComment, STRATEGY};
use crate::comments::cursor::{self, page_from, View};
use crate::comments::engine::{Listing, ThreadsEngine};
use crate::comments::{
    check_reply_target, notify_reply, slug, validate, Comment, KeyedComment, NewComment, Order,
    Sort, Thread, VotedComments,
};
use crate::page::invalid;
use crate::{bson_ext, error::Entity, Page, Result};

#[async_trait]
impl ThreadsEngine for PerComment {
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        slug::parse_slug(parent)?;
        check_reply_target(self.outbox.as_ref(), discussion, parent)?;
        let keyed = KeyedComment::of(discussion, Some(parent), &comment)?;
        if let Some(keyed) = &keyed {
            // A repeat: one `find`, nothing written (and nothing notified again).
            if let Some(stored) = self.keyed_comment(discussion, keyed).await? {
                return Ok(stored.comment());
            }
        }
        let parent = self
            .find_link(discussion, parent, Entity::ParentComment)
            .await?;
        let reply = self
            .insert(discussion, Some(&parent), comment, keyed.as_ref())
            .await?;
        // The parent may have been removed (as a leaf) between the read and the insert: put it
        // (and any ancestor removed after it) back as a tombstone so the reply keeps its place.
        let still_there = self
            .comments
            .find_one(doc! { "_id": parent.id, "discussion_id": discussion })
            .projection(doc! { "_id": 1 })
            .await?;
        if still_there.is_none() {
            self.restore_as_tombstone(&parent).await?;
        }
        let reply = reply.comment();
        notify_reply(
            self.outbox.as_ref(),
            discussion,
            &parent.slug,
            &parent.body.author.id,
            &reply,
        )
        .await;
        Ok(reply)
    }

    async fn thread_page(&self, listing: Listing<'_>, order: Order) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        let field = Self::thread_field(order);
        let mut filter = doc! { "discussion_id": discussion };
        let scope = cursor::discussion(discussion);
        if let Some(key) = Self::sort_key_after(&page, View::Threaded, order, scope)? {
            filter.insert(field, doc! { "$gt": key });
        }
        self.page(discussion, &page, filter, doc! { field: 1 }, |stored| {
            let key = match order {
                Order::OldestFirst => &stored.full_slug,
                Order::NewestFirst => &stored.thread_key,
            };
            cursor::new(STRATEGY, View::Threaded, order, scope, &[key])
        })
        .await
    }

    async fn sub_thread(&self, listing: Listing<'_>, link: &str) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        let root = self.find_link(discussion, link, Entity::Comment).await?;
        // A sub-thread reads in posting order, as its cursors say.
        let scope = cursor::sub_thread(discussion, link);
        let start = match Self::sort_key_after(&page, View::SubThread, Order::OldestFirst, scope)? {
            Some(key) if key >= root.full_slug => doc! { "$gt": key },
            Some(_) => return Err(invalid("not a position in this sub-thread")),
            None => doc! { "$gte": &root.full_slug },
        };
        let mut range = start;
        range.insert("$lt", format!("{}0", root.full_slug));
        let filter = doc! { "discussion_id": discussion, "full_slug": range };
        self.page(
            discussion,
            &page,
            filter,
            doc! { "full_slug": 1 },
            |stored| {
                cursor::new(
                    STRATEGY,
                    View::SubThread,
                    Order::OldestFirst,
                    scope,
                    &[&stored.full_slug],
                )
            },
        )
        .await
    }

    /// The top level as [`VotedComments::ranked`] reads it (1 `find`), then per level of
    /// replies 1 `find` of every reply of the comments shown at the level above, ranked here
    /// by their stored keys as the ranked index orders them (key, then `full_slug`).
    async fn ranked_thread(
        &self,
        listing: Listing<'_>,
        sort: Sort,
        depth: usize,
    ) -> Result<Page<Thread>> {
        let Listing { discussion, page } = listing;
        let limit = page.limit;
        let top = self.ranked(discussion, None, sort, page).await?;
        let mut replies = HashMap::new();
        let mut level: Vec<String> = top.items.iter().map(|c| c.link.clone()).collect();
        for _ in 0..depth {
            if level.is_empty() {
                break;
            }
            let found: Vec<Document> = self
                .comments
                .find(doc! { "discussion_id": discussion, "parent": { "$in": level.clone() } })
                .await?
                .try_collect()
                .await?;
            let mut by_parent: HashMap<String, Vec<Stored>> = HashMap::new();
            for found in found {
                let stored: Stored = bson_ext::decode(self.comments.name(), found)?;
                by_parent
                    .entry(stored.parent.clone())
                    .or_default()
                    .push(stored);
            }
            // One zero, as the server compares keys.
            let key = |stored: &Stored| stored.ranking.key(sort) + 0.0;
            let mut below = Vec::new();
            for parent in level {
                let mut children = by_parent.remove(&parent).unwrap_or_default();
                children.sort_by(|a, b| {
                    key(b)
                        .total_cmp(&key(a))
                        .then_with(|| a.full_slug.cmp(&b.full_slug))
                });
                children.truncate(limit + 1);
                let page = page_from(children, limit, Stored::comment, |last| {
                    cursor::after_ranked(
                        STRATEGY,
                        sort,
                        discussion,
                        Some(&parent),
                        last.ranking.key(sort),
                        &last.full_slug,
                    )
                });
                below.extend(page.items.iter().map(|c| c.link.clone()));
                replies.insert(parent, page);
            }
            level = below;
        }
        Ok(Thread::assemble(top, &mut replies))
    }
}
