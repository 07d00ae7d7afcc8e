//! Idempotency keys of posted comments: the id a key gives and the content it vouches for.

use serde::{Deserialize, Serialize};

use super::NewComment;
use crate::Result;

/// A keyed comment's key, the id it gives within its discussion, and the digest of what is
/// posted (author, text, and the parent's link for a reply).
#[derive(Clone, Debug)]
pub(super) struct KeyedComment {
    pub(super) key: String,
    pub(super) id: bson::oid::ObjectId,
    pub(super) content: String,
}

impl KeyedComment {
    /// The key of `comment` (checked) for a post (`parent` `None`) or a reply to `parent` in
    /// `discussion`; `None` without a key.
    pub(super) fn of(
        discussion: &str,
        parent: Option<&str>,
        comment: &NewComment,
    ) -> Result<Option<Self>> {
        let Some(key) = &comment.key else {
            return Ok(None);
        };
        crate::idempotency::check(Some(key))?;
        let content = crate::idempotency::digest(&(
            (&comment.author.id, &comment.author.name),
            &comment.text,
            parent.unwrap_or(""),
        ))?;
        Ok(Some(Self {
            key: key.clone(),
            id: crate::idempotency::id(discussion, key),
            content,
        }))
    }

    /// `Ok` when `stored` (the key and digest stored with a comment) is this comment's;
    /// otherwise [`crate::Error::Conflict`].
    fn check(&self, stored: &StoredKey) -> Result<()> {
        let conflict = |reason| crate::Error::Conflict {
            what: crate::error::Entity::Comment,
            id: self.key.clone(),
            reason,
        };
        if stored.idempotency_key.as_deref() != Some(self.key.as_str()) {
            return Err(conflict("its id is taken by another comment"));
        }
        if stored.content_digest.as_deref() != Some(self.content.as_str()) {
            return Err(conflict("the author, text or parent differs"));
        }
        Ok(())
    }

    /// `found` (the comment stored under this key's id, if any) as a repeat of this comment,
    /// once its stored key (as `stored` reads it) passes [`KeyedComment::check`].
    pub(super) fn repeat<T>(
        &self,
        found: Option<T>,
        stored: impl FnOnce(&T) -> &StoredKey,
    ) -> Result<Option<T>> {
        let Some(found) = found else {
            return Ok(None);
        };
        self.check(stored(&found))?;
        Ok(Some(found))
    }
}

/// A keyed comment's idempotency key and the digest of what it was posted with, as stored; both
/// absent for a comment posted without a key.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct StoredKey {
    /// The caller's idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) idempotency_key: Option<String>,
    /// The digest of what the comment was posted with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) content_digest: Option<String>,
}

impl StoredKey {
    /// What a comment posted with `keyed` (or without a key) stores.
    pub(super) fn of(keyed: Option<&KeyedComment>) -> Self {
        Self {
            idempotency_key: keyed.map(|keyed| keyed.key.clone()),
            content_digest: keyed.map(|keyed| keyed.content.clone()),
        }
    }
}
