//! Comments in pages of about 100 per document, the manual's hybrid strategy.

mod builder;
mod read;
mod store;
mod transfer;
mod votes;
mod write;

use bson::Document;
use mongodb::Collection;
use serde::{Deserialize, Serialize};

use super::body::Body;
use super::keyed::StoredKey;
use super::registry::{registered_collections, Registry};
use super::votes::{VoteBook, VOTE_OPS_BYTES};
use super::{validate, Comment, Strategy, Votes};
use crate::backend::Backend;
use crate::bson_ext;
use crate::page::invalid;
use crate::Result;

pub use builder::HybridPagesBuilder;

/// The strategy named in this store's cursors.
const STRATEGY: Strategy = Strategy::HybridPages;
/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 4] = registered_collections("comment_pages");
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
///   that keep documents in PostgreSQL enforce a secondary unique index as an exclusion
///   constraint, whose check waits on every uncommitted conflicting entry: an upsert creating a
///   page and a push into that page, each waiting on the other's entry, deadlocked there (16
///   posters into one discussion failed about one post in a hundred after 10 s of retries).
///   `_id` is the table's primary key, whose check makes only the later writer wait, so with no
///   secondary unique index on the pages two posts cannot wait on each other at all.
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
///
/// [`CommentStore::post`]: super::CommentStore::post
/// [`VotedComments`]: super::VotedComments
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

/// A comment as stored in a page.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    slug: String,
    #[serde(flatten)]
    body: Body,
    /// Its votes (see [`VotedComments`]), changed by `$inc` in place.
    ///
    /// [`VotedComments`]: super::VotedComments
    #[serde(default)]
    ups: i64,
    #[serde(default)]
    downs: i64,
    /// A keyed comment's key.
    #[serde(flatten)]
    key: StoredKey,
}

/// Bytes a comment takes in its page beyond its text and author: array index, field names,
/// times, counts.
const ENTRY_OVERHEAD: usize = 48;

impl Entry {
    fn votes(&self) -> Votes {
        Votes::from_stored(self.ups, self.downs)
    }

    fn comment(&self) -> Comment {
        self.body.comment(self.slug.clone(), None, 0, self.votes())
    }
}

/// A page document.
#[derive(Clone, Debug, Deserialize)]
struct PageDocument {
    /// [`page_id`] for pages this store made; pages written by other code may have any `_id`.
    #[serde(rename = "_id")]
    id: bson::Bson,
    page: i64,
    #[serde(default)]
    comments: Vec<Entry>,
}

/// Where a comment is: its page number and its index in that page. Ordered as the
/// chronological view reads (page, then index), whatever the pages' sizes.
type Place = (i64, usize);

/// The place whose page number and index a cursor wrote as `page` and `index` (decimal digits
/// each); [`Invalid::Cursor`](crate::error::Invalid::Cursor) otherwise.
fn parse_place_parts(page: &str, index: &str) -> Result<Place> {
    let bad = || invalid("bad position");
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(page) || !digits(index) {
        return Err(bad());
    }
    Ok((
        page.parse().map_err(|_| bad())?,
        index.parse().map_err(|_| bad())?,
    ))
}

/// The `_id` of page `page` of `discussion`: unique per page, and the same for every writer, so
/// creating a page twice is a duplicate `_id` (the number after the last `/` is the page).
fn page_id(discussion: &str, page: i64) -> String {
    format!("{discussion}/{page}")
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
            "a slug of this strategy is 16 lowercase hex digits",
        ));
    }
    Ok(())
}

/// An integer field, 0 when missing.
fn number(document: &Document, field: &str) -> i64 {
    bson_ext::integer(document, field).unwrap_or(0)
}
