//! Votes ([`Tally`], [`VotedComments`]) and the ranked levels read from the counts.

use async_trait::async_trait;
use bson::doc;
use bson::oid::ObjectId;

use super::read::Range;
use super::{Embedded, STRATEGY};
use crate::comments::cursor;
use crate::comments::engine::{Listing, Ranked, VotesEngine};
use crate::comments::ranking::rank_after;
use crate::comments::tree::{self, Node};
use crate::comments::votes::{count_in_element, Delta, Found, Tally, VoteBook};
use crate::comments::{validate, Comment, Sort, Strategy, Thread};
use crate::page::invalid;
use crate::{error::Entity, Cursor, Page, Result};

/// Where a ranked page of `parent`'s replies (the top level for `None`) by `sort` continues: the
/// key and sibling index in `cursor`, if any.
pub(super) fn ranked_after(
    cursor: Option<&Cursor>,
    sort: Sort,
    discussion: &str,
    parent: Option<&str>,
) -> Result<Option<(f64, usize)>> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    let (key, index) = cursor::ranked_key(cursor, STRATEGY, sort, discussion, parent)?;
    let index = tree::parse_path(&index, 0).map_err(|_| invalid("not a position"))?[0];
    Ok(Some((key, index)))
}

/// One level of comments, each with its index among its siblings, under the comment at `base`
/// (empty: the top level), ranked by `sort` as [`VotedComments::ranked`] ranks it: the page of
/// `limit` after `after`, each comment with the first page of its own replies, `depth` levels
/// down.
pub(super) fn ranked_level(
    discussion: &str,
    sort: Sort,
    base: &[usize],
    level: Vec<(usize, &Node)>,
    after: Option<(f64, usize)>,
    limit: usize,
    depth: usize,
) -> Page<Thread> {
    let parent = (!base.is_empty()).then(|| tree::format_path(base));
    let keyed = level
        .into_iter()
        .map(|(index, node)| (sort.key(node.votes(), node.body.posted), index, node))
        .collect();
    let mut ranked = rank_after(keyed, after);
    ranked.truncate(limit + 1);
    let page = Page::from_overfetch(ranked, limit, |(key, index, _)| {
        cursor::after_ranked(
            STRATEGY,
            sort,
            discussion,
            parent.as_deref(),
            *key,
            &index.to_string(),
        )
    });
    page.map(|(_, index, node)| {
        let mut path = base.to_vec();
        path.push(index);
        let replies = (depth > 0).then(|| {
            let replies = node.replies.iter().enumerate().collect();
            ranked_level(discussion, sort, &path, replies, None, limit, depth - 1)
        });
        Thread {
            comment: node.comment(&path),
            replies,
        }
    })
}

#[async_trait]
impl Tally for Embedded {
    type Target = Vec<usize>;
    const STRATEGY: Strategy = STRATEGY;

    fn vote_book(&self) -> &VoteBook {
        &self.votes
    }

    fn check_link(&self, link: &str) -> Result<()> {
        tree::parse_path(link, self.max_depth).map(drop)
    }

    async fn find(&self, discussion: &str, link: &str) -> Result<Found<Vec<usize>>> {
        let path = tree::parse_path(link, self.max_depth)?;
        let window = self
            .window_for_write(discussion, &path, link, Entity::Comment)
            .await?;
        let deleted = window.node(&path).is_some_and(|node| node.body.deleted);
        Ok(Found {
            target: path,
            deleted,
        })
    }

    async fn apply(
        &self,
        discussion: &str,
        path: &Vec<usize>,
        delta: Delta,
        op: ObjectId,
    ) -> Result<bool> {
        // Elements are never removed: a discussion that no longer counts `op` is gone.
        count_in_element(
            &self.backend,
            &self.discussions,
            doc! { "_id": discussion },
            doc! {
                "slots": { "$exists": true },
                format!("{}.deleted", tree::field_path(path)): { "$exists": true },
            },
            &tree::field_path(path),
            delta,
            op,
        )
        .await
    }
}

#[async_trait]
impl VotesEngine for Embedded {
    async fn ranked(&self, listing: Listing<'_>, ranked: Ranked<'_>) -> Result<Page<Comment>> {
        let (Listing { discussion, page }, Ranked { parent, sort }) = (listing, ranked);
        let parent_path = parent
            .map(|parent| tree::parse_path(parent, self.max_depth))
            .transpose()?;
        let after = ranked_after(page.after.as_ref(), sort, discussion, parent)?;
        let window = match (&parent_path, parent) {
            (Some(path), Some(link)) => {
                self.window_with(discussion, path, link, Entity::ParentComment)
                    .await?
            }
            _ => self
                .window(discussion, Range::All)
                .await?
                .ok_or_else(|| validate::no_discussion(discussion))?,
        };
        // The level ranked: its comments with their positions among their siblings.
        let level: Vec<(usize, &Node)> = match &parent_path {
            Some(path) => window
                .node(path)
                .expect("checked by window_with")
                .replies
                .iter()
                .enumerate()
                .collect(),
            None => (window.first..).zip(&window.nodes).collect(),
        };
        let base = parent_path.unwrap_or_default();
        let ranked = ranked_level(discussion, sort, &base, level, after, page.limit, 0);
        Ok(ranked.map(|thread| thread.comment))
    }
}
