//! Feeds: ordered lists of post ids, built in the background, read a page at a time.
//!
//! A feed is one document `{_id: key, items: [{post, score}, ..]}` holding at most
//! `max_feed_len` items, highest score first. A page reads the feed document (one `find` by
//! `_id`) and then the page's posts (one `find` with `$in`), and returns them in feed order:
//! exactly 2 commands, whatever the page size.
//!
//! - **latest** (`"latest"`) and **per-user** feeds (`"user:<id>"`) are written when a post's
//!   `post_created` job runs: the post goes into "latest", its author's own feed and the feed of
//!   each of the author's followers ([`crate::graph::FollowSource::followers_of`]).
//!   [`FeedStore::rebuild_user_feed`] refills a user's feed from whom they follow.
//! - **hot** (`"hot"`) holds the posts created within the hot window (default 24 hours) that
//!   were liked within it, by likes in the window; [`FeedStore::refresh_hot_feed`] recomputes it
//!   (run it on a timer, or queue it with [`FeedStore::schedule_hot_refresh`]).
//!
//! On MongoDB a post enters many feeds with one unordered `insert` (creating missing feeds) and
//! one `update` of all of them: `$push` with `$each`, `$sort` and `$slice` keeps each feed sorted
//! and bounded atomically, and a filter `items.post: {$ne: post}` makes a repeated job change
//! nothing. FerretDB 1.x ignores `$sort`/`$slice` in `$push`, does not match `items.post`, and its
//! updates are not atomic, so there each group of up to 50 feeds is locked (leased lock
//! documents), read, merged in memory and written back with `$set`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::cursor;
use super::ranking::Candidate;
use super::{FeedStore, Post, PostId};
use crate::bson_ext;
use crate::jobs::{Job, JobHandler};
use crate::Payload;
use crate::{Error, Page, PageRequest, Result};

pub(super) const JOB_POST_CREATED: &str = "post_created";
pub(super) const JOB_PROPAGATE: &str = "propagate";
pub(super) const JOB_REFRESH_HOT: &str = "refresh_hot";

/// Feeds merged per locked group where updates are not atomic (FerretDB's update limit).
const LOCKED_GROUP: usize = 50;
/// Feeds created and updated per command on MongoDB.
const ATOMIC_GROUP: usize = 1000;

/// Which feed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FeedKind {
    /// Every post, newest first.
    Latest,
    /// The most liked posts of the hot window.
    Hot,
    /// A user's home feed: their posts and those of whom they follow.
    User(String),
}

impl FeedKind {
    /// The feed document's `_id`: `latest`, `hot` or `user:<id>`.
    pub fn key(&self) -> String {
        match self {
            FeedKind::Latest => "latest".to_owned(),
            FeedKind::Hot => "hot".to_owned(),
            FeedKind::User(user) => format!("user:{user}"),
        }
    }
}

/// One entry of a feed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeedItem {
    /// The post.
    pub post: PostId,
    /// Its score from the store's [`super::Ranking`]; higher first.
    pub score: f64,
}

/// Highest score first, ties to the larger (newer) post id.
fn sort_items(items: &mut [FeedItem]) {
    items.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.post.cmp(&a.post)));
}

/// Whether `item` comes strictly after the item keyed `(score, post)` in feed order.
fn comes_after(item: &FeedItem, (score, post): (f64, PostId)) -> bool {
    match item.score.total_cmp(&score) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => item.post < post,
        std::cmp::Ordering::Greater => false,
    }
}

/// How long a fan-out job waits for its post to appear (its job is queued before the post is
/// inserted): until then a missing post is an error, retried with back-off; after it, the post is
/// taken as never stored (or deleted) and the job is dropped.
const MISSING_POST_GRACE: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// The items of a feed document read from `collection`.
fn decode_items(collection: &str, feed: Option<Document>) -> Result<Vec<FeedItem>> {
    let Some(mut feed) = feed else {
        return Ok(Vec::new());
    };
    match feed.remove("items") {
        Some(items) => bson_ext::decode_with_id(collection, feed.get("_id").cloned(), items),
        None => Ok(Vec::new()),
    }
}

impl<X: Payload> FeedStore<X> {
    /// One page of a feed, in feed order: one `find` of the feed, one `find` of its posts with
    /// `$in` (none when the page is empty). Posts deleted since they entered the feed are left
    /// out. A user's feed that does not exist yet costs one more `find`, to tell a user without
    /// a feed (an empty page) from an unknown one.
    ///
    /// Pages are stable while posts arrive: a new post does not shift or repeat what follows the
    /// cursor. A feed recomputed as a whole ([`FeedStore::refresh_hot_feed`],
    /// [`FeedStore::rebuild_user_feed`]) gets a new generation, and its scores may change, so a
    /// cursor of an older generation is refused: start again from the first page.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidCursor`] for a cursor not made by a feed page (before any command) or
    /// made before the feed was recomputed; [`Error::InvalidPageLimit`], [`Error::Blank`] for
    /// a blank user id, before any command; [`Error::NotFound`] for an unknown user.
    pub async fn feed_page(&self, feed: &FeedKind, page: PageRequest) -> Result<Page<Post<X>>> {
        page.check()?;
        if let FeedKind::User(user) = feed {
            crate::validate::user_id("user", user)?;
        }
        let after = match &page.after {
            Some(cursor) => Some(cursor::feed_key(cursor)?),
            None => None,
        };
        let (mut items, generation) = match self.feed_document(feed).await? {
            Some(found) => found,
            None => {
                if let FeedKind::User(user) = feed {
                    self.user(user).await?;
                }
                (Vec::new(), 0)
            }
        };
        if let Some((cursor_generation, key)) = after {
            if cursor_generation != generation {
                return Err(Error::InvalidCursor {
                    reason: "the feed was recomputed since this cursor was made; start again \
                             from the first page"
                        .to_owned(),
                });
            }
            items.retain(|item| comes_after(item, key));
        }
        let items = Page::from_overfetch(items, page.limit, |last| {
            cursor::after_feed_item(generation, last.score, last.post)
        });
        let ids: Vec<PostId> = items.items.iter().map(|item| item.post).collect();
        let posts = self.posts_in_order(&ids).await?;
        Ok(Page {
            items: posts,
            next: items.next,
        })
    }

    /// A feed's entries, highest score first (one `find`); empty for a feed not written yet.
    pub async fn feed_items(&self, feed: &FeedKind) -> Result<Vec<FeedItem>> {
        Ok(self
            .feed_document(feed)
            .await?
            .map(|(items, _)| items)
            .unwrap_or_default())
    }

    /// A feed's sorted entries and generation, if the feed document exists (one `find`).
    async fn feed_document(&self, feed: &FeedKind) -> Result<Option<(Vec<FeedItem>, i64)>> {
        let Some(found) = self
            .collections
            .feeds
            .find_one(doc! { "_id": feed.key() })
            .await?
        else {
            return Ok(None);
        };
        let generation = crate::bson_ext::integer(&found, "generation").unwrap_or(0);
        let mut items = decode_items(self.collections.feeds.name(), Some(found))?;
        sort_items(&mut items);
        Ok(Some((items, generation)))
    }

    /// Recomputes the "hot" feed: the posts created within the hot window, ranked by their
    /// likes within it (by default). One `aggregate` of the window's likes of posts created in
    /// the window (each like stores its post's `created`; index `{created: 1, at: 1}`), keeping
    /// the `4 × max_feed_len` most liked; one `find` of those posts; one write of the feed.
    /// Returns the feed's length.
    pub async fn refresh_hot_feed(&self) -> Result<usize> {
        let now = self.clock.now();
        let window = self.settings.hot_window.as_millis() as i64;
        let since = bson::DateTime::from_millis(now.timestamp_millis() - window);
        let candidates = (self.settings.max_feed_len * 4) as i64;
        let counts: Vec<Document> = self
            .collections
            .likes
            .aggregate([
                // Likes carry their post's `created`: only the window's posts are ranked, so
                // old posts liked recently cannot crowd them out of the candidates.
                doc! { "$match": {
                    "created": { "$gte": since, "$lte": now },
                    "at": { "$gte": since, "$lte": now },
                    // A like an interrupted unlike marked "removing" is gone already.
                    "removing": { "$exists": false },
                } },
                doc! { "$group": { "_id": "$post", "likes": { "$sum": 1 } } },
                doc! { "$sort": { "likes": -1, "_id": -1 } },
                doc! { "$limit": candidates },
            ])
            .await?
            .try_collect()
            .await?;
        let mut likes = HashMap::with_capacity(counts.len());
        for count in &counts {
            if let Ok(post) = count.get_object_id("_id") {
                let n = crate::bson_ext::count(count, "likes");
                likes.insert(post, n);
            }
        }
        let ids: Vec<ObjectId> = likes.keys().copied().collect();
        let filter = doc! { "_id": { "$in": ids }, "created": { "$gte": since, "$lte": now } };
        let feed = FeedKind::Hot;
        let items = self
            .scored_posts(filter, None, &feed, |post| {
                likes.get(&post.0).copied().unwrap_or(0)
            })
            .await?;
        let len = items.len();
        self.replace_feed(&feed, items).await?;
        Ok(len)
    }

    /// Queues a refresh of the "hot" feed for a worker (one `insert`).
    pub async fn schedule_hot_refresh(&self) -> Result<()> {
        self.jobs.enqueue(JOB_REFRESH_HOT, Document::new()).await?;
        Ok(())
    }

    /// Rebuilds `user`'s feed from the newest posts of `user` and whom they follow
    /// ([`crate::graph::FollowSource::followees_of`]): for a new or returning user, or after follows
    /// changed. One `find` of posts and one write of the feed (plus the lock where updates are
    /// not atomic). Returns the feed's length.
    ///
    /// A post whose fan-out runs while the feed is rebuilt can be left out; it is back at the
    /// next rebuild.
    ///
    /// # Errors
    ///
    /// [`Error::Blank`] for an empty user id, [`Error::NotFound`] for an unknown user
    /// (one `find` first), both before anything is written; errors of the follow source;
    /// [`Error::InvalidConfig`] for a non-finite score from the ranking.
    pub async fn rebuild_user_feed(&self, user: &str) -> Result<usize> {
        crate::validate::user_id("user", user)?;
        self.user(user).await?;
        let mut authors = self.follows.followees_of(user).await?;
        authors.push(user.to_owned());
        let feed = FeedKind::User(user.to_owned());
        let filter = doc! { "created_by.id": { "$in": authors } };
        let limit = Some(self.settings.max_feed_len as i64);
        let items = self.scored_posts(filter, limit, &feed, |_| 0).await?;
        let len = items.len();
        self.replace_feed(&feed, items).await?;
        Ok(len)
    }

    /// The posts matching `filter` (newest first, at most `limit`), scored for `feed`, sorted
    /// and cut to the feed's length.
    async fn scored_posts(
        &self,
        filter: Document,
        limit: Option<i64>,
        feed: &FeedKind,
        recent_likes: impl Fn(PostId) -> u64,
    ) -> Result<Vec<FeedItem>> {
        let now = self.clock.now();
        let mut find = self
            .collections
            .posts
            .find(filter)
            .sort(doc! { "created": -1, "_id": -1 })
            .projection(doc! { "_id": 1, "created": 1, "created_by.id": 1 });
        if let Some(limit) = limit {
            find = find.limit(limit);
        }
        let found: Vec<Document> = find.await?.try_collect().await?;
        let mut items = Vec::with_capacity(found.len());
        for post in &found {
            let candidate = candidate_of(self.collections.posts.name(), post, now, &recent_likes)?;
            items.push(FeedItem {
                post: candidate.post,
                score: self.score(feed, &candidate)?,
            });
        }
        sort_items(&mut items);
        items.truncate(self.settings.max_feed_len);
        Ok(items)
    }

    /// The ranking's score, refused unless finite (a NaN or infinity cannot be paged).
    fn score(&self, feed: &FeedKind, candidate: &Candidate) -> Result<f64> {
        let score = self.ranking.score(feed, candidate);
        if !score.is_finite() {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "the ranking gave post {} the non-finite score {score} in feed `{}`",
                    candidate.post,
                    feed.key()
                ),
            });
        }
        Ok(score)
    }

    /// Puts a new post into "latest", its author's feed and their followers' feeds. Idempotent.
    ///
    /// The job is queued before its post is inserted: a post not found while the job is younger
    /// than [`MISSING_POST_GRACE`] (by the post's `created` in the payload) is an error, so the
    /// queue retries it; after that the job is dropped (the post was never stored, or deleted).
    async fn fan_out_post(&self, post: PostId, created: Option<bson::DateTime>) -> Result<()> {
        let found = self
            .collections
            .posts
            .find_one(doc! { "_id": post.0 })
            .projection(doc! { "_id": 1, "created": 1, "created_by.id": 1 })
            .await?;
        let Some(found) = found else {
            let now = self.clock.now().timestamp_millis();
            let young = created.is_some_and(|created| {
                now - created.timestamp_millis() < MISSING_POST_GRACE.as_millis() as i64
            });
            if young {
                return Err(super::posts::not_found_post(post));
            }
            return Ok(());
        };
        let candidate = candidate_of(
            self.collections.posts.name(),
            &found,
            self.clock.now(),
            &|_| 0,
        )?;
        let mut feeds = vec![FeedKind::Latest, FeedKind::User(candidate.author.clone())];
        for follower in self.follows.followers_of(&candidate.author).await? {
            let feed = FeedKind::User(follower);
            // A follow source may name a follower twice: one lock key per feed.
            if !feed_has_no_user(&feed) && !feeds.contains(&feed) {
                feeds.push(feed);
            }
        }
        let mut entries = Vec::with_capacity(feeds.len());
        for feed in &feeds {
            let score = self.score(feed, &candidate)?;
            entries.push((feed.key(), FeedItem { post, score }));
        }
        self.merge_into_feeds(entries).await
    }

    /// Adds each `(feed key, item)`, keeping every feed sorted, bounded and free of repeats.
    async fn merge_into_feeds(&self, entries: Vec<(String, FeedItem)>) -> Result<()> {
        let atomic = async {
            // Feeds that get the same item share one update.
            let mut groups: BTreeMap<(u64, PostId), Vec<String>> = BTreeMap::new();
            for (key, item) in &entries {
                groups
                    .entry((item.score.to_bits(), item.post))
                    .or_default()
                    .push(key.clone());
            }
            for ((bits, post), keys) in groups {
                let item = FeedItem {
                    post,
                    score: f64::from_bits(bits),
                };
                for chunk in keys.chunks(ATOMIC_GROUP) {
                    self.push_atomically(chunk, item).await?;
                }
            }
            Ok(())
        };
        let locked = async {
            for chunk in entries.chunks(LOCKED_GROUP) {
                let keys: Vec<String> = chunk.iter().map(|(key, _)| key.clone()).collect();
                let lock_keys: Vec<String> = keys.iter().map(|key| feed_lock(key)).collect();
                self.serialized(&lock_keys, self.merge_locked(chunk, &keys))
                    .await?;
            }
            Ok(())
        };
        self.backend.atomic_or_locked(atomic, locked).await
    }

    /// MongoDB: one `insert` creating missing feeds, one `update` pushing the item into all.
    async fn push_atomically(&self, keys: &[String], item: FeedItem) -> Result<()> {
        let empty = keys.iter().map(|key| doc! { "_id": key, "items": [] });
        if let Err(error) = self
            .collections
            .feeds
            .insert_many(empty)
            .ordered(false)
            .await
        {
            if !crate::update_batch::is_duplicate_key(&error) {
                return Err(error.into());
            }
        }
        let item_bson = bson::to_bson(&item)?;
        self.collections
            .feeds
            .update_many(
                doc! { "_id": { "$in": keys }, "items.post": { "$ne": item.post.0 } },
                doc! { "$push": { "items": {
                    "$each": [item_bson],
                    "$sort": { "score": -1, "post": -1 },
                    "$slice": self.settings.max_feed_len as i64,
                } } },
            )
            .await?;
        Ok(())
    }

    /// Where updates are not atomic, under the feeds' locks: read, merge, write back.
    async fn merge_locked(&self, entries: &[(String, FeedItem)], keys: &[String]) -> Result<()> {
        let found: Vec<Document> = self
            .collections
            .feeds
            .find(doc! { "_id": { "$in": keys } })
            .await?
            .try_collect()
            .await?;
        let mut feeds: HashMap<String, Vec<FeedItem>> = HashMap::with_capacity(keys.len());
        for mut feed in found {
            let key = feed.get_str("_id").unwrap_or_default().to_owned();
            let items = decode_items(
                self.collections.feeds.name(),
                Some(std::mem::take(&mut feed)),
            )?;
            feeds.insert(key, items);
        }
        let mut batch = self.backend.update_batch(self.collections.feeds.name());
        for (key, item) in entries {
            let items = feeds.entry(key.clone()).or_default();
            items.retain(|existing| existing.post != item.post);
            items.push(*item);
            sort_items(items);
            items.truncate(self.settings.max_feed_len);
            batch.push(
                doc! { "_id": key },
                doc! { "$set": { "items": bson::to_bson(items)? } },
                true,
            )?;
        }
        let outcome = batch.run().await?;
        if outcome.suspects().next().is_some() {
            // Under the locks nobody else writes these feeds: report it, the job is retried.
            return Err(Error::Contention { attempts: 1 });
        }
        Ok(())
    }

    /// Sets a feed's whole list and starts a new generation of its cursors (under its lock
    /// where updates are not atomic).
    async fn replace_feed(&self, feed: &FeedKind, items: Vec<FeedItem>) -> Result<()> {
        let key = feed.key();
        let items = bson::to_bson(&items)?;
        self.serialized(&[feed_lock(&key)], async {
            self.collections
                .feeds
                .update_one(
                    doc! { "_id": &key },
                    doc! { "$set": { "items": items }, "$inc": { "generation": 1_i64 } },
                )
                .upsert(true)
                .await?;
            Ok(())
        })
        .await
    }

    async fn run_job(&self, job: &Job) -> Result<()> {
        match job.kind.as_str() {
            JOB_POST_CREATED => {
                let post = job
                    .payload
                    .get_object_id("post")
                    .map_err(|_| bad_job(job))?;
                let created = job.payload.get_datetime("created").ok().copied();
                self.fan_out_post(PostId(post), created).await
            }
            JOB_PROPAGATE => {
                let propagation = job
                    .payload
                    .get_object_id("propagation")
                    .map_err(|_| bad_job(job))?;
                // Batches stop at the claim's deadline, so the job never outlives its lease by
                // more than one batch; the rest goes to a new job, resuming from the record.
                match self
                    .propagate_within(propagation, None, job.deadline())
                    .await
                {
                    Ok(status) if !status.done => {
                        self.jobs
                            .enqueue(JOB_PROPAGATE, doc! { "propagation": propagation })
                            .await?;
                        Ok(())
                    }
                    Ok(_) | Err(Error::NotFound { .. }) => Ok(()),
                    Err(error) => Err(error),
                }
            }
            JOB_REFRESH_HOT => self.refresh_hot_feed().await.map(|_| ()),
            _ => Err(bad_job(job)),
        }
    }
}

/// The ranking input of `post`, read from the collection `posts`.
fn candidate_of(
    posts: &str,
    post: &Document,
    now: bson::DateTime,
    recent_likes: &impl Fn(PostId) -> u64,
) -> Result<Candidate> {
    let malformed = || {
        bson_ext::corrupt(
            posts,
            post.get("_id").cloned(),
            "a post lacks _id, created or created_by.id",
        )
    };
    let id = PostId(post.get_object_id("_id").map_err(|_| malformed())?);
    let created = *post.get_datetime("created").map_err(|_| malformed())?;
    let author = post
        .get_document("created_by")
        .and_then(|chunk| chunk.get_str("id"))
        .map_err(|_| malformed())?
        .to_owned();
    Ok(Candidate {
        post: id,
        author,
        created,
        recent_likes: recent_likes(id),
        now,
    })
}

fn bad_job(job: &Job) -> Error {
    Error::InvalidConfig {
        reason: format!("feed job {} of kind `{}` cannot be run", job.id, job.kind),
    }
}

/// A user feed of a blank user id (from a follow source), which no one reads.
fn feed_has_no_user(feed: &FeedKind) -> bool {
    matches!(feed, FeedKind::User(user) if crate::validate::is_blank(user))
}

fn feed_lock(key: &str) -> String {
    format!("feed:{key}")
}

/// Runs the store's jobs; see [`FeedStore::start_worker`].
pub(super) struct FeedJobs<X>(pub(super) FeedStore<X>);

impl<X> fmt::Debug for FeedJobs<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FeedJobs").field(&self.0).finish()
    }
}

#[async_trait]
impl<X: Payload> JobHandler for FeedJobs<X> {
    async fn handle(&self, job: &Job) -> Result<()> {
        self.0.run_job(job).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_sort_by_score_then_newer_post() {
        let (a, b, c) = (PostId::new(), PostId::new(), PostId::new());
        let mut items = vec![
            FeedItem {
                post: a,
                score: 1.0,
            },
            FeedItem {
                post: b,
                score: 2.0,
            },
            FeedItem {
                post: c,
                score: 1.0,
            },
        ];
        sort_items(&mut items);
        let order: Vec<PostId> = items.iter().map(|item| item.post).collect();
        assert_eq!(order, [b, c, a]);
        assert!(comes_after(&items[1], (2.0, b)));
        assert!(comes_after(&items[2], (1.0, c)));
        assert!(!comes_after(&items[1], (1.0, c)));
        assert!(!comes_after(&items[0], (1.0, a)));
    }
}
