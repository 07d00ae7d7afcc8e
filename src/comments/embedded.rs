//! Every comment embedded in the discussion's own document, threads nested by position.

use crate::error::Invalid;
use std::sync::Arc;

use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::{Collection, Database};

use super::cursor::{self, View};
use super::ranking::rank_after;
use super::tree::{self, Entry, Node, Window};
use super::votes::{
    self, Delta, Found, Tally, VoteBook, VOTE_OPS, VOTE_OPS_BYTES, VOTE_OPS_PER_DOCUMENT,
};
use super::{
    check_reply_target, discussion_lock, notify_reply, reply_to_withdraw, validate, Comment,
    CommentStore, Deletion, Features, Keyed, NewComment, Order, Sort, Strategy, Thread,
    ThreadedComments, Vote, VotedComments,
};
use crate::backend::Backend;
use crate::bson_ext::{self, now_or_after};
use crate::config::{store_builder_methods, StoreConfig};
use crate::notifications::{DynNotifier, Outbox};
use crate::page::{invalid, Scope};
use crate::sharding::ShardKey;
use crate::update_batch::is_duplicate_key;
use crate::validate::MAX_DOCUMENT_BYTES;
use crate::{Cursor, Entity, Error, Page, PageRequest, Result};

/// The strategy named in this store's cursors.
const STRATEGY: Strategy = Strategy::Embedded;
/// The store's collections, by default name.
pub(super) const COLLECTIONS: [&str; 3] = ["discussions", "comment_locks", votes::VOTES];
/// How long a discussion's lock lasts if its holder dies.
const LOCK_LEASE: std::time::Duration = std::time::Duration::from_secs(30);
/// Bytes a comment costs its document beyond its own encoding: the array index key, and the
/// `replies` array of a parent that had none.
const ELEMENT_OVERHEAD: usize = 32;
/// Attempts at a reply, edit or delete while other writers keep changing the same comment.
const ATTEMPTS: usize = 32;
/// The newest top-level comment's `posted`: a post never lands after a later one.
const LAST_POSTED: &str = "last_posted";
/// The ids of the discussion's keyed comments: a keyed push is filtered by its id not being
/// there, and adds it, in the same atomic update.
const KEYED: &str = "keyed";
/// Deepest reply accepted: BSON nests at most 100 levels, and each reply level takes two (an
/// array and a document).
const MAX_DEPTH_LIMIT: usize = 45;

/// Every comment of a discussion inside the discussion's document, as in the manual's second
/// strategy, threads nested by position.
///
/// The document (in a collection of the application's choosing, default `discussions`) is
/// `{_id: discussion, count, slots, bytes, last_posted, vote_ops, keyed, comments: [{id, posted,
/// author, text, edited, deleted, ups, downs, replies: [...]}]}`, plus any fields of the application's
/// own: point the store at the collection of the content being discussed and the comments live in
/// that content's document. `count` counts comments not deleted, `slots` top-level comments,
/// `bytes` estimates the document's size, `last_posted` is the newest top-level comment's time,
/// `keyed` the ids of comments posted with an idempotency key (derived from the discussion and
/// the key, see [`CommentStore::post`]; such a comment also keeps `idempotency_key` and
/// `content_digest`), and `vote_ops` the newest 1,000 votes' operation ids (see [`VotedComments`]; up to 20 KiB,
/// kept free below the 16 MiB limit). Votes live in `comment_votes` (index `{discussion_id,
/// comment}`, shard key `{discussion_id: 1, comment: 1}`); locks, on servers without atomic
/// updates, in `comment_locks`.
///
/// A comment's link is its position path: `2` for the third top-level comment, `2.0` for the
/// first reply to it. Positions never change, so a deleted comment stays as a tombstone.
///
/// # How it improves on the seed
/// - **A typed error, not a failed update, at the size limit.** Each write adds its size to
///   `bytes` in the same atomic update whose filter requires room for it, so a comment that would
///   take the document past [`EmbeddedBuilder::max_document_bytes`] (default 16 MiB less 64 KiB
///   for the application's own fields) fails with [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (of the `"discussion"`), which suggests
///   [`super::HybridPages`].
/// - **Links that return the new comment's position.** A post reads back `slots` from the same
///   `findAndModify` that pushed it; a reply is pushed only if its expected position is still
///   free, so concurrent replies never get each other's link.
/// - **Positions and posting times agree.** A comment is stamped for the position it is about
///   to take, never before the comment before it there (a post's filter requires `last_posted`
///   not to be later, a reply's stamp follows its previous sibling), and a writer that loses the
///   position to another stamps again: under concurrent posters the threaded view, in position
///   order, lists siblings in `posted` order.
/// - **Pages from `$slice`.** A threaded page reads only the top-level comments it needs, with
///   their replies, through a `$slice` projection; servers without `$slice` projections read the
///   whole document and slice it here (and so do servers that fail a `$slice` starting past the
///   end of the array, for reads that start at a given position).
///
/// The chronological view reads the whole document (replies are nested, so no projection can
/// pick comments by time) and sorts it here: one command, but its cost grows with the
/// discussion.
///
/// # Costs (commands, MongoDB)
/// Post: 1 (`findAndModify`). Reply, edit, delete: 2 (`find`, `update`). Any page, direct link,
/// count: 1 `find`. A vote: 4 (see [`super`]); a ranked page: 1 `find` (of the whole document
/// for the top level, of one thread for a comment's replies), ranked here. On servers without
/// atomic updates each write also takes and releases a lock (2 more).
///
/// # Votes
///
/// A vote's change of counts is one `update`: `$inc` of the element's `ups` and `downs` at its
/// position path, filtered by the element existing and by the vote's op id not among the
/// discussion's `vote_ops`, which it joins. The sorts' keys are computed from the counts on
/// every read, so nothing else is stored and no index is needed.
#[derive(Clone, Debug)]
pub struct Embedded {
    backend: Backend,
    /// Where replies and their deletion are notified, if the application asked.
    outbox: Option<Outbox>,
    discussions: Collection<Document>,
    votes: VoteBook,
    max_document_bytes: usize,
    max_comment_bytes: usize,
    max_depth: usize,
    /// Whether a post to a discussion not created creates it.
    create_discussions: bool,
}

/// Configures an [`Embedded`] store.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct EmbeddedBuilder {
    config: StoreConfig,
    notifier: Option<Arc<DynNotifier>>,
    max_document_bytes: usize,
    max_comment_bytes: usize,
    max_depth: usize,
    create_discussions: bool,
}

impl EmbeddedBuilder {
    store_builder_methods!();

    /// Whether a top-level [`post`](CommentStore::post) to a discussion that was not created
    /// creates it ([`CommentStore::create_discussion`], idempotent under concurrency) and
    /// posts, instead of failing with [`Error::NotFound`] (default `false`). A post to a
    /// created discussion costs what it did; the first post to a new one, the failed
    /// `findAndModify`, its check (1 `find`) and the creation (a `find` and an upserting
    /// `update`) more. Replies, votes and reads still need the discussion.
    pub fn create_discussions_on_post(mut self, create: bool) -> Self {
        self.create_discussions = create;
        self
    }

    /// Tells `notifier` (a [`NotificationStore`](crate::NotificationStore), say) of every
    /// reply: the parent comment's author is notified ([`Kind::Reply`] on
    /// `"<discussion>/<parent link>"`, by the reply's author; nobody of their own reply), and
    /// deleting a reply withdraws its author from that group (even if they wrote other replies
    /// to the same comment). Off by default.
    ///
    /// The notification never fails the reply (or the delete): it is queued in the store's own
    /// database, in the collection `<main collection>_outbox`, and tried at once (for at most 2
    /// seconds); one that could not be delivered then is delivered by the store's
    /// [`outbox`](Embedded::outbox) worker, at least once (see [`Outbox`] for the guarantee and what
    /// can lose one). On, a reply costs 2 commands more in the store's database (queue, then
    /// complete) besides the notifier's own, and a delete 4 (reading the comment and its
    /// parent, queue, complete).
    ///
    /// [`Kind::Reply`]: crate::notifications::Kind::Reply
    pub fn notifier(mut self, notifier: Arc<DynNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// The size a discussion document may reach, in bytes (default 16 MiB less 64 KiB, room
    /// for the application's own fields).
    pub fn max_document_bytes(mut self, bytes: usize) -> Self {
        self.max_document_bytes = bytes;
        self
    }

    /// The largest comment, as an encoded document in bytes (default 64 KiB).
    pub fn max_comment_bytes(mut self, bytes: usize) -> Self {
        self.max_comment_bytes = bytes;
        self
    }

    /// The deepest reply, top-level comments being depth 0 (default and most 45).
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    /// The store.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an unusable collection name, the same name twice, a name
    /// given to a collection the store does not have, a document limit above 16 MiB less the
    /// 20 KiB its votes' operation ids may take, or a depth above 45.
    pub fn build(self) -> Result<Embedded> {
        let [discussions, locks, votes] = self.config.names(COLLECTIONS)?;
        if self.max_document_bytes > MAX_DOCUMENT_BYTES - VOTE_OPS_BYTES {
            return Err(Error::InvalidConfig {
                reason: "max_document_bytes cannot pass the 16 MiB document limit less the \
                         20 KiB kept for vote_ops"
                    .to_owned(),
            });
        }
        if self.max_depth > MAX_DEPTH_LIMIT {
            return Err(Error::InvalidConfig {
                reason: format!("max_depth cannot pass {MAX_DEPTH_LIMIT} (BSON nesting limit)"),
            });
        }
        let votes = self.config.database().collection(&votes);
        let backend = self
            .config
            .backend(&locks, LOCK_LEASE)
            .with_index(&votes, VoteBook::index());
        let outbox = self
            .notifier
            .map(|notifier| {
                Outbox::build(
                    &self.config,
                    &Outbox::collection_for(&discussions),
                    notifier,
                )
            })
            .transpose()?;
        Ok(Embedded {
            votes: VoteBook::new(votes, backend.clone()),
            backend,
            outbox,
            discussions: self.config.database().collection(&discussions),
            max_document_bytes: self.max_document_bytes,
            max_comment_bytes: self.max_comment_bytes,
            max_depth: self.max_depth,
            create_discussions: self.create_discussions,
        })
    }
}

/// Which top-level comments to read.
#[derive(Clone, Copy, Debug)]
enum Range {
    All,
    From { first: usize, len: usize },
    Last { len: usize },
}

impl Embedded {
    /// The default size a discussion document may reach.
    pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = MAX_DOCUMENT_BYTES - 64 * 1024;
    /// The default largest comment, in bytes.
    pub const DEFAULT_MAX_COMMENT_BYTES: usize = 64 * 1024;
    /// The default deepest reply.
    pub const DEFAULT_MAX_DEPTH: usize = MAX_DEPTH_LIMIT;

    /// A store with the default collections and limits in `database`.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default configuration is valid")
    }

    /// The notifications the store owes, when it was built with a
    /// [`notifier`](EmbeddedBuilder::notifier): run its worker (or `run_pending`) to deliver
    /// those whose first attempt failed.
    pub fn outbox(&self) -> Option<&Outbox> {
        self.outbox.as_ref()
    }

    /// A builder to configure collections and limits.
    pub fn builder(database: &Database) -> EmbeddedBuilder {
        EmbeddedBuilder {
            config: StoreConfig::new(database),
            notifier: None,
            max_document_bytes: Self::DEFAULT_MAX_DOCUMENT_BYTES,
            max_comment_bytes: Self::DEFAULT_MAX_COMMENT_BYTES,
            max_depth: Self::DEFAULT_MAX_DEPTH,
            create_discussions: false,
        }
    }

    /// This store as a [`ThreadedComments`], which it always is: what
    /// [`CommentStore::threaded`] gives a strategy chosen at run time, without its `Option`.
    /// (With the traits in scope, [`crate::prelude`], an `Embedded` replies and votes as it
    /// is.)
    pub fn as_threaded(&self) -> &dyn ThreadedComments {
        self
    }

    /// Reads the top-level comments in `range`, or `None` if the discussion was not created.
    async fn window(&self, discussion: &str, range: Range) -> Result<Option<Window>> {
        let capabilities = self.backend.capabilities().await?;
        // `[skip, limit]` may skip past the end (a link to a missing comment, a page past the
        // last): servers that fail such a query read the whole document instead.
        let sliced = match range {
            Range::All => false,
            Range::From { .. } => capabilities.slice_projection && capabilities.slice_past_end,
            Range::Last { .. } => capabilities.slice_projection,
        };
        let comments = match range {
            Range::From { first, len } if sliced => Bson::from(doc! {
                "$slice": [slice_number(first, 1), slice_number(len.max(1), 1)]
            }),
            Range::Last { len } if sliced => {
                Bson::from(doc! { "$slice": slice_number(len.max(1), -1) })
            }
            _ => Bson::from(1),
        };
        let found = self
            .discussions
            .find_one(doc! { "_id": discussion })
            .projection(doc! { "slots": 1, "comments": comments })
            .await?;
        let Some(found) = found.filter(created) else {
            return Ok(None);
        };
        let slots = count_field(&found, "slots");
        let mut nodes: Vec<Node> = match found.get_array("comments") {
            Ok(array) => bson_ext::decode_with_id(
                self.discussions.name(),
                Some(discussion.into()),
                array.clone(),
            )?,
            Err(_) => Vec::new(),
        };
        let first = match range {
            Range::All => 0,
            Range::From { first, .. } => first,
            Range::Last { .. } if sliced => slots.saturating_sub(nodes.len()),
            Range::Last { len } => slots.saturating_sub(len),
        };
        if !sliced {
            // The server sent every comment: keep the ones asked for.
            let end = match range {
                Range::All => nodes.len(),
                Range::From { first, len } => first.saturating_add(len).min(nodes.len()),
                Range::Last { .. } => nodes.len(),
            };
            nodes.truncate(end);
            nodes.drain(..first.min(nodes.len()));
        }
        Ok(Some(Window {
            first,
            slots,
            nodes,
        }))
    }

    /// The window holding the thread of `path`, failing if the discussion or comment is missing.
    async fn window_with(
        &self,
        discussion: &str,
        path: &[usize],
        link: &str,
        what: Entity,
    ) -> Result<Window> {
        let window = self
            .window(
                discussion,
                Range::From {
                    first: path[0],
                    len: 1,
                },
            )
            .await?
            .ok_or_else(|| validate::no_discussion(discussion))?;
        if window.node(path).is_none() {
            return Err(validate::no_comment(what, link));
        }
        Ok(window)
    }

    /// Why a write of `growth` more bytes cannot apply, if it cannot: the discussion is missing
    /// or would pass its limit (one read). Otherwise the newest top-level `posted`: there is
    /// room, so a filter that did not match lost to another writer.
    async fn refusal(
        &self,
        discussion: &str,
        growth: i64,
    ) -> Result<std::result::Result<Option<bson::DateTime>, Error>> {
        let found = self
            .backend
            .retry("read discussion", || async {
                Ok(self
                    .discussions
                    .find_one(doc! { "_id": discussion })
                    .projection(doc! { "slots": 1, "bytes": 1, LAST_POSTED: 1 })
                    .await?)
            })
            .await?;
        let Some(found) = found.filter(created) else {
            return Ok(Err(validate::no_discussion(discussion)));
        };
        let bytes = count_field(&found, "bytes") as i64;
        if bytes + growth > self.max_document_bytes as i64 {
            return Ok(Err(Error::InvalidInput(crate::error::Invalid::TooLarge {
                what: "discussion",
                size: (bytes + growth).max(0) as usize,
                limit: self.max_document_bytes,
            })));
        }
        Ok(Ok(bson_ext::date(&found, LAST_POSTED)))
    }

    /// [`Embedded::window_with`] for a write, retried: a read is idempotent.
    async fn window_for_write(
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
    async fn keyed_comment(
        &self,
        discussion: &str,
        keyed: &Keyed,
    ) -> Result<Option<(Vec<usize>, Node)>> {
        let found = self
            .backend
            .retry("find keyed comment", || async {
                Ok(self
                    .discussions
                    .find_one(doc! { "_id": discussion, KEYED: keyed.id })
                    .projection(doc! { "comments": 1 })
                    .await?)
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
        let Some((path, node)) = Node::find(&nodes, keyed.id) else {
            return Ok(None);
        };
        keyed.check(
            node.idempotency_key.as_deref(),
            node.content_digest.as_deref(),
        )?;
        Ok(Some((path, node.clone())))
    }

    /// A filter for `discussion` that leaves room for `growth` more bytes.
    fn with_room(&self, discussion: &str, growth: i64) -> Document {
        doc! {
            "_id": discussion,
            "slots": { "$exists": true },
            "bytes": { "$lte": self.max_document_bytes as i64 - growth },
        }
    }

    /// Runs `change` (an update built from the current comment) until it applies, re-reading
    /// the comment whenever another writer got there first.
    async fn change_comment<T>(
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
enum Change<T> {
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

/// `sign * n` for a `$slice`, as an Int32 where it fits: MongoDB takes any number there, some
/// servers (mongo-java-server) only an Int32.
fn slice_number(n: usize, sign: i64) -> Bson {
    let n = i64::try_from(n).unwrap_or(i64::MAX) * sign;
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

/// Whether a discussion document read by `_id` (with `slots` projected) was created by this
/// store. Checked here rather than by a `slots: {$exists: true}` filter: FerretDB 1.x evaluates
/// any filter but `{_id}` by decoding every discussion of the collection, comments and all.
fn created(document: &Document) -> bool {
    document.contains_key("slots")
}

/// A non-negative count field, 0 when missing.
fn count_field(document: &Document, field: &str) -> usize {
    bson_ext::count(document, field) as usize
}

/// A page from `entries` (in view order) after the cursor position, which `is_after` tests.
fn page_after(
    entries: Vec<Entry<'_>>,
    limit: usize,
    more_beyond: bool,
    is_after: impl Fn(&Entry<'_>) -> bool,
    cursor: impl Fn(&Entry<'_>) -> Cursor,
) -> Page<Comment> {
    let mut entries: Vec<Entry<'_>> = entries.into_iter().filter(|e| is_after(e)).collect();
    let more = entries.len() > limit || (more_beyond && !entries.is_empty());
    entries.truncate(limit);
    Page {
        next: if more {
            entries.last().map(&cursor)
        } else {
            None
        },
        items: entries.iter().map(Entry::comment).collect(),
    }
}

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

/// Where a ranked page of `parent`'s replies (the top level for `None`) by `sort` continues: the
/// key and sibling index in `cursor`, if any.
fn ranked_after(
    cursor: Option<&Cursor>,
    sort: Sort,
    discussion: &str,
    parent: Option<&str>,
) -> Result<Option<(f64, usize)>> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    let (key, index) = cursor::ranked_key(cursor, STRATEGY, sort, discussion, parent)?;
    let index = tree::parse_path(&index, 0).map_err(|_| invalid("not a position"))?[0];
    Ok(Some((key, index)))
}

/// One level of comments, each with its index among its siblings, under the comment at `base`
/// (empty: the top level), ranked by `sort` as [`VotedComments::ranked`] ranks it: the page of
/// `limit` after `after`, each comment with the first page of its own replies, `depth` levels
/// down.
fn ranked_level(
    discussion: &str,
    sort: Sort,
    base: &[usize],
    level: Vec<(usize, &Node)>,
    after: Option<(f64, usize)>,
    limit: usize,
    depth: usize,
) -> Page<Thread> {
    let parent = (!base.is_empty()).then(|| tree::format_path(base));
    let keyed = level
        .into_iter()
        .map(|(index, node)| (sort.key(node.votes(), node.posted), index, node))
        .collect();
    let mut ranked = rank_after(keyed, after);
    ranked.truncate(limit + 1);
    let page = Page::from_overfetch(ranked, limit, |(key, index, _)| {
        cursor::after_ranked(
            STRATEGY,
            sort,
            discussion,
            parent.as_deref(),
            *key,
            &index.to_string(),
        )
    });
    page.map(|(_, index, node)| {
        let mut path = base.to_vec();
        path.push(index);
        let replies = (depth > 0).then(|| {
            let replies = node.replies.iter().enumerate().collect();
            ranked_level(discussion, sort, &path, replies, None, limit, depth - 1)
        });
        Thread {
            comment: node.comment(&path),
            replies,
        }
    })
}

/// A threaded or sub-thread cursor of `view` in `order`, made by a read of `scope`, after the
/// comment at `path`.
fn after_path(view: View, order: Order, scope: Scope, path: &[usize]) -> Cursor {
    cursor::new(STRATEGY, view, order, scope, &[&tree::format_path(path)])
}

impl Embedded {
    /// [`CommentStore::post`] to a discussion that was created: [`Error::NotFound`], having
    /// written nothing, where it was not.
    async fn post_to_created(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        let keyed = Keyed::of(discussion, None, &comment)?;
        if let Some(keyed) = &keyed {
            // A repeat: one `find`, nothing written.
            if let Some((path, node)) = self.keyed_comment(discussion, keyed).await? {
                return Ok(node.comment(&path));
            }
        }
        let mut node = Node::new(comment);
        let mut keyed_growth = 0;
        if let Some(keyed) = &keyed {
            node.id = keyed.id;
            node.idempotency_key = Some(keyed.key.clone());
            node.content_digest = Some(keyed.content.clone());
            keyed_growth = 24;
        }
        let growth = (validate::check_stored(&node, self.max_comment_bytes)?
            + ELEMENT_OVERHEAD
            + keyed_growth) as i64;
        let capabilities = self.backend.capabilities().await?;
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
                            return Ok((path[0], stored.posted));
                        }
                    }
                    // Stamped once this writer's turn has come, and never before the newest
                    // top-level comment: the push lands only if none is later, so positions and
                    // posting times agree.
                    node.posted = now_or_after(floor);
                    let mut push = doc! { "comments": bson::to_bson(&node)? };
                    let mut filter = self.with_room(discussion, growth);
                    if let Some(keyed) = &keyed {
                        push.insert(KEYED, keyed.id);
                        filter.insert(KEYED, doc! { "$ne": keyed.id });
                    }
                    let update = doc! {
                        "$push": push,
                        "$inc": { "slots": 1_i64, "count": 1_i64, "bytes": growth },
                        "$max": { LAST_POSTED: node.posted },
                    };
                    filter.insert(LAST_POSTED, doc! { "$not": { "$gt": node.posted } });
                    // Never pushed twice: a retry after a lost reply matches nothing.
                    filter.insert("comments.id", doc! { "$ne": node.id });
                    let mut tries = 0;
                    let (id, posted) = (node.id, node.posted);
                    let pushed = self
                        .backend
                        .retry("post comment", || {
                            tries += 1;
                            let again = tries > 1;
                            let mut action = self
                                .discussions
                                .find_one_and_update(filter.clone(), update.clone())
                                .return_document(ReturnDocument::After);
                            if capabilities.find_and_modify_projection {
                                action = action.projection(doc! { "slots": 1 });
                            }
                            async move {
                                // FerretDB 1.x matches `$ne` on an array path when any element
                                // differs: a retry looks for the comment itself first.
                                if again {
                                    if let Some((index, stored)) =
                                        self.find_posted(discussion, id).await?
                                    {
                                        return Ok(Some((index, stored.posted)));
                                    }
                                }
                                Ok(action
                                    .await?
                                    .map(|document| (count_field(&document, "slots") - 1, posted)))
                            }
                        })
                        .await?;
                    if let Some(landed) = pushed {
                        return Ok(landed);
                    }
                    uncertain |= tries > 1;
                    if uncertain {
                        if let Some((index, stored)) = self.find_posted(discussion, node.id).await?
                        {
                            return Ok((index, stored.posted));
                        }
                    }
                    if let Some(keyed) = &keyed {
                        // A concurrent attempt with the key got there first.
                        if let Some((path, stored)) = self.keyed_comment(discussion, keyed).await? {
                            return Ok((path[0], stored.posted));
                        }
                    }
                    // Missing, full, or a later comment got there first.
                    floor = self.refusal(discussion, growth).await??;
                }
                Err(Error::contention("embedded write", ATTEMPTS))
            })
            .await?;
        let (index, posted) = index;
        node.posted = posted;
        Ok(node.comment(&[index]))
    }
}

#[async_trait]
impl CommentStore for Embedded {
    fn strategy(&self) -> Strategy {
        Strategy::Embedded
    }

    fn features(&self) -> Features {
        Features {
            threading: true,
            removes_leaves: false,
        }
    }

    fn threaded(&self) -> Option<&dyn ThreadedComments> {
        Some(self)
    }

    /// Adds the comment fields to the discussion's document, creating the document if it does
    /// not exist. An existing document keeps its own fields (and gets an empty `comments` array,
    /// replacing any field of that name); one that has comments already is left alone.
    async fn create_discussion(&self, discussion: &str) -> Result<()> {
        validate::check_discussion(discussion)?;
        // Guarded: on servers without atomic updates, creating the fields of an existing
        // document must not interleave with a post to it.
        // Retried whole: an attempt whose reply was lost left `slots`, which the next one sees.
        let attempt = || async {
            let existing = self
                .discussions
                .find_one(doc! { "_id": discussion })
                .await?;
            let base = match &existing {
                Some(document) if document.contains_key("slots") => return Ok(()),
                Some(document) => bson::to_vec(document)?.len(),
                None => 0,
            };
            let fields =
                doc! { "count": 0_i64, "slots": 0_i64, "bytes": base as i64, "comments": [] };
            let created = self
                .discussions
                .update_one(
                    doc! { "_id": discussion, "slots": { "$exists": false } },
                    doc! { "$set": fields },
                )
                .upsert(true)
                .await;
            match created {
                Ok(_) => Ok(()),
                // Created by a concurrent call.
                Err(error) if is_duplicate_key(&error) => Ok(()),
                Err(error) => Err(error.into()),
            }
        };
        self.backend
            .exclusive_one(
                &discussion_lock(STRATEGY, discussion),
                self.backend.retry("create discussion", attempt),
            )
            .await
    }

    async fn post(&self, discussion: &str, comment: NewComment) -> Result<Comment> {
        let again = self.create_discussions.then(|| comment.clone());
        match (self.post_to_created(discussion, comment).await, again) {
            (Err(error), Some(comment)) if validate::is_no_discussion(&error) => {
                self.create_discussion(discussion).await?;
                self.post_to_created(discussion, comment).await
            }
            (posted, _) => posted,
        }
    }

    async fn chronological(
        &self,
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        validate::check_page(discussion, &page)?;
        let after = match &page.after {
            None => None,
            Some(cursor) => {
                let (posted, id) = cursor::posted_key(cursor, STRATEGY, order, discussion)?;
                Some((posted.timestamp_millis(), id))
            }
        };
        let window = self
            .window(discussion, Range::All)
            .await?
            .ok_or_else(|| validate::no_discussion(discussion))?;
        let mut entries = window.threaded(Order::OldestFirst);
        let key = |e: &Entry<'_>| (e.node.posted.timestamp_millis(), e.node.id);
        entries.sort_by_key(key);
        if order == Order::NewestFirst {
            entries.reverse();
        }
        Ok(page_after(
            entries,
            page.limit,
            false,
            |e| match &after {
                None => true,
                Some(after) if order == Order::OldestFirst => key(e) > *after,
                Some(after) => key(e) < *after,
            },
            |e| cursor::after_posted(STRATEGY, order, discussion, e.node.posted, e.node.id),
        ))
    }

    async fn get(&self, discussion: &str, link: &str) -> Result<Comment> {
        validate::check_discussion(discussion)?;
        let path = tree::parse_path(link, self.max_depth)?;
        let window = self
            .window_with(discussion, &path, link, Entity::Comment)
            .await?;
        Ok(window
            .node(&path)
            .expect("checked by window_with")
            .comment(&path))
    }

    async fn edit(&self, discussion: &str, link: &str, text: &str) -> Result<Comment> {
        validate::check_edit(discussion, text, self.max_comment_bytes)?;
        let now = bson::DateTime::now();
        self.change_comment(discussion, link, |path, node| {
            if node.deleted {
                return Err(Error::NotFound {
                    what: crate::Entity::DeletedComment,
                    id: link.to_owned(),
                });
            }
            if node.text == text && node.edited == Some(now) {
                // This edit's own earlier attempt, whose reply was lost.
                return Ok(Change::Done(node.comment(path)));
            }
            let edited = Node {
                text: text.to_owned(),
                edited: Some(now),
                replies: Vec::new(),
                ..node.clone()
            };
            validate::check_stored(&edited, self.max_comment_bytes)?;
            let field = tree::field_path(path);
            let growth = text.len() as i64 - node.text.len() as i64
                + if node.edited.is_none() { 16 } else { 0 };
            Ok(Change::Update {
                filter: doc! {
                    format!("{field}.deleted"): false,
                    format!("{field}.text"): &node.text,
                },
                update: doc! {
                    "$set": { format!("{field}.text"): text, format!("{field}.edited"): now },
                    "$inc": { "bytes": growth },
                },
                growth,
                value: edited.comment(path),
            })
        })
        .await
    }

    async fn delete(&self, discussion: &str, link: &str) -> Result<Deletion> {
        let withdrawal = reply_to_withdraw(self, self.outbox.as_ref(), discussion, link).await?;
        let deletion = self
            .change_comment(discussion, link, |path, node| {
                if node.deleted {
                    return Ok(Change::Done(Deletion::Tombstoned));
                }
                let field = tree::field_path(path);
                Ok(Change::Update {
                    filter: doc! {
                        format!("{field}.deleted"): false,
                        format!("{field}.text"): &node.text,
                    },
                    update: doc! {
                        "$set": { format!("{field}.text"): "", format!("{field}.deleted"): true },
                        "$inc": { "count": -1_i64, "bytes": -(node.text.len() as i64) },
                    },
                    growth: -(node.text.len() as i64),
                    value: Deletion::Tombstoned,
                })
            })
            .await?;
        if let (Some(outbox), Some(activity)) = (&self.outbox, withdrawal) {
            outbox.withdraw(activity).await;
        }
        Ok(deletion)
    }

    async fn count(&self, discussion: &str) -> Result<u64> {
        validate::check_discussion(discussion)?;
        let found = self
            .discussions
            .find_one(doc! { "_id": discussion })
            .projection(doc! { "slots": 1, "count": 1 })
            .await?
            .filter(created)
            .ok_or_else(|| validate::no_discussion(discussion))?;
        Ok(count_field(&found, "count") as u64)
    }

    /// The votes' index (every other operation finds the discussion by `_id`).
    async fn create_indexes(&self) -> Result<()> {
        self.backend.create_indexes().await
    }

    fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::new(
                self.discussions.name(),
                doc! { "_id": "hashed" },
                "each discussion is one document, read and written by _id; hashing spreads \
                 discussions evenly (the manual leaves this strategy's shard key to the \
                 application, whose content collection it usually is)",
            ),
            self.votes.shard_key(),
        ]
    }
}

#[async_trait]
impl ThreadedComments for Embedded {
    async fn reply(&self, discussion: &str, parent: &str, comment: NewComment) -> Result<Comment> {
        validate::check_new_comment(discussion, &comment, self.max_comment_bytes)?;
        let parent_path = tree::parse_path(parent, self.max_depth)?;
        check_reply_target(self.outbox.as_ref(), discussion, parent)?;
        if parent_path.len() > self.max_depth {
            return Err(Error::InvalidInput(Invalid::ThreadTooDeep {
                depth: parent_path.len(),
                limit: format!("this store nests replies at most {} deep", self.max_depth),
            }));
        }
        let keyed = Keyed::of(discussion, Some(parent), &comment)?;
        if let Some(keyed) = &keyed {
            // A repeat: one `find`, nothing written (and nothing notified again).
            if let Some((path, node)) = self.keyed_comment(discussion, keyed).await? {
                return Ok(node.comment(&path));
            }
        }
        let mut node = Node::new(comment);
        let mut keyed_growth = 0;
        if let Some(keyed) = &keyed {
            node.id = keyed.id;
            node.idempotency_key = Some(keyed.key.clone());
            node.content_digest = Some(keyed.content.clone());
            keyed_growth = 24;
        }
        let growth = (validate::check_stored(&node, self.max_comment_bytes)?
            + ELEMENT_OVERHEAD
            + keyed_growth) as i64;
        let mut parent_author = String::new();
        let index = self
            .backend
            .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                for _ in 0..ATTEMPTS {
                    if let Some(keyed) = &keyed {
                        // Stored by a concurrent attempt with the key (checked under the
                        // discussion's lock where writers take turns).
                        if let Some((path, stored)) = self.keyed_comment(discussion, keyed).await? {
                            let parent_node = self
                                .window_for_write(
                                    discussion,
                                    &parent_path,
                                    parent,
                                    Entity::ParentComment,
                                )
                                .await?;
                            if let Some(parent_node) = parent_node.node(&parent_path) {
                                parent_author = parent_node.author.id.clone();
                            }
                            let index = path.last().copied().unwrap_or_default();
                            return Ok((index, stored.posted));
                        }
                    }
                    let window = self
                        .window_for_write(discussion, &parent_path, parent, Entity::ParentComment)
                        .await?;
                    let parent_node = window.node(&parent_path).expect("checked by window_with");
                    parent_author = parent_node.author.id.clone();
                    let siblings = &parent_node.replies;
                    // This reply's own earlier attempt, whose reply was lost, took its position.
                    if let Some(index) = siblings.iter().position(|sibling| sibling.id == node.id) {
                        return Ok((index, siblings[index].posted));
                    }
                    let index = siblings.len();
                    // Stamped for this attempt at position `index`, never before the reply
                    // there before it: the reply that takes a position carries the stamp made
                    // for it, so positions and posting times agree.
                    node.posted = now_or_after(siblings.last().map(|sibling| sibling.posted));
                    let pushed = bson::to_bson(&node)?;
                    let field = tree::field_path(&parent_path);
                    let mut filter = self.with_room(discussion, growth);
                    // The reply goes to position `index` only if no one took it meanwhile.
                    filter.insert(
                        format!("{field}.replies.{index}"),
                        doc! { "$exists": false },
                    );
                    filter.insert(format!("{field}.deleted"), doc! { "$exists": true });
                    let mut push = doc! { format!("{field}.replies"): pushed };
                    if let Some(keyed) = &keyed {
                        push.insert(KEYED, keyed.id);
                        filter.insert(KEYED, doc! { "$ne": keyed.id });
                    }
                    let update = doc! {
                        "$push": push,
                        "$inc": { "count": 1_i64, "bytes": growth },
                    };
                    // Pushed at `index` only while it is free: a retry after a lost reply
                    // matches nothing, and the next round finds the reply there.
                    let mut tries = 0;
                    let (id, posted) = (node.id, node.posted);
                    let (parent_path, parent) = (&parent_path, parent);
                    let landed = self
                        .backend
                        .retry("reply to comment", || {
                            tries += 1;
                            let again = tries > 1;
                            let action =
                                self.discussions.update_one(filter.clone(), update.clone());
                            async move {
                                if again {
                                    let window = self
                                        .window_with(
                                            discussion,
                                            parent_path,
                                            parent,
                                            Entity::ParentComment,
                                        )
                                        .await?;
                                    let siblings = window.node(parent_path).map(|n| &n.replies);
                                    if let Some(sibling) = siblings.and_then(|s| {
                                        s.iter().position(|s| s.id == id).map(|i| (i, s))
                                    }) {
                                        return Ok(Some((sibling.0, sibling.1[sibling.0].posted)));
                                    }
                                }
                                Ok((action.await?.matched_count == 1).then_some((index, posted)))
                            }
                        })
                        .await?;
                    if let Some(landed) = landed {
                        return Ok(landed);
                    }
                    if tries == 1 {
                        self.refusal(discussion, growth).await??;
                    }
                }
                Err(Error::contention("embedded write", ATTEMPTS))
            })
            .await?;
        let (index, posted) = index;
        node.posted = posted;
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

    async fn thread_page(
        &self,
        discussion: &str,
        order: Order,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        validate::check_page(discussion, &page)?;
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

    async fn sub_thread(
        &self,
        discussion: &str,
        link: &str,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        validate::check_page(discussion, &page)?;
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
    async fn ranked_thread(
        &self,
        discussion: &str,
        sort: Sort,
        page: PageRequest,
        depth: usize,
    ) -> Result<Page<Thread>> {
        validate::check_page(discussion, &page)?;
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

#[async_trait]
impl Tally for Embedded {
    type Target = Vec<usize>;

    fn check_link(&self, link: &str) -> Result<()> {
        tree::parse_path(link, self.max_depth).map(drop)
    }

    async fn find(&self, discussion: &str, link: &str) -> Result<Found<Vec<usize>>> {
        let path = tree::parse_path(link, self.max_depth)?;
        let window = self
            .window_for_write(discussion, &path, link, Entity::Comment)
            .await?;
        let deleted = window.node(&path).is_some_and(|node| node.deleted);
        Ok(Found {
            target: path,
            deleted,
        })
    }

    async fn apply(
        &self,
        discussion: &str,
        path: &Vec<usize>,
        delta: Delta,
        op: ObjectId,
    ) -> Result<bool> {
        let field = tree::field_path(path);
        let mut filter = doc! {
            "_id": discussion,
            "slots": { "$exists": true },
            format!("{field}.deleted"): { "$exists": true },
        };
        let mut update = doc! {
            "$inc": { format!("{field}.ups"): delta.ups, format!("{field}.downs"): delta.downs },
        };
        crate::retry::once_per_op_in(
            &mut filter,
            &mut update,
            VOTE_OPS,
            VOTE_OPS_PER_DOCUMENT,
            op,
        );
        // Applied once: `op` joins `vote_ops`, whose filter a retry no longer matches.
        let counted = self
            .backend
            .retry("count vote", || async {
                Ok(self
                    .discussions
                    .update_one(filter.clone(), update.clone())
                    .await?)
            })
            .await?;
        if counted.matched_count == 1 {
            return Ok(true);
        }
        // Counted already (by this vote's lost attempt, or by a call finishing its mark)?
        // Elements are never removed, so otherwise the discussion is gone.
        let holds = self
            .backend
            .retry("read discussion", || async {
                Ok(self
                    .discussions
                    .find_one(doc! { "_id": discussion, VOTE_OPS: op })
                    .projection(doc! { "_id": 1 })
                    .await?)
            })
            .await?;
        Ok(holds.is_some())
    }

    fn lock_key(&self, discussion: &str) -> String {
        discussion_lock(STRATEGY, discussion)
    }
}

#[async_trait]
impl VotedComments for Embedded {
    async fn vote(
        &self,
        discussion: &str,
        link: &str,
        user: &str,
        vote: Vote,
    ) -> Result<Option<Vote>> {
        self.votes
            .set(self, discussion, link, user, vote.value())
            .await
    }

    async fn retract_vote(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>> {
        self.votes.set(self, discussion, link, user, 0).await
    }

    async fn vote_of(&self, discussion: &str, link: &str, user: &str) -> Result<Option<Vote>> {
        self.votes
            .get(|link| self.check_link(link), discussion, link, user)
            .await
    }

    async fn ranked(
        &self,
        discussion: &str,
        parent: Option<&str>,
        sort: Sort,
        page: PageRequest,
    ) -> Result<Page<Comment>> {
        validate::check_page(discussion, &page)?;
        let parent_path = parent
            .map(|parent| tree::parse_path(parent, self.max_depth))
            .transpose()?;
        let after = ranked_after(page.after.as_ref(), sort, discussion, parent)?;
        let window = match (&parent_path, parent) {
            (Some(path), Some(link)) => {
                self.window_with(discussion, path, link, Entity::ParentComment)
                    .await?
            }
            _ => self
                .window(discussion, Range::All)
                .await?
                .ok_or_else(|| validate::no_discussion(discussion))?,
        };
        // The level ranked: its comments with their positions among their siblings.
        let level: Vec<(usize, &Node)> = match &parent_path {
            Some(path) => window
                .node(path)
                .expect("checked by window_with")
                .replies
                .iter()
                .enumerate()
                .collect(),
            None => (window.first..).zip(&window.nodes).collect(),
        };
        let base = parent_path.unwrap_or_default();
        let ranked = ranked_level(discussion, sort, &base, level, after, page.limit, 0);
        Ok(ranked.map(|thread| thread.comment))
    }

    async fn settle_votes(&self, discussion: &str) -> Result<usize> {
        self.votes.settle(self, discussion).await
    }
}
