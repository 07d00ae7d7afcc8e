//! [`CommentStore`] for [`Embedded`].

use async_trait::async_trait;
use bson::doc;

use super::read::{page_after, Range};
use super::write::Change;
use super::{count_field, created, Embedded, STRATEGY};
use crate::backend::update_batch::is_duplicate_key;
use crate::comments::cursor;
use crate::comments::engine::{CommentEngine, Listing};
use crate::comments::tree::{self, Entry, Node};
use crate::comments::{
    discussion_lock, reply_to_withdraw, validate, Comment, Deletion, NewComment, Order,
    ThreadedComments,
};
use crate::error::{Entity, Error, Result};
use crate::page::Page;
use crate::sharding::ShardKey;

#[async_trait]
impl CommentEngine for Embedded {
    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        Some(self)
    }

    /// Adds the comment fields to the discussion's document, creating the document if it does
    /// not exist. An existing document keeps its own fields (and gets an empty `comments` array,
    /// replacing any field of that name); one that has comments already is left alone.
    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        // Guarded: on servers without atomic updates, creating the fields of an existing
        // document must not interleave with a post to it.
        // Retried whole: an attempt whose reply was lost left `slots`, which the next one sees.
        let attempt = || async {
            let existing = self
                .discussions
                .find_one(doc! { "_id": discussion })
                .await?;
            let base = match &existing {
                Some(document) if document.contains_key("slots") => return Ok(()),
                Some(document) => bson::to_vec(document)?.len(),
                None => 0,
            };
            let fields =
                doc! { "count": 0_i64, "slots": 0_i64, "bytes": base as i64, "comments": [] };
            let created = self
                .discussions
                .update_one(
                    doc! { "_id": discussion, "slots": { "$exists": false } },
                    doc! { "$set": fields },
                )
                .upsert(true)
                .await;
            match created {
                Ok(_) => Ok(()),
                // Created by a concurrent call.
                Err(error) if is_duplicate_key(&error) => Ok(()),
                Err(error) => Err(error.into()),
            }
        };
        self.backend
            .exclusive_one(
                &discussion_lock(STRATEGY, discussion),
                self.backend.retry("create discussion", attempt),
            )
            .await
    }

    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        let again = self.create_discussions.then(|| comment.clone());
        match (self.post_to_created(discussion, comment).await, again) {
            (Err(error), Some(comment)) if validate::is_no_discussion(&error) => {
                CommentEngine::create_discussion(self, discussion).await?;
                self.post_to_created(discussion, comment).await
            }
            (posted, _) => posted,
        }
    }

    async fn chronological(&self, listing: Listing<'_>, order: Order) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        let after = match &page.after {
            None => None,
            Some(cursor) => {
                let (posted, id) = cursor::posted_key(cursor, STRATEGY, order, discussion)?;
                Some((posted.timestamp_millis(), id))
            }
        };
        let window = self
            .window(discussion, Range::All)
            .await?
            .ok_or_else(|| validate::no_discussion(discussion))?;
        let mut entries = window.threaded(Order::OldestFirst);
        let key = |e: &Entry<'_>| (e.node.body.posted.timestamp_millis(), e.node.id);
        entries.sort_by_key(key);
        if order == Order::NewestFirst {
            entries.reverse();
        }
        Ok(page_after(
            entries,
            page.limit,
            false,
            |e| match &after {
                None => true,
                Some(after) if order == Order::OldestFirst => key(e) > *after,
                Some(after) => key(e) < *after,
            },
            |e| cursor::after_posted(STRATEGY, order, discussion, e.node.body.posted, e.node.id),
        ))
    }

    async fn get(&self, discussion: &str, link: &str) -> Result<Comment> {
        let path = tree::parse_path(link, self.max_depth)?;
        let window = self
            .window_with(discussion, &path, link, Entity::Comment)
            .await?;
        Ok(window
            .node(&path)
            .expect("checked by window_with")
            .comment(&path))
    }

    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment> {
        validate::check_edit(discussion, text, self.max_comment_bytes)?;
        let now = bson::DateTime::now();
        self.change_comment(discussion, link, |path, node| {
            if node.body.deleted {
                return Err(Error::NotFound {
                    what: crate::error::Entity::DeletedComment,
                    id: link.to_owned(),
                });
            }
            if node.body.text == text && node.body.edited == Some(now) {
                // This edit's own earlier attempt, whose reply was lost.
                return Ok(Change::Done(node.comment(path)));
            }
            let edited = Node {
                body: node.body.edited(text, now),
                replies: Vec::new(),
                ..node.clone()
            };
            validate::check_stored(&edited, self.max_comment_bytes)?;
            let field = tree::field_path(path);
            let growth = text.len() as i64 - node.body.text.len() as i64
                + if node.body.edited.is_none() { 16 } else { 0 };
            Ok(Change::Update {
                filter: doc! {
                    format!("{field}.deleted"): false,
                    format!("{field}.text"): &node.body.text,
                },
                update: doc! {
                    "$set": { format!("{field}.text"): text, format!("{field}.edited"): now },
                    "$inc": { "bytes": growth },
                },
                growth,
                value: edited.comment(path),
            })
        })
        .await
    }

    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion> {
        let withdrawal = reply_to_withdraw(self, self.outbox.as_ref(), discussion, link).await?;
        let deletion = self
            .change_comment(discussion, link, |path, node| {
                if node.body.deleted {
                    return Ok(Change::Done(Deletion::Tombstoned));
                }
                let field = tree::field_path(path);
                Ok(Change::Update {
                    filter: doc! {
                        format!("{field}.deleted"): false,
                        format!("{field}.text"): &node.body.text,
                    },
                    update: doc! {
                        "$set": { format!("{field}.text"): "", format!("{field}.deleted"): true },
                        "$inc": { "count": -1_i64, "bytes": -(node.body.text.len() as i64) },
                    },
                    growth: -(node.body.text.len() as i64),
                    value: Deletion::Tombstoned,
                })
            })
            .await?;
        if let (Some(outbox), Some(activity)) = (&self.outbox, withdrawal) {
            outbox.withdraw(activity).await;
        }
        Ok(deletion)
    }

    async fn count(&self, discussion: &str) -> Result<u64> {
        let found = self
            .discussions
            .find_one(doc! { "_id": discussion })
            .projection(doc! { "slots": 1, "count": 1 })
            .await?
            .filter(created)
            .ok_or_else(|| validate::no_discussion(discussion))?;
        Ok(count_field(&found, "count") as u64)
    }

    /// The votes' index (every other operation finds the discussion by `_id`).
    async fn create_indexes(&self) -> Result<()> {
        self.backend.create_indexes().await
    }

    fn database(&self) -> &mongodb::Database {
        self.backend.database()
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::hashed_id(
                self.discussions.name(),
                "each discussion is one document, read and written by _id; hashing spreads \
                 discussions evenly (the manual leaves this strategy's shard key to the \
                 application, whose content collection it usually is)",
            ),
            self.votes.shard_key(),
        ]
    }
}
