//! Votes on [`PerComment`]'s comments: counts applied once, the stored sort keys that follow
//! them, and ranked pages.

use async_trait::async_trait;
use bson::doc;
use bson::oid::ObjectId;
use mongodb::options::ReturnDocument;

use super::stored::{sort_field, Ranking};
use super::{PerComment, STRATEGY};
use crate::bson_ext;
use crate::comments::cursor;
use crate::comments::engine::{Listing, Ranked, VotesEngine};
use crate::comments::votes::{Delta, Found, Tally, VoteBook, VOTE_OPS, VOTE_OPS_PER_COMMENT};
use crate::comments::{slug, Comment, Strategy, Votes};
use crate::error::{Entity, Result};
use crate::page::invalid;
use crate::page::Page;

#[async_trait]
impl Tally for PerComment {
    type Target = ObjectId;
    const STRATEGY: Strategy = STRATEGY;

    fn vote_book(&self) -> &VoteBook {
        &self.votes
    }

    fn check_link(&self, link: &str) -> Result<()> {
        slug::parse_slug(link).map(drop)
    }

    async fn find(&self, discussion: &str, link: &str) -> Result<Found<ObjectId>> {
        let stored = self
            .backend
            .retry("read comment", || {
                self.find_link(discussion, link, Entity::Comment)
            })
            .await?;
        Ok(Found {
            target: stored.id,
            deleted: stored.body.deleted,
        })
    }

    async fn apply(
        &self,
        discussion: &str,
        id: &ObjectId,
        delta: Delta,
        op: ObjectId,
    ) -> Result<bool> {
        let mut filter = doc! { "_id": id, "discussion_id": discussion };
        let mut update = doc! { "$inc": { "ups": delta.ups, "downs": delta.downs } };
        crate::retry::once_per_op_in(&mut filter, &mut update, VOTE_OPS, VOTE_OPS_PER_COMMENT, op);
        let projection = doc! { "ups": 1, "downs": 1, "posted": 1 };
        let dialect = self.backend.dialect().await?;
        // Applied once: `op` joins `vote_ops`, whose filter a retry no longer matches.
        let counted = self
            .backend
            .retry("count vote", || async {
                let action = self
                    .comments
                    .find_one_and_update(filter.clone(), update.clone())
                    .return_document(ReturnDocument::After);
                Ok(dialect.returning(action, projection.clone()).await?)
            })
            .await?;
        let counted = match counted {
            Some(counted) => counted,
            // Counted already (by this vote's lost attempt, or by a call finishing its mark),
            // or removed.
            None => {
                let current = self
                    .backend
                    .command("read comment", || {
                        self.comments
                            .find_one(doc! { "_id": id, "discussion_id": discussion })
                            .projection(projection.clone())
                    })
                    .await?;
                match current {
                    Some(current) => current,
                    None => return Ok(false),
                }
            }
        };
        let (ups, downs) = (
            bson_ext::integer(&counted, "ups").unwrap_or(0),
            bson_ext::integer(&counted, "downs").unwrap_or(0),
        );
        let posted = bson_ext::date(&counted, "posted").ok_or_else(|| {
            bson_ext::corrupt(self.comments.name(), Some((*id).into()), "no posted")
        })?;
        let ranking = Ranking::of(Votes::from_stored(ups, downs), posted);
        let keys = doc! {
            "best": ranking.best,
            "hot": ranking.hot,
            "top": ranking.top,
            "controversial": ranking.controversial,
        };
        // Filtered by the counts the keys come from: a retry sets the same keys again, and a
        // voter whose counts were overtaken sets nothing (the later one sets its own).
        self.backend
            .command("rank comment", || {
                self.comments.update_one(
                    doc! { "_id": id, "discussion_id": discussion, "ups": ups, "downs": downs },
                    doc! { "$set": keys.clone() },
                )
            })
            .await?;
        Ok(true)
    }
}

#[async_trait]
impl VotesEngine for PerComment {
    async fn ranked(&self, listing: Listing<'_>, ranked: Ranked<'_>) -> Result<Page<Comment>> {
        let (Listing { discussion, page }, Ranked { parent, sort }) = (listing, ranked);
        if let Some(parent) = parent {
            slug::parse_slug(parent)?;
        }
        let field = sort_field(sort);
        let mut filter = doc! { "discussion_id": discussion, "parent": parent.unwrap_or("") };
        if let Some(cursor) = &page.after {
            let (key, after) = cursor::ranked_key(cursor, STRATEGY, sort, discussion, parent)?;
            if !slug::is_sort_key(&after) {
                return Err(invalid("not a thread position"));
            }
            // The bound on the key alone lets the index scan start at the cursor; the `$or`
            // then breaks ties by posting order.
            filter.insert(field, doc! { "$lte": key });
            filter.insert(
                "$or",
                vec![
                    doc! { field: { "$lt": key } },
                    doc! { field: key, "full_slug": { "$gt": after } },
                ],
            );
        }
        let ranked = self
            .page(
                discussion,
                &page,
                filter,
                doc! { field: -1, "full_slug": 1 },
                |stored| {
                    cursor::after_ranked(
                        STRATEGY,
                        sort,
                        discussion,
                        parent,
                        stored.ranking.key(sort),
                        &stored.full_slug,
                    )
                },
            )
            .await?;
        if let (Some(parent), true, None) = (parent, ranked.items.is_empty(), &page.after) {
            // An empty first page: no replies, or no such parent.
            self.find_link(discussion, parent, Entity::ParentComment)
                .await?;
        }
        Ok(ranked)
    }
}
