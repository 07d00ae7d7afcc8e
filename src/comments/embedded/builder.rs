//! The builder: an [`Embedded`] store's collections and limits.

use std::sync::Arc;

use mongodb::Database;

use super::{Embedded, COLLECTIONS, LOCK_LEASE, MAX_DEPTH_LIMIT, STRATEGY};
use crate::comments::reply_notifications::{reply_notifier_method, reply_outbox};
use crate::comments::votes::{VoteBook, VOTE_OPS_BYTES};
use crate::comments::ThreadedComments;
use crate::config::{new_with_defaults, outbox_accessor, store_builder_methods, StoreConfig};
use crate::notifications::DynNotifier;
use crate::setters::builder_setters;
use crate::validate::MAX_DOCUMENT_BYTES;
use crate::{Error, Result};

/// Configures an [`Embedded`] store.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct EmbeddedBuilder {
    config: StoreConfig,
    notifier: Option<Arc<DynNotifier>>,
    max_document_bytes: usize,
    max_comment_bytes: usize,
    max_depth: usize,
    create_discussions: bool,
}

impl EmbeddedBuilder {
    store_builder_methods!();

    /// Whether a top-level [`post`](crate::CommentStore::post) to a discussion that was not created
    /// creates it ([`CommentStore::create_discussion`], idempotent under concurrency) and
    /// posts, instead of failing with [`Error::NotFound`] (default `false`). A post to a
    /// created discussion costs what it did; the first post to a new one, the failed
    /// `findAndModify`, its check (1 `find`) and the creation (a `find` and an upserting
    /// `update`) more. Replies, votes and reads still need the discussion.
    ///
    /// [`CommentStore::create_discussion`]: crate::CommentStore::create_discussion
    pub fn create_discussions_on_post(mut self, create: bool) -> Self {
        self.create_discussions = create;
        self
    }

    reply_notifier_method!(Embedded);

    builder_setters! {
        /// The size a discussion document may reach, in bytes (default 16 MiB less 64 KiB, room
        /// for the application's own fields).
        max_document_bytes: usize,

        /// The largest comment, as an encoded document in bytes (default 64 KiB).
        max_comment_bytes: usize,

        /// The deepest reply, top-level comments being depth 0 (default and most 45).
        max_depth: usize,
    }

    /// The store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an unusable collection name, the same name twice, a name
    /// given to a collection the store does not have, a document limit above 16 MiB less the
    /// 20 KiB its votes' operation ids may take, or a depth above 45.
    pub fn build(self) -> Result<Embedded> {
        let [discussions, locks, votes] = self.config.names(COLLECTIONS)?;
        if self.max_document_bytes > MAX_DOCUMENT_BYTES - VOTE_OPS_BYTES {
            return Err(Error::InvalidConfig {
                reason: "max_document_bytes cannot pass the 16 MiB document limit less the \
                         20 KiB kept for vote_ops"
                    .to_owned(),
            });
        }
        if self.max_depth > MAX_DEPTH_LIMIT {
            return Err(Error::InvalidConfig {
                reason: format!("max_depth cannot pass {MAX_DEPTH_LIMIT} (BSON nesting limit)"),
            });
        }
        let votes = self.config.database().collection(&votes);
        let backend = self
            .config
            .backend(&locks, LOCK_LEASE)
            .with_index(&votes, VoteBook::index());
        let outbox = reply_outbox(&self.config, &discussions, self.notifier)?;
        Ok(Embedded {
            votes: VoteBook::new(votes, backend.clone(), STRATEGY.name()),
            backend,
            outbox,
            discussions: self.config.database().collection(&discussions),
            max_document_bytes: self.max_document_bytes,
            max_comment_bytes: self.max_comment_bytes,
            max_depth: self.max_depth,
            create_discussions: self.create_discussions,
        })
    }
}

impl Embedded {
    /// The default size a discussion document may reach.
    pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = MAX_DOCUMENT_BYTES - 64 * 1024;
    /// The default largest comment, in bytes.
    pub const DEFAULT_MAX_COMMENT_BYTES: usize = 64 * 1024;
    /// The default deepest reply.
    pub const DEFAULT_MAX_DEPTH: usize = MAX_DEPTH_LIMIT;

    new_with_defaults!("A store with the default collections and limits in `database`.");

    outbox_accessor!(EmbeddedBuilder);

    /// A builder to configure collections and limits.
    pub fn builder(database: &Database) -> EmbeddedBuilder {
        EmbeddedBuilder {
            config: StoreConfig::new(database),
            notifier: None,
            max_document_bytes: Self::DEFAULT_MAX_DOCUMENT_BYTES,
            max_comment_bytes: Self::DEFAULT_MAX_COMMENT_BYTES,
            max_depth: Self::DEFAULT_MAX_DEPTH,
            create_discussions: false,
        }
    }

    /// This store as a [`ThreadedComments`], which it always is: what
    /// [`CommentStore::threaded`] gives a strategy chosen at run time, without its `Option`.
    /// (With the traits in scope, [`crate::prelude`], an `Embedded` replies and votes as it
    /// is.)
    ///
    /// [`CommentStore::threaded`]: crate::CommentStore::threaded
    pub fn as_threaded(&self) -> &dyn ThreadedComments {
        self
    }
}
