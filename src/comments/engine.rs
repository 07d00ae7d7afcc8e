//! What one comment strategy supplies: the engine half of every comment store.
//!
//! As for inboxes ([`crate::inbox`]'s engine), a comment store's operations are written once,
//! as the provided methods of the public traits ([`super::CommentStore`],
//! [`super::VotedComments`], [`super::ThreadedComments`], [`super::CommentTransfer`]: the
//! discussion id and page checks, one span per operation), over an engine: where a comment, its
//! thread position and its votes live, and how a discussion is exported and imported.
//! [`super::PerComment`], [`super::Embedded`] and [`super::HybridPages`] are engines, and so is
//! the migration mirror ([`crate::migrate::MigratingComments`]); every engine is a store by the
//! blanket implementations beside the public traits.
//!
//! These traits are public in a private module, so nothing outside the crate can name or
//! implement them. Methods share their names with the public methods they serve, and may assume
//! the discussion id (and a page's limit) passed the checks: a page read gets them as a
//! [`Listing`], which only the check makes. Checks that depend on the strategy (a link's form,
//! a comment's size as stored) stay in the engine.

use std::fmt;

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::model::HeldComment;
use super::{
    Comment, Deletion, Features, NewComment, Order, Sort, Strategy, Thread, ThreadedComments, Vote,
};
use crate::error::Result;
use crate::page::{Page, PageRequest};
use crate::sharding::ShardKey;

/// The votes half of [`VotesEngine`]: which strategy keeps them, a vote, taking it back, reading
/// it, settling pending ones. Every strategy gets it from its [`super::votes::Tally`] (written
/// once, in [`super::votes`]); the migration mirror routes it.
#[async_trait]
pub trait BallotEngine: Send + Sync {
    /// Which strategy this is.
    fn strategy(&self) -> Strategy;

    /// Sets the user's vote on a comment.
    async fn vote(&self, at: At<'_>, user: &str, vote: Vote) -> Result<Option<Vote>>;

    /// Takes the user's vote back.
    async fn retract_vote(&self, at: At<'_>, user: &str) -> Result<Option<Vote>>;

    /// The user's vote on a comment.
    async fn vote_of(&self, at: At<'_>, user: &str) -> Result<Option<Vote>>;

    /// Folds pending votes into the comments' scores.
    async fn settle_votes(&self, discussion: &str) -> Result<usize>;
}

/// A page of one discussion as a store's operation hands it to an engine: the discussion id and
/// the page's limit passed the checks ([`super::validate::check_page`] makes it).
#[derive(Clone, Debug)]
pub struct Listing<'a> {
    /// The discussion's id.
    pub discussion: &'a str,
    /// Which page.
    pub page: PageRequest,
}

/// Which ranked list of a discussion a page reads: the comments under `parent` (or at the top
/// level), by `sort`. A ranked page's cursor belongs to one list.
#[derive(Clone, Copy, Debug)]
pub struct Ranked<'a> {
    /// The parent's link, `None` for the top level.
    pub parent: Option<&'a str>,
    /// The order.
    pub sort: Sort,
}

/// Where a comment is: its discussion and its link.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    /// The discussion's id.
    pub discussion: &'a str,
    /// The comment's link, in the strategy's form.
    pub link: &'a str,
}

/// The strategy's part of [`super::VotedComments`].
#[async_trait]
pub trait VotesEngine: BallotEngine + fmt::Debug + 'static {
    /// Whether this is a running migration's store, whose operations' spans are
    /// `migrate.comments.<operation>` (a store's own are `comments.<operation>`).
    fn migrating(&self) -> bool {
        false
    }

    /// A page of the `ranked` list.
    async fn ranked(&self, listing: Listing<'_>, ranked: Ranked<'_>) -> Result<Page<Comment>>;
}

/// The strategy's part of [`super::CommentStore`].
#[async_trait]
pub trait CommentEngine: VotesEngine {
    /// What the strategy supports: [`Strategy::features`] (a migration's store: what both
    /// of its stores support).
    fn features(&self) -> Features {
        self.strategy().features()
    }

    /// The store as threaded comments, where it threads.
    fn threaded(&self) -> Option<&dyn ThreadedComments>;

    /// Creates the discussion.
    async fn create_discussion(&self, discussion: &str) -> Result<()>;

    /// Posts a top-level comment.
    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment>;

    /// A page of the discussion in posting order.
    async fn chronological(&self, listing: Listing<'_>, order: Order) -> Result<Page<Comment>>;

    /// One comment by its link.
    async fn get(&self, discussion: &str, link: &str) -> Result<Comment>;

    /// Replaces a comment's text.
    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment>;

    /// Deletes a comment.
    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion>;

    /// How many comments the discussion shows.
    async fn count(&self, discussion: &str) -> Result<u64>;

    /// Creates the engine's indexes.
    async fn create_indexes(&self) -> Result<()>;

    /// The shard key each collection should have.
    fn shard_keys(&self) -> Vec<ShardKey>;

    /// The database the store lives in.
    fn database(&self) -> &mongodb::Database;
}

/// The strategy's part of [`super::ThreadedComments`].
#[async_trait]
pub trait ThreadsEngine: CommentEngine {
    /// Posts a reply to `parent`.
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment>;

    /// A page of the discussion in thread order.
    async fn thread_page(&self, listing: Listing<'_>, order: Order) -> Result<Page<Comment>>;

    /// A page of the replies below `link`.
    async fn sub_thread(&self, listing: Listing<'_>, link: &str) -> Result<Page<Comment>>;

    /// Ranked top-level comments with their ranked replies, `depth` levels down.
    async fn ranked_thread(
        &self,
        listing: Listing<'_>,
        sort: Sort,
        depth: usize,
    ) -> Result<Page<Thread>>;
}

/// The strategy's part of [`super::CommentTransfer`].
#[async_trait]
pub trait TransferEngine: CommentEngine {
    /// Every discussion after `after`, in order.
    async fn discussions(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>>;

    /// Everything the discussion holds, parents first.
    async fn export(&self, discussion: &str) -> Result<Vec<HeldComment>>;

    /// Writes held comments into the discussion, idempotently.
    async fn import(&self, discussion: &str, comments: &[HeldComment]) -> Result<Vec<String>>;

    /// Removes everything the discussion holds.
    async fn purge(&self, discussion: &str) -> Result<()>;

    /// Removes everything the store holds.
    async fn purge_all(&self) -> Result<()>;

    /// Whether the store holds no comment.
    async fn is_empty(&self) -> Result<bool>;

    /// A discussion with replies, among `within` (or any).
    async fn threaded_discussion(&self, within: Option<&[String]>) -> Result<Option<String>>;

    /// The collections holding the store's data.
    fn data_collections(&self) -> Vec<String>;
}
