//! The per-post counters: their types, reads, increments and recounts.

use bson::oid::ObjectId;
use bson::{doc, Document};
use serde::{Deserialize, Serialize};

use super::{Likes, MAX_FIRST_UPDATE_RACES, REMOVING};
use crate::backend::update_batch::is_duplicate_key;
use crate::bson_ext;
use crate::error::Result;
use crate::feed::types::PostId;
use crate::observe::spans::Op;

/// A post's social counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Users who like the post.
    #[serde(default)]
    pub likes: i64,
    /// Comments on the post.
    #[serde(default)]
    pub comments: i64,
    /// Points (ratings, votes) the post earned.
    #[serde(default)]
    pub points: i64,
}

/// A counter the application changes directly; likes change only through
/// [`Likes::like`] and [`Likes::unlike`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Counter {
    /// The comment count.
    Comments,
    /// The points.
    Points,
}

impl Counter {
    fn field(self) -> &'static str {
        match self {
            Counter::Comments => "comments",
            Counter::Points => "points",
        }
    }
}

/// One `$inc` of a post's counter, tagged with its operation id `op` so that it is applied
/// once however often it is retried, and can be reversed exactly.
#[derive(Clone, Copy, Debug)]
pub(super) struct CounterChange {
    pub(super) post: PostId,
    pub(super) field: &'static str,
    pub(super) delta: i64,
    pub(super) op: ObjectId,
}

impl CounterChange {
    /// `delta` likes on `post`, by operation `op`.
    pub(super) fn likes(post: PostId, delta: i64, op: ObjectId) -> Self {
        Self {
            post,
            field: "likes",
            delta,
            op,
        }
    }
}

impl Likes {
    /// Adds `delta` (negative to subtract) to one of a post's counters.
    ///
    /// # Errors
    ///
    /// [`crate::Error::NotFound`] for an unknown post.
    ///
    /// Retried on transient failures, and applied once however often it is retried (each change
    /// carries an operation id the counter remembers); a call made again by the caller is a new
    /// change.
    pub async fn add_to_counter(&self, post: PostId, counter: Counter, delta: i64) -> Result<()> {
        Op::FeedLikesAddToCounter
            .span()
            .run(async move {
                self.check_post_exists(post).await?;
                self.increment(post, counter.field(), delta).await
            })
            .await
    }

    /// A post's counters: one `find`, plus one to tell a post never counted from an unknown one.
    ///
    /// # Errors
    ///
    /// [`crate::Error::NotFound`] for an unknown post.
    pub async fn counters(&self, post: PostId) -> Result<Counters> {
        Op::FeedLikesCounters
            .span()
            .run(async move {
                match self
                    .inner
                    .collections
                    .counters
                    .find_one(doc! { "_id": post.0 })
                    .projection(doc! { "ops": 0 })
                    .await?
                {
                    Some(found) => bson_ext::decode(self.inner.collections.counters.name(), found),
                    None => {
                        self.check_post_exists(post).await?;
                        Ok(Counters::default())
                    }
                }
            })
            .await
    }

    /// Sets a post's like count from its likes (after a crash between a like and its count, or
    /// a counter changed by hand): `find` (post), `find` (likes a failure interrupted, finished
    /// first as [`Likes::settle`] does), `count`, `update`.
    ///
    /// Where updates are not atomic, the count and its `$set` run under the post's counter
    /// lock, which likes and unlikes also hold from their insert (or removal) to their `$inc`:
    /// the result is exact under concurrent likes. On MongoDB likes take no lock, so
    /// a like inserted before the count whose `$inc` lands after the `$set` is counted twice (an
    /// unlike, missed once): run it when no like of the post is in flight (a repair after a
    /// crash, or a quiet period), or run it again afterwards.
    pub async fn recount(&self, post: PostId) -> Result<i64> {
        let recount = move || async move {
            // Interrupted likes are finished first: counting a like not yet counted would let
            // its own `$inc`, applied later, count it again.
            self.settle_unlocked(post).await?;
            let likes = self
                .inner
                .collections
                .likes
                .count_documents(doc! { "post": post.0, REMOVING: { "$exists": false } })
                .await? as i64;
            self.backend()
                .command("recount", || {
                    self.inner
                        .collections
                        .counters
                        .update_one(doc! { "_id": post.0 }, doc! { "$set": { "likes": likes } })
                        .upsert(true)
                })
                .await?;
            Ok(likes)
        };
        self.repair(Op::FeedLikesRecount, post, recount).await
    }

    /// `$inc` of one counter under the post's counter lock where updates are not atomic.
    pub(super) async fn increment(
        &self,
        post: PostId,
        field: &'static str,
        delta: i64,
    ) -> Result<()> {
        let change = CounterChange {
            post,
            field,
            delta,
            op: ObjectId::new(),
        };
        self.locked(post, self.increment_unlocked(change)).await
    }

    /// The `$inc` of `change`, creating the counter document on first use, applied once under
    /// retries: its operation id is recorded in the document's recent `ops`, and a document that
    /// holds it already is not matched. The caller holds the counter lock where updates are not
    /// atomic.
    pub(super) async fn increment_unlocked(&self, change: CounterChange) -> Result<()> {
        let mut update: Document = doc! { "$inc": { change.field: change.delta } };
        let mut filter = doc! { "_id": change.post.0 };
        crate::retry::once_per_op(&mut filter, &mut update, change.op);
        self.backend()
            .retry("counter update", || async {
                // A duplicate key means the document exists but was not matched: it holds `op`
                // (an earlier attempt applied it), or a concurrent first update created it since
                // the filter ran (then the next round matches it).
                for _ in 0..MAX_FIRST_UPDATE_RACES {
                    match self
                        .inner
                        .collections
                        .counters
                        .update_one(filter.clone(), update.clone())
                        .upsert(true)
                        .await
                    {
                        Ok(_) => return Ok(()),
                        Err(error) if is_duplicate_key(&error) => {
                            if self.holds_op(change.post, change.op).await? {
                                return Ok(());
                            }
                        }
                        Err(error) => return Err(error.into()),
                    }
                }
                Err(crate::Error::contention("like", MAX_FIRST_UPDATE_RACES))
            })
            .await
    }

    /// Reverses the `$inc` of `change` if it was applied (the document holds its operation id),
    /// and forgets the id: idempotent, exact whether or not the `$inc` ran.
    pub(super) async fn reverse_increment(&self, change: CounterChange) -> Result<()> {
        let filter = doc! { "_id": change.post.0, "ops": change.op };
        let update =
            doc! { "$inc": { change.field: -change.delta }, "$pull": { "ops": change.op } };
        self.backend()
            .command("counter undo", || {
                self.inner
                    .collections
                    .counters
                    .update_one(filter.clone(), update.clone())
            })
            .await?;
        Ok(())
    }
}
