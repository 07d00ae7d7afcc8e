//! Comments in pages of about 100 per document, the manual's hybrid design.

use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::options::{FindOptions, IndexOptions};
use mongodb::{Collection, Database, IndexModel};
use serde::{Deserialize, Serialize};

use super::cursor::{self, View};
use super::guard::WriteGuard;
use super::registry::Registry;
use super::{
    validate, Author, Comment, CommentCursor, CommentPage, CommentQuery, CommentStore, Deletion,
    Design, Features, NewComment, Order, ThreadedComments,
};
use crate::bson_ext;
use crate::inbox::{check_collection_names, MAX_DOCUMENT_BYTES};
use crate::retry::RetryPolicy;
use crate::sharding::ShardKey;
use crate::update_batch::is_duplicate_key;
use crate::{Error, Result};

/// Letter of this design's cursors.
const CURSOR: char = 'h';
/// Rounds a post tries while pages fill under it.
const ATTEMPTS: usize = 32;
/// Bytes of a page document not available to comments: ids, counters, field names.
const PAGE_OVERHEAD: usize = 4096;

/// Comments in pages of `page_size` (default 100) per document, as in the manual's hybrid
/// design. Comments are top-level only (the manual leaves threading out of this design).
///
/// Collections (names configurable):
/// - `comment_pages`: `{discussion_id, page, count, visible, comments: [{slug, posted, author,
///   text, edited, deleted}]}`, unique index `{discussion_id, page}` and index
///   `{discussion_id, comments.slug}` (direct links); shard key `{discussion_id: 1, page: 1}`;
/// - `comment_discussions`: `{_id: discussion, last_page}`, the registered discussions and the
///   seed's page counter;
/// - `comment_locks`: write locks, used only on servers without atomic updates.
///
/// # How it fixes the seed's races
/// - **A hard cap, so no page ever holds more than `page_size`.** The seed's upserting
///   `findAndModify` pushes to "the last page" whatever its count, so pages overfill while
///   writers race to open the next one. Here the push's filter requires `count < page_size`, in
///   the same atomic update.
/// - **Never two documents for one page.** A full page makes the upsert try to create the page
///   again, which the unique `{discussion_id, page}` index refuses. Only then does the writer
///   advance `last_page`, with the seed's guard (the update names the page it saw last, so two
///   writers cannot both advance it), and push to the next page, which the first writer there
///   creates (the same unique index settles a race to create it).
/// - **No lost comment.** Every push either applies or fails visibly and is retried.
///
/// Because a page is left only once full, every page but the last holds exactly `page_size`
/// comments, so a comment's position is `page * page_size + index`: pages are exact keyset
/// pages that read one or two page documents, with no skip walk. Deleting leaves a tombstone,
/// keeping positions (and links) stable; `visible` counts the comments not deleted.
///
/// # Costs (commands, MongoDB)
/// Post: 2 (`find` the page counter, `update` with upsert); when the page is full, 3 more
/// (`find`, `update` the counter, `update`). A page of up to `page_size` comments: 1 `find`.
/// Direct link: 1 `find`. Edit and delete: 2. Count: 1 `find`. On servers without atomic
/// updates each write also takes and releases a lock (2 more).
#[derive(Clone, Debug)]
pub struct HybridPages {
    pages: Collection<Document>,
    registry: Registry,
    guard: WriteGuard,
    page_size: usize,
    max_comment_bytes: usize,
}

/// Configures a [`HybridPages`] store.
#[derive(Clone, Debug)]
pub struct HybridPagesBuilder {
    database: Database,
    pages: String,
    discussions: String,
    locks: String,
    retry: RetryPolicy,
    page_size: usize,
    max_comment_bytes: usize,
}

impl HybridPagesBuilder {
    /// The page documents (default `comment_pages`).
    pub fn pages_collection(mut self, name: impl Into<String>) -> Self {
        self.pages = name.into();
        self
    }

    /// The registered discussions and their page counters (default `comment_discussions`).
    pub fn discussions_collection(mut self, name: impl Into<String>) -> Self {
        self.discussions = name.into();
        self
    }

    /// The lock documents, used only on servers without atomic updates (default
    /// `comment_locks`).
    pub fn locks_collection(mut self, name: impl Into<String>) -> Self {
        self.locks = name.into();
        self
    }

    /// Comments per page (default 100).
    pub fn page_size(mut self, size: usize) -> Self {
        self.page_size = size;
        self
    }

    /// The largest comment, as an encoded document in bytes (default 64 KiB).
    pub fn max_comment_bytes(mut self, bytes: usize) -> Self {
        self.max_comment_bytes = bytes;
        self
    }

    /// How transient failures are retried (default [`RetryPolicy::default`]): the discussion's
    /// registration and, where updates are not atomic, its lock. Posts, edits and deletes are
    /// not retried yet (their failures are returned as they happen, classified by
    /// [`Error::is_retryable`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an unusable collection name, the same name twice, a page
    /// size of 0, or a page that could pass 16 MiB when full of the largest comments.
    pub fn build(self) -> Result<HybridPages> {
        check_collection_names(
            &[&self.pages, &self.discussions, &self.locks],
            "pages, discussions and locks",
        )?;
        let worst_page = self
            .page_size
            .saturating_mul(self.max_comment_bytes + 16)
            .saturating_add(PAGE_OVERHEAD);
        if self.page_size == 0 || worst_page > MAX_DOCUMENT_BYTES {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "{} comments of up to {} bytes do not fit a 16 MiB page document",
                    self.page_size, self.max_comment_bytes
                ),
            });
        }
        Ok(HybridPages {
            pages: self.database.collection(&self.pages),
            registry: Registry::new(self.database.collection(&self.discussions), self.retry),
            guard: WriteGuard::new(&self.database, &self.locks, "hybrid", self.retry),
            page_size: self.page_size,
            max_comment_bytes: self.max_comment_bytes,
        })
    }
}

/// A comment as stored in a page.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    slug: String,
    posted: bson::DateTime,
    author: Author,
    text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    edited: Option<bson::DateTime>,
    deleted: bool,
}

impl Entry {
    fn comment(&self) -> Comment {
        Comment {
            link: self.slug.clone(),
            parent: None,
            depth: 0,
            author: self.author.clone(),
            text: self.text.clone(),
            posted: self.posted,
            edited: self.edited,
            deleted: self.deleted,
        }
    }
}

/// A page document.
#[derive(Clone, Debug, Deserialize)]
struct Page {
    #[serde(rename = "_id")]
    id: ObjectId,
    page: i64,
    #[serde(default)]
    comments: Vec<Entry>,
}

impl HybridPages {
    /// The default pages collection name.
    pub const DEFAULT_COLLECTION: &'static str = "comment_pages";
    /// The default registered-discussions collection name.
    pub const DEFAULT_DISCUSSIONS_COLLECTION: &'static str = "comment_discussions";
    /// The default locks collection name.
    pub const DEFAULT_LOCKS_COLLECTION: &'static str = "comment_locks";
    /// The default page size.
    pub const DEFAULT_PAGE_SIZE: usize = 100;
    /// The default largest comment, in bytes.
    pub const DEFAULT_MAX_COMMENT_BYTES: usize = 64 * 1024;

    /// A store with the default collections and page size in `database`.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default configuration is valid")
    }

    /// A builder to configure collections and page size.
    pub fn builder(database: &Database) -> HybridPagesBuilder {
        HybridPagesBuilder {
            database: database.clone(),
            pages: Self::DEFAULT_COLLECTION.to_owned(),
            discussions: Self::DEFAULT_DISCUSSIONS_COLLECTION.to_owned(),
            locks: Self::DEFAULT_LOCKS_COLLECTION.to_owned(),
            retry: RetryPolicy::default(),
            page_size: Self::DEFAULT_PAGE_SIZE,
            max_comment_bytes: Self::DEFAULT_MAX_COMMENT_BYTES,
        }
    }

    /// The configured page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// How many comments each page document of `discussion` holds, page 0 first (tombstones
    /// included). Every page but the last holds exactly [`HybridPages::page_size`].
    pub async fn page_counts(&self, discussion: &str) -> Result<Vec<(u64, usize)>> {
        let pages: Vec<Document> = self
            .pages
            .find(doc! { "discussion_id": discussion })
            .projection(doc! { "page": 1, "count": 1 })
            .sort(doc! { "page": 1 })
            .await?
            .try_collect()
            .await?;
        Ok(pages
            .iter()
            .map(|page| (number(page, "page") as u64, number(page, "count") as usize))
            .collect())
    }

    /// Pushes `entry` onto the last page, opening the next page when that one is full.
    async fn push(&self, discussion: &str, entry: &Entry) -> Result<()> {
        let registered = self
            .registry
            .find(discussion)
            .await?
            .ok_or_else(|| validate::no_discussion(discussion))?;
        let mut page = number(&registered, "last_page");
        let pushed = bson::to_bson(entry)?;
        for _ in 0..ATTEMPTS {
            let filter = doc! {
                "discussion_id": discussion,
                "page": page,
                "count": { "$lt": self.page_size as i64 },
            };
            let update = doc! {
                "$push": { "comments": pushed.clone() },
                "$inc": { "count": 1_i64, "visible": 1_i64 },
            };
            match self.pages.update_one(filter, update).upsert(true).await {
                Ok(_) => return Ok(()),
                Err(error) if is_duplicate_key(&error) => {}
                Err(error) => return Err(error.into()),
            }
            // The page exists: full, or just created by another writer.
            let existing = self
                .pages
                .find_one(doc! { "discussion_id": discussion, "page": page })
                .projection(doc! { "count": 1 })
                .await?;
            let full = existing.is_some_and(|p| number(&p, "count") >= self.page_size as i64);
            if full {
                // The seed's guard: only a writer that saw `page` as the last advances it.
                self.registry
                    .discussions
                    .update_one(
                        doc! { "_id": discussion, "last_page": page },
                        doc! { "$set": { "last_page": page + 1 } },
                    )
                    .await?;
                page += 1;
            }
        }
        Err(Error::Contention { attempts: ATTEMPTS })
    }

    /// The comments of up to `limit` pages matching `filter`, taken in `sort` order of page
    /// number, each with its position, sorted by position.
    async fn entries(
        &self,
        discussion: &str,
        filter: Document,
        sort: i32,
        limit: i64,
    ) -> Result<Vec<(u64, Entry)>> {
        let mut full = doc! { "discussion_id": discussion };
        full.extend(filter);
        let options = FindOptions::builder()
            .sort(doc! { "page": sort })
            .limit(limit)
            .build();
        let pages: Vec<Document> = self
            .pages
            .find(full)
            .with_options(options)
            .await?
            .try_collect()
            .await?;
        let mut entries = Vec::new();
        for page in pages {
            let page: Page = bson::from_document(page)?;
            let base = page.page as u64 * self.page_size as u64;
            entries.extend(
                page.comments
                    .into_iter()
                    .enumerate()
                    .map(|(index, entry)| (base + index as u64, entry)),
            );
        }
        entries.sort_by_key(|(position, _)| *position);
        Ok(entries)
    }

    /// The page holding `slug`, and the comment's index in it.
    async fn locate(&self, discussion: &str, slug: &str) -> Result<(Page, usize)> {
        validate::check_discussion(discussion)?;
        check_slug(slug)?;
        let page = self
            .pages
            .find_one(doc! { "discussion_id": discussion, "comments.slug": slug })
            .await?
            .ok_or_else(|| validate::no_comment("comment", slug))?;
        let page: Page = bson::from_document(page)?;
        let index = page
            .comments
            .iter()
            .position(|entry| entry.slug == slug)
            .ok_or_else(|| validate::no_comment("comment", slug))?;
        Ok((page, index))
    }

    /// Sets fields of the comment `slug` if it is not deleted and passes `check`; returns the
    /// comment as it was (`Err` if it was deleted).
    async fn change(
        &self,
        discussion: &str,
        slug: &str,
        check: impl Fn(&Entry) -> Result<()>,
        set: impl Fn(&str) -> Document,
        visible: i64,
    ) -> Result<std::result::Result<Entry, Entry>> {
        self.guard
            .run(discussion, async {
                let (page, index) = self.locate(discussion, slug).await?;
                let entry = page.comments[index].clone();
                if entry.deleted {
                    return Ok(Err(entry));
                }
                check(&entry)?;
                let field = format!("comments.{index}");
                let mut update = doc! { "$set": set(&field) };
                if visible != 0 {
                    update.insert("$inc", doc! { "visible": visible });
                }
                let result = self
                    .pages
                    .update_one(
                        doc! {
                            "_id": page.id,
                            // The shard key's prefix, so a sharded cluster routes it to one shard.
                            "discussion_id": discussion,
                            format!("{field}.slug"): slug,
                            format!("{field}.deleted"): false,
                        },
                        update,
                    )
                    .await?;
                if result.matched_count == 0 {
                    // Deleted between the read and the update.
                    return Ok(Err(entry));
                }
                Ok(Ok(entry))
            })
            .await
    }
}

/// Checks a hybrid slug: 16 lowercase hex digits.
fn check_slug(slug: &str) -> Result<()> {
    if slug.len() != 16
        || !slug
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(validate::invalid_link(
            slug,
            "a slug of this design is 16 lowercase hex digits",
        ));
    }
    Ok(())
}

/// A fresh slug: 64 random bits, so slugs stay unique across a discussion's pages.
fn new_slug() -> String {
    format!("{}{}", super::slug::new_part(), super::slug::new_part())
}

/// An integer field, 0 when missing.
fn number(document: &Document, field: &str) -> i64 {
    bson_ext::integer(document, field).unwrap_or(0)
}

#[async_trait]
impl CommentStore for HybridPages {
    fn design(&self) -> Design {
        Design::HybridPages
    }

    fn features(&self) -> Features {
        Features {
            threading: false,
            removes_leaves: false,
        }
    }

    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        None
    }

    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        validate::check_discussion(discussion)?;
        self.registry
            .create(discussion, doc! { "last_page": 0_i64 })
            .await
    }

    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment)?;
        let entry = Entry {
            slug: new_slug(),
            posted: bson::DateTime::now(),
            author: comment.author,
            text: comment.text,
            edited: None,
            deleted: false,
        };
        validate::check_size(&entry, self.max_comment_bytes)?;
        self.guard
            .run(discussion, self.push(discussion, &entry))
            .await?;
        Ok(entry.comment())
    }

    async fn chronological(&self, discussion: &str, query: &CommentQuery) -> Result<CommentPage> {
        validate::check_query(discussion, query)?;
        let size = self.page_size as u64;
        let after = match &query.after {
            None => None,
            Some(cursor) => Some(
                cursor
                    .key(CURSOR, View::Chronological, query.order)?
                    .parse::<u64>()
                    .map_err(|_| cursor::invalid("bad position"))?,
            ),
        };
        // One more comment than the page, to know whether another page follows.
        let wanted = query.limit as u64 + 1;
        let pages_spanned = |first: u64, last: u64| (last / size - first / size + 1) as i64;
        let mut entries = match (query.order, after) {
            (Order::OldestFirst, after) => {
                let first = match after {
                    None => 0,
                    Some(after) => after
                        .checked_add(1)
                        .ok_or_else(|| cursor::invalid("bad position"))?,
                };
                let last = first + wanted - 1;
                let filter = doc! { "page": { "$gte": (first / size) as i64, "$lte": (last / size) as i64 } };
                let mut entries = self
                    .entries(discussion, filter, 1, pages_spanned(first, last))
                    .await?;
                entries.retain(|(position, _)| *position >= first);
                entries
            }
            (Order::NewestFirst, None) => {
                // The newest pages: the last one may hold a single comment, the rest come from
                // full pages before it.
                let pages = ((wanted - 1).div_ceil(size) + 1) as i64;
                let mut entries = self.entries(discussion, Document::new(), -1, pages).await?;
                entries.reverse();
                entries
            }
            (Order::NewestFirst, Some(0)) => Vec::new(),
            (Order::NewestFirst, Some(after)) => {
                let last = after - 1;
                let first = last.saturating_sub(wanted - 1);
                let filter = doc! { "page": { "$gte": (first / size) as i64, "$lte": (last / size) as i64 } };
                let mut entries = self
                    .entries(discussion, filter, -1, pages_spanned(first, last))
                    .await?;
                entries.retain(|(position, _)| *position <= last);
                entries.reverse();
                entries
            }
        };
        if entries.is_empty()
            && query.after.is_none()
            && self.registry.find(discussion).await?.is_none()
        {
            return Err(validate::no_discussion(discussion));
        }
        entries.truncate(wanted as usize);
        let order = query.order;
        Ok(super::cursor::page_from(
            entries,
            query.limit,
            |(_, entry)| entry.comment(),
            |(position, _)| {
                CommentCursor::new(CURSOR, View::Chronological, order, &position.to_string())
            },
        ))
    }

    async fn get(&self, discussion: &str, link: &str) -> Result<Comment> {
        let (page, index) = self.locate(discussion, link).await?;
        Ok(page.comments[index].comment())
    }

    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment> {
        validate::check_text(text)?;
        let now = bson::DateTime::now();
        let edited = |entry: &Entry| Entry {
            text: text.to_owned(),
            edited: Some(now),
            ..entry.clone()
        };
        let changed = self
            .change(
                discussion,
                link,
                |entry| validate::check_size(&edited(entry), self.max_comment_bytes).map(drop),
                |field| doc! { format!("{field}.text"): text, format!("{field}.edited"): now },
                0,
            )
            .await?;
        let entry = changed.map_err(|_| Error::CommentDeleted {
            link: link.to_owned(),
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
        validate::check_discussion(discussion)?;
        let pages: Vec<Document> = self
            .pages
            .find(doc! { "discussion_id": discussion })
            .projection(doc! { "visible": 1 })
            .await?
            .try_collect()
            .await?;
        if pages.is_empty() && self.registry.find(discussion).await?.is_none() {
            return Err(validate::no_discussion(discussion));
        }
        Ok(pages
            .iter()
            .map(|page| number(page, "visible").max(0) as u64)
            .sum())
    }

    async fn create_indexes(&self) -> Result<()> {
        let indexes = [
            IndexModel::builder()
                .keys(doc! { "discussion_id": 1, "page": 1 })
                .options(IndexOptions::builder().unique(true).build())
                .build(),
            IndexModel::builder()
                .keys(doc! { "discussion_id": 1, "comments.slug": 1 })
                .build(),
        ];
        // One command per index: FerretDB 1.24 drops the connection when one `createIndexes`
        // names several indexes that all exist already.
        for index in indexes {
            self.pages.create_index(index).await?;
        }
        Ok(())
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        vec![ShardKey::new(
            self.pages.name(),
            doc! { "discussion_id": 1, "page": 1 },
            "a discussion's pages stay together, so a page read and a post each touch one shard; \
             page lets a very long discussion split across chunks",
        )]
    }
}
