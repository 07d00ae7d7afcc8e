//! [`CommentStore`] for [`PerComment`]: posting, the chronological view, direct links, edits,
//! deletes and counts.

use async_trait::async_trait;
use bson::{doc, Document};
use mongodb::options::ReturnDocument;

use super::stored::Stored;
use super::{PerComment, STRATEGY};
use crate::comments::cursor;
use crate::comments::engine::{CommentEngine, Listing};
use crate::comments::{
    discussion_lock, reply_to_withdraw, validate, Comment, Deletion, KeyedComment, NewComment,
    Order, ThreadedComments,
};
use crate::sharding::ShardKey;
use crate::{bson_ext, error::Entity, Error, Page, Result};

#[async_trait]
impl CommentEngine for PerComment {
    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        Some(self)
    }

    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        self.registry.create(discussion, Document::new()).await
    }

    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        let keyed = KeyedComment::of(discussion, None, &comment)?;
        if let Some(keyed) = &keyed {
            // A repeat: one `find`, nothing written.
            if let Some(stored) = self.keyed_comment(discussion, keyed).await? {
                return Ok(stored.comment());
            }
        }
        if self.registry.find(discussion).await?.is_none() {
            if !self.create_discussions {
                return Err(validate::no_discussion(discussion));
            }
            CommentEngine::create_discussion(self, discussion).await?;
        }
        Ok(self
            .insert(discussion, None, comment, keyed.as_ref())
            .await?
            .comment())
    }

    async fn chronological(&self, listing: Listing<'_>, order: Order) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        let (direction, after, at_or_after) = match order {
            Order::OldestFirst => (1, "$gt", "$gte"),
            Order::NewestFirst => (-1, "$lt", "$lte"),
        };
        let mut filter = doc! { "discussion_id": discussion };
        if let Some(cursor) = &page.after {
            let (posted, id) = cursor::posted_key(cursor, STRATEGY, order, discussion)?;
            // The bound on `posted` alone lets the index scan start at the cursor; the `$or`
            // then breaks ties within that millisecond by id.
            filter.insert("posted", doc! { at_or_after: posted });
            filter.insert(
                "$or",
                vec![
                    doc! { "posted": { after: posted } },
                    doc! { "posted": posted, "_id": { after: id } },
                ],
            );
        }
        self.page(
            discussion,
            &page,
            filter,
            doc! { "posted": direction, "_id": direction },
            |stored| {
                cursor::after_posted(STRATEGY, order, discussion, stored.body.posted, stored.id)
            },
        )
        .await
    }

    async fn get(&self, discussion: &str, link: &str) -> Result<Comment> {
        Ok(self
            .find_link(discussion, link, Entity::Comment)
            .await?
            .comment())
    }

    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment> {
        validate::check_edit(discussion, text, self.max_comment_bytes)?;
        let stored = self.find_link(discussion, link, Entity::Comment).await?;
        let edited = Stored {
            body: stored.body.edited(text, bson::DateTime::now()),
            ..stored
        };
        validate::check_stored(&edited, self.max_comment_bytes)?;
        let update = doc! { "$set": { "text": &edited.body.text, "edited": edited.body.edited } };
        let updated = self
            .backend
            .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                // A `$set` of the new text and edit time: a retry sets the same values again.
                self.backend.command("edit comment", || {
self
                        .comments
                        .find_one_and_update(
                            doc! { "_id": edited.id, "discussion_id": discussion, "deleted": false },
                            update.clone(),
                        )
                        .return_document(ReturnDocument::After)
})
.await
            })
            .await?;
        match updated {
            Some(document) => {
                Ok(bson_ext::decode::<Stored>(self.comments.name(), document)?.comment())
            }
            None => match self
                .find_one(doc! { "_id": edited.id, "discussion_id": discussion })
                .await?
            {
                Some(_) => Err(Error::NotFound {
                    what: crate::error::Entity::DeletedComment,
                    id: link.to_owned(),
                }),
                None => Err(validate::no_comment(Entity::Comment, link)),
            },
        }
    }

    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion> {
        let withdrawal = reply_to_withdraw(self, self.outbox.as_ref(), discussion, link).await?;
        let deletion = async {
            let stored = self.find_link(discussion, link, Entity::Comment).await?;
            if stored.body.deleted {
                return Ok(Deletion::Tombstoned);
            }
            self.backend
                .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                    let live =
                        doc! { "_id": stored.id, "discussion_id": discussion, "deleted": false };
                    if self.has_replies(&stored).await? {
                        // A `$set`: tombstoning twice tombstones once.
                        self.backend
                            .command("tombstone comment", || {
                                self.comments.update_one(
                                    live.clone(),
                                    doc! { "$set": { "deleted": true, "text": "" } },
                                )
                            })
                            .await?;
                        return Ok(Deletion::Tombstoned);
                    }
                    let mut attempts = 0;
                    let removed = self
                        .backend
                        .retry("delete comment", || {
                            attempts += 1;
                            let live = live.clone();
                            async move { Ok(self.comments.delete_one(live).await?) }
                        })
                        .await?;
                    // A retry that finds nothing follows an attempt that deleted the comment and lost
                    // the reply (or a concurrent delete): removed either way.
                    let gone_by_retry = removed.deleted_count == 0
                        && attempts > 1
                        && self.find_one(doc! { "_id": stored.id }).await?.is_none();
                    if removed.deleted_count == 0 && !gone_by_retry {
                        // Deleted meanwhile by someone else (as a tombstone, or outright).
                        return match self
                            .find_one(doc! { "_id": stored.id, "discussion_id": discussion })
                            .await?
                        {
                            Some(_) => Ok(Deletion::Tombstoned),
                            None => Err(validate::no_comment(Entity::Comment, link)),
                        };
                    }
                    // Its votes go with it (a tombstone put back below starts without any).
                    self.votes.forget(discussion, &stored.slug).await?;
                    // A reply that found this comment before it went must not be orphaned.
                    if self.has_replies(&stored).await? {
                        self.restore_as_tombstone(&stored).await?;
                        return Ok(Deletion::Tombstoned);
                    }
                    Ok(Deletion::Removed)
                })
                .await
        }
        .await?;
        if let (Some(outbox), Some(activity)) = (&self.outbox, withdrawal) {
            outbox.withdraw(activity).await;
        }
        Ok(deletion)
    }

    async fn count(&self, discussion: &str) -> Result<u64> {
        Ok(self
            .comments
            .count_documents(doc! { "discussion_id": discussion, "deleted": false })
            .await?)
    }

    async fn create_indexes(&self) -> Result<()> {
        self.backend.create_indexes().await
    }

    fn database(&self) -> &mongodb::Database {
        self.backend.database()
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::new(
                self.comments.name(),
                doc! { "discussion_id": 1, "slug": 1 },
                "a discussion's comments stay together, so its pages and sub-threads are read \
                 from its own chunks; slug lets a huge discussion split, and prefixes the unique \
                 {discussion_id, slug} index as sharding requires (the manual's {discussion_id, \
                 full_slug} would not allow that index)",
            ),
            self.votes.shard_key(),
        ]
    }
}
