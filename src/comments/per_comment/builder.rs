//! Configuring a [`PerComment`] store: collections, limits, notifier, and its indexes.

use std::sync::Arc;

use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use super::stored::sort_field;
use super::{PerComment, COLLECTIONS, LOCK_LEASE, STRATEGY};
use crate::comments::registry::Registry;
use crate::comments::reply_notifications::{reply_notifier_method, reply_outbox};
use crate::comments::votes::VoteBook;
use crate::comments::{slug, Sort};
use crate::config::{store_builder_methods, StoreConfig};
use crate::notifications::DynNotifier;
use crate::setters::builder_setters;
use crate::{Error, Result};

/// Configures a [`PerComment`] store.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct PerCommentBuilder {
    pub(super) config: StoreConfig,
    pub(super) notifier: Option<Arc<DynNotifier>>,
    pub(super) max_key_bytes: usize,
    pub(super) max_comment_bytes: usize,
    pub(super) create_discussions: bool,
}

impl PerCommentBuilder {
    store_builder_methods!();

    /// Whether a top-level [`post`](crate::comments::CommentStore::post) to a discussion that was
    /// not registered registers it
    /// ([`CommentStore::create_discussion`](crate::comments::CommentStore::create_discussion)) and
    /// posts, instead of failing with [`Error::NotFound`] (default `false`). Concurrent first posts
    /// register it once (an `insert` of the discussion's `_id`, a duplicate counting as done). A
    /// post to a registered discussion costs what it did; the first post to a new one, 1 `insert`
    /// more. Replies, votes and reads still need the discussion.
    pub fn create_discussions_on_post(mut self, create: bool) -> Self {
        self.create_discussions = create;
        self
    }

    reply_notifier_method!(PerComment);

    builder_setters! {
        /// The longest index key (discussion id plus `full_slug`, in bytes) a reply may create
        /// (default 1,000). Raise it on MongoDB 4.2 and later, which has no index key limit, if
        /// deeper threads are wanted.
        max_key_bytes: usize,

        /// The largest comment, as an encoded document in bytes (default 64 KiB).
        max_comment_bytes: usize,
    }

    /// The store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an unusable collection name, the same name twice, a name
    /// given to a collection the store does not have, a key limit too small for a top-level
    /// comment, or a comment limit above 16 MiB.
    pub fn build(self) -> Result<PerComment> {
        let [comments, discussions, locks, votes] = self.config.names(COLLECTIONS)?;
        if self.max_key_bytes < 2 * slug::STEP_LEN {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "max_key_bytes {} leaves no room for a discussion id and a reply",
                    self.max_key_bytes
                ),
            });
        }
        if self.max_comment_bytes > crate::validate::MAX_DOCUMENT_BYTES {
            return Err(Error::InvalidConfig {
                reason: "max_comment_bytes cannot pass the 16 MiB document limit".to_owned(),
            });
        }
        let database = self.config.database();
        let comments = database.collection(&comments);
        let index = |keys: Document| IndexModel::builder().keys(keys).build();
        let mut backend = self
            .config
            .backend(&locks, LOCK_LEASE)
            .with_index(
                &comments,
                index(doc! { "discussion_id": 1, "posted": 1, "_id": 1 }),
            )
            .with_index(
                &comments,
                index(doc! { "discussion_id": 1, "full_slug": 1 }),
            )
            .with_index(
                &comments,
                index(doc! { "discussion_id": 1, "thread_key": 1 }),
            )
            .with_index(
                &comments,
                IndexModel::builder()
                    .keys(doc! { "discussion_id": 1, "slug": 1 })
                    .options(IndexOptions::builder().unique(true).build())
                    .build(),
            );
        for sort in Sort::ALL {
            backend = backend.with_index(
                &comments,
                index(doc! {
                    "discussion_id": 1, "parent": 1, sort_field(sort): -1, "full_slug": 1
                }),
            );
        }
        let votes = database.collection(&votes);
        let backend = backend.with_index(&votes, VoteBook::index());
        let outbox = reply_outbox(&self.config, comments.name(), self.notifier)?;
        Ok(PerComment {
            votes: VoteBook::new(votes, backend.clone(), STRATEGY.name()),
            outbox,
            registry: Registry::new(database.collection(&discussions), backend.clone()),
            backend,
            comments,
            max_key_bytes: self.max_key_bytes,
            max_comment_bytes: self.max_comment_bytes,
            create_discussions: self.create_discussions,
        })
    }
}
