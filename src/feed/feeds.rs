//! The [`Feeds`] handle: ordered lists of post ids, built in the background, read a page at a
//! time.
//!
//! A page reads the feed document (one `find` by `_id`) and then the page's posts (one `find`
//! with `$in`), and returns them in feed order: exactly 2 commands, whatever the page size. How
//! feeds are written is in `super::lists`.

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use bson::doc;

use crate::error::Invalid;

use super::cursor;
use super::jobs::FeedJob;
use super::lists::{self, decode_items, sort_items, FeedItem};
use super::state::{handle, FeedState};
use super::types::{FeedKind, Post, PostId};
use crate::observe::spans::Op;
use crate::payload::Payload;
use crate::realtime::{self, Change, Key, PollRequest, ResumeToken, Source, Updates, WatchOptions};
use crate::{Error, Page, PageRequest, Result};

handle! {
    /// Feeds: pages of a feed, its raw entries, and the feeds recomputed as a whole. From
    /// [`super::FeedStore::feeds`]; cheap to clone.
    ///
    /// - **latest** ([`FeedKind::Latest`]) and **per-user** feeds ([`FeedKind::User`]) are written
    ///   when a post's fan-out job runs: the post goes into "latest", its author's own feed and the
    ///   feed of each of the author's followers ([`crate::graph::FollowSource::followers_of`]).
    ///   [`Feeds::rebuild_user`] refills a user's feed from whom they follow.
    /// - **hot** ([`FeedKind::Hot`]) holds the posts created within the hot window (default 24
    ///   hours) that were liked within it, by likes in the window; [`Feeds::refresh_hot`] recomputes
    ///   it (run it on a timer, or queue it with [`Feeds::schedule_hot_refresh`]).
    ///
    /// A feed is one document `{_id: key, items: [{post, score}, ..]}` holding at most
    /// [`max_feed_len`](super::FeedStoreBuilder::max_feed_len) items, highest score first. On
    /// MongoDB a post's fan-out enters all its feeds with one `insert` (creating missing feeds) and
    /// one `update` (`$push` with `$sort` and `$slice`, filtered so a repeated job changes nothing);
    /// where updates are not atomic each group of up to 50 feeds is locked, read, merged and
    /// written back.
    ///
    /// ```no_run
    /// # async fn demo(store: mongo_social::FeedStore<()>) -> mongo_social::Result<()> {
    /// use mongo_social::feed::FeedKind;
    /// use mongo_social::PageRequest;
    ///
    /// let feeds = store.feeds();
    /// let bob = FeedKind::User("bob".into());
    /// let first = feeds.page(&bob, PageRequest::first(20)).await?;
    /// if let Some(cursor) = first.next {
    ///     let second = feeds.page(&bob, PageRequest::after(20, cursor)).await?;
    /// }
    /// feeds.schedule_hot_refresh().await?; // a worker recomputes "hot"
    /// # Ok(()) }
    /// ```
    Feeds<X>
}

impl<X: Payload> Feeds<X> {
    /// One page of a feed, in feed order: one `find` of the feed, one `find` of its posts with
    /// `$in` (none when the page is empty). Posts deleted since they entered the feed are left
    /// out. A user's feed that does not exist yet costs one more `find`, to tell a user without
    /// a feed (an empty page) from an unknown one.
    ///
    /// Pages are stable while posts arrive: a new post does not shift or repeat what follows the
    /// cursor. A feed recomputed as a whole ([`Feeds::refresh_hot`], [`Feeds::rebuild_user`])
    /// gets a new generation, and its scores may change, so a cursor of an older generation is
    /// refused: start again from the first page.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor not made by a page of this
    /// feed (before any command) or made before the feed was recomputed;
    /// [`Invalid::PageLimit`](crate::error::Invalid::PageLimit),
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank user id,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"user"`) for one over
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), before any command; [`Error::NotFound`] for an
    /// unknown user.
    pub async fn page(&self, feed: &FeedKind, request: PageRequest) -> Result<Page<Post<X>>> {
        Op::FeedFeedsPage
            .span()
            .run(async move {
                request.check()?;
                if let FeedKind::User(user) = feed {
                    crate::validate::user_id("user", user)?;
                }
                let after = request.decode_after(|cursor| cursor::feed_key(cursor, feed))?;
                let (mut items, generation) = match self.read(feed).await? {
                    Some(found) => found,
                    None => {
                        if let FeedKind::User(user) = feed {
                            self.inner.user(user).await?;
                        }
                        (Vec::new(), 0)
                    }
                };
                if let Some((cursor_generation, key)) = after {
                    if cursor_generation != generation {
                        return Err(Error::InvalidInput { reason: Invalid::Cursor {
                            reason:
                                "the feed was recomputed since this cursor was made; start again \
                                     from the first page"
                                    .to_owned(),
                        } });
                    }
                    items.retain(|item| comes_after(item, key));
                }
                let items = Page::from_overfetch(items, request.limit, |last| {
                    cursor::after_feed_item(feed, generation, last.score, last.post)
                });
                let ids: Vec<PostId> = items.items.iter().map(|item| item.post).collect();
                let posts = self.inner.posts_in_order(&ids).await?;
                Ok(Page {
                    items: posts,
                    next: items.next,
                })
            })
            .await
    }

    /// A stream of the posts that enter `feed` (a post's fan-out, or a recompute that brings a
    /// post not older than the lookback), from `from` (the token of the last update handled) or
    /// from now (a post's id holds seconds: a watch without a token also reports posts made
    /// earlier in the second it started). See [`crate::realtime`] for how it learns of them (a change stream on the feed
    /// document, or one `find` of it per poll) and what its tokens promise; a poll or a change
    /// that brings new posts reads them with one more `find`.
    ///
    /// # Errors
    ///
    /// The stream yields [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank user id, [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a
    /// token of another watch, and server failures past the store's retry budget; then it ends.
    pub fn watch(
        &self,
        feed: &FeedKind,
        from: Option<ResumeToken>,
        options: WatchOptions,
    ) -> Updates<Post<X>> {
        if let FeedKind::User(user) = feed {
            if let Err(error) = crate::validate::user_id("user", user) {
                return crate::realtime::failed(error);
            }
        }
        realtime::watch(
            Entering::<X> {
                inner: self.inner.clone(),
                feed: feed.key(),
                _extension: PhantomData,
            },
            from,
            options,
        )
    }

    /// A feed's entries, highest score first (one `find`); empty for a feed not written yet.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"user"`) for the user id of a
    /// [`FeedKind::User`], before any command.
    pub async fn items(&self, feed: &FeedKind) -> Result<Vec<FeedItem>> {
        Op::FeedFeedsItems
            .span()
            .run(async move {
                if let FeedKind::User(user) = feed {
                    crate::validate::user_id("user", user)?;
                }
                Ok(self
                    .read(feed)
                    .await?
                    .map(|(items, _)| items)
                    .unwrap_or_default())
            })
            .await
    }

    /// A feed's sorted entries and generation, if the feed document exists (one `find`).
    async fn read(&self, feed: &FeedKind) -> Result<Option<(Vec<FeedItem>, i64)>> {
        let feeds = &self.inner.collections.feeds;
        let Some(found) = feeds.find_one(doc! { "_id": feed.key() }).await? else {
            return Ok(None);
        };
        let generation = crate::bson_ext::integer(&found, "generation").unwrap_or(0);
        let mut items = decode_items(feeds.name(), Some(found))?;
        sort_items(&mut items);
        Ok(Some((items, generation)))
    }

    /// Recomputes the "hot" feed: the posts created within the hot window, ranked by their
    /// likes within it (by default). One `aggregate` of the window's likes of posts created in
    /// the window (each like stores its post's `created`; index `{created: 1, at: 1}`), keeping
    /// the `4 × max_feed_len` most liked; one `find` of those posts; one write of the feed.
    /// Returns the feed's length.
    pub async fn refresh_hot(&self) -> Result<usize> {
        Op::FeedFeedsRefreshHot
            .span()
            .run(async move { lists::refresh_hot(&self.inner).await })
            .await
    }

    /// Queues a refresh of the "hot" feed for a worker (one `insert`).
    pub async fn schedule_hot_refresh(&self) -> Result<()> {
        Op::FeedFeedsScheduleHotRefresh
            .span()
            .run(async move {
                FeedJob::RefreshHot.enqueue(&self.inner.jobs).await?;
                Ok(())
            })
            .await
    }

    /// Rebuilds `user`'s feed from the newest posts of `user` and whom they follow
    /// ([`crate::graph::FollowSource::followees_of`]): for a new or returning user, or after
    /// follows changed. One `find` of posts and one write of the feed (plus the lock where
    /// updates are not atomic). Returns the feed's length.
    ///
    /// A post whose fan-out runs while the feed is rebuilt can be left out; it is back at the
    /// next rebuild.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for an empty user id, [`Error::NotFound`] for an unknown user
    /// (one `find` first), both before anything is written; errors of the follow source;
    /// [`Error::InvalidConfig`] for a non-finite score from the ranking.
    pub async fn rebuild_user(&self, user: &str) -> Result<usize> {
        Op::FeedFeedsRebuildUser
            .span()
            .run(async move { lists::rebuild_user(&self.inner, user).await })
            .await
    }
}

/// Whether `item` comes strictly after the item keyed `(score, post)` in feed order.
fn comes_after(item: &FeedItem, (score, post): (f64, PostId)) -> bool {
    match item.score.total_cmp(&score) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => item.post < post,
        std::cmp::Ordering::Greater => false,
    }
}

/// The posts entering one feed, as a watch sees them: keyed by their id (its time, then its
/// hex), the order in which posts are made.
struct Entering<X> {
    inner: Arc<FeedState>,
    feed: String,
    _extension: PhantomData<fn() -> X>,
}

impl<X: Payload> Entering<X> {
    fn key(post: PostId) -> Key {
        Key::new(post.0.timestamp().timestamp_millis(), post.0.to_hex())
    }

    /// The posts of the feed document `feed` from `from` on and not `seen`, read in one more
    /// `find` (none when there are none), in key order, at most `limit`.
    async fn entering(
        &self,
        feed: Option<bson::Document>,
        from: &Key,
        seen: &BTreeSet<Key>,
        limit: usize,
    ) -> Result<Vec<(Key, Post<X>)>> {
        let items = decode_items(self.inner.collections.feeds.name(), feed)?;
        let mut ids: Vec<(Key, PostId)> = items
            .into_iter()
            .map(|item| (Self::key(item.post), item.post))
            .filter(|(key, _)| key >= from && !seen.contains(key))
            .collect();
        ids.sort();
        ids.dedup();
        ids.truncate(limit);
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let posts: Vec<Post<X>> = self
            .inner
            .posts_in_order(&ids.iter().map(|(_, id)| *id).collect::<Vec<_>>())
            .await?;
        // Posts deleted since they entered the feed are left out.
        Ok(posts
            .into_iter()
            .map(|post| (Self::key(post.id), post))
            .collect())
    }
}

#[async_trait]
impl<X: Payload> Source for Entering<X> {
    type Item = Post<X>;

    fn name(&self) -> String {
        format!("feed/{}/{}", self.inner.collections.feeds.name(), self.feed)
    }

    fn backend(&self) -> &crate::backend::Backend {
        &self.inner.backend
    }

    /// Post ids hold seconds: a watch starts at the start of its second.
    fn start(&self, now: bson::DateTime) -> Key {
        Key::new(
            now.timestamp_millis() - now.timestamp_millis().rem_euclid(1000),
            "",
        )
    }

    async fn poll(&self, request: PollRequest<'_>) -> Result<Vec<(Key, Post<X>)>> {
        let PollRequest { from, seen, limit } = request;
        let feed = self
            .inner
            .collections
            .feeds
            .find_one(doc! { "_id": &self.feed })
            .await?;
        self.entering(feed, from, seen, limit).await
    }

    async fn changes(&self) -> Result<(mongodb::Collection<bson::Document>, Vec<bson::Document>)> {
        Ok((
            self.inner.collections.feeds.clone(),
            vec![doc! { "$match": {
                "documentKey._id": &self.feed,
                "operationType": { "$in": ["insert", "update", "replace"] },
            } }],
        ))
    }

    async fn items_of(&self, change: Change<'_>) -> Result<Vec<(Key, Post<X>)>> {
        let Change {
            event,
            newest,
            seen,
        } = change;
        // Only posts not older than what was reported, less the lookback a poll would allow:
        // a recompute brings back old posts, which are not news.
        let from = Key::new(newest.time.saturating_sub(ENTERING_LOOKBACK_MS), "");
        self.entering(event.full_document, &from, seen, usize::MAX)
            .await
    }
}

/// How much older than the newest post reported a post entering a feed by a change event may
/// be and still be reported (a post fanned out late).
const ENTERING_LOOKBACK_MS: i64 = 60_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comes_after_follows_feed_order() {
        let ([a, b, c], items) = super::lists::tests::sorted_sample();
        assert!(comes_after(&items[1], (2.0, b)));
        assert!(comes_after(&items[2], (1.0, c)));
        assert!(!comes_after(&items[1], (1.0, c)));
        assert!(!comes_after(&items[0], (1.0, a)));
    }
}
