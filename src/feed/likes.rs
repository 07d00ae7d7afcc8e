//! The [`Likes`] handle: idempotent likes, and the per-post counters (likes, comments, points)
//! in their own document.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::inner::{not_found_post, Inner};
use super::types::PostId;
use crate::notifications::{Activity, Kind as NotificationKind};
use crate::update_batch::is_duplicate_key;
use crate::{bson_ext, Result};

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

/// Likes and a post's counters: like, unlike, read the counters, repair them. From
/// [`super::FeedStore::likes`]; cheap to clone.
///
/// ```no_run
/// # use mongo_social::{FeedStore, PostId};
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
/// being removed), so the count is exact under any concurrency. Where updates are not atomic
/// (FerretDB 1.x), a like's or unlike's writes run under a leased lock on the post's counter
/// (+2 commands).
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
/// Every write here is retried on transient failures (see [`crate::RetryPolicy`]) and is
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
#[derive(Clone)]
#[must_use = "a handle does nothing until one of its methods is called"]
pub struct Likes {
    inner: Arc<Inner>,
}

impl fmt::Debug for Likes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Likes").field(&self.inner).finish()
    }
}

impl Likes {
    pub(super) fn new(inner: Arc<Inner>) -> Self {
        Self { inner }
    }

    /// Runs `work` holding `post`'s counter lock where updates are not atomic.
    async fn locked<T>(&self, post: PostId, work: impl Future<Output = Result<T>>) -> Result<T> {
        self.inner
            .backend
            .exclusive(&[counter_lock(post)], work)
            .await
    }

    /// Runs `run` under the store's retry policy; `run` must be idempotent.
    async fn retry<T, F, Fut>(&self, operation: &'static str, run: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.inner.backend.retry(operation, run).await
    }

    /// `user` likes `post`; returns `false` (and counts nothing) if they already did. On MongoDB:
    /// `find` (post), `find` (user), `insert` (like), `update` (`$inc`), `update` (the like
    /// marked counted) — 5 commands; 7 where updates are not atomic (the like and its `$inc`
    /// under the post's counter lock). A repeated like: `find`, `find`, `insert` (a duplicate),
    /// `find` (the stored like, to finish it if a failure interrupted it) — 4 commands; 6 locked.
    ///
    /// The like stores the post's `created`, so the "hot" feed can pick the window's posts first.
    ///
    /// A like or unlike of the same pair that a failure interrupted is finished first (see
    /// [`Likes`]): a like stored but not yet counted is counted, and this call returns
    /// `false`; a like being removed is removed and counted, then this like is stored.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank user id, [`crate::Error::NotFound`] for an
    /// unknown post or user, before anything is written. If the `$inc` fails, the like is
    /// deleted again before the error is returned, so a retry counts it; if that fails too, the
    /// like stays marked "not yet counted" and the next like or unlike of the pair (or
    /// [`Likes::settle`]) counts it.
    pub async fn like(&self, post: PostId, user: &str) -> Result<bool> {
        crate::validate::user_id("user", user)?;
        let (created, author) = self.post_created(post).await?;
        self.inner.chunk_of(user).await?;
        let id = doc! { "post": post.0, "user": user };
        let at = self.inner.clock.now();
        let op = ObjectId::new();
        let like = doc! {
            "_id": &id,
            "post": post.0,
            "user": user,
            "at": at,
            "created": created,
            "op": op,
            PENDING: true,
        };
        let mine = doc! { "_id": &id, "post": post.0, "op": op };
        let liked = self
            .locked(post, async {
                let mut inserted = false;
                for _ in 0..MAX_FIRST_UPDATE_RACES {
                    match self.insert_like(post, &like, op).await? {
                        Stored::Mine => {
                            inserted = true;
                            break;
                        }
                        // Removed by an unlike that finished meanwhile: the next round stores it.
                        Stored::Gone => {}
                        Stored::Other(stored) => {
                            if self.finish_like(post, &stored).await? {
                                return Ok(false);
                            }
                            // It was being removed, and now is: the next round stores this like.
                        }
                    }
                }
                if !inserted {
                    return Err(crate::Error::contention("like", MAX_FIRST_UPDATE_RACES));
                }
                if let Err(error) = self.increment_unlocked(post, "likes", 1, op).await {
                    // Undone, so the like is not left uncounted; if the undo fails, the like keeps
                    // its "not yet counted" mark and whoever finds it next counts it.
                    if self.reverse_increment(post, "likes", 1, op).await.is_ok() {
                        let _ = self
                            .retry("like undo", || async {
                                Ok(self
                                    .inner
                                    .collections
                                    .likes
                                    .delete_one(mine.clone())
                                    .await?)
                            })
                            .await;
                    }
                    return Err(error);
                }
                // Counted: the mark goes. If this fails the like is counted already, and finishing
                // it again applies `op` once (the counter holds it).
                self.mark_counted(&mine).await?;
                Ok(true)
            })
            .await?;
        // On every call, new or repeated: the notification is idempotent, so repeating a like
        // whose notification failed completes it.
        if let Some(outbox) = &self.inner.outbox {
            outbox.notify(Self::liked(post, &author, user)).await;
        }
        Ok(liked)
    }

    /// `user` no longer likes `post`; returns `false` if they did not. `find` (post), `find`
    /// (user), `findAndModify` (the like marked "removing"), `update` (`$inc`), `delete` — 5
    /// commands on MongoDB, 7 where updates are not atomic (the removal and its `$inc` under the
    /// post's counter lock).
    ///
    /// An interrupted like or unlike of the pair is finished first (see [`Likes`]); a like
    /// that was stored but never counted is counted before it is uncounted, so it does not
    /// decrement the counter below its likes.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank user id, [`crate::Error::NotFound`] for an
    /// unknown post or user, before anything is written. If the `$inc` fails, the like is put
    /// back before the error is returned, so a retry counts it; if that fails too, the like
    /// stays marked "removing" (and reads as absent) and the next like or unlike of the pair (or
    /// [`Likes::settle`]) removes and counts it.
    pub async fn unlike(&self, post: PostId, user: &str) -> Result<bool> {
        crate::validate::user_id("user", user)?;
        let (_, author) = self.post_created(post).await?;
        self.inner.chunk_of(user).await?;
        let id = doc! { "post": post.0, "user": user };
        let op = ObjectId::new();
        let unliked = self
            .locked(post, async {
                let pair = doc! { "_id": &id, "post": post.0 };
                let mut unmarked = pair.clone();
                unmarked.insert(REMOVING, doc! { "$exists": false });
                let mut marked = None;
                for _ in 0..MAX_FIRST_UPDATE_RACES {
                    let before = self
                        .retry("unlike", || async {
                            Ok(self
                                .inner
                                .collections
                                .likes
                                .find_one_and_update(
                                    unmarked.clone(),
                                    doc! { "$set": { REMOVING: op } },
                                )
                                .await?)
                        })
                        .await?;
                    if let Some(before) = before {
                        marked = Some(before);
                        break;
                    }
                    // Nothing to mark: no like, or one being removed (by this call, whose reply was
                    // lost, or by an interrupted unlike, which this one finishes).
                    let stored = self
                        .retry("unlike", || async {
                            Ok(self.inner.collections.likes.find_one(pair.clone()).await?)
                        })
                        .await?;
                    match stored {
                        None => return Ok(false),
                        Some(stored) if stored.get_object_id(REMOVING).ok() == Some(op) => {
                            marked = Some(stored);
                            break;
                        }
                        Some(stored) if stored.contains_key(REMOVING) => {
                            self.finish_like(post, &stored).await?;
                            return Ok(false);
                        }
                        // Put back by an unlike that failed meanwhile: the next round marks it.
                        Some(_) => {}
                    }
                }
                let Some(marked) = marked else {
                    return Err(crate::Error::contention("like", MAX_FIRST_UPDATE_RACES));
                };
                let counted = async {
                    // A like never counted is counted first (once, with its own op id).
                    if let Some(liked) = pending_op(&marked) {
                        self.increment_unlocked(post, "likes", 1, liked).await?;
                    }
                    self.increment_unlocked(post, "likes", -1, op).await
                };
                if let Err(error) = counted.await {
                    // Put back as it was; if that fails too, the mark stays and whoever finds the
                    // like next removes and counts it.
                    if self.reverse_increment(post, "likes", -1, op).await.is_ok() {
                        let mut mine = pair.clone();
                        mine.insert(REMOVING, op);
                        let _ = self
                            .retry("unlike undo", || async {
                                Ok(self
                                    .inner
                                    .collections
                                    .likes
                                    .update_one(mine.clone(), doc! { "$unset": { REMOVING: "" } })
                                    .await?)
                            })
                            .await;
                    }
                    return Err(error);
                }
                self.delete_removed(&pair, op).await?;
                Ok(true)
            })
            .await?;
        if let Some(outbox) = &self.inner.outbox {
            outbox.withdraw(Self::liked(post, &author, user)).await;
        }
        Ok(unliked)
    }

    /// Whether `user` likes `post` (one `find`). A like being removed by an interrupted unlike
    /// reads as absent; one stored but not yet counted, as present.
    pub async fn is_liked(&self, post: PostId, user: &str) -> Result<bool> {
        crate::validate::user_id("user", user)?;
        let found = self
            .inner
            .collections
            .likes
            .find_one(doc! {
                "_id": { "post": post.0, "user": user },
                "post": post.0,
                REMOVING: { "$exists": false },
            })
            .projection(doc! { "_id": 1 })
            .await?;
        Ok(found.is_some())
    }

    /// Finishes every like and unlike of `post` that a failure interrupted (see [`Likes`]): a
    /// like stored but not yet counted is counted, a like marked "removing" is removed and
    /// uncounted, each with the operation id stored on it, so nothing is applied twice.
    /// `find` (post), `find` (marked likes), then per marked like one or two `update`s and an
    /// `update` or `delete`. Returns how many likes it finished.
    ///
    /// Likes and unlikes finish what they find on their own pair; this is for a post whose
    /// interrupted pairs nobody touches again, before its counters are relied on. Where updates
    /// are not atomic it runs under the post's counter lock.
    ///
    /// # Errors
    ///
    /// [`crate::Error::NotFound`] for an unknown post.
    pub async fn settle(&self, post: PostId) -> Result<usize> {
        self.check_post_exists(post).await?;
        self.locked(post, self.settle_unlocked(post)).await
    }

    async fn settle_unlocked(&self, post: PostId) -> Result<usize> {
        let filter = doc! {
            "post": post.0,
            "$or": [ { PENDING: true }, { REMOVING: { "$exists": true } } ],
        };
        let marked: Vec<Document> = self
            .retry("settle likes", || async {
                Ok(self
                    .inner
                    .collections
                    .likes
                    .find(filter.clone())
                    .await?
                    .try_collect()
                    .await?)
            })
            .await?;
        for like in &marked {
            self.finish_like(post, like).await?;
        }
        Ok(marked.len())
    }

    /// Inserts like document `like` (operation `op`), or finds the like already stored for its
    /// pair. Retried: a retry that meets a duplicate key finds its own document (by `op`).
    async fn insert_like(&self, post: PostId, like: &Document, op: ObjectId) -> Result<Stored> {
        let pair = doc! { "_id": like.get("_id"), "post": post.0 };
        self.retry("like", || async {
            match self.inner.collections.likes.insert_one(like.clone()).await {
                Ok(_) => Ok(Stored::Mine),
                Err(error) if is_duplicate_key(&error) => {
                    match self.inner.collections.likes.find_one(pair.clone()).await? {
                        None => Ok(Stored::Gone),
                        Some(stored) if stored.get_object_id("op").ok() == Some(op) => {
                            Ok(Stored::Mine)
                        }
                        Some(stored) => Ok(Stored::Other(stored)),
                    }
                }
                Err(error) => Err(error.into()),
            }
        })
        .await
    }

    /// Finishes what a failure left on stored like `like`: counts it if it is marked "not yet
    /// counted" (with its own op id, so once), and removes and uncounts it if it is marked
    /// "removing" (with the unlike's op id). Returns whether the like is still there.
    async fn finish_like(&self, post: PostId, like: &Document) -> Result<bool> {
        let pair = doc! { "_id": like.get("_id"), "post": post.0 };
        let pending = pending_op(like);
        if let Some(op) = pending {
            self.increment_unlocked(post, "likes", 1, op).await?;
        }
        if let Ok(removing) = like.get_object_id(REMOVING) {
            self.increment_unlocked(post, "likes", -1, removing).await?;
            self.delete_removed(&pair, removing).await?;
            return Ok(false);
        }
        if let Some(op) = pending {
            let mut counted = pair;
            counted.insert("op", op);
            self.mark_counted(&counted).await?;
        }
        Ok(true)
    }

    /// Clears the "not yet counted" mark of the like `filter` selects.
    async fn mark_counted(&self, filter: &Document) -> Result<()> {
        self.retry("like counted", || async {
            self.inner
                .collections
                .likes
                .update_one(filter.clone(), doc! { "$unset": { PENDING: "" } })
                .await?;
            Ok(())
        })
        .await
    }

    /// Deletes the like of `pair` that unlike `op` marked "removing" (once it is uncounted).
    async fn delete_removed(&self, pair: &Document, op: ObjectId) -> Result<()> {
        let mut filter = pair.clone();
        filter.insert(REMOVING, op);
        self.retry("unlike", || async {
            self.inner
                .collections
                .likes
                .delete_one(filter.clone())
                .await?;
            Ok(())
        })
        .await
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
    }

    /// Sets a post's like count from its likes (after a crash between a like and its count, or
    /// a counter changed by hand): `find` (post), `find` (likes a failure interrupted, finished
    /// first as [`Likes::settle`] does), `count`, `update`.
    ///
    /// Where updates are not atomic (FerretDB 1.x), the count and its `$set` run under the
    /// post's counter lock, which likes and unlikes also hold from their insert (or removal) to
    /// their `$inc`: the result is exact under concurrent likes. On MongoDB likes take no lock, so
    /// a like inserted before the count whose `$inc` lands after the `$set` is counted twice (an
    /// unlike, missed once): run it when no like of the post is in flight (a repair after a
    /// crash, or a quiet period), or run it again afterwards.
    pub async fn recount(&self, post: PostId) -> Result<i64> {
        self.check_post_exists(post).await?;
        self.locked(post, async {
            // Interrupted likes are finished first: counting a like not yet counted would let
            // its own `$inc`, applied later, count it again.
            self.settle_unlocked(post).await?;
            let likes = self
                .inner
                .collections
                .likes
                .count_documents(doc! { "post": post.0, REMOVING: { "$exists": false } })
                .await? as i64;
            self.retry("recount", || async {
                self.inner
                    .collections
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
        let op = ObjectId::new();
        self.locked(post, self.increment_unlocked(post, field, delta, op))
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
        self.retry("counter update", || async {
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
                        if self.holds_op(post, op).await? {
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

    /// Reverses `$inc` `op` of `delta` if it was applied (the document holds `op`), and forgets
    /// `op`: idempotent, exact whether or not the `$inc` ran.
    async fn reverse_increment(
        &self,
        post: PostId,
        field: &str,
        delta: i64,
        op: ObjectId,
    ) -> Result<()> {
        self.retry("counter undo", || async {
            self.inner
                .collections
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

    /// The post's `created`, or [`crate::Error::NotFound`] (one `find`).
    /// The post's creation time and its author's id (one `find` of its `_id`).
    async fn post_created(&self, id: PostId) -> Result<(bson::DateTime, String)> {
        let posts = &self.inner.collections.posts;
        let found = posts
            .find_one(doc! { "_id": id.0 })
            .projection(doc! { "_id": 1, "created": 1, "created_by.id": 1 })
            .await?
            .ok_or_else(|| not_found_post(id))?;
        let corrupt = |what| bson_ext::corrupt(posts.name(), Some(id.0.into()), what);
        let created = found
            .get_datetime("created")
            .copied()
            .map_err(|_| corrupt("a post lacks created"))?;
        let author = found
            .get_document("created_by")
            .and_then(|by| by.get_str("id"))
            .map_err(|_| corrupt("a post lacks created_by.id"))?;
        Ok((created, author.to_owned()))
    }

    /// What a like of `post` (by `author`) by `user` tells the notifier.
    fn liked(post: PostId, author: &str, user: &str) -> Activity {
        Activity::new(author, NotificationKind::Like, post.to_string(), user)
    }

    /// Fails with [`crate::Error::NotFound`] unless the post exists (one `find` of its `_id`).
    async fn check_post_exists(&self, id: PostId) -> Result<()> {
        self.inner
            .collections
            .posts
            .find_one(doc! { "_id": id.0 })
            .projection(doc! { "_id": 1 })
            .await?
            .map(|_| ())
            .ok_or_else(|| not_found_post(id))
    }

    async fn holds_op(&self, post: PostId, op: ObjectId) -> Result<bool> {
        Ok(self
            .inner
            .collections
            .counters
            .find_one(doc! { "_id": post.0, "ops": op })
            .projection(doc! { "_id": 1 })
            .await?
            .is_some())
    }
}

/// The lock serializing changes of a post's counters where updates are not atomic.
fn counter_lock(post: PostId) -> String {
    format!("counters:{}", post.0.to_hex())
}
