//! One document per comment, threaded by materialized slug paths.

use crate::error::Invalid;
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::options::{FindOptions, IndexOptions, ReturnDocument};
use mongodb::{Collection, Database, IndexModel};
use serde::{Deserialize, Serialize};

use super::cursor::{self, page_from, View};
use super::registry::Registry;
use super::votes::{self, Delta, Found, Tally, VoteBook, VOTE_OPS, VOTE_OPS_PER_COMMENT};
use super::{
    check_reply_target, discussion_lock, notify_reply, reply_to_withdraw, slug, validate, Author,
    Comment, CommentStore, Deletion, Features, Keyed, NewComment, Order, Sort, Strategy, Thread,
    ThreadedComments, Vote, VotedComments, Votes,
};
use crate::backend::Backend;
use crate::config::{store_builder_methods, StoreConfig};
use crate::notifications::{DynNotifier, Outbox};
use crate::page::{invalid, Scope};
use crate::sharding::ShardKey;
use crate::{bson_ext, Cursor, Entity, Error, Page, PageRequest, Result};

/// The strategy named in this store's cursors.
const STRATEGY: Strategy = Strategy::PerComment;
/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 4] = [
    "comments",
    "comment_discussions",
    "comment_locks",
    votes::VOTES,
];
/// How long a discussion's lock lasts if its holder dies.
const LOCK_LEASE: std::time::Duration = std::time::Duration::from_secs(30);
/// Attempts at a fresh slug part when one collides with another comment's.
const SLUG_ATTEMPTS: usize = 8;

/// One document per comment, as in the manual's first strategy, threaded by slug paths.
///
/// Collections (default names; see [`PerCommentBuilder::collection`]):
/// - `comments`: `{_id, discussion_id, parent_id, parent, slug, full_slug, thread_key, posted,
///   author: {id, name}, text, edited, deleted, ups, downs, best, hot, top, controversial,
///   vote_ops}` (and `idempotency_key`, `content_digest` for a keyed comment, whose `_id` and
///   slug part derive from the discussion and the key: see [`CommentStore::post`]), indexes `{discussion_id, posted, _id}` (chronological), `{discussion_id,
///   full_slug}` (threaded, sub-threads), `{discussion_id, thread_key}` (threaded, newest
///   first), unique `{discussion_id, slug}` (direct links) and, per sort, `{discussion_id,
///   parent, <key>: -1, full_slug}` (ranked pages: `parent` is the parent's slug, empty at the
///   top level); shard key `{discussion_id: 1, slug: 1}` (not the manual's `{discussion_id,
///   full_slug}`: MongoDB shards a collection only if its unique indexes start with the shard
///   key);
/// - `comment_discussions`: `{_id: discussion}`, the registered discussions;
/// - `comment_locks`: edit, delete and vote locks, used only on servers without atomic updates;
/// - `comment_votes`: one document per vote (see [`VotedComments`]), index `{discussion_id,
///   comment}`, shard key `{discussion_id: 1, comment: 1}`.
///
/// # How it improves on the seed
/// - **Exact threaded order.** The seed's `full_slug` steps have one-second resolution, so two
///   replies in the same second sort by their random slugs. Here steps carry microseconds at
///   fixed width from a clock that never repeats within a process, and ties between processes
///   fall to the slug part, the same way on every read.
/// - **Newest first without reversing replies.** A second sort key, `thread_key`, complements
///   the top-level step so threads read newest first while each thread still reads top-down.
/// - **Anchored sub-threads.** A sub-thread is the index range `[full_slug, full_slug + "0")`:
///   no regular expression, no match on a sibling whose slug merely starts the same way.
/// - **Keyset pages.** Pages continue after a cursor instead of skipping, so a page costs the
///   same on page 1,000 as on page 1, and new comments never shift what follows.
/// - **Index key guard.** Each level adds 36 bytes to `full_slug`. A reply whose index key
///   (discussion id plus `full_slug`) would pass [`PerCommentBuilder::max_key_bytes`] (default
///   1,000, under the 1,024-byte index key limit of MongoDB before 4.2) is refused with
///   [`Invalid::ThreadTooDeep`](crate::error::Invalid::ThreadTooDeep): 26 levels below the top with a 10-byte discussion id.
/// - **Deletes that keep threads whole.** A comment with replies becomes a tombstone; a leaf is
///   removed. A reply racing with its parent's removal restores the parent (and any ancestor
///   removed after it) as a tombstone, so no reply is ever orphaned.
///
/// # Costs (commands, MongoDB)
/// Post: 2 (`find` the discussion, `insert`). Reply: 3 (`find` the parent, `insert`, `find` to
/// confirm the parent survived). A chronological or threaded page: 1 `find`; a sub-thread page:
/// 2 (the root, then the range). Direct link: 1 `find`. Count: 1 `aggregate` (a
/// `countDocuments`, which reads the discussion's comments to skip deleted ones). Edit: 2;
/// delete: 3 or 4, and 1 more to delete the votes of a comment removed outright. A vote: 5 (see
/// [`super`]); a ranked page, of the top level or of one comment's replies: 1 `find`.
///
/// # Votes
///
/// A vote's change of counts is one `findAndModify` (`$inc` of `ups` and `downs`, filtered by
/// the vote's op id not among the comment's `vote_ops`, which it joins), then one `update`
/// setting the four stored sort keys computed from the counts it returned, filtered by those
/// counts: of concurrent voters, only the one whose counts are current sets the keys, so the keys
/// always follow the counts once the votes in flight have landed (a vote cut off between the two
/// leaves its mark, and finishing it sets the keys). Each key has its index, so a ranked page is
/// one range scan of `limit + 1` entries, and a vote rewrites up to four index entries.
///
/// Posting times come from the posting process's clock. A reader paging the chronological
/// view can miss a comment stamped before, but stored after, the page it read; keep clocks
/// synchronised (NTP) and expect this window to be the time between stamping and storing. On servers without atomic updates, edits and deletes also take and
/// release a lock (2 more).
#[derive(Clone, Debug)]
pub struct PerComment {
    backend: Backend,
    /// Where replies and their deletion are notified, if the application asked.
    outbox: Option<Outbox>,
    comments: Collection<Document>,
    registry: Registry,
    votes: VoteBook,
    max_key_bytes: usize,
    max_comment_bytes: usize,
    /// Whether a post to a discussion not registered registers it.
    create_discussions: bool,
}

/// Configures a [`PerComment`] store.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct PerCommentBuilder {
    config: StoreConfig,
    notifier: Option<Arc<DynNotifier>>,
    max_key_bytes: usize,
    max_comment_bytes: usize,
    create_discussions: bool,
}

impl PerCommentBuilder {
    store_builder_methods!();

    /// Whether a top-level [`post`](CommentStore::post) to a discussion that was not registered
    /// registers it ([`CommentStore::create_discussion`]) and posts, instead of failing with
    /// [`Error::NotFound`] (default `false`). Concurrent first posts register it once (an
    /// `insert` of the discussion's `_id`, a duplicate counting as done). A post to a
    /// registered discussion costs what it did; the first post to a new one, 1 `insert` more.
    /// Replies, votes and reads still need the discussion.
    pub fn create_discussions_on_post(mut self, create: bool) -> Self {
        self.create_discussions = create;
        self
    }

    /// Tells `notifier` (a [`NotificationStore`](crate::NotificationStore), say) of every
    /// reply: the parent comment's author is notified ([`Kind::Reply`] on
    /// `"<discussion>/<parent link>"`, by the reply's author; nobody of their own reply), and
    /// deleting a reply withdraws its author from that group (even if they wrote other replies
    /// to the same comment). Off by default.
    ///
    /// The notification never fails the reply (or the delete): it is queued in the store's own
    /// database, in the collection `<main collection>_outbox`, and tried at once (for at most 2
    /// seconds); one that could not be delivered then is delivered by the store's
    /// [`outbox`](PerComment::outbox) worker, at least once (see [`Outbox`] for the guarantee and what
    /// can lose one). On, a reply costs 2 commands more in the store's database (queue, then
    /// complete) besides the notifier's own, and a delete 4 (reading the comment and its
    /// parent, queue, complete).
    ///
    /// [`Kind::Reply`]: crate::notifications::Kind::Reply
    pub fn notifier(mut self, notifier: Arc<DynNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// The longest index key (discussion id plus `full_slug`, in bytes) a reply may create
    /// (default 1,000). Raise it on MongoDB 4.2 and later, which has no index key limit, if
    /// deeper threads are wanted.
    pub fn max_key_bytes(mut self, bytes: usize) -> Self {
        self.max_key_bytes = bytes;
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
        let outbox = self
            .notifier
            .map(|notifier| {
                Outbox::build(
                    &self.config,
                    &Outbox::collection_for(comments.name()),
                    notifier,
                )
            })
            .transpose()?;
        Ok(PerComment {
            votes: VoteBook::new(votes, backend.clone()),
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

/// A comment as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Stored {
    #[serde(rename = "_id")]
    id: ObjectId,
    discussion_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_id: Option<ObjectId>,
    /// The parent's slug, empty for a top-level comment: what ranked pages select by.
    #[serde(default)]
    parent: String,
    slug: String,
    full_slug: String,
    thread_key: String,
    posted: bson::DateTime,
    author: Author,
    text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    edited: Option<bson::DateTime>,
    deleted: bool,
    #[serde(flatten)]
    ranking: Ranking,
    /// The caller's idempotency key, for a keyed comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<String>,
    /// The digest of what a keyed comment was posted with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_digest: Option<String>,
}

/// A comment's votes and the keys its ranked pages sort by, as stored (the keys follow the
/// counts, see [`PerComment`]'s votes).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Ranking {
    #[serde(default)]
    ups: i64,
    #[serde(default)]
    downs: i64,
    #[serde(default)]
    best: f64,
    #[serde(default)]
    hot: f64,
    #[serde(default)]
    top: f64,
    #[serde(default)]
    controversial: f64,
}

impl Ranking {
    /// The counts of `votes` and the keys they give a comment posted at `posted`.
    fn of(votes: Votes, posted: bson::DateTime) -> Self {
        let key = |sort: Sort| sort.key(votes, posted);
        Self {
            ups: votes.ups as i64,
            downs: votes.downs as i64,
            best: key(Sort::Best),
            hot: key(Sort::Hot),
            top: key(Sort::Top),
            controversial: key(Sort::Controversial),
        }
    }

    fn votes(&self) -> Votes {
        Votes::from_stored(self.ups, self.downs)
    }

    fn key(&self, sort: Sort) -> f64 {
        match sort {
            Sort::Best => self.best,
            Sort::Hot => self.hot,
            Sort::Top => self.top,
            Sort::Controversial => self.controversial,
        }
    }
}

/// The stored field of `sort`'s key.
fn sort_field(sort: Sort) -> &'static str {
    sort.name()
}

impl Stored {
    fn comment(&self) -> Comment {
        let parent = self
            .slug
            .rsplit_once('/')
            .map(|(parent, _)| parent.to_owned());
        Comment {
            link: self.slug.clone(),
            depth: self.slug.matches('/').count(),
            parent,
            author: self.author.clone(),
            text: self.text.clone(),
            posted: self.posted,
            edited: self.edited,
            deleted: self.deleted,
            votes: self.ranking.votes(),
        }
    }

    /// A tombstone in place of this comment, removed (with its votes) by a delete.
    fn tombstone(&self) -> Self {
        Self {
            text: String::new(),
            deleted: true,
            ranking: Ranking::of(Votes::default(), self.posted),
            ..self.clone()
        }
    }
}

impl PerComment {
    /// The default [`PerCommentBuilder::max_key_bytes`].
    pub const DEFAULT_MAX_KEY_BYTES: usize = 1_000;
    /// The default largest comment, in bytes.
    pub const DEFAULT_MAX_COMMENT_BYTES: usize = 64 * 1024;

    /// A store with the default collections and limits in `database`.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default configuration is valid")
    }

    /// The notifications the store owes, when it was built with a
    /// [`notifier`](PerCommentBuilder::notifier): run its worker (or `run_pending`) to deliver
    /// those whose first attempt failed.
    pub fn outbox(&self) -> Option<&Outbox> {
        self.outbox.as_ref()
    }

    /// A builder to configure collections and limits.
    pub fn builder(database: &Database) -> PerCommentBuilder {
        PerCommentBuilder {
            config: StoreConfig::new(database),
            notifier: None,
            max_key_bytes: Self::DEFAULT_MAX_KEY_BYTES,
            max_comment_bytes: Self::DEFAULT_MAX_COMMENT_BYTES,
            create_discussions: false,
        }
    }

    /// This store as a [`ThreadedComments`], which it always is: what
    /// [`CommentStore::threaded`] gives a strategy chosen at run time, without its `Option`.
    /// (With the traits in scope, [`crate::prelude`], a `PerComment` replies and votes as it
    /// is.)
    pub fn as_threaded(&self) -> &dyn ThreadedComments {
        self
    }

    /// Inserts a comment under `parent` (or at the top level), choosing a fresh slug part
    /// whenever one collides.
    async fn insert(
        &self,
        discussion: &str,
        parent: Option<&Stored>,
        comment: NewComment,
        keyed: Option<&Keyed>,
    ) -> Result<Stored> {
        let micros = slug::now_micros();
        let posted = bson::DateTime::from_millis(micros.div_euclid(1_000));
        for attempt in 0..SLUG_ATTEMPTS {
            // A keyed comment's slug part is derived from its key first, so two attempts of it
            // meet on the unique `{discussion_id, slug}` (within the shard key) as on `_id`.
            let part = match keyed {
                Some(keyed) if attempt == 0 => format!("{:08x}", {
                    let bytes = keyed.id.bytes();
                    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
                }),
                _ => slug::new_part(),
            };
            let step = slug::step(micros, &part);
            let stored = match parent {
                None => Stored {
                    id: ObjectId::new(),
                    discussion_id: discussion.to_owned(),
                    parent_id: None,
                    parent: String::new(),
                    slug: part,
                    thread_key: slug::reversed_step(&step),
                    full_slug: step,
                    posted,
                    author: comment.author.clone(),
                    text: comment.text.clone(),
                    edited: None,
                    deleted: false,
                    ranking: Ranking::of(Votes::default(), posted),
                    idempotency_key: None,
                    content_digest: None,
                },
                Some(parent) => Stored {
                    id: ObjectId::new(),
                    discussion_id: discussion.to_owned(),
                    parent_id: Some(parent.id),
                    parent: parent.slug.clone(),
                    slug: format!("{}/{part}", parent.slug),
                    full_slug: format!("{}/{step}", parent.full_slug),
                    thread_key: format!("{}/{step}", parent.thread_key),
                    posted,
                    author: comment.author.clone(),
                    text: comment.text.clone(),
                    edited: None,
                    deleted: false,
                    ranking: Ranking::of(Votes::default(), posted),
                    idempotency_key: None,
                    content_digest: None,
                },
            };
            let mut stored = stored;
            if let Some(keyed) = keyed {
                stored.id = keyed.id;
                stored.idempotency_key = Some(keyed.key.clone());
                stored.content_digest = Some(keyed.content.clone());
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
    async fn keyed_comment(&self, discussion: &str, keyed: &Keyed) -> Result<Option<Stored>> {
        let found = self
            .backend
            .retry("find keyed comment", || {
                self.find_one(doc! { "_id": keyed.id, "discussion_id": discussion })
            })
            .await?;
        let Some(found) = found else {
            return Ok(None);
        };
        keyed.check(
            found.idempotency_key.as_deref(),
            found.content_digest.as_deref(),
        )?;
        Ok(Some(found))
    }

    /// Fails with [`Invalid::ThreadTooDeep`](crate::error::Invalid::ThreadTooDeep) when `stored`'s index key would be too long.
    fn check_key(&self, discussion: &str, stored: &Stored) -> Result<()> {
        let key_bytes = discussion.len() + stored.full_slug.len();
        if key_bytes > self.max_key_bytes {
            return Err(Error::InvalidInput(Invalid::ThreadTooDeep {
                depth: stored.slug.matches('/').count(),
                limit: format!(
                    "its full_slug index key would be {key_bytes} bytes, over the \
                     {}-byte limit (max_key_bytes)",
                    self.max_key_bytes
                ),
            }));
        }
        Ok(())
    }

    async fn find_one(&self, filter: Document) -> Result<Option<Stored>> {
        let found = self.comments.find_one(filter).await?;
        found
            .map(|found| bson_ext::decode(self.comments.name(), found))
            .transpose()
    }

    /// The comment at `link`.
    async fn find_link(&self, discussion: &str, link: &str, what: Entity) -> Result<Stored> {
        validate::check_discussion(discussion)?;
        slug::parse_slug(link)?;
        self.find_one(doc! { "discussion_id": discussion, "slug": link })
            .await?
            .ok_or_else(|| validate::no_comment(what, link))
    }

    /// Whether anything replies to `stored`.
    async fn has_replies(&self, stored: &Stored) -> Result<bool> {
        let replies = self
            .comments
            .find_one(doc! {
                "discussion_id": &stored.discussion_id,
                "full_slug": {
                    "$gt": format!("{}/", stored.full_slug),
                    "$lt": format!("{}0", stored.full_slug),
                },
            })
            .projection(doc! { "_id": 1 })
            .await?;
        Ok(replies.is_some())
    }

    /// Puts `stored` back as a tombstone if it is missing (a reply raced with its removal), and
    /// so every missing ancestor of it: a chain of leaves can be removed one after the other
    /// while a reply to the last of them is on its way.
    async fn restore_as_tombstone(&self, stored: &Stored) -> Result<()> {
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
                posted,
                author: Author::new("", ""),
                text: String::new(),
                edited: None,
                deleted: true,
                ranking: Ranking::of(Votes::default(), posted),
                idempotency_key: None,
                content_digest: None,
            });
        }
        for tombstone in missing {
            self.backend
                .insert_once(&self.comments, bson::to_document(&tombstone)?)
                .await?;
        }
        Ok(())
    }

    /// Runs a page query: `filter`, sorted by `sort`, `limit + 1` documents.
    async fn page(
        &self,
        discussion: &str,
        page: &PageRequest,
        filter: Document,
        sort: Document,
        cursor: impl FnOnce(&Stored) -> Cursor,
    ) -> Result<Page<Comment>> {
        let options = FindOptions::builder()
            .sort(sort)
            .limit(page.fetch() as i64)
            .build();
        let found: Vec<Document> = self
            .comments
            .find(filter)
            .with_options(options)
            .await?
            .try_collect()
            .await?;
        let stored = found
            .into_iter()
            .map(|found| bson_ext::decode(self.comments.name(), found))
            .collect::<Result<Vec<Stored>>>()?;
        if stored.is_empty()
            && page.after.is_none()
            && self.registry.find(discussion).await?.is_none()
        {
            return Err(validate::no_discussion(discussion));
        }
        Ok(page_from(stored, page.limit, Stored::comment, cursor))
    }

    /// The field a threaded page in `order` sorts by.
    fn thread_field(order: Order) -> &'static str {
        match order {
            Order::OldestFirst => "full_slug",
            Order::NewestFirst => "thread_key",
        }
    }

    /// The sort key after which a threaded or sub-thread page (of `scope`) continues.
    fn sort_key_after(
        page: &PageRequest,
        view: View,
        order: Order,
        scope: Scope,
    ) -> Result<Option<String>> {
        let Some(after) = &page.after else {
            return Ok(None);
        };
        let [key] = cursor::position(after, STRATEGY, view, order, scope)?;
        if !slug::is_sort_key(&key) {
            return Err(invalid("not a thread position"));
        }
        Ok(Some(key))
    }
}

#[async_trait]
impl CommentStore for PerComment {
    fn strategy(&self) -> Strategy {
        Strategy::PerComment
    }

    fn features(&self) -> Features {
        Features {
            threading: true,
            removes_leaves: true,
        }
    }

    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        Some(self)
    }

    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        validate::check_discussion(discussion)?;
        self.registry.create(discussion, Document::new()).await
    }

    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        let keyed = Keyed::of(discussion, None, &comment)?;
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
            self.create_discussion(discussion).await?;
        }
        Ok(self
            .insert(discussion, None, comment, keyed.as_ref())
            .await?
            .comment())
    }

    async fn chronological(
        &self,
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        validate::check_page(discussion, &page)?;
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
            |stored| cursor::after_posted(STRATEGY, order, discussion, stored.posted, stored.id),
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
            text: text.to_owned(),
            edited: Some(bson::DateTime::now()),
            ..stored
        };
        validate::check_stored(&edited, self.max_comment_bytes)?;
        let update = doc! { "$set": { "text": &edited.text, "edited": edited.edited } };
        let updated = self
            .backend
            .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                // A `$set` of the new text and edit time: a retry sets the same values again.
                self.backend.retry("edit comment", || async {
                    Ok(self
                        .comments
                        .find_one_and_update(
                            doc! { "_id": edited.id, "discussion_id": discussion, "deleted": false },
                            update.clone(),
                        )
                        .return_document(ReturnDocument::After)
                        .await?)
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
                    what: crate::Entity::DeletedComment,
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
            if stored.deleted {
                return Ok(Deletion::Tombstoned);
            }
            self.backend
                .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                    let live =
                        doc! { "_id": stored.id, "discussion_id": discussion, "deleted": false };
                    if self.has_replies(&stored).await? {
                        // A `$set`: tombstoning twice tombstones once.
                        self.backend
                            .retry("tombstone comment", || async {
                                self.comments
                                    .update_one(
                                        live.clone(),
                                        doc! { "$set": { "deleted": true, "text": "" } },
                                    )
                                    .await?;
                                Ok(())
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
        validate::check_discussion(discussion)?;
        Ok(self
            .comments
            .count_documents(doc! { "discussion_id": discussion, "deleted": false })
            .await?)
    }

    async fn create_indexes(&self) -> Result<()> {
        self.backend.create_indexes().await
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

#[async_trait]
impl ThreadedComments for PerComment {
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        slug::parse_slug(parent)?;
        check_reply_target(self.outbox.as_ref(), discussion, parent)?;
        let keyed = Keyed::of(discussion, Some(parent), &comment)?;
        if let Some(keyed) = &keyed {
            // A repeat: one `find`, nothing written (and nothing notified again).
            if let Some(stored) = self.keyed_comment(discussion, keyed).await? {
                return Ok(stored.comment());
            }
        }
        let parent = self
            .find_link(discussion, parent, Entity::ParentComment)
            .await?;
        let reply = self
            .insert(discussion, Some(&parent), comment, keyed.as_ref())
            .await?;
        // The parent may have been removed (as a leaf) between the read and the insert: put it
        // (and any ancestor removed after it) back as a tombstone so the reply keeps its place.
        let still_there = self
            .comments
            .find_one(doc! { "_id": parent.id, "discussion_id": discussion })
            .projection(doc! { "_id": 1 })
            .await?;
        if still_there.is_none() {
            self.restore_as_tombstone(&parent).await?;
        }
        let reply = reply.comment();
        notify_reply(
            self.outbox.as_ref(),
            discussion,
            &parent.slug,
            &parent.author.id,
            &reply,
        )
        .await;
        Ok(reply)
    }

    async fn thread_page(
        &self,
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        validate::check_page(discussion, &page)?;
        let field = Self::thread_field(order);
        let mut filter = doc! { "discussion_id": discussion };
        let scope = cursor::discussion(discussion);
        if let Some(key) = Self::sort_key_after(&page, View::Threaded, order, scope)? {
            filter.insert(field, doc! { "$gt": key });
        }
        self.page(discussion, &page, filter, doc! { field: 1 }, |stored| {
            let key = match order {
                Order::OldestFirst => &stored.full_slug,
                Order::NewestFirst => &stored.thread_key,
            };
            cursor::new(STRATEGY, View::Threaded, order, scope, &[key])
        })
        .await
    }

    async fn sub_thread(
        &self,
        discussion: &str,
        link: &str,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        validate::check_page(discussion, &page)?;
        let root = self.find_link(discussion, link, Entity::Comment).await?;
        // A sub-thread reads in posting order, as its cursors say.
        let scope = cursor::sub_thread(discussion, link);
        let start = match Self::sort_key_after(&page, View::SubThread, Order::OldestFirst, scope)? {
            Some(key) if key >= root.full_slug => doc! { "$gt": key },
            Some(_) => return Err(invalid("not a position in this sub-thread")),
            None => doc! { "$gte": &root.full_slug },
        };
        let mut range = start;
        range.insert("$lt", format!("{}0", root.full_slug));
        let filter = doc! { "discussion_id": discussion, "full_slug": range };
        self.page(
            discussion,
            &page,
            filter,
            doc! { "full_slug": 1 },
            |stored| {
                cursor::new(
                    STRATEGY,
                    View::SubThread,
                    Order::OldestFirst,
                    scope,
                    &[&stored.full_slug],
                )
            },
        )
        .await
    }

    /// The top level as [`VotedComments::ranked`] reads it (1 `find`), then per level of
    /// replies 1 `find` of every reply of the comments shown at the level above, ranked here
    /// by their stored keys as the ranked index orders them (key, then `full_slug`).
    async fn ranked_thread(
        &self,
        discussion: &str,
        sort: Sort,
        page: PageRequest,
        depth: usize,
    ) -> Result<Page<Thread>> {
        let limit = page.limit;
        let top = self.ranked(discussion, None, sort, page).await?;
        let mut replies = HashMap::new();
        let mut level: Vec<String> = top.items.iter().map(|c| c.link.clone()).collect();
        for _ in 0..depth {
            if level.is_empty() {
                break;
            }
            let found: Vec<Document> = self
                .comments
                .find(doc! { "discussion_id": discussion, "parent": { "$in": level.clone() } })
                .await?
                .try_collect()
                .await?;
            let mut by_parent: HashMap<String, Vec<Stored>> = HashMap::new();
            for found in found {
                let stored: Stored = bson_ext::decode(self.comments.name(), found)?;
                by_parent
                    .entry(stored.parent.clone())
                    .or_default()
                    .push(stored);
            }
            // One zero, as the server compares keys.
            let key = |stored: &Stored| stored.ranking.key(sort) + 0.0;
            let mut below = Vec::new();
            for parent in level {
                let mut children = by_parent.remove(&parent).unwrap_or_default();
                children.sort_by(|a, b| {
                    key(b)
                        .total_cmp(&key(a))
                        .then_with(|| a.full_slug.cmp(&b.full_slug))
                });
                children.truncate(limit + 1);
                let page = page_from(children, limit, Stored::comment, |last| {
                    cursor::after_ranked(
                        STRATEGY,
                        sort,
                        discussion,
                        Some(&parent),
                        last.ranking.key(sort),
                        &last.full_slug,
                    )
                });
                below.extend(page.items.iter().map(|c| c.link.clone()));
                replies.insert(parent, page);
            }
            level = below;
        }
        Ok(Thread::assemble(top, &mut replies))
    }
}

#[async_trait]
impl Tally for PerComment {
    type Target = ObjectId;

    fn check_link(&self, link: &str) -> Result<()> {
        slug::parse_slug(link).map(drop)
    }

    async fn find(&self, discussion: &str, link: &str) -> Result<Found<ObjectId>> {
        let stored = self
            .backend
            .retry("read comment", || {
                self.find_link(discussion, link, Entity::Comment)
            })
            .await?;
        Ok(Found {
            target: stored.id,
            deleted: stored.deleted,
        })
    }

    async fn apply(
        &self,
        discussion: &str,
        id: &ObjectId,
        delta: Delta,
        op: ObjectId,
    ) -> Result<bool> {
        let mut filter = doc! { "_id": id, "discussion_id": discussion };
        let mut update = doc! { "$inc": { "ups": delta.ups, "downs": delta.downs } };
        crate::retry::once_per_op_in(&mut filter, &mut update, VOTE_OPS, VOTE_OPS_PER_COMMENT, op);
        let projection = doc! { "ups": 1, "downs": 1, "posted": 1 };
        let capabilities = self.backend.capabilities().await?;
        // Applied once: `op` joins `vote_ops`, whose filter a retry no longer matches.
        let counted = self
            .backend
            .retry("count vote", || async {
                let mut action = self
                    .comments
                    .find_one_and_update(filter.clone(), update.clone())
                    .return_document(ReturnDocument::After);
                if capabilities.find_and_modify_projection {
                    action = action.projection(projection.clone());
                }
                Ok(action.await?)
            })
            .await?;
        let counted = match counted {
            Some(counted) => counted,
            // Counted already (by this vote's lost attempt, or by a call finishing its mark),
            // or removed.
            None => {
                let current = self
                    .backend
                    .retry("read comment", || async {
                        Ok(self
                            .comments
                            .find_one(doc! { "_id": id, "discussion_id": discussion })
                            .projection(projection.clone())
                            .await?)
                    })
                    .await?;
                match current {
                    Some(current) => current,
                    None => return Ok(false),
                }
            }
        };
        let (ups, downs) = (
            bson_ext::integer(&counted, "ups").unwrap_or(0),
            bson_ext::integer(&counted, "downs").unwrap_or(0),
        );
        let posted = bson_ext::date(&counted, "posted").ok_or_else(|| {
            bson_ext::corrupt(self.comments.name(), Some((*id).into()), "no posted")
        })?;
        let ranking = Ranking::of(Votes::from_stored(ups, downs), posted);
        let keys = doc! {
            "best": ranking.best,
            "hot": ranking.hot,
            "top": ranking.top,
            "controversial": ranking.controversial,
        };
        // Filtered by the counts the keys come from: a retry sets the same keys again, and a
        // voter whose counts were overtaken sets nothing (the later one sets its own).
        self.backend
            .retry("rank comment", || async {
                self.comments
                    .update_one(
                        doc! { "_id": id, "discussion_id": discussion, "ups": ups, "downs": downs },
                        doc! { "$set": keys.clone() },
                    )
                    .await?;
                Ok(())
            })
            .await?;
        Ok(true)
    }

    fn lock_key(&self, discussion: &str) -> String {
        discussion_lock(STRATEGY, discussion)
    }
}

#[async_trait]
impl VotedComments for PerComment {
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
        self.votes
            .get(|link| self.check_link(link), discussion, link, user)
            .await
    }

    async fn ranked(
        &self,
        discussion: &str,
        parent: Option<&str>,
        sort: Sort,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        validate::check_page(discussion, &page)?;
        if let Some(parent) = parent {
            slug::parse_slug(parent)?;
        }
        let field = sort_field(sort);
        let mut filter = doc! { "discussion_id": discussion, "parent": parent.unwrap_or("") };
        if let Some(cursor) = &page.after {
            let (key, after) = cursor::ranked_key(cursor, STRATEGY, sort, discussion, parent)?;
            if !slug::is_sort_key(&after) {
                return Err(invalid("not a thread position"));
            }
            // The bound on the key alone lets the index scan start at the cursor; the `$or`
            // then breaks ties by posting order.
            filter.insert(field, doc! { "$lte": key });
            filter.insert(
                "$or",
                vec![
                    doc! { field: { "$lt": key } },
                    doc! { field: key, "full_slug": { "$gt": after } },
                ],
            );
        }
        let ranked = self
            .page(
                discussion,
                &page,
                filter,
                doc! { field: -1, "full_slug": 1 },
                |stored| {
                    cursor::after_ranked(
                        STRATEGY,
                        sort,
                        discussion,
                        parent,
                        stored.ranking.key(sort),
                        &stored.full_slug,
                    )
                },
            )
            .await?;
        if let (Some(parent), true, None) = (parent, ranked.items.is_empty(), &page.after) {
            // An empty first page: no replies, or no such parent.
            self.find_link(discussion, parent, Entity::ParentComment)
                .await?;
        }
        Ok(ranked)
    }

    async fn settle_votes(&self, discussion: &str) -> Result<usize> {
        self.votes.settle(self, discussion).await
    }
}
