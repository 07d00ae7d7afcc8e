//! Storing comments: a fresh slug per comment, keyed comments once, and tombstones restored
//! under a reply that raced with its parent's removal.

use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;

use super::stored::{Ranking, Stored};
use super::{PerComment, SLUG_ATTEMPTS};
use crate::comments::body::Body;
use crate::comments::keyed::StoredKey;
use crate::comments::{slug, validate, KeyedComment, NewComment, Votes};
use crate::error::Invalid;
use crate::{Error, Result};

/// The slug part for insert attempt `attempt`: a keyed comment's first is derived from its key,
/// so two attempts of it meet on the unique `{discussion_id, slug}` (within the shard key) as on
/// `_id`; every other is fresh.
fn slug_part(keyed: Option<&KeyedComment>, attempt: usize) -> String {
    match keyed {
        Some(keyed) if attempt == 0 => format!("{:08x}", {
            let bytes = keyed.id.bytes();
            u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
        }),
        _ => slug::new_part(),
    }
}

impl PerComment {
    /// Inserts a comment under `parent` (or at the top level), choosing a fresh slug part
    /// whenever one collides.
    pub(super) async fn insert(
        &self,
        discussion: &str,
        parent: Option<&Stored>,
        comment: NewComment,
        keyed: Option<&KeyedComment>,
    ) -> Result<Stored> {
        let micros = slug::now_micros();
        let posted = bson::DateTime::from_millis(micros.div_euclid(1_000));
        for attempt in 0..SLUG_ATTEMPTS {
            let part = slug_part(keyed, attempt);
            let mut stored = Stored::placed(
                discussion,
                parent,
                &part,
                micros,
                Body::posted_at(posted, comment.clone()),
            );
            if let Some(keyed) = keyed {
                stored.id = keyed.id;
                stored.key = StoredKey::of(Some(keyed));
            }
            validate::check_stored(&stored, self.max_comment_bytes)?;
            self.check_key(discussion, &stored)?;
            // The unique `{discussion_id, slug}` index is what keeps links unique.
            self.backend.ensure_indexes().await?;
            // Retried with the comment's client-made `_id`: a retry that meets its own earlier
            // insert counts it as done; a duplicate slug (another comment's) tries the next.
            if self
                .backend
                .insert_once(&self.comments, bson::to_document(&stored)?)
                .await?
            {
                return Ok(stored);
            }
            if let Some(keyed) = keyed {
                // Stored by a concurrent attempt with the key (or by this one, whose reply was
                // lost); otherwise the derived slug part was another comment's.
                if let Some(existing) = self.keyed_comment(discussion, keyed).await? {
                    return Ok(existing);
                }
            }
        }
        Err(Error::contention("post comment", SLUG_ATTEMPTS))
    }

    /// The comment stored under `keyed`'s id, if any (one `find`), checked against `keyed`:
    /// [`Error::Conflict`] when it was posted with other content.
    pub(super) async fn keyed_comment(
        &self,
        discussion: &str,
        keyed: &KeyedComment,
    ) -> Result<Option<Stored>> {
        let found = self
            .backend
            .retry("find keyed comment", || {
                self.find_one(doc! { "_id": keyed.id, "discussion_id": discussion })
            })
            .await?;
        keyed.repeat(found, |stored| &stored.key)
    }

    /// Fails with [`Invalid::ThreadTooDeep`](crate::error::Invalid::ThreadTooDeep) when `stored`'s index key would be too long.
    pub(super) fn check_key(&self, discussion: &str, stored: &Stored) -> Result<()> {
        let key_bytes = discussion.len() + stored.full_slug.len();
        if key_bytes > self.max_key_bytes {
            return Err(Error::InvalidInput {
                reason: Invalid::ThreadTooDeep {
                    depth: stored.slug.matches('/').count(),
                    limit: format!(
                        "its full_slug index key would be {key_bytes} bytes, over the \
                     {}-byte limit (max_key_bytes)",
                        self.max_key_bytes
                    ),
                },
            });
        }
        Ok(())
    }

    /// Puts `stored` back as a tombstone if it is missing (a reply raced with its removal), and
    /// so every missing ancestor of it: a chain of leaves can be removed one after the other
    /// while a reply to the last of them is on its way.
    pub(super) async fn restore_as_tombstone(&self, stored: &Stored) -> Result<()> {
        let slugs: Vec<&str> = stored.slug.split('/').collect();
        let full: Vec<&str> = stored.full_slug.split('/').collect();
        let keys: Vec<&str> = stored.thread_key.split('/').collect();
        let chain: Vec<String> = (1..=slugs.len()).map(|n| slugs[..n].join("/")).collect();
        let present: Vec<Document> = self
            .comments
            .find(doc! { "discussion_id": &stored.discussion_id, "slug": { "$in": &chain } })
            .projection(doc! { "slug": 1 })
            .await?
            .try_collect()
            .await?;
        let present: Vec<&str> = present
            .iter()
            .filter_map(|d| d.get_str("slug").ok())
            .collect();
        let mut missing = Vec::new();
        for (depth, slug) in chain.iter().enumerate() {
            if present.contains(&slug.as_str()) {
                continue;
            }
            if *slug == stored.slug {
                missing.push(stored.tombstone());
                continue;
            }
            // An ancestor known only by its path: its step gives its posting time.
            let micros = slug::step_micros(full[depth]).unwrap_or_default();
            let posted = bson::DateTime::from_millis(micros.div_euclid(1_000));
            missing.push(Stored {
                id: ObjectId::new(),
                discussion_id: stored.discussion_id.clone(),
                parent_id: None,
                parent: chain[..depth].last().cloned().unwrap_or_default(),
                slug: slug.clone(),
                full_slug: full[..=depth].join("/"),
                thread_key: keys[..=depth].join("/"),
                body: Body::placeholder(posted),
                ranking: Ranking::of(Votes::default(), posted),
                key: StoredKey::default(),
            });
        }
        for tombstone in missing {
            self.backend
                .insert_once(&self.comments, bson::to_document(&tombstone)?)
                .await?;
        }
        Ok(())
    }
}
