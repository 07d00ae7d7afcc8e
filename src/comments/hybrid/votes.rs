//! Votes: [`Tally`] and [`VotedComments`], ranked pages read from every page's counts.

use async_trait::async_trait;
use bson::doc;
use bson::oid::ObjectId;
use mongodb::options::FindOptions;

use super::{check_slug, parse_place_parts, HybridPages, PageDocument, Place, STRATEGY};
use crate::bson_ext;
use crate::comments::cursor;
use crate::comments::engine::{Listing, Ranked, VotesEngine};
use crate::comments::ranking::rank_after;
use crate::comments::votes::{count_in_element, Delta, Found, Tally, VoteBook};
use crate::comments::{validate, Comment, Strategy};
use crate::page::{invalid, Page};
use crate::{Error, Result};

/// A comment's place as a ranked cursor's tiebreak: `page:index`.
fn place_field((page, index): Place) -> String {
    format!("{page}:{index}")
}

/// The place in a field made by [`place_field`].
fn parse_place_field(field: &str) -> Result<Place> {
    let (page, index) = field
        .split_once(':')
        .ok_or_else(|| invalid("bad position"))?;
    parse_place_parts(page, index)
}

/// Where a vote finds its comment: the page document, the index in it, and the slug there.
pub(in crate::comments) struct Spot {
    page: bson::Bson,
    index: usize,
    slug: String,
}

#[async_trait]
impl Tally for HybridPages {
    type Target = Spot;
    const STRATEGY: Strategy = STRATEGY;

    fn vote_book(&self) -> &VoteBook {
        &self.votes
    }

    fn check_link(&self, link: &str) -> Result<()> {
        check_slug(link)
    }

    async fn find(&self, discussion: &str, link: &str) -> Result<Found<Spot>> {
        let (page, index) = self
            .backend
            .retry("read page", || self.locate(discussion, link))
            .await?;
        Ok(Found {
            deleted: page.comments[index].body.deleted,
            target: Spot {
                page: page.id,
                index,
                slug: link.to_owned(),
            },
        })
    }

    async fn apply(
        &self,
        discussion: &str,
        spot: &Spot,
        delta: Delta,
        op: ObjectId,
    ) -> Result<bool> {
        let field = format!("comments.{}", spot.index);
        count_in_element(
            &self.backend,
            &self.pages,
            // The shard key's prefix, so a sharded cluster routes it to one shard.
            doc! { "_id": spot.page.clone(), "discussion_id": discussion },
            doc! { format!("{field}.slug"): &spot.slug },
            &field,
            delta,
            op,
        )
        .await
    }
}

#[async_trait]
impl VotesEngine for HybridPages {
    async fn ranked(&self, listing: Listing<'_>, ranked: Ranked<'_>) -> Result<Page<Comment>> {
        let (Listing { discussion, page }, Ranked { parent, sort }) = (listing, ranked);
        if parent.is_some() {
            return Err(Error::Unsupported {
                limit: crate::error::Limit::Strategy,
                feature: "replies",
                reason: "HybridPages keeps discussions flat; rank the top level".to_owned(),
            });
        }
        let after = match &page.after {
            None => None,
            Some(cursor) => {
                let (key, place) = cursor::ranked_key(cursor, STRATEGY, sort, discussion, None)?;
                Some((key, parse_place_field(&place)?))
            }
        };
        let by_page = FindOptions::builder().sort(doc! { "page": 1 }).build();
        let pages = self.discussion_pages(discussion, by_page).await?;
        if pages.is_empty()
            && page.after.is_none()
            && self.registry.find(discussion).await?.is_none()
        {
            return Err(validate::no_discussion(discussion));
        }
        let mut keyed = Vec::new();
        for stored in pages {
            let stored: PageDocument = bson_ext::decode(self.pages.name(), stored)?;
            for (index, entry) in stored.comments.into_iter().enumerate() {
                let key = sort.key(entry.votes(), entry.body.posted);
                keyed.push((key, (stored.page, index), entry));
            }
        }
        let mut ranked = rank_after(keyed, after);
        ranked.truncate(page.fetch());
        let page = Page::from_overfetch(ranked, page.limit, |(key, place, _)| {
            cursor::after_ranked(STRATEGY, sort, discussion, None, *key, &place_field(*place))
        });
        Ok(page.map(|(_, _, entry)| entry.comment()))
    }
}
