//! Writes: posts, and the guarded updates that edits, deletes and replies share.

use std::future::Future;

use bson::{doc, Document};
use mongodb::options::ReturnDocument;

use super::read::Range;
use super::{
    count_field, created, Embedded, ATTEMPTS, ELEMENT_OVERHEAD, KEYED, LAST_POSTED, STRATEGY,
};
use crate::backend::dialect::Dialect;
use crate::bson_ext::{self, now_or_after};
use crate::comments::body::Body;
use crate::comments::keyed::StoredKey;
use crate::comments::tree::{self, Node, Window};
use crate::comments::{discussion_lock, validate, Comment, KeyedComment, NewComment};
use crate::error::{Entity, Error, Result};

/// Where a push landed: the comment's position among its siblings, and its posting time.
pub(super) type Landed = (usize, bson::DateTime);

impl Embedded {
    /// Why a write of `growth` more bytes cannot apply, if it cannot: the discussion is missing
    /// or would pass its limit (one read). Otherwise the newest top-level `posted`: there is
    /// room, so a filter that did not match lost to another writer.
    pub(super) async fn refusal(
        &self,
        discussion: &str,
        growth: i64,
    ) -> Result<std::result::Result<Option<bson::DateTime>, Error>> {
        let found = self
            .backend
            .command("read discussion", || {
                self.discussions
                    .find_one(doc! { "_id": discussion })
                    .projection(doc! { "slots": 1, "bytes": 1, LAST_POSTED: 1 })
            })
            .await?;
        let Some(found) = found.filter(created) else {
            return Ok(Err(validate::no_discussion(discussion)));
        };
        let bytes = count_field(&found, "bytes") as i64;
        if bytes + growth > self.max_document_bytes as i64 {
            return Ok(Err(Error::InvalidInput {
                reason: crate::error::Invalid::TooLarge {
                    what: "discussion",
                    size: (bytes + growth).max(0) as usize,
                    limit: self.max_document_bytes,
                },
            }));
        }
        Ok(Ok(bson_ext::date(&found, LAST_POSTED)))
    }

    /// [`Embedded::window_with`] for a write, retried: a read is idempotent.
    pub(super) async fn window_for_write(
        &self,
        discussion: &str,
        path: &[usize],
        link: &str,
        what: Entity,
    ) -> Result<Window> {
        self.backend
            .retry("read discussion", || {
                self.window_with(discussion, path, link, what)
            })
            .await
    }

    /// The top-level comment whose id is `id`, with its position, if the discussion holds it:
    /// how a post whose reply was lost finds out whether it landed (a rare path, so it reads the
    /// whole document).
    async fn find_posted(
        &self,
        discussion: &str,
        id: bson::oid::ObjectId,
    ) -> Result<Option<(usize, Node)>> {
        let window = self
            .backend
            .retry("read discussion", || self.window(discussion, Range::All))
            .await?;
        Ok(window.and_then(|mut window| {
            let index = window.nodes.iter().position(|node| node.id == id)?;
            Some((window.first + index, window.nodes.swap_remove(index)))
        }))
    }

    /// The comment stored under `keyed`'s id anywhere in `discussion`, with its path (one
    /// `find`, matching only a discussion whose `keyed` holds the id), checked against `keyed`:
    /// [`Error::Conflict`] when it was posted with other content.
    pub(super) async fn keyed_comment(
        &self,
        discussion: &str,
        keyed: &KeyedComment,
    ) -> Result<Option<(Vec<usize>, Node)>> {
        let found = self
            .backend
            .command("find keyed comment", || {
                self.discussions
                    .find_one(doc! { "_id": discussion, KEYED: keyed.id })
                    .projection(doc! { "comments": 1 })
            })
            .await?;
        let Some(found) = found else {
            return Ok(None);
        };
        let nodes: Vec<Node> = match found.get("comments") {
            Some(comments) => bson_ext::decode_with_id(
                self.discussions.name(),
                Some(discussion.into()),
                comments.clone(),
            )?,
            None => Vec::new(),
        };
        let found = keyed.repeat(Node::find(&nodes, keyed.id), |(_, node)| &node.key)?;
        Ok(found.map(|(path, node)| (path, node.clone())))
    }

    /// A filter for `discussion` that leaves room for `growth` more bytes.
    pub(super) fn with_room(&self, discussion: &str, growth: i64) -> Document {
        doc! {
            "_id": discussion,
            "slots": { "$exists": true },
            "bytes": { "$lte": self.max_document_bytes as i64 - growth },
        }
    }

    /// Runs `change` (an update built from the current comment) until it applies, re-reading
    /// the comment whenever another writer got there first.
    pub(super) async fn change_comment<T>(
        &self,
        discussion: &str,
        link: &str,
        mut change: impl FnMut(&[usize], &Node) -> Result<Change<T>>,
    ) -> Result<T> {
        validate::check_discussion(discussion)?;
        let path = tree::parse_path(link, self.max_depth)?;
        self.backend
            .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                for _ in 0..ATTEMPTS {
                    let window = self
                        .window_for_write(discussion, &path, link, Entity::Comment)
                        .await?;
                    let node = window.node(&path).expect("checked by window_with");
                    let (filter, update, growth, value) = match change(&path, node)? {
                        Change::Done(value) => return Ok(value),
                        Change::Update {
                            filter,
                            update,
                            growth,
                            value,
                        } => (filter, update, growth, value),
                    };
                    let mut full_filter = self.with_room(discussion, growth);
                    full_filter.extend(filter);
                    // The filter names the comment's current text, so an attempt whose reply
                    // was lost makes its retry match nothing; the next round reads the comment
                    // and `change` recognises it as changed (a `$set` of the same values).
                    let mut tries = 0;
                    let result = self
                        .backend
                        .retry("change comment", || {
                            tries += 1;
                            let action = self
                                .discussions
                                .update_one(full_filter.clone(), update.clone());
                            async move { Ok(action.await?) }
                        })
                        .await?;
                    if result.matched_count == 1 {
                        return Ok(value);
                    }
                    // After a retry the miss may be this change's own: the next round tells.
                    if growth > 0 && tries == 1 {
                        self.refusal(discussion, growth).await??;
                    }
                }
                Err(Error::contention("embedded write", ATTEMPTS))
            })
            .await
    }
}

/// What [`Embedded::change_comment`] should do with the comment as read.
pub(super) enum Change<T> {
    /// Nothing to write; return this.
    Done(T),
    /// Apply `update` if `filter` still matches (and the document has room for `growth`), then
    /// return `value`.
    Update {
        filter: Document,
        update: Document,
        growth: i64,
        value: T,
    },
}

impl Embedded {
    /// The node stored for `comment` (carrying its key, if any) and the bytes it adds to the
    /// discussion document.
    pub(super) fn stored_node(
        &self,
        comment: NewComment,
        keyed: Option<&KeyedComment>,
    ) -> Result<(Node, i64)> {
        let mut node = Node::new(Body::new(comment));
        let mut keyed_growth = 0;
        if let Some(keyed) = keyed {
            node.id = keyed.id;
            node.key = StoredKey::of(Some(keyed));
            keyed_growth = 24;
        }
        let growth = (validate::check_stored(&node, self.max_comment_bytes)?
            + ELEMENT_OVERHEAD
            + keyed_growth) as i64;
        Ok((node, growth))
    }

    /// [`CommentStore::post`] to a discussion that was created: [`Error::NotFound`], having
    /// written nothing, where it was not.
    ///
    /// [`CommentStore::post`]: crate::CommentStore::post
    pub(super) async fn post_to_created(
        &self,
        discussion: &str,
        comment: NewComment,
    ) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        let keyed = KeyedComment::of(discussion, None, &comment)?;
        if let Some(keyed) = &keyed {
            // A repeat: one `find`, nothing written.
            if let Some((path, node)) = self.keyed_comment(discussion, keyed).await? {
                return Ok(node.comment(&path));
            }
        }
        let (mut node, growth) = self.stored_node(comment, keyed.as_ref())?;
        let dialect = self.backend.dialect().await?;
        let index = self
            .backend
            .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                let mut floor = None;
                // Whether an attempt failed after it may have landed.
                let mut uncertain = false;
                for attempt in 0..ATTEMPTS {
                    if let (Some(keyed), 0) = (&keyed, attempt) {
                        // Under the discussion's lock where writers take turns.
                        if let Some((path, stored)) = self.keyed_comment(discussion, keyed).await? {
                            return Ok((path[0], stored.body.posted));
                        }
                    }
                    // Stamped once this writer's turn has come, and never before the newest
                    // top-level comment: the push lands only if none is later, so positions and
                    // posting times agree.
                    node.body.posted = now_or_after(floor);
                    let (filter, update) =
                        self.top_level_push(discussion, &node, keyed.as_ref(), growth)?;
                    let (pushed, tries) = self
                        .push_top_level(dialect, discussion, filter, update, &node)
                        .await?;
                    if let Some(landed) = pushed {
                        return Ok(landed);
                    }
                    uncertain |= tries > 1;
                    if uncertain {
                        if let Some((index, stored)) = self.find_posted(discussion, node.id).await?
                        {
                            return Ok((index, stored.body.posted));
                        }
                    }
                    if let Some(keyed) = &keyed {
                        // A concurrent attempt with the key got there first.
                        if let Some((path, stored)) = self.keyed_comment(discussion, keyed).await? {
                            return Ok((path[0], stored.body.posted));
                        }
                    }
                    // Missing, full, or a later comment got there first.
                    floor = self.refusal(discussion, growth).await??;
                }
                Err(Error::contention("embedded write", ATTEMPTS))
            })
            .await?;
        let (index, posted) = index;
        node.body.posted = posted;
        Ok(node.comment(&[index]))
    }

    /// The filter and update that push `node` at the end of `discussion`'s top level: only
    /// where there is room for `growth` more bytes, no later comment, no comment with its id,
    /// and (for a keyed post) no comment with its key.
    fn top_level_push(
        &self,
        discussion: &str,
        node: &Node,
        keyed: Option<&KeyedComment>,
        growth: i64,
    ) -> Result<(Document, Document)> {
        let mut push = doc! { "comments": bson::to_bson(node)? };
        let mut filter = self.with_room(discussion, growth);
        if let Some(keyed) = keyed {
            push.insert(KEYED, keyed.id);
            filter.insert(KEYED, doc! { "$ne": keyed.id });
        }
        let update = doc! {
            "$push": push,
            "$inc": { "slots": 1_i64, "count": 1_i64, "bytes": growth },
            "$max": { LAST_POSTED: node.body.posted },
        };
        filter.insert(LAST_POSTED, doc! { "$not": { "$gt": node.body.posted } });
        // Never pushed twice: a retry after a lost reply matches nothing.
        filter.insert("comments.id", doc! { "$ne": node.id });
        Ok((filter, update))
    }

    /// Runs the push of [`Embedded::top_level_push`], retried: where it landed (its position
    /// and posting time), or `None` where the filter matched nothing; with the attempts made.
    async fn push_top_level(
        &self,
        dialect: Dialect,
        discussion: &str,
        filter: Document,
        update: Document,
        node: &Node,
    ) -> Result<(Option<Landed>, u32)> {
        let (id, posted) = (node.id, node.body.posted);
        // Where the server matches `$ne` on an array path when any element differs, the filter
        // cannot stop a second push: a retry looks for the comment itself first.
        let find = || async move {
            let found = self.find_posted(discussion, id).await?;
            Ok(found.map(|(index, stored)| (index, stored.body.posted)))
        };
        let push = || {
            let action = dialect.returning(
                self.discussions
                    .find_one_and_update(filter.clone(), update.clone())
                    .return_document(ReturnDocument::After),
                doc! { "slots": 1 },
            );
            async move {
                Ok(action
                    .await?
                    .map(|document| (count_field(&document, "slots") - 1, posted)))
            }
        };
        self.retried_push("post comment", find, push).await
    }

    /// A push of one comment, retried on transient errors: `push` sends it (`None` where its
    /// filter matched nothing), and every try after the first asks `find` first whether an
    /// earlier try, whose reply was lost, landed it. Where it landed, and the tries made.
    pub(super) async fn retried_push<Found, Pushed>(
        &self,
        operation: &'static str,
        find: impl Fn() -> Found,
        push: impl Fn() -> Pushed,
    ) -> Result<(Option<Landed>, u32)>
    where
        Found: Future<Output = Result<Option<Landed>>>,
        Pushed: Future<Output = Result<Option<Landed>>>,
    {
        let mut tries = 0;
        let landed = self
            .backend
            .retry(operation, || {
                tries += 1;
                let earlier = (tries > 1).then(&find);
                let pushed = push();
                async move {
                    if let Some(earlier) = earlier {
                        if let Some(landed) = earlier.await? {
                            return Ok(Some(landed));
                        }
                    }
                    pushed.await
                }
            })
            .await?;
        Ok((landed, tries))
    }
}
