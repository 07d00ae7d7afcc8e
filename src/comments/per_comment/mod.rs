//! One document per comment, threaded by materialized slug paths.

mod builder;
mod read;
mod store;
mod stored;
mod threads;
mod transfer;
mod votes;
mod write;

use bson::Document;
use mongodb::{Collection, Database};

pub use builder::PerCommentBuilder;

use super::registry::{registered_collections, Registry};
use super::votes::VoteBook;
use super::{Strategy, ThreadedComments};
use crate::backend::Backend;
use crate::config::{new_with_defaults, outbox_accessor, StoreConfig};
use crate::notifications::Outbox;

/// The strategy named in this store's cursors.
const STRATEGY: Strategy = Strategy::PerComment;
/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 4] = registered_collections("comments");
/// How long a discussion's lock lasts if its holder dies.
const LOCK_LEASE: std::time::Duration = std::time::Duration::from_secs(30);
/// Attempts at a fresh slug part when one collides with another comment's.
const SLUG_ATTEMPTS: usize = 8;

/// One document per comment, as in the manual's first strategy, threaded by slug paths.
///
/// Collections (default names; see [`PerCommentBuilder::collection`]):
/// - `comments`: `{_id, discussion_id, parent_id, parent, slug, full_slug, thread_key, posted,
///   author: {id, name}, text, edited, deleted, ups, downs, best, hot, top, controversial,
///   vote_ops}` (and `idempotency_key`, `content_digest` for a keyed comment, whose `_id` and slug
///   part derive from the discussion and the key: see
///   [`CommentStore::post`](crate::comments::CommentStore::post)), indexes `{discussion_id, posted,
///   _id}` (chronological), `{discussion_id, full_slug}` (threaded, sub-threads), `{discussion_id,
///   thread_key}` (threaded, newest first), unique `{discussion_id, slug}` (direct links) and, per
///   sort, `{discussion_id, parent, <key>: -1, full_slug}` (ranked pages: `parent` is the parent's
///   slug, empty at the top level); shard key `{discussion_id: 1, slug: 1}` (not the manual's
///   `{discussion_id, full_slug}`: MongoDB shards a collection only if its unique indexes start
///   with the shard key);
/// - `comment_discussions`: `{_id: discussion}`, the registered discussions;
/// - `comment_locks`: edit, delete and vote locks, used only on servers without atomic updates;
/// - `comment_votes`: one document per vote (see
///   [`VotedComments`](crate::comments::VotedComments)), index `{discussion_id, comment}`, shard
///   key `{discussion_id: 1, comment: 1}`.
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

impl PerComment {
    /// The default [`PerCommentBuilder::max_key_bytes`].
    pub const DEFAULT_MAX_KEY_BYTES: usize = 1_000;
    /// The default largest comment, in bytes.
    pub const DEFAULT_MAX_COMMENT_BYTES: usize = 64 * 1024;

    new_with_defaults!("A store with the default collections and limits in `database`.");

    outbox_accessor!(PerCommentBuilder);

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
    /// [`CommentStore::threaded`](crate::comments::CommentStore::threaded) gives a strategy chosen
    /// at run time, without its `Option`. (With the traits in scope, [`crate::prelude`], a
    /// `PerComment` replies and votes as it is.)
    pub fn as_threaded(&self) -> &dyn ThreadedComments {
        self
    }
}
