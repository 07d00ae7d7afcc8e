//! The [`Likes`] handle: idempotent likes, and the per-post counters (likes, comments, points)
//! in their own document.

mod counters;
mod pairs;

use std::future::Future;

use bson::oid::ObjectId;
use bson::Document;

use super::state::handle;
use super::types::PostId;
use crate::backend::Backend;
use crate::observe::spans::Op;
use crate::Result;

/// Rounds of a counter's `$inc` that may meet a concurrently created document (and of a like or
/// unlike that may meet a concurrent change of its pair).
const MAX_FIRST_UPDATE_RACES: usize = 3;

/// A like's "not yet counted" mark: `true` from its insert until its `$inc` (operation `op`,
/// stored on the like) landed.
const PENDING: &str = "pending";

/// A like's "removing" mark: the op id of the unlike whose `-1` is applied before the like is
/// deleted. A like so marked reads as absent.
const REMOVING: &str = "removing";

/// What inserting a like found.
enum Stored {
    /// This call's like is stored.
    Mine,
    /// Another like of the pair is stored.
    Other(Document),
    /// The pair's like was removed between the insert and the look-up.
    Gone,
}

/// The op id of a like stored but not yet counted.
fn pending_op(like: &Document) -> Option<ObjectId> {
    if like.get_bool(PENDING).unwrap_or(false) {
        like.get_object_id("op").ok()
    } else {
        None
    }
}

pub use counters::{Counter, Counters};

handle! {
    /// Likes and a post's counters: like, unlike, read the counters, repair them. From
    /// [`super::FeedStore::likes`]; cheap to clone.
    ///
    /// ```no_run
    /// # use mongo_social::{FeedStore, feed::PostId};
    /// # async fn demo(store: FeedStore<()>, post: PostId) -> mongo_social::Result<()> {
    /// use mongo_social::feed::Counter;
    ///
    /// let likes = store.likes();
    /// assert!(likes.like(post, "bob").await?);
    /// assert!(!likes.like(post, "bob").await?, "liked once, counted once");
    /// assert!(likes.is_liked(post, "bob").await?);
    /// likes.add_to_counter(post, Counter::Comments, 1).await?;
    /// let counters = likes.counters(post).await?;
    /// assert_eq!((counters.likes, counters.comments), (1, 1));
    /// # Ok(()) }
    /// ```
    ///
    /// A like is a document `{_id: {post, user}, post, user, at, created, op}` in `post_likes`:
    /// inserting it is atomic on every server thanks to the unique `_id`, so a second like by the
    /// same user fails with a duplicate key and counts nothing. The counter document
    /// `{_id: post, likes, comments, points, ops}` is `$inc`ed only when the like was stored (or is
    /// being removed), so the count is exact under any concurrency. Where updates are not atomic,
    /// a like's or unlike's writes run under a leased lock on the post's counter (+2 commands).
    ///
    /// # The like document is the journal
    ///
    /// A like and its count are two writes to two documents; a failure between them (a lost
    /// reply, an outage, a client giving up) must leave the counter neither off nor fixable only by
    /// a recount. So each like document records what is still to be applied to the counter:
    /// - a like is inserted with its op id `op` and the mark `pending: true`; its `$inc +1` carries
    ///   `op`; then the mark is cleared. A like still marked may or may not be counted: `op` in the
    ///   counter's `ops` tells, and applying `+1` with `op` again is a no-op if it was;
    /// - an unlike does not delete at once: it marks the like `removing: op2` (a `findAndModify`,
    ///   which returns the like as it was), applies `-1` with `op2`, then deletes the like. A like
    ///   so marked reads as absent ([`Likes::is_liked`], recounts, the hot window);
    /// - each like or unlike first finishes a mark it finds on its pair, with the op id stored there,
    ///   so nothing is applied twice: a like that failed after its insert and is then unliked is
    ///   counted (`+1` with its `op`, a no-op if its own `$inc` landed) before it is uncounted
    ///   (`-1` with the unlike's), so the counter never goes below the likes.
    ///
    /// When a step fails, the call first undoes what it did (a like is uncounted and deleted, an
    /// unlike uncounted and unmarked), so an error usually means nothing changed; if the undo
    /// fails too (the server is still unreachable), the marks stay and the next like or unlike of
    /// the pair, [`Likes::settle`] or [`Likes::recount`] finishes them.
    ///
    /// Exact as long as a mark is finished before 100 later changes of the post's counters drop its
    /// op id from `ops` (see below), and, on MongoDB where likes take no lock, as long as a failed
    /// call's undo does not race another call on the same pair.
    ///
    /// # Retries
    ///
    /// Every write here is retried on transient failures (see [`crate::retry::RetryPolicy`]) and is
    /// idempotent, so a retry after a lost reply applies nothing twice:
    /// - a like's insert carries a client-made `_id` and `op` id: a retry that meets a duplicate key
    ///   finds its own document (by `op`) and counts it as inserted;
    /// - each `$inc` carries an operation id and records it in the counter document's `ops`, a
    ///   list of the newest 100 ids (`$push` with `$slice`); its filter excludes documents
    ///   whose `ops` hold the id, so a retry of an applied `$inc` matches nothing. An `$inc` is
    ///   therefore exact as long as its retries end before 100 later changes of the same
    ///   post's counters (with the default 10-second retry budget: under about 100 changes a second
    ///   per post);
    /// - an unlike's mark is a `findAndModify` of a like not yet marked; a retry that finds nothing
    ///   to mark finds the like marked with its own op id and carries on;
    /// - clearing a mark and deleting a marked like select the like by the mark's op id;
    /// - undoing an `$inc` is a reversal guarded by the `$inc`'s own id (`{ops: id}` matched,
    ///   `$inc` back, `$pull` the id): exact whether or not the `$inc` ran.
    Likes
}

impl Likes {
    /// Runs `work`, a repair of `post`'s likes or counters, in `op`'s span under the post's
    /// counter lock once the post is known to exist ([`Likes::check_post_exists`]); `work` is
    /// called only then.
    async fn repair<T, Fut>(&self, op: Op, post: PostId, work: impl FnOnce() -> Fut) -> Result<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        op.span()
            .run(async move {
                self.check_post_exists(post).await?;
                self.locked(post, work()).await
            })
            .await
    }

    /// Runs `work` holding `post`'s counter lock where updates are not atomic.
    async fn locked<T>(&self, post: PostId, work: impl Future<Output = Result<T>>) -> Result<T> {
        self.inner
            .backend
            .exclusive(&[counter_lock(post)], work)
            .await
    }

    /// The backend every command of the likes goes through.
    fn backend(&self) -> &Backend {
        &self.inner.backend
    }
}

/// The lock serializing changes of a post's counters where updates are not atomic.
fn counter_lock(post: PostId) -> String {
    format!("counters:{}", post.0.to_hex())
}
