//! Reading a timeline: the inbox, celebrities merged in, and the fan-out-on-read view that
//! stands in while a returning user's inbox is rebuilt.

use bson::{doc, Document};
use futures::TryStreamExt;

use super::worker::decode_post;
use super::Delivery;
use crate::graph::FollowSource;
use crate::inbox::{cursor, Message, Strategy};
use crate::observe::spans::Op;
use crate::{payload::Payload, Page, PageRequest, Result};

impl<P: Payload> Delivery<P> {
    /// One page of `owner`'s timeline, newest first, with the inbox's cursor API.
    ///
    /// - Normally: `owner`'s inbox, with the posts of the celebrities `owner` follows merged in
    ///   by send time (those are never copied). Messages in both (posted before their author
    ///   became a celebrity) appear once.
    /// - While `owner`'s inbox is being rebuilt after a dormant spell (see [`Delivery::touch`]):
    ///   the inbox merged with the posts of everyone `owner` follows, and `owner`'s own, read
    ///   straight from the outbox (fan-out on read), so the page is complete and ordered even
    ///   before the rebuild ends. Cursors are the same `(sent, id)` keys either way, so paging
    ///   carries on across the switch. (The rebuild copies at most
    ///   [`super::DeliveryBuilder::rebuild_limit`] of the missed posts; a user who missed more
    ///   sees the older ones only while the rebuild runs.)
    ///
    /// With a [`BucketedFanOut`](crate::BucketedFanOut) inbox (arrival order, position
    /// cursors) this is the inbox page alone.
    ///
    /// Authors `owner` mutes or blocks ([`crate::InboxStore::filters`]) are left out of what is
    /// merged, as their copies are hidden from the inbox.
    ///
    /// Costs: 3 commands (`find` of activity, the inbox page, `find` of the celebrities), plus
    /// 1 when celebrities exist (which of them `owner` follows) and 2 when `owner` follows any
    /// (the owner's mute and block lists, and the posts: one `find` where the server merges
    /// sorted index ranges, MongoDB; elsewhere one per followed celebrity, at most 8 in flight,
    /// each reading a page, so the cost follows the celebrities followed and never all they
    /// ever posted). While rebuilding: 2, the followees'
    /// pages (one per 10,000), and 2.
    ///
    /// # Errors
    ///
    /// As [`crate::InboxStore::inbox_page`].
    pub async fn timeline(&self, owner: &str, page: PageRequest) -> Result<Page<Message<P>>> {
        Op::DeliveryTimeline
            .span()
            .run(async move {
                let inner = &self.inner;
                if inner.inbox.strategy() == Strategy::BucketedFanOut {
                    return inner.inbox.inbox_page(owner, page).await;
                }
                crate::validate::user_id("owner", owner)?;
                page.check()?;
                let strategy = inner.inbox.strategy();
                let after = page
                    .after
                    .as_ref()
                    .map(|after| cursor::older_than(after, strategy, owner, "_id"))
                    .transpose()?;
                let rebuilding = inner
                    .activity
                    .find_one(doc! { "_id": owner, "rebuilding": true })
                    .projection(doc! { "_id": 1 })
                    .await?
                    .is_some();
                let limit = page.limit;
                let inbox = inner.inbox.inbox_page(owner, page).await?;
                // Whose outbox posts join the inbox: while the inbox is rebuilt, everyone `owner`
                // follows (and `owner`), whose missed posts are on their way; otherwise the
                // celebrities `owner` follows, whose posts are never copied.
                let others = if rebuilding {
                    let mut authors = inner.graph.followees_of(owner).await?;
                    authors.push(owner.to_owned());
                    inner.shown_authors(owner, authors).await?
                } else {
                    inner.followed_celebrities(owner).await?
                };
                if others.is_empty() {
                    return Ok(inbox);
                }
                let theirs = self
                    .outbox_page(owner, &others, after, limit, strategy)
                    .await?;
                Ok(merge(owner, inbox, theirs, limit, strategy))
            })
            .await
    }

    /// The newest posts of `authors` after `after`, from the outbox: one `find`. Cursors are
    /// those of `owner`'s inbox of the inbox's `strategy`, so paging carries on in the inbox.
    async fn outbox_page(
        &self,
        owner: &str,
        authors: &[String],
        after: Option<Document>,
        limit: usize,
        strategy: Strategy,
    ) -> Result<Page<Message<P>>> {
        let found = self
            .inner
            .backend
            .newest_of_keys(
                &self.inner.outbox,
                "from",
                authors,
                after.unwrap_or_default(),
                limit + 1,
            )
            .await?;
        let items = found
            .into_iter()
            .map(|found| decode_post(self.inner.outbox.name(), found))
            .collect::<Result<Vec<Message<P>>>>()?;
        Ok(Page::from_overfetch(items, limit, |last| {
            cursor::after_time(strategy, owner, last.sent, last.id)
        }))
    }
}

/// Two pages of the same `(sent, id)` order after the same cursor, merged: the newest `limit`
/// of both, each message once, and a cursor after the last one kept if either had more.
fn merge<P>(
    owner: &str,
    mut ours: Page<Message<P>>,
    theirs: Page<Message<P>>,
    limit: usize,
    strategy: Strategy,
) -> Page<Message<P>> {
    let more = ours.next.is_some() || theirs.next.is_some();
    ours.items.extend(theirs.items);
    ours.items
        .sort_by_key(|message| std::cmp::Reverse((message.sent, message.id)));
    ours.items.dedup_by_key(|message| message.id);
    let cut = ours.items.len() > limit;
    ours.items.truncate(limit);
    ours.next = match ours.items.last() {
        Some(last) if more || cut => Some(cursor::after_time(strategy, owner, last.sent, last.id)),
        _ => None,
    };
    ours
}

impl<P: Payload> super::DeliveryState<P> {
    /// The celebrities `owner` follows and neither mutes nor blocks: one `find` of the
    /// celebrities, and when there are any, one of the follows and one of the owner's lists.
    pub(super) async fn followed_celebrities(&self, owner: &str) -> Result<Vec<String>> {
        let celebrities: Vec<String> = self
            .celebrities
            .find(doc! {})
            .projection(doc! { "_id": 1 })
            .await?
            .try_collect::<Vec<Document>>()
            .await?
            .iter()
            .filter_map(|d| d.get_str("_id").ok().map(str::to_owned))
            .collect();
        if celebrities.is_empty() {
            return Ok(celebrities);
        }
        let followed = self.graph.follows_any(owner, &celebrities).await?;
        self.shown_authors(owner, followed).await
    }

    /// `authors` without those `owner` mutes or blocks: one `find` of the owner's lists, none
    /// when `authors` is empty.
    pub(super) async fn shown_authors(
        &self,
        owner: &str,
        mut authors: Vec<String>,
    ) -> Result<Vec<String>> {
        if authors.is_empty() {
            return Ok(authors);
        }
        let filters = self.inbox.filters(owner).await?;
        authors
            .retain(|author| !filters.muted.contains(author) && !filters.blocked.contains(author));
        Ok(authors)
    }
}
