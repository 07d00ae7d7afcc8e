//! [`ThreadedComments`] for [`Embedded`]: replies, threaded pages and sub-threads.

use async_trait::async_trait;
use bson::doc;

use super::read::{page_after, Range};
use super::votes::{ranked_after, ranked_level};
use super::write::Landed;
use super::{Embedded, ATTEMPTS, KEYED, STRATEGY};
use crate::bson_ext::now_or_after;
use crate::comments::cursor::{self, View};
use crate::comments::engine::{Listing, ThreadsEngine};
use crate::comments::tree::{self, Node};
use crate::comments::{
    check_reply_target, discussion_lock, notify_reply, validate, Comment, KeyedComment, NewComment,
    Order, Sort, Thread,
};
use crate::error::Invalid;
use crate::page::{invalid, Scope};
use crate::{error::Entity, Cursor, Error, Page, Result};

/// The position path in a threaded or sub-thread cursor of `view` in `order`, made by a read of
/// `scope`.
fn cursor_path(
    cursor: &Cursor,
    view: View,
    order: Order,
    scope: Scope,
    max_depth: usize,
) -> Result<Vec<usize>> {
    let [path] = cursor::position(cursor, STRATEGY, view, order, scope)?;
    tree::parse_path(&path, max_depth).map_err(|_| invalid("not a position path"))
}

/// A threaded or sub-thread cursor of `view` in `order`, made by a read of `scope`, after the
/// comment at `path`.
fn after_path(view: View, order: Order, scope: Scope, path: &[usize]) -> Cursor {
    cursor::new(STRATEGY, view, order, scope, &[&tree::format_path(path)])
}

/// Where a reply goes: the parent comment `parent` (at `parent_path`) in `discussion`.
struct ReplyTarget<'a> {
    discussion: &'a str,
    parent: &'a str,
    parent_path: &'a [usize],
}

/// A reply at a sibling position and its posting time, with the author of its parent.
type Placed = (usize, bson::DateTime, String);

impl Embedded {
    /// Places `node` among the replies of the target's parent, run under the discussion's lock;
    /// each round reads the parent afresh and tries the next free position.
    async fn place_reply(
        &self,
        target: &ReplyTarget<'_>,
        node: &mut Node,
        keyed: Option<&KeyedComment>,
        growth: i64,
    ) -> Result<Placed> {
        let ReplyTarget {
            discussion,
            parent,
            parent_path,
        } = *target;
        let mut parent_author = String::new();
        for _ in 0..ATTEMPTS {
            if let Some(keyed) = keyed {
                // Stored by a concurrent attempt with the key (checked under the
                // discussion's lock where writers take turns).
                if let Some((path, stored)) = self.keyed_comment(discussion, keyed).await? {
                    let parent_node = self
                        .window_for_write(discussion, parent_path, parent, Entity::ParentComment)
                        .await?;
                    if let Some(parent_node) = parent_node.node(parent_path) {
                        parent_author = parent_node.body.author.id.clone();
                    }
                    let index = path.last().copied().unwrap_or_default();
                    return Ok((index, stored.body.posted, parent_author));
                }
            }
            let window = self
                .window_for_write(discussion, parent_path, parent, Entity::ParentComment)
                .await?;
            let parent_node = window.node(parent_path).expect("checked by window_with");
            parent_author = parent_node.body.author.id.clone();
            let siblings = &parent_node.replies;
            // This reply's own earlier attempt, whose reply was lost, took its position.
            if let Some(index) = siblings.iter().position(|sibling| sibling.id == node.id) {
                return Ok((index, siblings[index].body.posted, parent_author));
            }
            let index = siblings.len();
            // Stamped for this attempt at position `index`, never before the reply
            // there before it: the reply that takes a position carries the stamp made
            // for it, so positions and posting times agree.
            node.body.posted = now_or_after(siblings.last().map(|sibling| sibling.body.posted));
            let (landed, tries) = self
                .push_reply_at(target, node, keyed, growth, index)
                .await?;
            if let Some((index, posted)) = landed {
                return Ok((index, posted, parent_author));
            }
            if tries == 1 {
                self.refusal(discussion, growth).await??;
            }
        }
        Err(Error::contention("embedded write", ATTEMPTS))
    }

    /// One try at pushing `node` to position `index` among the parent's replies, retried on
    /// transient errors: the position and posting time it landed at (`None` when the position
    /// was taken or the discussion has no room), and how many tries it took.
    async fn push_reply_at(
        &self,
        target: &ReplyTarget<'_>,
        node: &Node,
        keyed: Option<&KeyedComment>,
        growth: i64,
        index: usize,
    ) -> Result<(Option<Landed>, u32)> {
        let ReplyTarget {
            discussion,
            parent,
            parent_path,
        } = *target;
        let pushed = bson::to_bson(node)?;
        let field = tree::field_path(parent_path);
        let mut filter = self.with_room(discussion, growth);
        // The reply goes to position `index` only if no one took it meanwhile.
        filter.insert(
            format!("{field}.replies.{index}"),
            doc! { "$exists": false },
        );
        filter.insert(format!("{field}.deleted"), doc! { "$exists": true });
        let mut push = doc! { format!("{field}.replies"): pushed };
        if let Some(keyed) = keyed {
            push.insert(KEYED, keyed.id);
            filter.insert(KEYED, doc! { "$ne": keyed.id });
        }
        let update = doc! {
            "$push": push,
            "$inc": { "count": 1_i64, "bytes": growth },
        };
        // Pushed at `index` only while it is free: a retry after a lost reply
        // matches nothing, and the next round finds the reply there.
        let (id, posted) = (node.id, node.body.posted);
        let find = || async move {
            let window = self
                .window_with(discussion, parent_path, parent, Entity::ParentComment)
                .await?;
            let siblings = window.node(parent_path).map(|n| &n.replies);
            Ok(siblings.and_then(|s| {
                s.iter()
                    .position(|s| s.id == id)
                    .map(|i| (i, s[i].body.posted))
            }))
        };
        let push = || {
            let action = self.discussions.update_one(filter.clone(), update.clone());
            async move { Ok((action.await?.matched_count == 1).then_some((index, posted))) }
        };
        self.retried_push("reply to comment", find, push).await
    }
}

#[async_trait]
impl ThreadsEngine for Embedded {
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        let parent_path = tree::parse_path(parent, self.max_depth)?;
        check_reply_target(self.outbox.as_ref(), discussion, parent)?;
        if parent_path.len() > self.max_depth {
            return Err(Error::InvalidInput {
                reason: Invalid::ThreadTooDeep {
                    depth: parent_path.len(),
                    limit: format!("this store nests replies at most {} deep", self.max_depth),
                },
            });
        }
        let keyed = KeyedComment::of(discussion, Some(parent), &comment)?;
        if let Some(keyed) = &keyed {
            // A repeat: one `find`, nothing written (and nothing notified again).
            if let Some((path, node)) = self.keyed_comment(discussion, keyed).await? {
                return Ok(node.comment(&path));
            }
        }
        let (mut node, growth) = self.stored_node(comment, keyed.as_ref())?;
        let target = ReplyTarget {
            discussion,
            parent,
            parent_path: &parent_path,
        };
        let (index, posted, parent_author) = self
            .backend
            .exclusive_one(
                &discussion_lock(STRATEGY, discussion),
                self.place_reply(&target, &mut node, keyed.as_ref(), growth),
            )
            .await?;
        node.body.posted = posted;
        let mut path = parent_path;
        path.push(index);
        let reply = node.comment(&path);
        notify_reply(
            self.outbox.as_ref(),
            discussion,
            parent,
            &parent_author,
            &reply,
        )
        .await;
        Ok(reply)
    }

    async fn thread_page(&self, listing: Listing<'_>, order: Order) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        let scope = cursor::discussion(discussion);
        let after = match &page.after {
            None => None,
            Some(cursor) => Some(cursor_path(
                cursor,
                View::Threaded,
                order,
                scope,
                self.max_depth,
            )?),
        };
        // Every top-level comment contributes at least one entry, so `limit + 1` of them (from
        // the cursor's own thread on) are enough for a page and a look past it.
        let len = page.fetch();
        let range = match (order, &after) {
            (Order::OldestFirst, None) => Range::From { first: 0, len },
            (Order::OldestFirst, Some(path)) => Range::From {
                first: path[0],
                len,
            },
            (Order::NewestFirst, None) => Range::Last { len },
            (Order::NewestFirst, Some(path)) => {
                let first = (path[0] + 1).saturating_sub(len);
                Range::From {
                    first,
                    len: path[0] + 1 - first,
                }
            }
        };
        let window = self
            .window(discussion, range)
            .await?
            .ok_or_else(|| validate::no_discussion(discussion))?;
        Ok(page_after(
            window.threaded(order),
            page.limit,
            window.more_beyond(order),
            |e| {
                after.as_ref().is_none_or(|after| {
                    tree::threaded_cmp(order, &e.path, after) == std::cmp::Ordering::Greater
                })
            },
            |e| after_path(View::Threaded, order, scope, &e.path),
        ))
    }

    async fn sub_thread(&self, listing: Listing<'_>, link: &str) -> Result<Page<Comment>> {
        let Listing { discussion, page } = listing;
        let root = tree::parse_path(link, self.max_depth)?;
        let scope = cursor::sub_thread(discussion, link);
        let after = match &page.after {
            None => None,
            Some(cursor) => {
                let order = Order::OldestFirst;
                let path = cursor_path(cursor, View::SubThread, order, scope, self.max_depth)?;
                if !path.starts_with(&root) {
                    return Err(invalid("not a position in this sub-thread"));
                }
                Some(path)
            }
        };
        let window = self
            .window_with(discussion, &root, link, Entity::Comment)
            .await?;
        let mut entries = Vec::new();
        let mut path = root.clone();
        window
            .node(&root)
            .expect("checked by window_with")
            .preorder(&mut path, &mut entries);
        Ok(page_after(
            entries,
            page.limit,
            false,
            |e| after.as_ref().is_none_or(|after| e.path > *after),
            |e| after_path(View::SubThread, Order::OldestFirst, scope, &e.path),
        ))
    }

    /// One `find` of the discussion's document, every level ranked here as
    /// [`VotedComments::ranked`] ranks one.
    ///
    /// [`VotedComments::ranked`]: crate::comments::VotedComments::ranked
    async fn ranked_thread(
        &self,
        listing: Listing<'_>,
        sort: Sort,
        depth: usize,
    ) -> Result<Page<Thread>> {
        let Listing { discussion, page } = listing;
        let after = ranked_after(page.after.as_ref(), sort, discussion, None)?;
        let window = self
            .window(discussion, Range::All)
            .await?
            .ok_or_else(|| validate::no_discussion(discussion))?;
        let level = (window.first..).zip(&window.nodes).collect();
        Ok(ranked_level(
            discussion,
            sort,
            &[],
            level,
            after,
            page.limit,
            depth,
        ))
    }
}
