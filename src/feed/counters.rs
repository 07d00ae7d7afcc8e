//! Per-post counters (likes, comments, points) in their own document, and idempotent likes.
//!
//! A like is a document `{_id: {post, user}, post, user, at}` in `post_likes`: inserting it is
//! atomic on every server thanks to the unique `_id`, so a second like by the same user fails
//! with a duplicate key and counts nothing; unliking deletes it. The counter document
//! `{_id: post, likes, comments, points}` is `$inc`ed only when the insert or delete actually
//! happened, so the count is exact under any concurrency. Where updates are not atomic
//! (FerretDB 1.x), the like's insert (or removal) and its `$inc` run under a leased lock on the
//! post's counter (+2 commands). An `$inc` that fails undoes its like (or unlike) before the
//! error is returned.
//!
//! A process that dies between the like and its `$inc` leaves the counter one off;
//! [`FeedStore::recount_likes`] sets it from the likes themselves (see there for when it is exact).
//!
//! # Retries
//!
//! Every write here is retried on transient failures (see [`crate::RetryPolicy`]) and is
//! idempotent, so a retry after a lost reply applies nothing twice:
//! - a like's insert carries a client-made `_id` and `op` id: a retry that meets a duplicate key
//!   finds its own document and counts it as inserted;
//! - each `$inc` carries an operation id and records it in the counter document's `ops`, a
//!   list of the newest 100 ids (`$push` with `$slice`); its filter excludes documents
//!   whose `ops` hold the id, so a retry of an applied `$inc` matches nothing. An `$inc` is
//!   therefore exact as long as its retries end before 100 later changes of the same
//!   post's counters (with the default 10-second retry budget: under about 100 changes a second
//!   per post);
//! - an unlike's removal is a `findAndModify` of the like, whose retry finds nothing to remove
//!   when the first attempt removed it: the unlike then returns `false` and leaves the counter
//!   as the first attempt's `$inc` (which only ran if the removal's reply arrived) left it.
//! - undoing a like whose `$inc` failed is a reversal guarded by the `$inc`'s own id
//!   (`{ops: id}` matched, `$inc -1`, `$pull` the id): exact whether or not the `$inc` ran.

use bson::oid::ObjectId;
use bson::{doc, Document};
use serde::{Deserialize, Serialize};

use super::{FeedStore, PostId};
use crate::retry::retry;
use crate::update_batch::{insert_once_with, is_duplicate_key};
use crate::Payload;
use crate::Result;

/// Rounds of a counter's `$inc` that may meet a concurrently created document.
const MAX_FIRST_UPDATE_RACES: usize = 3;

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
/// [`FeedStore::like`] and [`FeedStore::unlike`].
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

impl<X: Payload> FeedStore<X> {
    /// `user` likes `post`; returns `false` (and counts nothing) if they already did. On MongoDB:
    /// `find` (post), `find` (user), `insert` (like), `update` (`$inc`) — 4 commands; 6 where
    /// updates are not atomic (the like and its `$inc` under the post's counter lock).
    ///
    /// The like stores the post's `created`, so the "hot" feed can pick the window's posts first.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Blank`] for a blank user id, [`crate::Error::NotFound`] for an
    /// unknown post or user, before anything is written. If the `$inc` fails, the like is
    /// deleted again before the error is returned, so a retry counts it.
    pub async fn like(&self, post: PostId, user: &str) -> Result<bool> {
        crate::validate::user_id("user", user)?;
        let created = self.post_created(post).await?;
        self.chunk_of(user).await?;
        let id = doc! { "post": post.0, "user": user };
        let at = self.clock.now();
        let op = ObjectId::new();
        let like = doc! {
            "_id": &id,
            "post": post.0,
            "user": user,
            "at": at,
            "created": created,
            "op": op,
        };
        let retry_policy = &self.settings.retry;
        self.serialized(&[counter_lock(post)], async {
            if !insert_once_with(retry_policy, &self.collections.likes, like).await? {
                return Ok(false);
            }
            if let Err(error) = self.increment_unlocked(post, "likes", 1, op).await {
                // Undone, so the like is not left uncounted; if the undo fails too, the counter
                // may be one short until `recount_likes`.
                if self.reverse_increment(post, "likes", 1, op).await.is_ok() {
                    let _ = self
                        .collections
                        .likes
                        .delete_one(doc! { "_id": &id, "post": post.0, "op": op })
                        .await;
                }
                return Err(error);
            }
            Ok(true)
        })
        .await
    }

    /// `user` no longer likes `post`; returns `false` if they did not. `find` (post), `find`
    /// (user), `findAndModify` (remove the like), `update` — 4 commands on MongoDB, 6 where
    /// updates are not atomic (the removal and its `$inc` under the post's counter lock).
    ///
    /// # Errors
    ///
    /// [`crate::Error::Blank`] for a blank user id, [`crate::Error::NotFound`] for an
    /// unknown post or user, before anything is written. If the `$inc` fails, the like is put
    /// back before the error is returned, so a retry counts it.
    pub async fn unlike(&self, post: PostId, user: &str) -> Result<bool> {
        crate::validate::user_id("user", user)?;
        self.check_post_exists(post).await?;
        self.chunk_of(user).await?;
        self.serialized(&[counter_lock(post)], async {
            let filter = doc! { "_id": { "post": post.0, "user": user }, "post": post.0 };
            let removed = retry(&self.settings.retry, "unlike", || async {
                Ok(self
                    .collections
                    .likes
                    .find_one_and_delete(filter.clone())
                    .await?)
            })
            .await?;
            let Some(removed) = removed else {
                return Ok(false);
            };
            if let Err(error) = self
                .increment_unlocked(post, "likes", -1, ObjectId::new())
                .await
            {
                // Put back as it was; if that fails too, `recount_likes` repairs the counter.
                let _ =
                    insert_once_with(&self.settings.retry, &self.collections.likes, removed).await;
                return Err(error);
            }
            Ok(true)
        })
        .await
    }

    /// Whether `user` likes `post` (one `find`).
    pub async fn likes(&self, post: PostId, user: &str) -> Result<bool> {
        crate::validate::user_id("user", user)?;
        let found = self
            .collections
            .likes
            .find_one(doc! { "_id": { "post": post.0, "user": user }, "post": post.0 })
            .await?;
        Ok(found.is_some())
    }

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
        self.check_post_exists(post).await?;
        self.increment(post, counter.field(), delta).await
    }

    /// A post's counters: one `find`, plus one to tell a post never counted from an unknown one.
    ///
    /// # Errors
    ///
    /// [`crate::Error::NotFound`] for an unknown post.
    pub async fn counters(&self, post: PostId) -> Result<Counters> {
        match self
            .collections
            .counters
            .find_one(doc! { "_id": post.0 })
            .projection(doc! { "ops": 0 })
            .await?
        {
            Some(found) => crate::bson_ext::decode(self.collections.counters.name(), found),
            None => {
                self.check_post_exists(post).await?;
                Ok(Counters::default())
            }
        }
    }

    /// Sets a post's like count from its likes (after a crash between a like and its count):
    /// `find` (post), `count`, `update`.
    ///
    /// Where updates are not atomic (FerretDB 1.x), the count and its `$set` run under the
    /// post's counter lock, which likes and unlikes also hold from their insert (or removal) to
    /// their `$inc`: the result is exact under concurrent likes. On MongoDB likes take no lock, so
    /// a like inserted before the count whose `$inc` lands after the `$set` is counted twice (an
    /// unlike, missed once): run it when no like of the post is in flight (a repair after a
    /// crash, or a quiet period), or run it again afterwards.
    pub async fn recount_likes(&self, post: PostId) -> Result<i64> {
        self.check_post_exists(post).await?;
        let key = [counter_lock(post)];
        self.serialized(&key, async {
            let likes = self
                .collections
                .likes
                .count_documents(doc! { "post": post.0 })
                .await? as i64;
            retry(&self.settings.retry, "recount", || async {
                self.collections
                    .counters
                    .update_one(doc! { "_id": post.0 }, doc! { "$set": { "likes": likes } })
                    .upsert(true)
                    .await?;
                Ok(())
            })
            .await?;
            Ok(likes)
        })
        .await
    }

    /// `$inc` of one counter under the post's counter lock where updates are not atomic.
    async fn increment(&self, post: PostId, field: &str, delta: i64) -> Result<()> {
        self.serialized(
            &[counter_lock(post)],
            self.increment_unlocked(post, field, delta, ObjectId::new()),
        )
        .await
    }

    /// `$inc` of one counter, creating the counter document on first use, applied once under
    /// retries: operation `op` is recorded in the document's recent `ops`, and a document that
    /// holds it already is not matched. The caller holds the counter lock where updates are not
    /// atomic.
    async fn increment_unlocked(
        &self,
        post: PostId,
        field: &str,
        delta: i64,
        op: ObjectId,
    ) -> Result<()> {
        let mut update: Document = doc! { "$inc": { field: delta } };
        let mut filter = doc! { "_id": post.0 };
        crate::retry::once_per_op(&mut filter, &mut update, op);
        retry(&self.settings.retry, "counter update", || async {
            // A duplicate key means the document exists but was not matched: it holds `op`
            // (an earlier attempt applied it), or a concurrent first update created it since
            // the filter ran (then the next round matches it).
            for _ in 0..MAX_FIRST_UPDATE_RACES {
                match self
                    .collections
                    .counters
                    .update_one(filter.clone(), update.clone())
                    .upsert(true)
                    .await
                {
                    Ok(_) => return Ok(()),
                    Err(error) if is_duplicate_key(&error) => {
                        if self.holds_op(post, op).await? {
                            return Ok(());
                        }
                    }
                    Err(error) => return Err(error.into()),
                }
            }
            Err(crate::Error::Contention {
                attempts: MAX_FIRST_UPDATE_RACES,
            })
        })
        .await
    }

    /// Reverses `$inc` `op` of `delta` if it was applied (the document holds `op`), and forgets
    /// `op`: idempotent, exact whether or not the `$inc` ran.
    async fn reverse_increment(
        &self,
        post: PostId,
        field: &str,
        delta: i64,
        op: ObjectId,
    ) -> Result<()> {
        retry(&self.settings.retry, "counter undo", || async {
            self.collections
                .counters
                .update_one(
                    doc! { "_id": post.0, "ops": op },
                    doc! { "$inc": { field: -delta }, "$pull": { "ops": op } },
                )
                .await?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn holds_op(&self, post: PostId, op: ObjectId) -> Result<bool> {
        Ok(self
            .collections
            .counters
            .find_one(doc! { "_id": post.0, "ops": op })
            .projection(doc! { "_id": 1 })
            .await?
            .is_some())
    }
}

fn counter_lock(post: PostId) -> String {
    format!("counters:{}", post.0.to_hex())
}
