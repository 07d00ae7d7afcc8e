//! The values comments are posted as and read back as: authors, comments, threads, deletions.

use serde::{Deserialize, Serialize};

use super::ranking::{Vote, Votes};
use crate::Page;

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
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) refused), unique per discussion, that makes a repeated
    /// [`CommentStore::post`](super::CommentStore::post) or
    /// [`ThreadedComments::reply`](super::ThreadedComments::reply) (a client retrying a request
    /// whose response it lost) return the first call's comment (the same link and posting time, as
    /// it reads now) and write nothing. The same key with another author, text or parent is
    /// [`Error::Conflict`](crate::Error::Conflict). Each strategy enforces it in the database,
    /// under concurrency (see [`CommentStore::post`](super::CommentStore::post)).
    ///
    /// ```no_run
    /// # async fn demo(store: &mongo_social::comments::DynCommentStore) -> mongo_social::Result<()> {
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
    /// Addresses the comment within its discussion; pass it to
    /// [`CommentStore::get`](super::CommentStore::get),
    /// [`ThreadedComments::reply`](super::ThreadedComments::reply),
    /// [`CommentStore::edit`](super::CommentStore::edit) or
    /// [`CommentStore::delete`](super::CommentStore::delete).
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
    /// How many users vote it up and down ([`VotedComments`](super::VotedComments)).
    pub votes: Votes,
}

/// What [`CommentStore::delete`](super::CommentStore::delete) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Deletion {
    /// The comment is gone (a leaf in a strategy that removes leaves).
    Removed,
    /// The comment stays as a tombstone: text removed, place in the thread kept. Deleting a
    /// tombstone again reports this too and changes nothing.
    Tombstoned,
}

/// A comment with the first page of its ranked replies, each with theirs, as
/// [`ThreadedComments::ranked_thread`](super::ThreadedComments::ranked_thread) reads them.
///
/// It serializes (serde) as `{"comment": {...}, "replies": {"items": [...], "next": ...}}`,
/// without `replies` below the depth read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    /// The comment.
    pub comment: Comment,
    /// Its direct replies, ranked: the first page (`next` continues it with
    /// [`VotedComments::ranked`](super::VotedComments::ranked) of this comment's link), each with
    /// its own; `None` for a comment at the depth the read stopped at, whose replies were not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<Page<Thread>>,
}

impl Thread {
    /// The threads of `level`'s comments, each with its page of replies from `replies` (by the
    /// comment's link), and theirs; `None` for a comment `replies` does not hold.
    pub(super) fn assemble(
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

/// One comment as exported from a store of any strategy.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct HeldComment {
    /// Its link in the store it was exported from.
    pub link: String,
    /// Its parent's link there; `None` at the top level.
    pub parent: Option<String>,
    /// Who wrote it.
    pub author: Author,
    /// What it says; empty in a tombstone.
    pub text: String,
    /// When it was posted.
    pub posted: bson::DateTime,
    /// When it was last edited.
    pub edited: Option<bson::DateTime>,
    /// Whether it is a tombstone.
    pub deleted: bool,
    /// Its counts of votes.
    pub votes: Votes,
    /// Every user's vote on it, by user id.
    pub voters: Vec<(String, Vote)>,
}

impl HeldComment {
    /// `comment` as exported, without its voters yet.
    pub(super) fn of(comment: Comment) -> Self {
        Self {
            link: comment.link,
            parent: comment.parent,
            author: comment.author,
            text: comment.text,
            posted: comment.posted,
            edited: comment.edited,
            deleted: comment.deleted,
            votes: comment.votes,
            voters: Vec::new(),
        }
    }
}
