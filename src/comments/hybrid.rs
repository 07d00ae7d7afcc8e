//! Comments in pages of about 100 per document, the manual's hybrid strategy.

use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::{Collection, Database, IndexModel};
use serde::{Deserialize, Serialize};

use super::cursor::{self, View};
use super::ranking::rank_after;
use super::registry::Registry;
use super::votes::{
    self, Delta, Found, Tally, VoteBook, VOTE_OPS, VOTE_OPS_BYTES, VOTE_OPS_PER_DOCUMENT,
};
use super::{
    discussion_lock, validate, Author, Comment, CommentStore, Deletion, Features, Keyed,
    NewComment, Order, Sort, Strategy, ThreadedComments, Vote, VotedComments, Votes,
};
use crate::backend::Backend;
use crate::bson_ext::{self, now_or_after};
use crate::config::{store_builder_methods, StoreConfig};
use crate::page::{invalid, Cursor};
use crate::sharding::ShardKey;
use crate::update_batch::is_duplicate_key;
use crate::validate::MAX_DOCUMENT_BYTES;
use crate::{Entity, Error, PageRequest, Result};

/// The strategy named in this store's cursors.
const STRATEGY: Strategy = Strategy::HybridPages;
/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 4] = [
    "comment_pages",
    "comment_discussions",
    "comment_locks",
    votes::VOTES,
];
/// How long a discussion's lock lasts if its holder dies.
const LOCK_LEASE: std::time::Duration = std::time::Duration::from_secs(30);
/// Rounds a post tries while pages fill under it.
const ATTEMPTS: usize = 32;
/// Bytes of a page document not available to comments: ids, counters, field names, and the
/// votes' operation ids.
const PAGE_OVERHEAD: usize = 4096 + VOTE_OPS_BYTES;
/// A page's newest `posted`: a push never puts an older comment after it.
const LAST_POSTED: &str = "last_posted";
/// The newest `posted` of the page before the last, kept with the page counter, for a push that
/// opens a page.
const FLOOR: &str = "floor";

/// Comments in pages of `page_size` (default 100) per document, as in the manual's hybrid
/// strategy. Comments are top-level only (the manual leaves threading out of this strategy), so
/// its builder, unlike the threaded strategies', takes no notifier: there are no replies to
/// tell anyone of.
///
/// Collections (names configurable):
/// - `comment_pages`: `{_id: "<discussion>/<page>", discussion_id, page, count, visible,
///   last_posted, vote_ops, comments: [{slug, posted, author, text, edited, deleted, ups,
///   downs}]}` (a comment posted with an idempotency key has a slug derived from the
///   discussion and the key, and keeps `idempotency_key` and `content_digest`: see
///   [`CommentStore::post`]), indexes `{discussion_id, page}` (the walks) and `{discussion_id, comments.slug}`
///   (direct links); shard key `{discussion_id: 1, page: 1}`; `vote_ops` holds the newest 1,000
///   votes' operation ids (see [`VotedComments`]). A page's `_id` is its discussion and number,
///   so `_id`'s own uniqueness is what keeps a page from existing twice (see below);
/// - `comment_discussions`: `{_id: discussion, last_page, floor}`, the registered discussions,
///   the seed's page counter and the newest `posted` of the page before the last;
/// - `comment_locks`: write locks, used only on servers without atomic updates;
/// - `comment_votes`: one document per vote, index `{discussion_id, comment}`, shard key
///   `{discussion_id: 1, comment: 1}`.
///
/// # How it fixes the seed's races
/// - **A hard cap, so no page ever holds more than `page_size`.** The seed's upserting
///   `findAndModify` pushes to "the last page" whatever its count, so pages overfill while
///   writers race to open the next one. Here the push's filter requires `count < page_size`, in
///   the same atomic update.
/// - **Never two documents for one page.** A full page makes the upsert try to create the page
///   again, with the `_id` that page already has, which `_id`'s uniqueness refuses. Only then
///   does the writer advance `last_page`, with the seed's guard (the update names the page it saw
///   last, so two writers cannot both advance it), and push to the next page, which the first
///   writer there creates (`_id` settles a race to create it too).
/// - **No deadlock between posters.** A post's write is one statement on one document. Engines
///   that keep documents in PostgreSQL (DocumentDB: FerretDB 2.x, Azure Cosmos DB for MongoDB
///   vCore) enforce a secondary unique index as an exclusion constraint, whose check waits on
///   every uncommitted conflicting entry: an upsert creating a page and a push into that page,
///   each waiting on the other's entry, deadlocked there (16 posters into one discussion failed
///   about one post in a hundred after 10 s of retries). `_id` is the table's primary key, whose
///   check makes only the later writer wait, so with no secondary unique index on the pages two
///   posts cannot wait on each other at all.
/// - **No lost comment.** Every push either applies or fails visibly and is retried.
/// - **Positions and posting times agree.** A comment is stamped when its push is tried, and
///   the push lands only if no later comment is on the page (`last_posted`, moved up with
///   `$max` in the same update); one that loses is stamped again. So the chronological view,
///   read in position order, never lists a comment before an earlier one, under concurrent
///   posters too. (The seed stamps before it pushes.)
///
/// A comment's place is its page and its index there, and cursors name that place, so pages
/// are exact keyset pages with no skip walk. Because a page is left only once full, every page
/// but the last holds exactly `page_size` comments and a page of comments reads one or two page
/// documents in one `find`. Places are never computed from the page size, so pages filled by
/// the manual's algorithm, which overfills them (100, 102, 101, 22), read correctly too: that
/// `find` reads as many pages as the page needs when every page but the last holds at least
/// `page_size`, and reads on when one holds fewer. Deleting leaves a tombstone, keeping places
/// (and links) stable; `visible` counts the comments not deleted.
///
/// # Costs (commands, MongoDB)
/// Post: 2 (`find` the page counter, `update` with upsert); when the page is full, 3 more
/// (`find`, `update` the counter, `update`). A page of up to `page_size` comments: 1 `find`.
/// Direct link: 1 `find`. Edit and delete: 2. Count: 1 `find`. A vote: 4 (see [`super`]); a
/// ranked page: 1 `find` of every page of the discussion, ranked here (the discussion is flat,
/// so a ranked page is of all its comments). On servers without atomic updates each write also
/// takes and releases a lock (2 more).
///
/// # Votes
///
/// A vote's change of counts is one `update` of the comment's page: `$inc` of the element's
/// `ups` and `downs`, filtered by the element's slug at its index and by the vote's op id not
/// among the page's `vote_ops`, which it joins. The sorts' keys are computed on every read.
#[derive(Clone, Debug)]
pub struct HybridPages {
    backend: Backend,
    pages: Collection<Document>,
    registry: Registry,
    votes: VoteBook,
    page_size: usize,
    max_comment_bytes: usize,
    /// Whether a post to a discussion not registered registers it.
    create_discussions: bool,
}

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

    /// Whether a [`post`](CommentStore::post) to a discussion that was not registered
    /// registers it ([`CommentStore::create_discussion`]) and posts, instead of failing with
    /// [`Error::NotFound`] (default `false`). Concurrent first posts register it once (an
    /// `insert` of the discussion's `_id`, a duplicate counting as done). A post to a
    /// registered discussion costs what it did; the first post to a new one, 2 commands more
    /// (the `insert`, and reading the registration back). Votes and reads still need the
    /// discussion.
    pub fn create_discussions_on_post(mut self, create: bool) -> Self {
        self.create_discussions = create;
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
            votes: VoteBook::new(votes, backend.clone()),
            registry: Registry::new(database.collection(&discussions), backend.clone()),
            backend,
            pages,
            page_size: self.page_size,
            max_comment_bytes: self.max_comment_bytes,
            create_discussions: self.create_discussions,
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
    /// Its votes (see [`VotedComments`]), changed by `$inc` in place.
    #[serde(default)]
    ups: i64,
    #[serde(default)]
    downs: i64,
    /// The caller's idempotency key, for a keyed comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<String>,
    /// The digest of what a keyed comment was posted with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_digest: Option<String>,
}

/// Bytes a comment takes in its page beyond its text and author: array index, field names,
/// times, counts.
const ENTRY_OVERHEAD: usize = 48;

impl Entry {
    fn votes(&self) -> Votes {
        Votes::from_stored(self.ups, self.downs)
    }

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
            votes: self.votes(),
        }
    }
}

/// A page document.
#[derive(Clone, Debug, Deserialize)]
struct Page {
    /// [`page_id`] for pages this store made; pages written by other code may have any `_id`.
    #[serde(rename = "_id")]
    id: bson::Bson,
    page: i64,
    #[serde(default)]
    comments: Vec<Entry>,
}

impl HybridPages {
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

    /// How many comments each page document of `discussion` holds, page 0 first (tombstones
    /// included). Every page but the last holds exactly [`HybridPages::page_size`].
    pub async fn page_counts(&self, discussion: &str) -> Result<Vec<(u64, usize)>> {
        validate::check_discussion(discussion)?;
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

    /// Pushes `entry` onto the last page, opening the next page when that one is full, and
    /// stamps its `posted` for the place it takes: never before the newest comment of that page
    /// (its `last_posted`, checked in the push's filter) or of the page before (the `floor`
    /// recorded with the page counter).
    async fn push(&self, discussion: &str, entry: &mut Entry) -> Result<()> {
        let read = || {
            self.backend
                .retry("read discussion", || self.registry.find(discussion))
        };
        let registered = match read().await? {
            Some(registered) => registered,
            None if self.create_discussions => {
                // An `insert` of the `_id`, which takes no lock.
                self.create_discussion(discussion).await?;
                read()
                    .await?
                    .ok_or_else(|| validate::no_discussion(discussion))?
            }
            None => return Err(validate::no_discussion(discussion)),
        };
        let mut page = number(&registered, "last_page");
        let mut floor = bson_ext::date(&registered, FLOOR);
        // Whether an attempt failed after it may have landed.
        let mut uncertain = false;
        for _ in 0..ATTEMPTS {
            entry.posted = now_or_after(floor);
            let filter = doc! {
                "_id": page_id(discussion, page),
                "discussion_id": discussion,
                "page": page,
                "count": { "$lt": self.page_size as i64 },
                LAST_POSTED: { "$not": { "$gt": entry.posted } },
                // Never pushed twice: a retry after a lost reply matches nothing (and its
                // upsert meets the page's unique key).
                "comments.slug": { "$ne": &entry.slug },
            };
            let update = doc! {
                "$push": { "comments": bson::to_bson(&*entry)? },
                "$inc": { "count": 1_i64, "visible": 1_i64 },
                "$max": { LAST_POSTED: entry.posted },
            };
            let mut tries = 0;
            let (slug, posted) = (entry.slug.clone(), entry.posted);
            let pushed = self
                .backend
                .retry("post comment", || {
                    tries += 1;
                    let again = tries > 1;
                    let slug = slug.clone();
                    let action = self
                        .pages
                        .update_one(filter.clone(), update.clone())
                        .upsert(true);
                    async move {
                        // FerretDB 1.x matches `$ne` on an array path when any element differs: a
                        // retry looks for the comment itself first.
                        if again {
                            if let Some(stored) = self.find_slug(discussion, &slug).await? {
                                return Ok(Some(stored.posted));
                            }
                        }
                        match action.await {
                            Ok(_) => Ok(Some(posted)),
                            Err(error) if is_duplicate_key(&error) => Ok(None),
                            Err(error) => Err(error.into()),
                        }
                    }
                })
                .await?;
            if let Some(posted) = pushed {
                entry.posted = posted;
                return Ok(());
            }
            uncertain |= tries > 1;
            if uncertain {
                if let Some(stored) = self.find_slug(discussion, &entry.slug).await? {
                    entry.posted = stored.posted;
                    return Ok(());
                }
            }
            // The page exists: full, just created by another writer, or holding a later comment.
            let existing = self
                .backend
                .retry("read page", || async {
                    Ok(self
                        .pages
                        .find_one(doc! { "discussion_id": discussion, "page": page })
                        .projection(doc! { "count": 1, LAST_POSTED: 1 })
                        .await?)
                })
                .await?;
            let last_posted = existing
                .as_ref()
                .and_then(|p| bson_ext::date(p, LAST_POSTED));
            floor = bson_ext::later(floor, last_posted);
            let full = existing.is_some_and(|p| number(&p, "count") >= self.page_size as i64);
            if full {
                // The seed's guard: only a writer that saw `page` as the last advances it. The
                // next page starts after this one's newest comment.
                let mut advance = doc! { "$set": { "last_page": page + 1 } };
                if let Some(last_posted) = last_posted {
                    advance.insert("$max", doc! { FLOOR: last_posted });
                }
                // Filtered by the page it names: applying it twice advances once.
                self.backend
                    .retry("open comment page", || async {
                        self.registry
                            .discussions
                            .update_one(
                                doc! { "_id": discussion, "last_page": page },
                                advance.clone(),
                            )
                            .await?;
                        Ok(())
                    })
                    .await?;
                page += 1;
            }
        }
        Err(Error::contention("post comment", ATTEMPTS))
    }

    /// Up to `wanted` comments after `after` in `order`, with their places, in that order.
    ///
    /// Pages are read in page order and a comment's place is its page and its index there, never
    /// a position computed from the page size, so pages of any size read correctly: this
    /// strategy's (every page but the last holds exactly `page_size`) and the manual's (a page is
    /// left once it holds more than its soft limit, so concurrent writers overfill it). One
    /// `find` reads as many pages as hold `wanted` comments when every page but the last holds
    /// at least `page_size`; should some hold fewer, further `find`s read on.
    async fn walk(
        &self,
        discussion: &str,
        order: Order,
        after: Option<Place>,
        wanted: usize,
    ) -> Result<Vec<(Place, Entry)>> {
        let size = self.page_size;
        let ascending = order == Order::OldestFirst;
        let mut pages_wanted = match (after, ascending) {
            (None, true) => wanted.div_ceil(size),
            // The cursor's page holds the `index + 1` comments up to the cursor first.
            (Some((_, index)), true) => (wanted + index + 1).div_ceil(size),
            // The newest page may hold a single comment.
            (None, false) => 1 + (wanted - 1).div_ceil(size),
            // The cursor's page holds `index` comments before the cursor.
            (Some((_, index)), false) => 1 + wanted.saturating_sub(index).div_ceil(size),
        };
        let range = if ascending { "$gte" } else { "$lte" };
        let mut pages_filter = after.map(|(page, _)| doc! { range: page });
        let mut entries = Vec::new();
        loop {
            let mut filter = doc! { "discussion_id": discussion };
            if let Some(pages_filter) = &pages_filter {
                filter.insert("page", pages_filter.clone());
            }
            let pages: Vec<Document> = self
                .pages
                .find(filter)
                .sort(doc! { "page": if ascending { 1 } else { -1 } })
                .limit(pages_wanted as i64)
                .await?
                .try_collect()
                .await?;
            let fetched = pages.len();
            let mut last_page = None;
            for page in pages {
                let page: Page = bson_ext::decode(self.pages.name(), page)?;
                last_page = Some(page.page);
                let mut indexed: Vec<(usize, Entry)> =
                    page.comments.into_iter().enumerate().collect();
                if !ascending {
                    indexed.reverse();
                }
                for (index, entry) in indexed {
                    let place = (page.page, index);
                    let past_cursor = after.is_none_or(|cursor| {
                        if ascending {
                            place > cursor
                        } else {
                            place < cursor
                        }
                    });
                    if past_cursor {
                        entries.push((place, entry));
                    }
                }
            }
            let Some(last_page) = last_page else {
                break;
            };
            if entries.len() >= wanted || fetched < pages_wanted {
                break;
            }
            // Some page held fewer than `page_size`: read on past the last one read.
            pages_filter = Some(doc! { if ascending { "$gt" } else { "$lt" }: last_page });
            pages_wanted = (wanted - entries.len()).div_ceil(size);
        }
        entries.truncate(wanted);
        Ok(entries)
    }

    /// The comment `slug`, if a page holds it: how a post whose reply was lost finds out
    /// whether it landed.
    async fn find_slug(&self, discussion: &str, slug: &str) -> Result<Option<Entry>> {
        let page = self
            .backend
            .retry("read page", || async {
                Ok(self
                    .pages
                    .find_one(doc! { "discussion_id": discussion, "comments.slug": slug })
                    .await?)
            })
            .await?;
        let Some(page) = page else {
            return Ok(None);
        };
        let page: Page = bson_ext::decode(self.pages.name(), page)?;
        Ok(page.comments.into_iter().find(|entry| entry.slug == slug))
    }

    /// The keyed comment at `slug` (derived from `keyed`), if any (one `find`), checked against
    /// `keyed`: [`Error::Conflict`] when it was posted with other content.
    async fn keyed_entry(
        &self,
        discussion: &str,
        slug: &str,
        keyed: &Keyed,
    ) -> Result<Option<Entry>> {
        let Some(entry) = self.find_slug(discussion, slug).await? else {
            return Ok(None);
        };
        keyed.check(
            entry.idempotency_key.as_deref(),
            entry.content_digest.as_deref(),
        )?;
        Ok(Some(entry))
    }

    /// The page holding `slug`, and the comment's index in it.
    async fn locate(&self, discussion: &str, slug: &str) -> Result<(Page, usize)> {
        validate::check_discussion(discussion)?;
        check_slug(slug)?;
        let page = self
            .pages
            .find_one(doc! { "discussion_id": discussion, "comments.slug": slug })
            .await?
            .ok_or_else(|| validate::no_comment(Entity::Comment, slug))?;
        let page: Page = bson_ext::decode(self.pages.name(), page)?;
        let index = page
            .comments
            .iter()
            .position(|entry| entry.slug == slug)
            .ok_or_else(|| validate::no_comment(Entity::Comment, slug))?;
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
        // Before the lock, which is a write where updates are not atomic.
        validate::check_discussion(discussion)?;
        check_slug(slug)?;
        self.backend
            .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                let (page, index) = self
                    .backend
                    .retry("read page", || self.locate(discussion, slug))
                    .await?;
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
                let filter = doc! {
                    "_id": page.id.clone(),
                    // The shard key's prefix, so a sharded cluster routes it to one shard.
                    "discussion_id": discussion,
                    format!("{field}.slug"): slug,
                    format!("{field}.deleted"): false,
                };
                // A `$set` (an edit's retry sets the same values again), whose `visible` change
                // comes with `deleted: false` in the filter: a tombstone's retry matches nothing.
                let result = self
                    .backend
                    .retry("change comment", || async {
                        Ok(self
                            .pages
                            .update_one(filter.clone(), update.clone())
                            .await?)
                    })
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

/// Where a comment is: its page number and its index in that page. Ordered as the
/// chronological view reads (page, then index), whatever the pages' sizes.
type Place = (i64, usize);

/// A chronological cursor of `discussion` in `order` after the comment at `place`.
fn after_place(order: Order, discussion: &str, (page, index): Place) -> Cursor {
    let place = [page.to_string(), index.to_string()];
    cursor::new(
        STRATEGY,
        View::Chronological,
        order,
        cursor::discussion(discussion),
        &place.each_ref().map(String::as_str),
    )
}

/// The place in a chronological cursor of `discussion` in `order`: its page and index.
fn parse_place(cursor: &Cursor, order: Order, discussion: &str) -> Result<Place> {
    let bad = || invalid("bad position");
    let scope = cursor::discussion(discussion);
    let [page, index] = cursor::position(cursor, STRATEGY, View::Chronological, order, scope)?;
    let (page, index) = (page.as_str(), index.as_str());
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(page) || !digits(index) {
        return Err(bad());
    }
    Ok((
        page.parse().map_err(|_| bad())?,
        index.parse().map_err(|_| bad())?,
    ))
}

/// Checks a hybrid slug: 16 lowercase hex digits.
/// The `_id` of page `page` of `discussion`: unique per page, and the same for every writer, so
/// creating a page twice is a duplicate `_id` (the number after the last `/` is the page).
fn page_id(discussion: &str, page: i64) -> String {
    format!("{discussion}/{page}")
}

fn check_slug(slug: &str) -> Result<()> {
    if slug.len() != 16
        || !slug
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(validate::invalid_link(
            slug,
            "a slug of this strategy is 16 lowercase hex digits",
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
    fn strategy(&self) -> Strategy {
        Strategy::HybridPages
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
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        let keyed = Keyed::of(discussion, None, &comment)?;
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
            posted: bson::DateTime::now(),
            author: comment.author,
            text: comment.text,
            edited: None,
            deleted: false,
            ups: 0,
            downs: 0,
            idempotency_key: keyed.as_ref().map(|keyed| keyed.key.clone()),
            content_digest: keyed.as_ref().map(|keyed| keyed.content.clone()),
        };
        validate::check_stored(&entry, self.max_comment_bytes)?;
        // The unique `{discussion_id, page}` index is what keeps a page from being opened twice.
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
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<crate::Page<Comment>> {
        validate::check_page(discussion, &page)?;
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
            text: text.to_owned(),
            edited: Some(now),
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
            what: crate::Entity::DeletedComment,
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
        self.backend.create_indexes().await
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

/// A comment's place as a ranked cursor's tiebreak: `page:index`.
fn place_field((page, index): Place) -> String {
    format!("{page}:{index}")
}

/// The place in a field made by [`place_field`].
fn parse_place_field(field: &str) -> Result<Place> {
    let bad = || invalid("bad position");
    let (page, index) = field.split_once(':').ok_or_else(bad)?;
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(page) || !digits(index) {
        return Err(bad());
    }
    Ok((
        page.parse().map_err(|_| bad())?,
        index.parse().map_err(|_| bad())?,
    ))
}

/// Where a vote finds its comment: the page document, the index in it, and the slug there.
pub(super) struct Spot {
    page: bson::Bson,
    index: usize,
    slug: String,
}

#[async_trait]
impl Tally for HybridPages {
    type Target = Spot;

    fn check_link(&self, link: &str) -> Result<()> {
        check_slug(link)
    }

    async fn find(&self, discussion: &str, link: &str) -> Result<Found<Spot>> {
        let (page, index) = self
            .backend
            .retry("read page", || self.locate(discussion, link))
            .await?;
        Ok(Found {
            deleted: page.comments[index].deleted,
            target: Spot {
                page: page.id,
                index,
                slug: link.to_owned(),
            },
        })
    }

    async fn apply(
        &self,
        discussion: &str,
        spot: &Spot,
        delta: Delta,
        op: ObjectId,
    ) -> Result<bool> {
        let field = format!("comments.{}", spot.index);
        let mut filter = doc! {
            "_id": spot.page.clone(),
            // The shard key's prefix, so a sharded cluster routes it to one shard.
            "discussion_id": discussion,
            format!("{field}.slug"): &spot.slug,
        };
        let mut update = doc! {
            "$inc": { format!("{field}.ups"): delta.ups, format!("{field}.downs"): delta.downs },
        };
        crate::retry::once_per_op_in(
            &mut filter,
            &mut update,
            VOTE_OPS,
            VOTE_OPS_PER_DOCUMENT,
            op,
        );
        // Applied once: `op` joins `vote_ops`, whose filter a retry no longer matches.
        let counted = self
            .backend
            .retry("count vote", || async {
                Ok(self
                    .pages
                    .update_one(filter.clone(), update.clone())
                    .await?)
            })
            .await?;
        if counted.matched_count == 1 {
            return Ok(true);
        }
        // Counted already (by this vote's lost attempt, or by a call finishing its mark)?
        // Comments keep their places, so otherwise the page is gone.
        let holds = self
            .backend
            .retry("read page", || async {
                Ok(self
                    .pages
                    .find_one(doc! { "_id": spot.page.clone(), "discussion_id": discussion, VOTE_OPS: op })
                    .projection(doc! { "_id": 1 })
                    .await?)
            })
            .await?;
        Ok(holds.is_some())
    }

    fn lock_key(&self, discussion: &str) -> String {
        discussion_lock(STRATEGY, discussion)
    }
}

#[async_trait]
impl VotedComments for HybridPages {
    async fn vote(
        &self,
        discussion: &str,
        link: &str,
        user: &str,
        vote: Vote,
    ) -> Result<Option<Vote>> {
        self.votes
            .set(self, discussion, link, user, vote.value())
            .await
    }

    async fn retract_vote(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>> {
        self.votes.set(self, discussion, link, user, 0).await
    }

    async fn vote_of(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>> {
        self.votes.get(check_slug, discussion, link, user).await
    }

    async fn ranked(
        &self,
        discussion: &str,
        parent: Option<&str>,
        sort: Sort,
        page: PageRequest,
    ) -> Result<crate::Page<Comment>> {
        validate::check_page(discussion, &page)?;
        if parent.is_some() {
            return Err(Error::Unsupported {
                limit: crate::error::Limit::Strategy,
                feature: "replies",
                reason: "HybridPages keeps discussions flat; rank the top level".to_owned(),
            });
        }
        let after = match &page.after {
            None => None,
            Some(cursor) => {
                let (key, place) = cursor::ranked_key(cursor, STRATEGY, sort, discussion, None)?;
                Some((key, parse_place_field(&place)?))
            }
        };
        let pages: Vec<Document> = self
            .pages
            .find(doc! { "discussion_id": discussion })
            .sort(doc! { "page": 1 })
            .await?
            .try_collect()
            .await?;
        if pages.is_empty()
            && page.after.is_none()
            && self.registry.find(discussion).await?.is_none()
        {
            return Err(validate::no_discussion(discussion));
        }
        let mut keyed = Vec::new();
        for stored in pages {
            let stored: Page = bson_ext::decode(self.pages.name(), stored)?;
            for (index, entry) in stored.comments.into_iter().enumerate() {
                let key = sort.key(entry.votes(), entry.posted);
                keyed.push((key, (stored.page, index), entry));
            }
        }
        let mut ranked = rank_after(keyed, after);
        ranked.truncate(page.fetch());
        let page = crate::Page::from_overfetch(ranked, page.limit, |(key, place, _)| {
            cursor::after_ranked(STRATEGY, sort, discussion, None, *key, &place_field(*place))
        });
        Ok(page.map(|(_, _, entry)| entry.comment()))
    }

    async fn settle_votes(&self, discussion: &str) -> Result<usize> {
        self.votes.settle(self, discussion).await
    }
}
