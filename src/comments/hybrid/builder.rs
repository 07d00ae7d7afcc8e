//! The builder: a [`HybridPages`] store's collections and page size.

use bson::doc;
use mongodb::{Database, IndexModel};

use super::{HybridPages, COLLECTIONS, ENTRY_OVERHEAD, LOCK_LEASE, PAGE_OVERHEAD, STRATEGY};
use crate::comments::registry::Registry;
use crate::comments::votes::VoteBook;
use crate::config::{new_with_defaults, store_builder_methods, StoreConfig};
use crate::setters::builder_setters;
use crate::validate::MAX_DOCUMENT_BYTES;
use crate::{Error, Result};

/// Configures a [`HybridPages`] store.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct HybridPagesBuilder {
    config: StoreConfig,
    page_size: usize,
    max_comment_bytes: usize,
    create_discussions: bool,
}

impl HybridPagesBuilder {
    store_builder_methods!();

    /// Whether a [`post`](crate::CommentStore::post) to a discussion that was not registered
    /// registers it ([`CommentStore::create_discussion`]) and posts, instead of failing with
    /// [`Error::NotFound`] (default `false`). Concurrent first posts register it once (an
    /// `insert` of the discussion's `_id`, a duplicate counting as done). A post to a
    /// registered discussion costs what it did; the first post to a new one, 2 commands more
    /// (the `insert`, and reading the registration back). Votes and reads still need the
    /// discussion.
    ///
    /// [`CommentStore::create_discussion`]: crate::CommentStore::create_discussion
    pub fn create_discussions_on_post(mut self, create: bool) -> Self {
        self.create_discussions = create;
        self
    }

    builder_setters! {
        /// Comments per page (default 100).
        page_size: usize,

        /// The largest comment, as an encoded document in bytes (default 64 KiB).
        max_comment_bytes: usize,
    }

    /// The store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an unusable collection name, the same name twice, a name
    /// given to a collection the store does not have, a page size of 0, or a page that could
    /// pass 16 MiB when full of the largest comments.
    pub fn build(self) -> Result<HybridPages> {
        let [pages, discussions, locks, votes] = self.config.names(COLLECTIONS)?;
        let worst_page = self
            .page_size
            .saturating_mul(self.max_comment_bytes + ENTRY_OVERHEAD)
            .saturating_add(PAGE_OVERHEAD);
        if self.page_size == 0 || worst_page > MAX_DOCUMENT_BYTES {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "{} comments of up to {} bytes do not fit a 16 MiB page document",
                    self.page_size, self.max_comment_bytes
                ),
            });
        }
        let database = self.config.database();
        let pages = database.collection(&pages);
        let backend = self
            .config
            .backend(&locks, LOCK_LEASE)
            .with_index(
                &pages,
                IndexModel::builder()
                    .keys(doc! { "discussion_id": 1, "page": 1 })
                    .build(),
            )
            .with_index(
                &pages,
                IndexModel::builder()
                    .keys(doc! { "discussion_id": 1, "comments.slug": 1 })
                    .build(),
            );
        let votes = database.collection(&votes);
        let backend = backend.with_index(&votes, VoteBook::index());
        Ok(HybridPages {
            votes: VoteBook::new(votes, backend.clone(), STRATEGY.name()),
            registry: Registry::new(database.collection(&discussions), backend.clone()),
            backend,
            pages,
            page_size: self.page_size,
            max_comment_bytes: self.max_comment_bytes,
            create_discussions: self.create_discussions,
        })
    }
}

impl HybridPages {
    /// The default page size.
    pub const DEFAULT_PAGE_SIZE: usize = 100;
    /// The default largest comment, in bytes.
    pub const DEFAULT_MAX_COMMENT_BYTES: usize = 64 * 1024;

    new_with_defaults!("A store with the default collections and page size in `database`.");

    /// A builder to configure collections and page size.
    pub fn builder(database: &Database) -> HybridPagesBuilder {
        HybridPagesBuilder {
            config: StoreConfig::new(database),
            page_size: Self::DEFAULT_PAGE_SIZE,
            max_comment_bytes: Self::DEFAULT_MAX_COMMENT_BYTES,
            create_discussions: false,
        }
    }

    /// The configured page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }
}
