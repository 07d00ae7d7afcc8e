//! The traits of every comment store: posting and reading, votes, threads.
//!
//! Each operation is written here once, as a provided method over the strategy's engine
//! ([`super::engine`]): it opens its span, checks the discussion id (and a page's limit) before
//! any command, and calls the engine. The engine is reached through a hidden method that
//! nothing outside the crate can name or implement, so the traits are sealed: the crate's
//! strategies and its migration's stores are the comment stores, and an operation added to a
//! trait later breaks no application.

use std::fmt;

use async_trait::async_trait;

use super::engine::{At, CommentEngine, Ranked, ThreadsEngine, VotesEngine};
use super::validate::{check_discussion, check_page};
use super::{Comment, Deletion, Features, NewComment, Order, Sort, Strategy, Thread, Vote};
use crate::error::Result;
use crate::page::{Page, PageRequest};
use crate::sharding::ShardKey;

/// The span of operation `$name` of the comment store `$store` (see
/// [`crate::observe::store_operation`]).
macro_rules! span {
    ($store:expr, $($operation:tt)*) => {
        $crate::observe::store_operation!(
            "comments",
            $crate::comments::VotedComments::votes_engine($store),
            $($operation)*
        )
    };
}

pub(super) use span;

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
    /// The strategy's engine: what this trait's operations call once their input is checked. Hidden
    /// and unnameable outside the crate, so the trait is sealed: only the crate's strategies (and
    /// its migration's stores) are comment stores, and new operations can be added to it without
    /// breaking any application.
    #[doc(hidden)]
    fn comment_engine(&self) -> &dyn CommentEngine;

    /// Which strategy this store implements.
    fn strategy(&self) -> Strategy {
        self.comment_engine().strategy()
    }

    /// What the strategy supports beyond the basics.
    fn features(&self) -> Features {
        self.comment_engine().features()
    }

    /// Threading (replies, threaded view, sub-threads), when the strategy has it: for a store whose
    /// strategy is chosen at run time. A concrete [`PerComment`](super::PerComment) or
    /// [`Embedded`](super::Embedded) always threads: call [`ThreadedComments`]' methods on it
    /// directly (with the trait in scope, [`crate::prelude`]), or take it as a `&dyn
    /// ThreadedComments` with its `as_threaded()`.
    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        self.comment_engine().threaded()
    }

    /// Registers a discussion so comments can be posted to it. Idempotent.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank id,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"discussion id"`) for one over
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES); server errors as they come.
    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        span!(self, "create_discussion")
            .run_checked(check_discussion(discussion), |()| {
                self.comment_engine().create_discussion(discussion)
            })
            .await
    }

    /// Posts a top-level comment and returns it as stored.
    ///
    /// A comment with an idempotency key ([`NewComment::with_key`]) is posted once per discussion
    /// and key: a repeat returns the comment (its link and posting time, as it reads now) and
    /// writes nothing (1 `find`). Each strategy enforces it in the database under concurrency:
    /// [`PerComment`](super::PerComment) derives the comment's `_id` and slug from the discussion
    /// and the key (unique `_id`, unique `{discussion_id, slug}`); [`Embedded`](super::Embedded)
    /// derives the comment's id and pushes it to the discussion's `keyed` list in the same atomic
    /// update whose filter excludes it; [`HybridPages`](super::HybridPages) derives the slug and
    /// lets attempts of one key take turns on a leased lock of the key, looking the slug up first.
    ///
    /// ```no_run
    /// # async fn demo(store: &mongo_social::comments::DynCommentStore) -> mongo_social::Result<()> {
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
    /// key), [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"discussion id"`, `"author"`,
    /// `"idempotency key"`) for an id over [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES),
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"comment"`) for a comment over the
    /// store's `max_comment_bytes` (64 KiB by default, encoded as stored); then
    /// [`crate::Error::NotFound`] (discussion not registered, where the store does not
    /// `create_discussions_on_post`), [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (of
    /// the `"discussion"`) ([`Embedded`](super::Embedded) only); [`crate::Error::Conflict`] for a
    /// key used in the discussion for another comment (other author, text or parent), nothing
    /// written.
    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        span!(self, "post")
            .run_checked(check_discussion(discussion), |()| {
                self.comment_engine().post(discussion, comment)
            })
            .await
    }

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
    ) -> Result<Page<Comment>> {
        span!(self, "chronological", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                self.comment_engine().chronological(listing, order)
            })
            .await
    }

    /// The comment at `link` (a direct link).
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) for the discussion id,
    /// [`Invalid::Link`](crate::error::Invalid::Link) for a malformed link, [`crate::Error::NotFound`] when no
    /// comment has it.
    async fn get(&self, discussion: &str, link: &str) -> Result<Comment> {
        span!(self, "get")
            .run_checked(check_discussion(discussion), |()| {
                self.comment_engine().get(discussion, link)
            })
            .await
    }

    /// Replaces a comment's text, recording when; returns the comment as edited.
    ///
    /// # Errors
    ///
    /// As [`CommentStore::get`], plus [`Error::NotFound`](crate::Error::NotFound) of an [`Entity::DeletedComment`](crate::error::Entity::DeletedComment) for a tombstone,
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for blank text,
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"comment"`) for a text, or the
    /// comment with it, over the store's `max_comment_bytes` (the text alone is checked before
    /// anything is read) and [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (of the
    /// `"discussion"`). The discussion id is checked first, then the text, then the link.
    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment> {
        span!(self, "edit")
            .run_checked(check_discussion(discussion), |()| {
                self.comment_engine().edit(discussion, link, text)
            })
            .await
    }

    /// Deletes a comment: removes it outright when the strategy allows and nothing replies to it,
    /// otherwise leaves a tombstone.
    ///
    /// # Errors
    ///
    /// As [`CommentStore::get`].
    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion> {
        span!(self, "delete")
            .run_checked(check_discussion(discussion), |()| {
                self.comment_engine().delete(discussion, link)
            })
            .await
    }

    /// How many comments the discussion has, not counting deleted ones.
    async fn count(&self, discussion: &str) -> Result<u64> {
        span!(self, "count")
            .run_checked(check_discussion(discussion), |()| {
                self.comment_engine().count(discussion)
            })
            .await
    }

    /// Creates the indexes the strategy needs (idempotent, one command per index: safe to run on
    /// every start). A strategy whose correctness depends on a unique index creates its indexes
    /// before its first write if this was not called on the store (or a clone of it).
    async fn create_indexes(&self) -> Result<()> {
        span!(self, "create_indexes")
            .run(self.comment_engine().create_indexes())
            .await
    }

    /// The shard key each of the strategy's collections should have; every one leads with the
    /// discussion, as the manual advises.
    fn shard_keys(&self) -> Vec<ShardKey> {
        self.comment_engine().shard_keys()
    }

    /// The database the store lives in.
    fn database(&self) -> &mongodb::Database {
        self.comment_engine().database()
    }

    /// Shards the strategy's collections on [`CommentStore::shard_keys`], when connected to a
    /// `mongos` (or a front end that answers as one); see [`crate::sharding::shard_collections`]
    /// for the key forms each engine takes, the order (on a new deployment, before the indexes)
    /// and what happens elsewhere.
    ///
    /// ```no_run
    /// # async fn demo(comments: &mongo_social::PerComment) -> mongo_social::Result<()> {
    /// use mongo_social::prelude::*;
    /// comments.shard_collections().await?;
    /// comments.create_indexes().await?;
    /// # Ok(()) }
    /// ```
    async fn shard_collections(&self) -> Result<()> {
        crate::sharding::shard_collections(self.database(), &self.shard_keys()).await
    }
}

/// Up and down votes on comments, and the pages they rank: what every [`CommentStore`] does besides
/// posting and reading. It is a supertrait of [`CommentStore`], so an `Arc<DynCommentStore>` votes
/// and ranks whatever its strategy (a concrete store, such as [`PerComment`](super::PerComment),
/// needs this trait in scope: `use mongo_social::prelude::*`, [`crate::prelude`]).
///
/// One vote per user per comment: [`VotedComments::vote`] casts or changes it,
/// [`VotedComments::retract_vote`] takes it back. Each [`Comment`] carries its
/// [`Votes`](super::Votes), and the counts are exact:
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
    /// The strategy's votes engine: what this trait's operations call once their input is checked.
    /// Hidden and unnameable outside the crate, so the trait is sealed: only the crate's strategies
    /// (and its migration's stores) are comment stores, and new operations can be added to it
    /// without breaking any application.
    #[doc(hidden)]
    fn votes_engine(&self) -> &dyn VotesEngine;

    /// `user` votes the comment at `link` up or down, replacing any vote of theirs on it; returns
    /// the vote it replaced (`Some(vote)` unchanged: the same vote again changes nothing).
    ///
    /// # Errors
    ///
    /// Before anything is written: [`Invalid::Blank`](crate::error::Invalid::Blank) (discussion id, `"user"`),
    /// [`Invalid::Link`](crate::error::Invalid::Link), [`crate::Error::NotFound`] (the discussion or the comment),
    /// [`Error::NotFound`](crate::Error::NotFound) of an [`Entity::DeletedComment`](crate::error::Entity::DeletedComment) (a tombstone takes no votes).
    async fn vote(
        &self,
        discussion: &str,
        link: &str,
        user: &str,
        vote: Vote,
    ) -> Result<Option<Vote>> {
        span!(self, "vote")
            .run_checked(check_discussion(discussion), |()| {
                self.votes_engine()
                    .vote(At { discussion, link }, user, vote)
            })
            .await
    }

    /// `user` takes back their vote on the comment at `link` (a tombstone's too); returns it,
    /// `None` if they had none.
    ///
    /// # Errors
    ///
    /// As [`VotedComments::vote`], without [`Error::NotFound`](crate::Error::NotFound) of an [`Entity::DeletedComment`](crate::error::Entity::DeletedComment).
    async fn retract_vote(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>> {
        span!(self, "retract_vote")
            .run_checked(check_discussion(discussion), |()| {
                self.votes_engine()
                    .retract_vote(At { discussion, link }, user)
            })
            .await
    }

    /// `user`'s vote on the comment at `link`, if any (one `find`; an unknown comment has none).
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank), [`Invalid::Link`](crate::error::Invalid::Link).
    async fn vote_of(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>> {
        span!(self, "vote_of")
            .run_checked(check_discussion(discussion), |()| {
                self.votes_engine().vote_of(At { discussion, link }, user)
            })
            .await
    }

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
    ) -> Result<Page<Comment>> {
        span!(self, "ranked", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                self.votes_engine().ranked(listing, Ranked { parent, sort })
            })
            .await
    }

    /// Finishes every vote of `discussion` that a failure interrupted, each with its own
    /// operation id (nothing is counted twice); returns how many. Votes finish what they find on
    /// their own pair; this is for pairs nobody votes on again, before the counts are relied on.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank discussion id.
    async fn settle_votes(&self, discussion: &str) -> Result<usize> {
        span!(self, "settle_votes")
            .run_checked(check_discussion(discussion), |()| {
                self.votes_engine().settle_votes(discussion)
            })
            .await
    }
}

/// A comment store of any strategy, chosen at runtime: hold it as `Arc<DynCommentStore>` (or
/// `Box<DynCommentStore>`), as [`crate::DynInboxStore`] is for inboxes.
pub type DynCommentStore = dyn CommentStore;

/// Threaded discussions: replies at any depth the strategy allows, a depth-first view, and
/// sub-threads.
#[async_trait]
pub trait ThreadedComments: CommentStore {
    /// The strategy's threads engine: what this trait's operations call once their input is
    /// checked. Hidden and unnameable outside the crate, so the trait is sealed: only the crate's
    /// strategies (and its migration's stores) are comment stores, and new operations can be added
    /// to it without breaking any application.
    #[doc(hidden)]
    fn threads_engine(&self) -> &dyn ThreadsEngine;

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
    /// # async fn demo(store: &dyn mongo_social::comments::ThreadedComments) -> mongo_social::Result<()> {
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
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) ([`Invalid::TooLong`](crate::error::Invalid::TooLong),
    /// `"notification target"`), which the notifier would refuse once the reply was stored.
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment> {
        span!(self, "reply")
            .run_checked(check_discussion(discussion), |()| {
                self.threads_engine().reply(discussion, parent, comment)
            })
            .await
    }

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
    ) -> Result<Page<Comment>> {
        span!(self, "thread_page", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                self.threads_engine().thread_page(listing, order)
            })
            .await
    }

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
    ) -> Result<Page<Comment>> {
        span!(self, "sub_thread", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                self.threads_engine().sub_thread(listing, link)
            })
            .await
    }

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
    /// | [`PerComment`](super::PerComment) | 1 `find` for the top level (the index range `ranked` reads), then 1 `find` per level of replies, of every reply of the comments shown at the level above (`{parent: {$in: [...]}}` on the ranked index), ranked here: at most `1 + depth` |
    /// | [`Embedded`](super::Embedded) | 1 `find` of the discussion's document, ranked here at every level |
    /// | a running migration's store ([`MigratingComments`](crate::migrate::MigratingComments)) | one [`VotedComments::ranked`] per comment shown above `depth`: `1 + N + N·M + ...` |
    ///
    /// Reading level by level with [`VotedComments::ranked`] costs a read per comment whose replies
    /// are shown (1 + N + N·M for two levels of replies); this reads each level's replies at once,
    /// so [`PerComment`](super::PerComment) reads every reply of the comments shown (not only the
    /// first `page.limit` of each), and [`Embedded`](super::Embedded) the whole discussion, as its
    /// top level does already.
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
        span!(self, "ranked_thread", limit = page.limit)
            .run_checked(check_page(discussion, page), |listing| {
                self.threads_engine().ranked_thread(listing, sort, depth)
            })
            .await
    }
}

/// Every votes engine is [`VotedComments`] (its operations are the trait's, written once).
impl<E: VotesEngine> VotedComments for E {
    fn votes_engine(&self) -> &dyn VotesEngine {
        self
    }
}

/// Every comment engine is a [`CommentStore`].
impl<E: CommentEngine> CommentStore for E {
    fn comment_engine(&self) -> &dyn CommentEngine {
        self
    }
}

/// Every threads engine is [`ThreadedComments`].
impl<E: ThreadsEngine> ThreadedComments for E {
    fn threads_engine(&self) -> &dyn ThreadsEngine {
        self
    }
}

/// [`ThreadedComments::ranked_thread`] from [`VotedComments::ranked`] alone: the top level by
/// `sort`, then the ranked replies of each comment shown, `depth` levels down (one `ranked` per
/// comment with replies to show).
pub(crate) async fn ranked_levels<S: VotedComments + ?Sized>(
    store: &S,
    discussion: &str,
    sort: Sort,
    page: PageRequest,
    depth: usize,
) -> Result<Page<Thread>> {
    let limit = page.limit;
    let top = store.ranked(discussion, None, sort, page).await?;
    let mut replies = std::collections::HashMap::new();
    let mut level: Vec<String> = top.items.iter().map(|c| c.link.clone()).collect();
    for _ in 0..depth {
        let mut below = Vec::new();
        for parent in level {
            let page = store
                .ranked(discussion, Some(&parent), sort, PageRequest::first(limit))
                .await?;
            below.extend(page.items.iter().map(|c| c.link.clone()));
            replies.insert(parent, page);
        }
        level = below;
    }
    Ok(Thread::assemble(top, &mut replies))
}
