//! Every comment embedded in the discussion's own document, threads nested by position.

mod builder;
mod read;
mod store;
mod threads;
mod transfer;
mod votes;
mod write;

use bson::Document;
use mongodb::Collection;

use super::votes::VoteBook;
use super::Strategy;
use crate::backend::Backend;
use crate::bson_ext;
use crate::notifications::Outbox;

pub use builder::EmbeddedBuilder;

/// The strategy named in this store's cursors.
const STRATEGY: Strategy = Strategy::Embedded;
/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 3] = ["discussions", "comment_locks", super::votes::VOTES];
/// How long a discussion's lock lasts if its holder dies.
const LOCK_LEASE: std::time::Duration = std::time::Duration::from_secs(30);
/// Bytes a comment costs its document beyond its own encoding: the array index key, and the
/// `replies` array of a parent that had none.
const ELEMENT_OVERHEAD: usize = 32;
/// Attempts at a reply, edit or delete while other writers keep changing the same comment.
const ATTEMPTS: usize = 32;
/// The newest top-level comment's `posted`: a post never lands after a later one.
const LAST_POSTED: &str = "last_posted";
/// The ids of the discussion's keyed comments: a keyed push is filtered by its id not being
/// there, and adds it, in the same atomic update.
const KEYED: &str = "keyed";
/// Deepest reply accepted: BSON nests at most 100 levels, and each reply level takes two (an
/// array and a document).
const MAX_DEPTH_LIMIT: usize = 45;

/// Every comment of a discussion inside the discussion's document, as in the manual's second
/// strategy, threads nested by position.
///
/// The document (in a collection of the application's choosing, default `discussions`) is
/// `{_id: discussion, count, slots, bytes, last_posted, vote_ops, keyed, comments: [{id, posted,
/// author, text, edited, deleted, ups, downs, replies: [...]}]}`, plus any fields of the application's
/// own: point the store at the collection of the content being discussed and the comments live in
/// that content's document. `count` counts comments not deleted, `slots` top-level comments,
/// `bytes` estimates the document's size, `last_posted` is the newest top-level comment's time,
/// `keyed` the ids of comments posted with an idempotency key (derived from the discussion and
/// the key, see [`CommentStore::post`]; such a comment also keeps `idempotency_key` and
/// `content_digest`), and `vote_ops` the newest 1,000 votes' operation ids (see [`VotedComments`]; up to 20 KiB,
/// kept free below the 16 MiB limit). Votes live in `comment_votes` (index `{discussion_id,
/// comment}`, shard key `{discussion_id: 1, comment: 1}`); locks, on servers without atomic
/// updates, in `comment_locks`.
///
/// A comment's link is its position path: `2` for the third top-level comment, `2.0` for the
/// first reply to it. Positions never change, so a deleted comment stays as a tombstone.
///
/// # How it improves on the seed
/// - **A typed error, not a failed update, at the size limit.** Each write adds its size to
///   `bytes` in the same atomic update whose filter requires room for it, so a comment that would
///   take the document past [`EmbeddedBuilder::max_document_bytes`] (default 16 MiB less 64 KiB
///   for the application's own fields) fails with [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (of the `"discussion"`), which suggests
///   [`super::HybridPages`].
/// - **Links that return the new comment's position.** A post reads back `slots` from the same
///   `findAndModify` that pushed it; a reply is pushed only if its expected position is still
///   free, so concurrent replies never get each other's link.
/// - **Positions and posting times agree.** A comment is stamped for the position it is about
///   to take, never before the comment before it there (a post's filter requires `last_posted`
///   not to be later, a reply's stamp follows its previous sibling), and a writer that loses the
///   position to another stamps again: under concurrent posters the threaded view, in position
///   order, lists siblings in `posted` order.
/// - **Pages from `$slice`.** A threaded page reads only the top-level comments it needs, with
///   their replies, through a `$slice` projection; servers without `$slice` projections read the
///   whole document and slice it here (and so do servers that fail a `$slice` starting past the
///   end of the array, for reads that start at a given position).
///
/// The chronological view reads the whole document (replies are nested, so no projection can
/// pick comments by time) and sorts it here: one command, but its cost grows with the
/// discussion.
///
/// # Costs (commands, MongoDB)
/// Post: 1 (`findAndModify`). Reply, edit, delete: 2 (`find`, `update`). Any page, direct link,
/// count: 1 `find`. A vote: 4 (see [`super`]); a ranked page: 1 `find` (of the whole document
/// for the top level, of one thread for a comment's replies), ranked here. On servers without
/// atomic updates each write also takes and releases a lock (2 more).
///
/// # Votes
///
/// A vote's change of counts is one `update`: `$inc` of the element's `ups` and `downs` at its
/// position path, filtered by the element existing and by the vote's op id not among the
/// discussion's `vote_ops`, which it joins. The sorts' keys are computed from the counts on
/// every read, so nothing else is stored and no index is needed.
///
/// [`CommentStore::post`]: super::CommentStore::post
/// [`VotedComments`]: super::VotedComments
#[derive(Clone, Debug)]
pub struct Embedded {
    backend: Backend,
    /// Where replies and their deletion are notified, if the application asked.
    outbox: Option<Outbox>,
    discussions: Collection<Document>,
    votes: VoteBook,
    max_document_bytes: usize,
    max_comment_bytes: usize,
    max_depth: usize,
    /// Whether a post to a discussion not created creates it.
    create_discussions: bool,
}

/// Whether a discussion document read by `_id` (with `slots` projected) was created by this
/// store. Checked here rather than by a `slots: {$exists: true}` filter: where the server
/// evaluates no filter but `{_id}` in its engine, such a filter decodes every discussion of the
/// collection, comments and all.
fn created(document: &Document) -> bool {
    document.contains_key("slots")
}

/// A non-negative count field, 0 when missing.
fn count_field(document: &Document, field: &str) -> usize {
    bson_ext::count(document, field) as usize
}
