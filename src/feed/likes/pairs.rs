//! Likes and unlikes of a (post, user) pair, journaled on the like document.

use std::future::{Future, IntoFuture};

use bson::oid::ObjectId;
use bson::{doc, Document};

use super::counters::CounterChange;
use super::{pending_op, Likes, Stored, MAX_FIRST_UPDATE_RACES, PENDING, REMOVING};
use crate::backend::update_batch::is_duplicate_key;
use crate::bson_ext;
use crate::error::Result;
use crate::feed::state::not_found_post;
use crate::feed::types::PostId;
use crate::notifications::outbox::Change;
use crate::notifications::{Activity, Kind as NotificationKind};
use crate::observe::spans::Op;

/// A (post, user) pair a like or an unlike has checked.
struct CheckedPair {
    /// The pair's like `_id`.
    id: Document,
    /// When the post was created.
    created: bson::DateTime,
    /// The post author's user id.
    author: String,
}

impl Likes {
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
        self.change_pair(
            Op::FeedLikesLike,
            post,
            user,
            Change::Notify,
            |checked| async move {
                let CheckedPair { id, created, .. } = checked;
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
                let counted = CounterChange::likes(post, 1, op);
                // Undone, so the like is not left uncounted; if the undo fails, the like keeps its
                // "not yet counted" mark and whoever finds it next counts it.
                self.count_or_undo(
                    self.increment_unlocked(counted),
                    counted,
                    "like undo",
                    || self.inner.collections.likes.delete_one(mine.clone()),
                )
                .await?;
                // Counted: the mark goes. If this fails the like is counted already, and finishing
                // it again applies `op` once (the counter holds it).
                self.mark_counted(&mine).await?;
                Ok(true)
            },
        )
        .await
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
        self.change_pair(
            Op::FeedLikesUnlike,
            post,
            user,
            Change::Withdraw,
            |checked| async move {
                let pair = doc! { "_id": &checked.id, "post": post.0 };
                let op = ObjectId::new();
                let Some(marked) = self.mark_removing(post, &pair, op).await? else {
                    return Ok(false);
                };
                self.uncount(post, &pair, &marked, op).await?;
                self.delete_removed(&pair, op).await?;
                Ok(true)
            },
        )
        .await
    }

    /// Runs `change`, a like or an unlike of the pair (`post`, `user`), in `operation`'s span:
    /// the pair is checked first ([`Likes::check_pair`]), then `change` runs under the post's
    /// counter lock and returns whether it changed the pair. Then, on every call, new or
    /// repeated, the store's outbox (if it has a notifier) sends the like's notification or its
    /// withdrawal (`tell`): that is idempotent, so repeating a like or an unlike whose
    /// notification failed completes it.
    async fn change_pair<Fut>(
        &self,
        operation: Op,
        post: PostId,
        user: &str,
        tell: Change,
        change: impl FnOnce(CheckedPair) -> Fut,
    ) -> Result<bool>
    where
        Fut: Future<Output = Result<bool>>,
    {
        operation
            .span()
            .run(async move {
                let checked = self.check_pair(post, user).await?;
                let author = checked.author.clone();
                let changed = self.locked(post, change(checked)).await?;
                if let Some(outbox) = &self.inner.outbox {
                    outbox.send(tell, Self::liked(post, &author, user)).await;
                }
                Ok(changed)
            })
            .await
    }

    /// Runs `count`, the counter changes of a like or an unlike, the last of them `change`. If
    /// it fails, takes `change` back off the post's counter and, once that worked, undoes the
    /// like document's write with `undo` (a driver command retried as `what`) before returning
    /// the error. If the undo fails too, the like keeps its mark and whoever finds it next
    /// finishes it.
    async fn count_or_undo<T, F, A>(
        &self,
        count: impl Future<Output = Result<()>>,
        change: CounterChange,
        what: &'static str,
        undo: F,
    ) -> Result<()>
    where
        F: Fn() -> A,
        A: IntoFuture<Output = mongodb::error::Result<T>>,
    {
        let Err(error) = count.await else {
            return Ok(());
        };
        if self.reverse_increment(change).await.is_ok() {
            let _ = self.backend().command(what, undo).await;
        }
        Err(error)
    }

    /// The checks of a like or an unlike, before it writes anything: the user id, then the post
    /// and the user (one `find` each), [`crate::Error::NotFound`] for either unknown.
    async fn check_pair(&self, post: PostId, user: &str) -> Result<CheckedPair> {
        crate::validate::user_id("user", user)?;
        let (created, author) = self.post_created(post).await?;
        self.inner.chunk_of(user).await?;
        Ok(CheckedPair {
            id: doc! { "post": post.0, "user": user },
            created,
            author,
        })
    }

    /// Marks the like `pair` as being removed by unlike `op` (`findAndModify`): the like as it
    /// was, or `None` where there is nothing to unlike (no like, or one an interrupted unlike
    /// was removing, which this call finishes).
    async fn mark_removing(
        &self,
        post: PostId,
        pair: &Document,
        op: ObjectId,
    ) -> Result<Option<Document>> {
        let mut unmarked = pair.clone();
        unmarked.insert(REMOVING, doc! { "$exists": false });
        for _ in 0..MAX_FIRST_UPDATE_RACES {
            let before = self
                .backend()
                .command("unlike", || {
                    self.inner
                        .collections
                        .likes
                        .find_one_and_update(unmarked.clone(), doc! { "$set": { REMOVING: op } })
                })
                .await?;
            if let Some(before) = before {
                return Ok(Some(before));
            }
            // Nothing to mark: no like, or one being removed (by this call, whose reply was
            // lost, or by an interrupted unlike, which this one finishes).
            let stored = self
                .backend()
                .command("unlike", || {
                    self.inner.collections.likes.find_one(pair.clone())
                })
                .await?;
            match stored {
                None => return Ok(None),
                Some(stored) if stored.get_object_id(REMOVING).ok() == Some(op) => {
                    return Ok(Some(stored));
                }
                Some(stored) if stored.contains_key(REMOVING) => {
                    self.finish_like(post, &stored).await?;
                    return Ok(None);
                }
                // Put back by an unlike that failed meanwhile: the next round marks it.
                Some(_) => {}
            }
        }
        Err(crate::Error::contention("like", MAX_FIRST_UPDATE_RACES))
    }

    /// Takes the `marked` like off the post's counter (counting it first if it never was); on
    /// failure, puts the like back as it was.
    async fn uncount(
        &self,
        post: PostId,
        pair: &Document,
        marked: &Document,
        op: ObjectId,
    ) -> Result<()> {
        let uncounted = CounterChange::likes(post, -1, op);
        let counted = async {
            // A like never counted is counted first (once, with its own op id).
            if let Some(liked) = pending_op(marked) {
                self.increment_unlocked(CounterChange::likes(post, 1, liked))
                    .await?;
            }
            self.increment_unlocked(uncounted).await
        };
        let mut mine = pair.clone();
        mine.insert(REMOVING, op);
        // Put back as it was; if that fails too, the mark stays and whoever finds the like next
        // removes and counts it.
        self.count_or_undo(counted, uncounted, "unlike undo", || {
            self.inner
                .collections
                .likes
                .update_one(mine.clone(), doc! { "$unset": { REMOVING: "" } })
        })
        .await
    }

    /// Whether `user` likes `post` (one `find`). A like being removed by an interrupted unlike
    /// reads as absent; one stored but not yet counted, as present.
    pub async fn is_liked(&self, post: PostId, user: &str) -> Result<bool> {
        Op::FeedLikesIsLiked
            .span()
            .run(async move {
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
            })
            .await
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
        self.repair(Op::FeedLikesSettle, post, || self.settle_unlocked(post))
            .await
    }

    pub(super) async fn settle_unlocked(&self, post: PostId) -> Result<usize> {
        let filter = doc! {
            "post": post.0,
            "$or": [ { PENDING: true }, { REMOVING: { "$exists": true } } ],
        };
        let marked: Vec<Document> = self
            .backend()
            .find_all("settle likes", || {
                self.inner.collections.likes.find(filter.clone())
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
        self.backend()
            .retry("like", || async {
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
            self.increment_unlocked(CounterChange::likes(post, 1, op))
                .await?;
        }
        if let Ok(removing) = like.get_object_id(REMOVING) {
            self.increment_unlocked(CounterChange::likes(post, -1, removing))
                .await?;
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
        self.backend()
            .command("like counted", || {
                self.inner
                    .collections
                    .likes
                    .update_one(filter.clone(), doc! { "$unset": { PENDING: "" } })
            })
            .await
            .map(drop)
    }

    /// Deletes the like of `pair` that unlike `op` marked "removing" (once it is uncounted).
    async fn delete_removed(&self, pair: &Document, op: ObjectId) -> Result<()> {
        let mut filter = pair.clone();
        filter.insert(REMOVING, op);
        self.backend()
            .command("unlike", || {
                self.inner.collections.likes.delete_one(filter.clone())
            })
            .await
            .map(drop)
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
    pub(super) async fn check_post_exists(&self, id: PostId) -> Result<()> {
        self.inner
            .collections
            .posts
            .find_one(doc! { "_id": id.0 })
            .projection(doc! { "_id": 1 })
            .await?
            .map(|_| ())
            .ok_or_else(|| not_found_post(id))
    }

    pub(super) async fn holds_op(&self, post: PostId, op: ObjectId) -> Result<bool> {
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
