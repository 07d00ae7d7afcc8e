//! Comment threads: the three designs of the MongoDB manual's "Storing Comments" as three
//! strategies behind one [`CommentStore`] trait ([`CommentStore::strategy`] says which), with
//! threading ([`ThreadedComments`]) where the strategy has it.
//!
//! | strategy | post | read a page | threads | deletes | shard key |
//! |---|---|---|---|---|---|
//! | [`PerComment`] | 2 commands (3 for a reply) | one `find` | yes, any depth the index allows | leaves removed, others tombstoned | `{discussion_id: 1, slug: 1}` |
//! | [`Embedded`] | 1 command | one `find` of one document | yes, up to 45 levels | tombstoned | `{_id: "hashed"}` (the discussion) |
//! | [`HybridPages`] | 2 commands (more when a page fills) | one `find` of one or two pages | no | tombstoned | `{discussion_id: 1, page: 1}` |
//!
//! (Counts are for MongoDB. On servers whose updates are not atomic, such as FerretDB 1.x, each
//! write also takes and releases a lock document: 2 more commands.)
//!
//! # Which strategy to choose
//!
//! - **[`PerComment`]** when discussions can grow without bound, or comments are edited,
//!   moderated and linked to one by one: every comment is its own small document, found by its
//!   slug in one indexed query. Reading a page is one indexed range scan in either view.
//! - **[`Embedded`]** when discussions stay small (hundreds of comments) and are read far more
//!   than written: the whole discussion, threads included, is one document, so rendering it is
//!   one read. It stops at the 16 MiB document limit with [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (of the `"discussion"`).
//! - **[`HybridPages`]** for long, flat (unthreaded) discussions read page by page: about 100
//!   comments per document keeps reads to one or two documents and has no size ceiling.
//!
//! # Shared model
//!
//! Every comment has a `link`: a string that addresses it within its discussion (a slug path in
//! [`PerComment`], a position path such as `0.2.1` in [`Embedded`], a slug in [`HybridPages`]).
//! Links are stable: they never change and never come to point at another comment, which is why
//! [`Embedded`] and [`HybridPages`] delete by tombstone (the text is removed and the comment is
//! marked deleted, keeping its place) rather than by shifting array elements.
//!
//! Pages are the crate's keyset pages ([`crate::page`]): an [`Order`] (which top-level comments
//! come first) and a [`PageRequest`] in, a [`Page`] of comments and an opaque
//! [`crate::Cursor`] out. Comments posted while a reader pages through a discussion never cause
//! a repeat or a gap in what follows the cursor.
//!
//! Counts ([`CommentStore::count`]) are of comments not deleted, and stay exact under concurrent
//! posting and deleting.
//!
//! # Votes and sorts (Reddit's model)
//!
//! Every strategy takes up and down votes ([`VotedComments`], which every [`CommentStore`] is):
//! one per user per comment, changeable and retractable, in their own collection
//! (`comment_votes`, `{_id: {discussion, comment, user}, value: 1 | -1, ...}`); each comment
//! carries its [`Votes`] where the strategy stores it, exact under concurrent voters and across
//! failures (the vote document is a journal, see [`VotedComments`]). Comments are ranked by
//! [`Sort::Best`] (the Wilson lower bound at 95 %), [`Sort::Hot`], [`Sort::Top`] and
//! [`Sort::Controversial`], a level at a time ([`VotedComments::ranked`]: the top-level comments,
//! or the replies of one comment), in keyset pages.
//!
//! | strategy | vote (MongoDB) | where counts live | a ranked page | index entries per comment |
//! |---|---|---|---|---|
//! | [`PerComment`] | 5: `find` the comment, `insert` or `update` the vote, `findAndModify` `$inc` of the comment's counts, `update` of its four stored sort keys, `update` clearing the vote's mark | on the comment document, with its stored keys `best`, `hot`, `top`, `controversial` | 1 `find` on `{discussion_id, parent, <key>: -1, full_slug}`, `limit + 1` entries read | 4 more (one per sort), each rewritten by a vote |
//! | [`Embedded`] | 4: `find` (the thread), vote, `update` `$inc` of the element's counts, clear | on the embedded element | 1 `find` of the whole document (top level) or of one thread (replies, `$slice` where the server has it); sorted here | none |
//! | [`HybridPages`] | 4: `find` the page, vote, `update` `$inc` of the element's counts, clear | on the page's element | 1 `find` of every page of the discussion; sorted here | none |
//!
//! A vote is tried as a first vote (an `insert`); a change of the user's vote costs 2 commands
//! more (the `insert` meets their vote, which is read, then `update`d), a retraction 1 more, the
//! same vote again 3 in all. On servers without atomic updates (FerretDB 1.x) a vote runs under
//! the discussion's lock, as the strategy's edits do: 2 more commands. The in-memory
//! sorts ([`Embedded`], [`HybridPages`]) read every comment of the level they rank (all of the
//! discussion's, for [`HybridPages`]) on every page, so their cost grows with the discussion;
//! [`PerComment`]'s is a range of an index whatever the discussion's size.

pub(crate) mod cursor;
mod embedded;
mod hybrid;
mod per_comment;
mod ranking;
mod registry;
mod slug;
mod tree;
mod validate;
mod votes;

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use embedded::{Embedded, EmbeddedBuilder};
pub use hybrid::{HybridPages, HybridPagesBuilder};
pub use per_comment::{PerComment, PerCommentBuilder};
pub use ranking::{Sort, Vote, Votes};

use crate::notifications::{Activity, Kind as NotificationKind, Outbox};
use crate::sharding::ShardKey;
use crate::{Page, PageRequest, Result};

/// Who wrote a comment: the profile reference and the name shown, as in the seed's `author`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    /// The author's user id.
    pub id: String,
    /// The name displayed with the comment.
    pub name: String,
}

impl Author {
    /// An author with user id `id` shown as `name`.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
        }
    }
}

/// A comment to post.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewComment {
    /// Who writes it.
    pub author: Author,
    /// What it says (not empty).
    pub text: String,
    /// The caller's idempotency key, if any (see [`NewComment::with_key`]).
    pub key: Option<String>,
}

impl NewComment {
    /// A comment by `author` saying `text`.
    ///
    /// ```
    /// use mongo_social::comments::{Author, NewComment};
    /// let hello = NewComment::new(Author::new("u1", "Rick"), "First!");
    /// assert_eq!(hello.author.name, "Rick");
    /// ```
    pub fn new(author: Author, text: impl Into<String>) -> Self {
        Self {
            author,
            text: text.into(),
            key: None,
        }
    }

    /// The same comment with an idempotency key: a caller-chosen id (blank or longer than
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES) refused), unique per discussion, that makes a
    /// repeated [`CommentStore::post`] or [`ThreadedComments::reply`] (a client retrying a
    /// request whose response it lost) return the first call's comment (the same link and
    /// posting time, as it reads now) and write nothing. The same key with another author,
    /// text or parent is [`Error::Conflict`](crate::Error::Conflict). Each strategy enforces it
    /// in the database, under concurrency (see [`CommentStore::post`]).
    ///
    /// ```no_run
    /// # async fn demo(store: &mongo_social::DynCommentStore) -> mongo_social::Result<()> {
    /// use mongo_social::comments::{Author, NewComment};
    /// let hello = NewComment::new(Author::new("u1", "Rick"), "First!").with_key("req-41c2");
    /// let first = store.post("article-42", hello.clone()).await?;
    /// let again = store.post("article-42", hello).await?; // a retried request
    /// assert_eq!((again.link, again.posted), (first.link, first.posted));
    /// # Ok(()) }
    /// ```
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

/// A comment as it reads back.
///
/// It serializes (serde) with the field names below, as an API returns it (`posted` and
/// `edited` as `bson::DateTime` serializes: MongoDB Extended JSON in JSON,
/// `{"$date": {"$numberLong": "<ms>"}}`), and deserializes back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    /// Addresses the comment within its discussion; pass it to [`CommentStore::get`],
    /// [`ThreadedComments::reply`], [`CommentStore::edit`] or [`CommentStore::delete`].
    pub link: String,
    /// The link of the comment this one replies to; `None` for a top-level comment.
    pub parent: Option<String>,
    /// How deep in its thread: 0 for a top-level comment, 1 for a reply to one, and so on.
    pub depth: usize,
    /// Who wrote it.
    pub author: Author,
    /// What it says; empty once deleted.
    pub text: String,
    /// When it was posted (millisecond precision, the posting client's clock). Every strategy
    /// keeps it in step with the comment's place: the chronological view never lists a comment
    /// before an earlier one, nor the threaded view a reply before an earlier sibling, even
    /// under concurrent posters (a writer stamps a comment for the place it takes, raised to the
    /// comment before it there if that one's clock ran ahead).
    pub posted: bson::DateTime,
    /// When it was last edited, if ever.
    pub edited: Option<bson::DateTime>,
    /// Whether it was deleted and kept as a tombstone because of its replies or its position.
    pub deleted: bool,
    /// How many users vote it up and down ([`VotedComments`]).
    pub votes: Votes,
}

/// Which top-level comments come first. Replies always follow their parent in posting order.
///
/// Named `"oldest"` and `"newest"`: `FromStr` parses a request's name (anything else is
/// [`Invalid::Name`](crate::error::Invalid::Name)), `Display` prints it, and serde uses the
/// same text.
///
/// ```
/// use mongo_social::comments::Order;
/// assert_eq!("newest".parse::<Order>().unwrap(), Order::NewestFirst);
/// assert_eq!(Order::OldestFirst.to_string(), "oldest");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Oldest first (the default): the order of a conversation.
    #[default]
    OldestFirst,
    /// Newest first: the order of a feed.
    NewestFirst,
}

impl Order {
    /// The order's name: `"oldest"` or `"newest"`.
    pub fn name(self) -> &'static str {
        match self {
            Order::OldestFirst => "oldest",
            Order::NewestFirst => "newest",
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Order {
    type Err = crate::Error;

    /// `"oldest"` or `"newest"`; anything else is
    /// [`Invalid::Name`](crate::error::Invalid::Name).
    fn from_str(name: &str) -> Result<Order> {
        match name {
            "oldest" => Ok(Order::OldestFirst),
            "newest" => Ok(Order::NewestFirst),
            other => Err(crate::names::unknown("order", other, "oldest, newest")),
        }
    }
}

crate::names::serde_by_name!(Order);

/// What [`CommentStore::delete`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Deletion {
    /// The comment is gone (a leaf in a strategy that removes leaves).
    Removed,
    /// The comment stays as a tombstone: text removed, place in the thread kept. Deleting a
    /// tombstone again reports this too and changes nothing.
    Tombstoned,
}

/// The three strategies, for display and for code that must know which one it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// One document per comment, with slug paths.
    PerComment,
    /// Every comment embedded in the discussion's document.
    Embedded,
    /// Pages of about 100 comments.
    HybridPages,
}

impl Strategy {
    /// The strategy's name, such as `"per-comment"`.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::PerComment => "per-comment",
            Strategy::Embedded => "embedded",
            Strategy::HybridPages => "hybrid-pages",
        }
    }

    /// The default names of the strategy's collections: what its builder's `collection`
    /// renames, and what `collection_prefix` is put before.
    ///
    /// ```
    /// use mongo_social::comments::Strategy;
    /// assert_eq!(
    ///     Strategy::Embedded.collections(),
    ///     ["discussions", "comment_locks", "comment_votes"]
    /// );
    /// ```
    pub fn collections(self) -> &'static [&'static str] {
        match self {
            Strategy::PerComment => &per_comment::COLLECTIONS,
            Strategy::Embedded => &embedded::COLLECTIONS,
            Strategy::HybridPages => &hybrid::COLLECTIONS,
        }
    }
}

/// A keyed comment's key, the id it gives within its discussion, and the digest of what is
/// posted (author, text, and the parent's link for a reply).
#[derive(Clone, Debug)]
struct Keyed {
    key: String,
    id: bson::oid::ObjectId,
    content: String,
}

impl Keyed {
    /// The key of `comment` (checked) for a post (`parent` `None`) or a reply to `parent` in
    /// `discussion`; `None` without a key.
    fn of(discussion: &str, parent: Option<&str>, comment: &NewComment) -> Result<Option<Self>> {
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

    /// `Ok` when `key` and `content` (as stored with a comment) are this comment's; otherwise
    /// [`crate::Error::Conflict`].
    fn check(&self, key: Option<&str>, content: Option<&str>) -> Result<()> {
        let conflict = |reason| crate::Error::Conflict {
            what: crate::Entity::Comment,
            id: self.key.clone(),
            reason,
        };
        if key != Some(self.key.as_str()) {
            return Err(conflict("its id is taken by another comment"));
        }
        if content != Some(self.content.as_str()) {
            return Err(conflict("the author, text or parent differs"));
        }
        Ok(())
    }
}

/// What a reply tells a notifier: `reply`'s author replied to the comment `parent` (by
/// `parent_author`) of `discussion`; the parent's author is notified, grouped by the parent.
fn reply_activity(discussion: &str, parent: &str, parent_author: &str, replier: &str) -> Activity {
    Activity::new(
        parent_author,
        NotificationKind::Reply,
        format!("{discussion}/{parent}"),
        replier,
    )
}

/// Fails before a reply to `parent` of `discussion` is written if the store notifies (`outbox`
/// set) and the notification store would refuse the reply's notification: its target,
/// `"<discussion>/<parent link>"`, is an id, of at most [`MAX_ID_BYTES`](crate::MAX_ID_BYTES)
/// ([`Invalid::TooLong`](crate::error::Invalid::TooLong), `"notification target"`).
fn check_reply_target(outbox: Option<&Outbox>, discussion: &str, parent: &str) -> Result<()> {
    if outbox.is_none() {
        return Ok(());
    }
    let target = reply_activity(discussion, parent, "", "").target;
    crate::validate::id("notification target", &target)
}

/// Tells `outbox`, if any, of `reply` to the comment `parent` by `parent_author`: queued in the
/// store's database and tried at once, never failing the reply (see [`Outbox`]).
async fn notify_reply(
    outbox: Option<&Outbox>,
    discussion: &str,
    parent: &str,
    parent_author: &str,
    reply: &Comment,
) {
    if let Some(outbox) = outbox {
        let activity = reply_activity(discussion, parent, parent_author, &reply.author.id);
        outbox.notify(activity).await;
    }
}

/// Before `link` of `discussion` is deleted: if `notifier` is set and the comment is a reply,
/// what its deletion withdraws (two reads: the comment and its parent). Give it to the
/// outbox's withdraw once the deletion succeeded.
async fn reply_to_withdraw(
    store: &(impl CommentStore + ?Sized),
    notifier: Option<&Outbox>,
    discussion: &str,
    link: &str,
) -> Result<Option<Activity>> {
    if notifier.is_none() {
        return Ok(None);
    }
    let comment = store.get(discussion, link).await?;
    let Some(parent) = &comment.parent else {
        return Ok(None);
    };
    let parent_author = store.get(discussion, parent).await?.author.id;
    Ok(Some(reply_activity(
        discussion,
        parent,
        &parent_author,
        &comment.author.id,
    )))
}

/// The lock a strategy's writers of `discussion` take where the server needs them to take
/// turns (see [`crate::backend::Backend::exclusive`]).
fn discussion_lock(strategy: Strategy, discussion: &str) -> String {
    format!("{strategy}:{discussion}")
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a strategy supports beyond the [`CommentStore`] basics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Features {
    /// Replies, the threaded view and sub-threads ([`CommentStore::threaded`] is `Some`).
    pub threading: bool,
    /// A deleted comment without replies is removed outright rather than tombstoned.
    pub removes_leaves: bool,
}

/// Comments on discussions: post, page through in posting order, link to one, edit, delete,
/// count.
///
/// A discussion is whatever the application comments on (an article, a photo); its id is the
/// application's. Register it once with [`CommentStore::create_discussion`]; posting to a
/// discussion that was not registered fails with [`crate::Error::NotFound`], unless the store
/// was built with `create_discussions_on_post(true)` (on each strategy's builder), when the
/// first post creates it.
///
/// Every strategy keeps these promises:
/// - concurrent posters lose nothing and duplicate nothing;
/// - the chronological view lists every comment (replies included) by posting time, in keyset
///   pages without gaps or repeats;
/// - links never change and never point at another comment;
/// - [`CommentStore::count`] is exact under concurrent posting and deleting;
/// - bad input fails with a typed [`crate::Error`] before anything is written.
///
/// Hold it as `Arc<dyn CommentStore>` to choose the strategy at runtime:
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::Arc;
/// use mongo_social::comments::{Author, CommentStore, HybridPages, NewComment, Order, PerComment};
/// use mongo_social::PageRequest;
///
/// let store: Arc<dyn CommentStore> = if std::env::var("THREADED").is_ok() {
///     Arc::new(PerComment::new(&db))
/// } else {
///     Arc::new(HybridPages::new(&db))
/// };
/// store.create_indexes().await?;
/// store.create_discussion("article-42").await?;
/// let rick = Author::new("u1", "Rick");
/// let first = store.post("article-42", NewComment::new(rick.clone(), "First!")).await?;
/// if let Some(threads) = store.threaded() {
///     threads.reply("article-42", &first.link, NewComment::new(rick, "Replying to myself")).await?;
/// }
/// let page = store
///     .chronological("article-42", Order::OldestFirst, PageRequest::first(20))
///     .await?;
/// assert_eq!(page.items[0].text, "First!");
/// # Ok(()) }
/// ```
#[async_trait]
pub trait CommentStore: VotedComments + Send + Sync + fmt::Debug + 'static {
    /// Which strategy this store implements.
    fn strategy(&self) -> Strategy;

    /// What the strategy supports beyond the basics.
    fn features(&self) -> Features;

    /// Threading (replies, threaded view, sub-threads), when the strategy has it: for a store
    /// whose strategy is chosen at run time. A concrete [`PerComment`] or [`Embedded`] always
    /// threads: call [`ThreadedComments`]' methods on it directly (with the trait in scope,
    /// [`crate::prelude`]), or take it as a `&dyn ThreadedComments` with its `as_threaded()`.
    fn threaded(&self) -> Option<&dyn ThreadedComments>;

    /// Registers a discussion so comments can be posted to it. Idempotent.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank id,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"discussion id"`) for one over
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES); server errors as they come.
    async fn create_discussion(&self, discussion: &str) -> Result<()>;

    /// Posts a top-level comment and returns it as stored.
    ///
    /// A comment with an idempotency key ([`NewComment::with_key`]) is posted once per
    /// discussion and key: a repeat returns the comment (its link and posting time, as it reads
    /// now) and writes nothing (1 `find`). Each strategy enforces it in the database under
    /// concurrency: [`PerComment`] derives the comment's `_id` and slug from the discussion and
    /// the key (unique `_id`, unique `{discussion_id, slug}`); [`Embedded`] derives the comment's
    /// id and pushes it to the discussion's `keyed` list in the same atomic update whose filter
    /// excludes it; [`HybridPages`] derives the slug and lets attempts of one key take turns on a
    /// leased lock of the key, looking the slug up first.
    ///
    /// ```no_run
    /// # async fn demo(store: &mongo_social::DynCommentStore) -> mongo_social::Result<()> {
    /// use mongo_social::comments::{Author, NewComment};
    /// let hello = NewComment::new(Author::new("u1", "Rick"), "First!").with_key("req-1");
    /// let first = store.post("article-42", hello.clone()).await?;
    /// assert_eq!(store.post("article-42", hello).await?.link, first.link);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Before anything is written, and before anything is read for the first three:
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) (blank discussion id, author id, text or
    /// key), [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"discussion id"`,
    /// `"author"`, `"idempotency key"`) for an id over [`MAX_ID_BYTES`](crate::MAX_ID_BYTES),
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"comment"`) for a comment over the
    /// store's `max_comment_bytes` (64 KiB by default, encoded as stored); then
    /// [`crate::Error::NotFound`] (discussion not registered, where the store does not
    /// `create_discussions_on_post`),
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (of the `"discussion"`)
    /// ([`Embedded`] only); [`crate::Error::Conflict`] for a key used in the discussion for
    /// another comment (other author, text or parent), nothing written.
    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment>;

    /// One page of every comment in the discussion, replies included, by posting time: oldest
    /// or newest first as `order` says.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor of another view, order,
    /// strategy or discussion,
    /// [`Invalid::PageLimit`](crate::error::Invalid::PageLimit), [`crate::Error::NotFound`] for a discussion that was
    /// not registered.
    async fn chronological(
        &self,
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<Page<Comment>>;

    /// The comment at `link` (a direct link).
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) for the discussion id,
    /// [`Invalid::Link`](crate::error::Invalid::Link) for a malformed link, [`crate::Error::NotFound`] when no
    /// comment has it.
    async fn get(&self, discussion: &str, link: &str) -> Result<Comment>;

    /// Replaces a comment's text, recording when; returns the comment as edited.
    ///
    /// # Errors
    ///
    /// As [`CommentStore::get`], plus [`Error::NotFound`](crate::Error::NotFound) of an [`Entity::DeletedComment`](crate::Entity::DeletedComment) for a tombstone,
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for blank text,
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"comment"`) for a text, or the
    /// comment with it, over the store's `max_comment_bytes` (the text alone is checked before
    /// anything is read) and [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (of the
    /// `"discussion"`). The discussion id is checked first, then the text, then the link.
    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment>;

    /// Deletes a comment: removes it outright when the strategy allows and nothing replies to it,
    /// otherwise leaves a tombstone.
    ///
    /// # Errors
    ///
    /// As [`CommentStore::get`].
    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion>;

    /// How many comments the discussion has, not counting deleted ones.
    async fn count(&self, discussion: &str) -> Result<u64>;

    /// Creates the indexes the strategy needs (idempotent, one command per index: safe to run on
    /// every start). A strategy whose correctness depends on a unique index creates its indexes
    /// before its first write if this was not called on the store (or a clone of it).
    async fn create_indexes(&self) -> Result<()>;

    /// The shard key each of the strategy's collections should have; every one leads with the
    /// discussion, as the manual advises.
    fn shard_keys(&self) -> Vec<ShardKey>;
}

/// Up and down votes on comments, and the pages they rank: what every [`CommentStore`] does
/// besides posting and reading. It is a supertrait of [`CommentStore`], so an
/// `Arc<DynCommentStore>` votes and ranks whatever its strategy (a concrete store, such as
/// [`PerComment`], needs this trait in scope: `use mongo_social::prelude::*`, [`crate::prelude`]).
///
/// One vote per user per comment: [`VotedComments::vote`] casts or changes it,
/// [`VotedComments::retract_vote`] takes it back. Each [`Comment`] carries its [`Votes`], and the
/// counts are exact:
/// - under concurrency: a vote changes its document only from the value it read (a first vote by
///   an `insert` on the pair's unique `_id`), and the counts by an atomic `$inc` (under the
///   discussion's lock where updates are not atomic);
/// - across failures: the vote document is the journal. It records the change of counts still to
///   be applied, with an operation id, until the counts hold it; the counts' update records that
///   id and is never applied twice. A call cut off part-way (a lost reply, an outage) leaves the
///   mark; calling again with the same vote, any vote of the same user on the same comment, or
///   [`VotedComments::settle_votes`], finishes it, so a vote repeated after a failure is counted
///   once. Until then the vote reads as cast ([`VotedComments::vote_of`]) and the counts lag by
///   it.
///
/// ```no_run
/// # async fn demo(store: &mongo_social::comments::DynCommentStore) -> mongo_social::Result<()> {
/// use mongo_social::comments::{Sort, Vote, VotedComments};
/// use mongo_social::PageRequest;
///
/// let page = store.ranked("article-42", None, Sort::Best, PageRequest::first(20)).await?;
/// let first = &page.items[0];
/// store.vote("article-42", &first.link, "u7", Vote::Up).await?;
/// // A request's vote by name (`"up"`, `"down"`) is parsed, and checked, at the boundary,
/// let named: Vote = "down".parse()?;
/// store.vote("article-42", &first.link, "u8", named).await?;
/// // and so is a raw direction (Reddit's `dir`: 1, 0, -1).
/// match Vote::from_dir(-1)? {
///     Some(vote) => store.vote("article-42", &first.link, "u7", vote).await?,
///     None => store.retract_vote("article-42", &first.link, "u7").await?,
/// };
/// # Ok(()) }
/// ```
#[async_trait]
pub trait VotedComments: Send + Sync {
    /// `user` votes the comment at `link` up or down, replacing any vote of theirs on it; returns
    /// the vote it replaced (`Some(vote)` unchanged: the same vote again changes nothing).
    ///
    /// # Errors
    ///
    /// Before anything is written: [`Invalid::Blank`](crate::error::Invalid::Blank) (discussion id, `"user"`),
    /// [`Invalid::Link`](crate::error::Invalid::Link), [`crate::Error::NotFound`] (the discussion or the comment),
    /// [`Error::NotFound`](crate::Error::NotFound) of an [`Entity::DeletedComment`](crate::Entity::DeletedComment) (a tombstone takes no votes).
    async fn vote(
        &self,
        discussion: &str,
        link: &str,
        user: &str,
        vote: Vote,
    ) -> Result<Option<Vote>>;

    /// `user` takes back their vote on the comment at `link` (a tombstone's too); returns it,
    /// `None` if they had none.
    ///
    /// # Errors
    ///
    /// As [`VotedComments::vote`], without [`Error::NotFound`](crate::Error::NotFound) of an [`Entity::DeletedComment`](crate::Entity::DeletedComment).
    async fn retract_vote(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>>;

    /// `user`'s vote on the comment at `link`, if any (one `find`; an unknown comment has none).
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank), [`Invalid::Link`](crate::error::Invalid::Link).
    async fn vote_of(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>>;

    /// One page of comments ranked by `sort`, highest first, equal keys in posting order: the
    /// top-level comments (`parent` `None`; every comment, where the strategy does not thread),
    /// or the direct replies of the comment at `parent`. A threaded rendering ranks the top
    /// level, then each comment's replies within it, as Reddit does.
    ///
    /// Pages are keyset pages on the current ranking: each starts strictly after its cursor's
    /// comment as ranked when the page is read. A comment whose rank does not move past the
    /// cursor while a reader pages through (votes that reorder the comments already listed, or
    /// those still to come) is listed exactly once; one voted across the cursor is listed where
    /// the ranking then puts it (again, or not, as a re-read from the start would).
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor of another sort, parent,
    /// view, strategy or discussion,
    /// [`Invalid::PageLimit`](crate::error::Invalid::PageLimit), [`Invalid::Link`](crate::error::Invalid::Link),
    /// [`crate::Error::NotFound`] for an unknown discussion or parent,
    /// [`crate::Error::Unsupported`] for replies where the strategy does not thread.
    async fn ranked(
        &self,
        discussion: &str,
        parent: Option<&str>,
        sort: Sort,
        page: PageRequest,
    ) -> Result<Page<Comment>>;

    /// Finishes every vote of `discussion` that a failure interrupted, each with its own
    /// operation id (nothing is counted twice); returns how many. Votes finish what they find on
    /// their own pair; this is for pairs nobody votes on again, before the counts are relied on.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank discussion id.
    async fn settle_votes(&self, discussion: &str) -> Result<usize>;
}

/// A comment store of any strategy, chosen at runtime: hold it as `Arc<DynCommentStore>` (or
/// `Box<DynCommentStore>`), as [`crate::DynInboxStore`] is for inboxes.
pub type DynCommentStore = dyn CommentStore;

/// Threaded discussions: replies at any depth the strategy allows, a depth-first view, and
/// sub-threads.
#[async_trait]
pub trait ThreadedComments: CommentStore {
    /// Posts a reply to the comment at `parent` and returns it as stored. With a notifier (the
    /// strategy's builder), the parent's author is notified through the store's outbox: the
    /// notification never fails the reply (see [`crate::notifications::Outbox`]).
    ///
    /// A reply with an idempotency key ([`NewComment::with_key`]) is posted once per discussion
    /// and key, as [`CommentStore::post`] describes; the parent is part of its content, so the
    /// key used for a reply to another comment is a conflict. A repeat writes nothing and
    /// notifies nobody again.
    ///
    /// ```no_run
    /// # async fn demo(store: &dyn mongo_social::ThreadedComments) -> mongo_social::Result<()> {
    /// use mongo_social::comments::{Author, NewComment};
    /// let hi = NewComment::new(Author::new("u2", "Morty"), "Hi Rick").with_key("req-2");
    /// let first = store.reply("article-42", "0", hi.clone()).await?;
    /// assert_eq!(store.reply("article-42", "0", hi).await?.link, first.link);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`CommentStore::post`], plus [`Invalid::Link`](crate::error::Invalid::Link) and
    /// [`crate::Error::NotFound`] for the parent, and [`Invalid::ThreadTooDeep`](crate::error::Invalid::ThreadTooDeep).
    /// A store built with a notifier also refuses, before anything is written, a reply whose
    /// notification target `"<discussion>/<parent link>"` would be over
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES) ([`Invalid::TooLong`](crate::error::Invalid::TooLong),
    /// `"notification target"`), which the notifier would refuse once the reply was stored.
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment>;

    /// One page of the threaded view: depth first, each comment followed by its replies in
    /// posting order; top-level comments in `order`.
    ///
    /// # Errors
    ///
    /// As [`CommentStore::chronological`].
    async fn thread_page(
        &self,
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<Page<Comment>>;

    /// One page of the sub-thread rooted at `link`: that comment, then all its descendants in
    /// threaded order (a sub-thread always reads in posting order).
    ///
    /// # Errors
    ///
    /// As [`CommentStore::get`] and [`CommentStore::chronological`].
    async fn sub_thread(
        &self,
        discussion: &str,
        link: &str,
        page: PageRequest,
    ) -> Result<Page<Comment>>;

    /// A discussion ranked by `sort` as a threaded page shows it, to `depth` levels of replies,
    /// in a bounded number of reads: one page of top-level comments as
    /// [`VotedComments::ranked`] reads it (`page`: its limit, and its cursor to continue the top
    /// level), and under each comment down to depth `depth` (0: the top level alone, 1: their
    /// replies too, ...) the first page of its direct replies, `page.limit` of them, ranked the
    /// same way. Each level holds exactly the comments, in the order, and with the cursors that
    /// [`VotedComments::ranked`] gives for it (`Thread::replies`'s `next` continues a comment's
    /// replies there); what differs is the cost:
    ///
    /// | store | reads |
    /// |---|---|
    /// | [`PerComment`] | 1 `find` for the top level (the index range `ranked` reads), then 1 `find` per level of replies, of every reply of the comments shown at the level above (`{parent: {$in: [...]}}` on the ranked index), ranked here: at most `1 + depth` |
    /// | [`Embedded`] | 1 `find` of the discussion's document, ranked here at every level |
    /// | this default, for a strategy of the application's own | one [`VotedComments::ranked`] per comment shown above `depth`: `1 + N + N·M + ...` |
    ///
    /// Reading level by level with [`VotedComments::ranked`] costs a read per comment whose
    /// replies are shown (1 + N + N·M for two levels of replies); this reads each level's
    /// replies at once, so [`PerComment`] reads every reply of the comments shown (not only the
    /// first `page.limit` of each), and [`Embedded`] the whole discussion, as its top level
    /// does already.
    ///
    /// ```no_run
    /// # async fn demo(store: &mongo_social::PerComment) -> mongo_social::Result<()> {
    /// use mongo_social::prelude::*;
    /// use mongo_social::comments::Sort;
    /// use mongo_social::PageRequest;
    ///
    /// // The 20 best comments, the 20 best replies of each, and of each of those.
    /// let thread = store.ranked_thread("article-42", Sort::Best, PageRequest::first(20), 2).await?;
    /// for top in &thread.items {
    ///     println!("{} ({} up)", top.comment.text, top.comment.votes.ups);
    ///     for reply in top.replies.iter().flat_map(|replies| &replies.items) {
    ///         println!("  {}", reply.comment.text);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`VotedComments::ranked`] for the top level.
    async fn ranked_thread(
        &self,
        discussion: &str,
        sort: Sort,
        page: PageRequest,
        depth: usize,
    ) -> Result<Page<Thread>> {
        let limit = page.limit;
        let top = self.ranked(discussion, None, sort, page).await?;
        let mut replies = std::collections::HashMap::new();
        let mut level: Vec<String> = top.items.iter().map(|c| c.link.clone()).collect();
        for _ in 0..depth {
            let mut below = Vec::new();
            for parent in level {
                let page = self
                    .ranked(discussion, Some(&parent), sort, PageRequest::first(limit))
                    .await?;
                below.extend(page.items.iter().map(|c| c.link.clone()));
                replies.insert(parent, page);
            }
            level = below;
        }
        Ok(Thread::assemble(top, &mut replies))
    }
}

/// A comment with the first page of its ranked replies, each with theirs, as
/// [`ThreadedComments::ranked_thread`] reads them.
///
/// It serializes (serde) as `{"comment": {...}, "replies": {"items": [...], "next": ...}}`,
/// without `replies` below the depth read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    /// The comment.
    pub comment: Comment,
    /// Its direct replies, ranked: the first page (`next` continues it with
    /// [`VotedComments::ranked`] of this comment's link), each with its own; `None` for a
    /// comment at the depth the read stopped at, whose replies were not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<Page<Thread>>,
}

impl Thread {
    /// The threads of `level`'s comments, each with its page of replies from `replies` (by the
    /// comment's link), and theirs; `None` for a comment `replies` does not hold.
    fn assemble(
        level: Page<Comment>,
        replies: &mut std::collections::HashMap<String, Page<Comment>>,
    ) -> Page<Thread> {
        level.map(|comment| Thread {
            replies: replies
                .remove(&comment.link)
                .map(|page| Thread::assemble(page, replies)),
            comment,
        })
    }
}
