//! [`CommentStore`] for [`HybridPages`].

use async_trait::async_trait;
use bson::doc;
use mongodb::options::FindOptions;

use super::read::{after_place, parse_place};
use super::{number, Entry, HybridPages, LOCK_LEASE, STRATEGY};
use crate::comments::body::Body;
use crate::comments::cursor;
use crate::comments::engine::{CommentEngine, Listing};
use crate::comments::keyed::StoredKey;
use crate::comments::{
    discussion_lock, validate, Comment, Deletion, KeyedComment, NewComment, Order, ThreadedComments,
};
use crate::sharding::ShardKey;
use crate::{Error, Result};

/// A fresh slug: 64 random bits, so slugs stay unique across a discussion's pages.
fn new_slug() -> String {
    format!(
        "{}{}",
        crate::comments::slug::new_part(),
        crate::comments::slug::new_part()
    )
}

#[async_trait]
impl CommentEngine for HybridPages {
    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        None
    }

    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        self.registry
            .create(discussion, doc! { "last_page": 0_i64 })
            .await
    }

    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        let keyed = KeyedComment::of(discussion, None, &comment)?;
        let slug = match &keyed {
            // Derived from the key: every attempt of one keyed post looks for, and pushes, the
            // same slug.
            Some(keyed) => keyed.id.to_hex()[..16].to_owned(),
            None => new_slug(),
        };
        if let Some(keyed) = &keyed {
            // A repeat: one `find`, nothing written.
            if let Some(entry) = self.keyed_entry(discussion, &slug, keyed).await? {
                return Ok(entry.comment());
            }
        }
        let mut entry = Entry {
            slug,
            key: StoredKey::of(keyed.as_ref()),
            body: Body::new(comment),
            ups: 0,
            downs: 0,
        };
        validate::check_stored(&entry, self.max_comment_bytes)?;
        // A page's `_id` (`<discussion>/<page>`) keeps it from being opened twice; the indexes
        // the reads need are made before the first write.
        self.backend.ensure_indexes().await?;
        let post = async {
            if let Some(keyed) = &keyed {
                // Under the key's lock: a concurrent attempt that got there first is found.
                if let Some(stored) = self.keyed_entry(discussion, &entry.slug, keyed).await? {
                    return Ok(stored);
                }
            }
            self.backend
                .exclusive_one(
                    &discussion_lock(STRATEGY, discussion),
                    self.push(discussion, &mut entry),
                )
                .await?;
            Ok(entry.clone())
        };
        let posted = match &keyed {
            // A page's `comments.slug` is unique within that page only, and a keyed post's
            // attempts could land on two pages: they take turns on the key, on every server.
            Some(keyed) => {
                let key = format!(
                    "{}:key:{}",
                    discussion_lock(STRATEGY, discussion),
                    keyed.id.to_hex()
                );
                self.backend
                    .lease_locks(LOCK_LEASE)
                    .with_lock(&key, post)
                    .await?
            }
            None => post.await?,
        };
        Ok(posted.comment())
    }

    async fn chronological(
        &self,
        listing: Listing<'_>,
        order: Order,
    ) -> Result<crate::Page<Comment>> {
        let Listing { discussion, page } = listing;
        let after = match &page.after {
            None => None,
            Some(cursor) => Some(parse_place(cursor, order, discussion)?),
        };
        // One more comment than the page, to know whether another page follows.
        let entries = self.walk(discussion, order, after, page.fetch()).await?;
        if entries.is_empty()
            && page.after.is_none()
            && self.registry.find(discussion).await?.is_none()
        {
            return Err(validate::no_discussion(discussion));
        }
        Ok(cursor::page_from(
            entries,
            page.limit,
            |(_, entry)| entry.comment(),
            |(place, _)| after_place(order, discussion, *place),
        ))
    }

    async fn get(&self, discussion: &str, link: &str) -> Result<Comment> {
        let (page, index) = self.locate(discussion, link).await?;
        Ok(page.comments[index].comment())
    }

    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment> {
        validate::check_edit(discussion, text, self.max_comment_bytes)?;
        let now = bson::DateTime::now();
        let edited = |entry: &Entry| Entry {
            body: entry.body.edited(text, now),
            ..entry.clone()
        };
        let changed = self
            .change(
                discussion,
                link,
                |entry| validate::check_stored(&edited(entry), self.max_comment_bytes).map(drop),
                |field| doc! { format!("{field}.text"): text, format!("{field}.edited"): now },
                0,
            )
            .await?;
        let entry = changed.map_err(|_| Error::NotFound {
            what: crate::error::Entity::DeletedComment,
            id: link.to_owned(),
        })?;
        Ok(edited(&entry).comment())
    }

    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion> {
        // Deleting a tombstone again changes nothing and reports the same.
        let _was_deleted_already = self
            .change(
                discussion,
                link,
                |_| Ok(()),
                |field| doc! { format!("{field}.text"): "", format!("{field}.deleted"): true },
                -1,
            )
            .await?
            .is_err();
        Ok(Deletion::Tombstoned)
    }

    async fn count(&self, discussion: &str) -> Result<u64> {
        let visible = FindOptions::builder()
            .projection(doc! { "visible": 1 })
            .build();
        let pages = self.discussion_pages(discussion, visible).await?;
        if pages.is_empty() && self.registry.find(discussion).await?.is_none() {
            return Err(validate::no_discussion(discussion));
        }
        Ok(pages
            .iter()
            .map(|page| number(page, "visible").max(0) as u64)
            .sum())
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
                self.pages.name(),
                doc! { "discussion_id": 1, "page": 1 },
                "a discussion's pages stay together, so a page read and a post each touch one \
                 shard; page lets a very long discussion split across chunks",
            ),
            self.votes.shard_key(),
        ]
    }
}
