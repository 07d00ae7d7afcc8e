//! Feed lists as stored, and every write to them: a post's fan-out (the `post_created` job),
//! the hot refresh (the `refresh_hot` job and [`super::Feeds::refresh_hot`]) and a user feed's
//! rebuild ([`super::Feeds::rebuild_user`]).
//!
//! A feed is one document `{_id: key, items: [{post, score}, ..], generation}` holding at most
//! `max_feed_len` items, highest score first. A post enters many feeds as one bounded sorted
//! merge ([`Backend::merge_into_sorted_lists`](crate::backend::Backend::merge_into_sorted_lists):
//! one `insert` creating missing feeds and one `update` of all of them where the server's
//! updates are atomic), free of repeats, so a repeated job changes nothing. A refresh or rebuild
//! replaces a feed's whole list and starts a new generation of its cursors.

use std::collections::HashMap;
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::ranking::Candidate;
use super::state::{not_found_post, FeedState};
use super::types::{FeedKind, PostId};
use crate::backend::SortedLists;
use crate::bson_ext;
use crate::error::{Error, Result};

/// How long a fan-out job waits for its post to appear (its job is queued before the post is
/// inserted): until then a missing post is an error, retried with back-off; after it, the post is
/// taken as never stored (or deleted) and the job is dropped.
const MISSING_POST_GRACE: Duration = Duration::from_secs(10 * 60);

/// One entry of a feed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeedItem {
    /// The post.
    pub post: PostId,
    /// Its score from the store's [`super::Ranking`]; higher first.
    pub score: f64,
}

/// Highest score first, ties to the larger (newer) post id.
pub(super) fn sort_items(items: &mut [FeedItem]) {
    items.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.post.cmp(&a.post)));
}

/// The items of a feed document read from `collection`.
pub(super) fn decode_items(collection: &str, feed: Option<Document>) -> Result<Vec<FeedItem>> {
    let Some(mut feed) = feed else {
        return Ok(Vec::new());
    };
    match feed.remove("items") {
        Some(items) => bson_ext::decode_with_id(collection, feed.get("_id").cloned(), items),
        None => Ok(Vec::new()),
    }
}

/// Puts a new post into "latest", its author's feed and their followers' feeds. Idempotent.
///
/// The job is queued before its post is inserted: a post not found while the job is younger
/// than [`MISSING_POST_GRACE`] (by the post's `created` in the payload) is an error, so the
/// queue retries it; after that the job is dropped (the post was never stored, or deleted).
pub(super) async fn fan_out_post(
    inner: &FeedState,
    post: PostId,
    created: Option<bson::DateTime>,
) -> Result<()> {
    let found = inner
        .collections
        .posts
        .find_one(doc! { "_id": post.0 })
        .projection(doc! { "_id": 1, "created": 1, "created_by.id": 1 })
        .await?;
    let Some(found) = found else {
        let now = inner.clock.now().timestamp_millis();
        let young = created.is_some_and(|created| {
            now - created.timestamp_millis() < MISSING_POST_GRACE.as_millis() as i64
        });
        if young {
            return Err(not_found_post(post));
        }
        return Ok(());
    };
    let candidate = candidate_of(
        inner.collections.posts.name(),
        &found,
        inner.clock.now(),
        &|_| 0,
    )?;
    let mut feeds = vec![FeedKind::Latest, FeedKind::User(candidate.author.clone())];
    for follower in inner.follows.followers_of(&candidate.author).await? {
        let feed = FeedKind::User(follower);
        // A follow source may name a follower twice: one lock key per feed.
        if !feed_has_no_user(&feed) && !feeds.contains(&feed) {
            feeds.push(feed);
        }
    }
    let mut entries = Vec::with_capacity(feeds.len());
    for feed in &feeds {
        let score = score(inner, feed, &candidate)?;
        entries.push((feed.key(), FeedItem { post, score }));
    }
    merge_into_feeds(inner, entries).await
}

/// Recomputes the "hot" feed; see [`super::Feeds::refresh_hot`]. Returns the feed's length.
pub(super) async fn refresh_hot(inner: &FeedState) -> Result<usize> {
    let now = inner.clock.now();
    let window = inner.settings.hot_window.as_millis() as i64;
    let since = bson::DateTime::from_millis(now.timestamp_millis() - window);
    let candidates = (inner.settings.max_feed_len * 4) as i64;
    let counts: Vec<Document> = inner
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
            let n = bson_ext::count(count, "likes");
            likes.insert(post, n);
        }
    }
    let ids: Vec<ObjectId> = likes.keys().copied().collect();
    let feed = FeedKind::Hot;
    // No `find` when nothing was liked: an empty `$in` on the shard key crashes a sharded
    // engine (see `src/server/family/`).
    let items = if ids.is_empty() {
        Vec::new()
    } else {
        let filter = doc! { "_id": { "$in": ids }, "created": { "$gte": since, "$lte": now } };
        scored_posts(inner, filter, None, &feed, |post| {
            likes.get(&post.0).copied().unwrap_or(0)
        })
        .await?
    };
    let len = items.len();
    replace_feed(inner, &feed, items).await?;
    Ok(len)
}

/// Rebuilds `user`'s feed; see [`super::Feeds::rebuild_user`]. Returns the feed's length.
pub(super) async fn rebuild_user(inner: &FeedState, user: &str) -> Result<usize> {
    crate::validate::user_id("user", user)?;
    inner.user(user).await?;
    let mut authors = inner.follows.followees_of(user).await?;
    authors.push(user.to_owned());
    let feed = FeedKind::User(user.to_owned());
    let filter = doc! { "created_by.id": { "$in": authors } };
    let limit = Some(inner.settings.max_feed_len as i64);
    let items = scored_posts(inner, filter, limit, &feed, |_| 0).await?;
    let len = items.len();
    replace_feed(inner, &feed, items).await?;
    Ok(len)
}

/// The posts matching `filter` (newest first, at most `limit`), scored for `feed`, sorted and
/// cut to the feed's length.
async fn scored_posts(
    inner: &FeedState,
    filter: Document,
    limit: Option<i64>,
    feed: &FeedKind,
    recent_likes: impl Fn(PostId) -> u64,
) -> Result<Vec<FeedItem>> {
    let now = inner.clock.now();
    let mut find = inner
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
        let candidate = candidate_of(inner.collections.posts.name(), post, now, &recent_likes)?;
        items.push(FeedItem {
            post: candidate.post,
            score: score(inner, feed, &candidate)?,
        });
    }
    sort_items(&mut items);
    items.truncate(inner.settings.max_feed_len);
    Ok(items)
}

/// The ranking's score, refused unless finite (a NaN or infinity cannot be paged).
fn score(inner: &FeedState, feed: &FeedKind, candidate: &Candidate) -> Result<f64> {
    let score = inner.ranking.score(feed, candidate);
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

/// Adds each `(feed key, item)`, keeping every feed sorted, bounded and free of repeats (see
/// [`Backend::merge_into_sorted_lists`](crate::backend::Backend::merge_into_sorted_lists)).
async fn merge_into_feeds(inner: &FeedState, entries: Vec<(String, FeedItem)>) -> Result<()> {
    let sort = doc! { "score": -1, "post": -1 };
    let lists = SortedLists {
        collection: &inner.collections.feeds,
        field: "items",
        identity: "post",
        sort: &sort,
        cap: inner.settings.max_feed_len,
        lock_key: feed_lock,
    };
    let entries = entries
        .into_iter()
        .map(|(key, item)| Ok((key, bson::to_document(&item)?)))
        .collect::<Result<Vec<_>>>()?;
    inner.backend.merge_into_sorted_lists(lists, &entries).await
}

/// Sets a feed's whole list and starts a new generation of its cursors (under its lock where
/// updates are not atomic).
async fn replace_feed(inner: &FeedState, feed: &FeedKind, items: Vec<FeedItem>) -> Result<()> {
    let key = feed.key();
    let items = bson::to_bson(&items)?;
    inner
        .backend
        .exclusive(&[feed_lock(&key)], async {
            inner
                .collections
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

/// A user feed of a blank user id (from a follow source), which no one reads.
fn feed_has_no_user(feed: &FeedKind) -> bool {
    matches!(feed, FeedKind::User(user) if crate::validate::is_blank(user))
}

/// The lock serializing writers of a feed where updates are not atomic.
fn feed_lock(key: &str) -> String {
    format!("feed:{key}")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Three new posts `[a, b, c]` scored 1, 2 and 1, and their items in feed order.
    pub(in crate::feed) fn sorted_sample() -> ([PostId; 3], Vec<FeedItem>) {
        let posts = [PostId::new(), PostId::new(), PostId::new()];
        let mut items: Vec<FeedItem> = posts
            .iter()
            .zip([1.0, 2.0, 1.0])
            .map(|(&post, score)| FeedItem { post, score })
            .collect();
        sort_items(&mut items);
        (posts, items)
    }

    #[test]
    fn items_sort_by_score_then_newer_post() {
        let ([a, b, c], items) = sorted_sample();
        let order: Vec<PostId> = items.iter().map(|item| item.post).collect();
        assert_eq!(order, [b, c, a]);
    }
}
