//! Votes on comments, one document per (discussion, comment, user), and the journal that keeps
//! each comment's counts exact: written once, for the three strategies, which say how a change of
//! counts reaches a comment where they store it ([`Tally`]).
//!
//! # The vote document is the journal
//!
//! A vote is `{_id: {discussion, comment, user}, discussion_id, comment, user, value, at}` in
//! `comment_votes` (`value` 1 or -1). Changing it and counting the change are two writes to two
//! documents, so the vote document records what is still to be counted, as a like does
//! ([`crate::feed`]'s likes):
//! - a change is claimed by writing the new `value` with the mark `pending: {op, ups, downs}`
//!   (the change of counts it makes, and a fresh operation id): an `insert` for a first vote (the
//!   unique `_id` makes it atomic), else an `update` filtered by the value it replaces and by no
//!   mark, so of two concurrent changes of one pair exactly one claims each state;
//! - the change of counts is applied to the comment with `op` ([`Tally::apply`]), recorded in the
//!   document that holds the comment (`vote_ops`, the newest ids), whose filter excludes a
//!   document holding it: applied once however often it is sent;
//! - the mark is cleared (a retraction's document, `value: 0` while marked, is deleted), filtered
//!   by `op`.
//!
//! A call that finds a mark on its pair (left by a call that failed part-way) first finishes it
//! with the `op` stored there, so nothing is counted twice or missed; so does
//! [`VotedComments::settle_votes`](super::VotedComments::settle_votes) for a whole discussion.
//! Exact as long as a mark is finished before [`VOTE_OPS_PER_COMMENT`] later votes on the same
//! comment ([`PerComment`](super::PerComment)) or [`VOTE_OPS_PER_DOCUMENT`] on the same
//! document ([`Embedded`](super::Embedded)'s discussion, a [`HybridPages`](super::HybridPages)
//! page) drop its id.
//!
//! Where updates are not atomic (see docs/SERVERS.md) a vote runs under the discussion's lock, the one
//! the strategy's edits and deletes take.
//!
//! # Retries
//!
//! Every write is retried on transient failures and is idempotent: the claim's `insert` meets
//! its own document (by `op`) on a retry; the claim's `update` that matches nothing on a retry
//! finds the mark with its own `op`; the counts' update carries `op`; clearing and deleting
//! select the mark by `op`.

use crate::error::Invalid;
use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Document};
use mongodb::{Collection, IndexModel};

use super::engine::{At, BallotEngine};
use super::lock::discussion_lock;
use super::ranking::Vote;
use super::validate;
use super::Strategy;
use crate::backend::update_batch::is_duplicate_key;
use crate::backend::Backend;
use crate::bson_ext;
use crate::error::{Entity, Error, Result};
use crate::sharding::ShardKey;

/// The default name of the votes collection.
pub(super) const VOTES: &str = "comment_votes";
/// Operation ids a per-comment document keeps (as a post's counters do).
pub(crate) const VOTE_OPS_PER_COMMENT: i32 = crate::retry::RECENT_OPS;
/// Operation ids a document holding many comments keeps: an embedded discussion, a page.
pub(crate) const VOTE_OPS_PER_DOCUMENT: i32 = 1_000;
/// Bytes a document holding many comments keeps free for its `vote_ops` (1,000 ids of 17 bytes).
pub(super) const VOTE_OPS_BYTES: usize = 20 * 1024;
/// The field of the operation ids.
pub(super) const VOTE_OPS: &str = "vote_ops";
/// Rounds of a vote that meets concurrent changes of its own pair.
const ROUNDS: usize = 16;
/// A vote's mark: the change of counts not yet known to be applied, and its op id.
const PENDING: &str = "pending";

/// A change of a comment's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Delta {
    pub(super) ups: i64,
    pub(super) downs: i64,
}

impl Delta {
    /// The change of counts when a vote goes from `from` to `to` (values 1, -1, 0 for none).
    fn between(from: i32, to: i32) -> Self {
        let up = |v: i32| i64::from(v == 1);
        let down = |v: i32| i64::from(v == -1);
        Self {
            ups: up(to) - up(from),
            downs: down(to) - down(from),
        }
    }
}

/// A comment found for a vote.
pub(super) struct Found<T> {
    /// Where the strategy's [`Tally::apply`] finds it.
    pub(super) target: T,
    /// Whether it is a tombstone (votes on it are refused; retractions are not).
    pub(super) deleted: bool,
}

/// What a strategy does for the votes on its comments, and the [`VoteBook`] that keeps them. A
/// vote, taking it back, reading it and settling pending ones ([`BallotEngine`]) are written
/// once, over these.
#[async_trait]
pub(super) trait Tally: Send + Sync {
    /// Where [`Tally::apply`] finds a comment.
    type Target: Send + Sync;

    /// Which strategy this is.
    const STRATEGY: Strategy;

    /// Where the strategy's votes are kept.
    fn vote_book(&self) -> &VoteBook;

    /// Checks the shape of a link, before anything is read or written.
    fn check_link(&self, link: &str) -> Result<()>;

    /// The comment at `link` of `discussion`.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] (the discussion or the comment), [`Invalid::Link`](crate::error::Invalid::Link).
    async fn find(&self, discussion: &str, link: &str) -> Result<Found<Self::Target>>;

    /// Applies `delta` to the comment's counts (and whatever the strategy keeps from them) once
    /// under operation `op`: sent again, or by another call finishing the same mark, it changes
    /// nothing. `false` if the comment is gone.
    async fn apply(
        &self,
        discussion: &str,
        target: &Self::Target,
        delta: Delta,
        op: ObjectId,
    ) -> Result<bool>;
}

/// [`Tally::apply`] for a comment that is an element of a document holding many (an embedded
/// discussion, a hybrid page): adds `delta` to the counters at `field` (`<array>.<index>`) of
/// the document `key` selects, where `guard` still holds, once under `op`. `false` if the
/// document no longer counts `op` and no longer matches: it is gone.
pub(super) async fn count_in_element(
    backend: &Backend,
    documents: &Collection<Document>,
    key: Document,
    guard: Document,
    field: &str,
    delta: Delta,
    op: ObjectId,
) -> Result<bool> {
    let mut filter = key.clone();
    filter.extend(guard);
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
    let counted = backend
        .command("count vote", || {
            documents.update_one(filter.clone(), update.clone())
        })
        .await?;
    if counted.matched_count == 1 {
        return Ok(true);
    }
    // Counted already (by this vote's lost attempt, or by a call finishing its mark)? Elements
    // keep their places, so otherwise the document is gone.
    let mut holds = key;
    holds.insert(VOTE_OPS, op);
    let held = backend
        .command("read counted vote", || {
            documents
                .find_one(holds.clone())
                .projection(doc! { "_id": 1 })
        })
        .await?;
    Ok(held.is_some())
}

#[async_trait]
impl<T: Tally> BallotEngine for T {
    fn strategy(&self) -> Strategy {
        T::STRATEGY
    }

    async fn vote(&self, at: At<'_>, user: &str, vote: Vote) -> Result<Option<Vote>> {
        let value = vote.value();
        self.vote_book().set(self, at, user, value).await
    }

    async fn retract_vote(&self, at: At<'_>, user: &str) -> Result<Option<Vote>> {
        self.vote_book().set(self, at, user, 0).await
    }

    async fn vote_of(&self, at: At<'_>, user: &str) -> Result<Option<Vote>> {
        self.vote_book().get(self, at, user).await
    }

    async fn settle_votes(&self, discussion: &str) -> Result<usize> {
        self.vote_book().settle(self, discussion).await
    }
}

/// The votes collection and the journal's steps.
#[derive(Clone, Debug)]
pub(super) struct VoteBook {
    votes: Collection<Document>,
    backend: Backend,
    /// The name of the strategy whose votes these are: whose discussion lock a vote holds.
    strategy: &'static str,
}

impl VoteBook {
    /// The index the votes need: a discussion's (settling) and a comment's (forgetting) votes.
    pub(super) fn index() -> IndexModel {
        IndexModel::builder()
            .keys(doc! { "discussion_id": 1, "comment": 1 })
            .build()
    }

    pub(super) fn new(
        votes: Collection<Document>,
        backend: Backend,
        strategy: &'static str,
    ) -> Self {
        Self {
            votes,
            backend,
            strategy,
        }
    }

    /// The lock a vote of `discussion` holds where updates are not atomic: the one the
    /// strategy's other writes of the discussion hold.
    fn lock(&self, discussion: &str) -> String {
        discussion_lock(self.strategy, discussion)
    }

    /// The votes collection's shard key.
    pub(super) fn shard_key(&self) -> ShardKey {
        ShardKey::new(
            self.votes.name(),
            doc! { "discussion_id": 1, "comment": 1 },
            "a comment's votes stay together with its discussion's; every command of a vote \
             names both (with the vote's _id), so it touches one shard",
        )
    }

    /// `user`'s vote on `link` becomes `to` (1, -1, or 0 for none); returns what it was.
    pub(super) async fn set<T: Tally>(
        &self,
        tally: &T,
        At { discussion, link }: At<'_>,
        user: &str,
        to: i32,
    ) -> Result<Option<Vote>> {
        validate::check_discussion(discussion)?;
        crate::validate::user_id("user", user)?;
        tally.check_link(link)?;
        let found = tally.find(discussion, link).await?;
        if to != 0 && found.deleted {
            return Err(Error::NotFound {
                what: crate::error::Entity::DeletedComment,
                id: link.to_owned(),
            });
        }
        let pair = Pair {
            discussion,
            link,
            user,
        };
        self.backend
            .exclusive_one(
                &self.lock(discussion),
                self.set_unlocked(tally, &found.target, &pair, to),
            )
            .await
    }

    async fn set_unlocked<T: Tally>(
        &self,
        tally: &T,
        target: &T::Target,
        pair: &Pair<'_>,
        to: i32,
    ) -> Result<Option<Vote>> {
        let key = pair.key();
        let op = ObjectId::new();
        // The common case first: a first vote, claimed by its insert.
        let mut known = (to != 0).then_some(Known::Value(0));
        for _ in 0..ROUNDS {
            let stored = match known.take() {
                Some(known) => known,
                None => Known::Stored(self.read(&key).await?),
            };
            // What the pair holds, and whether it has a document to update.
            let (from, exists) = match stored {
                Known::Value(from) => (from, false),
                Known::Stored(Some(stored)) if stored.contains_key(PENDING) => {
                    self.finish(tally, target, pair.discussion, &stored).await?;
                    continue;
                }
                Known::Stored(Some(stored)) => (value(&stored), true),
                Known::Stored(None) => (0, false),
            };
            if from == to {
                return Ok(Vote::of_value(from));
            }
            let delta = Delta::between(from, to);
            let claim = Change {
                from,
                to,
                delta,
                op,
                exists,
            };
            if let Claim::Other(stored) = self.claim(pair, &key, &claim).await? {
                // The pair holds something else: go on from what it holds.
                known = Some(Known::Stored(stored));
                continue;
            }
            if !tally.apply(pair.discussion, target, delta, op).await? {
                // Removed meanwhile: the vote has no comment to count on.
                self.clear(&key, op, true).await?;
                return Err(validate::no_comment(Entity::Comment, pair.link));
            }
            self.clear(&key, op, to == 0).await?;
            return Ok(Vote::of_value(from));
        }
        Err(Error::contention("vote", ROUNDS))
    }

    /// Writes the change's `to` over `from` with its mark: [`Claim::Mine`] if this call did (its
    /// retry included), else what the pair holds.
    async fn claim(&self, pair: &Pair<'_>, key: &Document, change: &Change) -> Result<Claim> {
        let Change {
            from,
            to,
            delta,
            op,
            exists,
        } = *change;
        let mark = doc! { "op": op, "ups": delta.ups, "downs": delta.downs };
        let at = bson::DateTime::now();
        self.backend
            .retry("vote", || async {
                if !exists {
                    // A client-made `_id`: a retry meets its own insert (by `op`).
                    let vote = doc! {
                        "_id": pair.id(),
                        "discussion_id": pair.discussion,
                        "comment": pair.link,
                        "user": pair.user,
                        "value": to,
                        "at": at,
                        PENDING: mark.clone(),
                    };
                    match self.votes.insert_one(vote).await {
                        Ok(_) => return Ok(Claim::Mine),
                        Err(error) if is_duplicate_key(&error) => {}
                        Err(error) => return Err(error.into()),
                    }
                } else {
                    // Filtered by the value replaced and no mark: a retry matches nothing.
                    let mut unmarked = key.clone();
                    unmarked.insert("value", from);
                    unmarked.insert(PENDING, doc! { "$exists": false });
                    let claimed = self
                        .votes
                        .update_one(
                            unmarked,
                            doc! { "$set": { "value": to, "at": at, PENDING: mark.clone() } },
                        )
                        .await?;
                    if claimed.matched_count == 1 {
                        return Ok(Claim::Mine);
                    }
                }
                let stored = self.votes.find_one(key.clone()).await?;
                let mine = stored
                    .as_ref()
                    .and_then(|stored| stored.get_document(PENDING).ok())
                    .and_then(|mark| mark.get_object_id("op").ok())
                    == Some(op);
                Ok(if mine {
                    Claim::Mine
                } else {
                    Claim::Other(stored)
                })
            })
            .await
    }

    /// Finishes the mark a call that failed part-way left on `stored`: its change counted with
    /// its own op id (once), then the mark cleared.
    async fn finish<T: Tally>(
        &self,
        tally: &T,
        target: &T::Target,
        discussion: &str,
        stored: &Document,
    ) -> Result<()> {
        let key = &self.stored_key(stored)?;
        let mark = stored
            .get_document(PENDING)
            .map_err(|_| self.corrupt(stored, "a vote mark that is not a document"))?;
        let op = mark
            .get_object_id("op")
            .map_err(|_| self.corrupt(stored, "a vote mark without its op id"))?;
        let delta = Delta {
            ups: bson_ext::integer(mark, "ups").unwrap_or(0),
            downs: bson_ext::integer(mark, "downs").unwrap_or(0),
        };
        let kept = tally.apply(discussion, target, delta, op).await?;
        self.clear(key, op, !kept || value(stored) == 0).await
    }

    /// Clears the mark of `op` on the vote `key` selects, or deletes the vote (a retraction, or
    /// a vote whose comment is gone).
    async fn clear(&self, key: &Document, op: ObjectId, delete: bool) -> Result<()> {
        let mut mine = key.clone();
        mine.insert("pending.op", op);
        self.backend
            .retry("vote counted", || async {
                if delete {
                    self.votes.delete_one(mine.clone()).await?;
                } else {
                    self.votes
                        .update_one(mine.clone(), doc! { "$unset": { PENDING: "" } })
                        .await?;
                }
                Ok(())
            })
            .await
    }

    /// The vote `key` selects.
    async fn read(&self, key: &Document) -> Result<Option<Document>> {
        self.backend
            .command("read vote", || self.votes.find_one(key.clone()))
            .await
    }

    /// `user`'s vote on `link` (one `find`): a vote whose count a failure interrupted reads as
    /// what it became.
    pub(super) async fn get<T: Tally>(
        &self,
        tally: &T,
        At { discussion, link }: At<'_>,
        user: &str,
    ) -> Result<Option<Vote>> {
        validate::check_discussion(discussion)?;
        crate::validate::user_id("user", user)?;
        tally.check_link(link)?;
        let pair = Pair {
            discussion,
            link,
            user,
        };
        let stored = self
            .votes
            .find_one(pair.key())
            .projection(doc! { "value": 1 })
            .await?;
        Ok(stored.and_then(|stored| Vote::of_value(value(&stored))))
    }

    /// Finishes every mark failures left in `discussion`; returns how many.
    pub(super) async fn settle<T: Tally>(&self, tally: &T, discussion: &str) -> Result<usize> {
        validate::check_discussion(discussion)?;
        let filter = doc! { "discussion_id": discussion, PENDING: { "$exists": true } };
        let marked: Vec<Document> = self
            .backend
            .find_all("settle votes", || self.votes.find(filter.clone()))
            .await?;
        for stored in &marked {
            let link = stored
                .get_str("comment")
                .map_err(|_| self.corrupt(stored, "a vote without its comment"))?;
            let found = match tally.find(discussion, link).await {
                Ok(found) => Some(found.target),
                Err(
                    Error::NotFound { .. }
                    | Error::InvalidInput {
                        reason: Invalid::Link { .. },
                    },
                ) => None,
                Err(error) => return Err(error),
            };
            self.backend
                .exclusive_one(&self.lock(discussion), async {
                    let key = self.stored_key(stored)?;
                    let Some(current) = self.read(&key).await? else {
                        return Ok(());
                    };
                    match (&found, current.contains_key(PENDING)) {
                        (Some(target), true) => {
                            self.finish(tally, target, discussion, &current).await
                        }
                        // The comment is gone: so is what its votes counted.
                        (None, _) => {
                            // A filtered delete: a retry deletes nothing more.
                            self.backend
                                .command("forget vote", || self.votes.delete_one(key.clone()))
                                .await
                                .map(drop)
                        }
                        (Some(_), false) => Ok(()),
                    }
                })
                .await?;
        }
        Ok(marked.len())
    }

    /// Deletes the votes on `link` (a comment removed outright): one `delete`.
    pub(super) async fn forget(&self, discussion: &str, link: &str) -> Result<()> {
        // A filtered delete: a retry deletes nothing more.
        self.backend
            .command("forget votes", || {
                self.votes
                    .delete_many(doc! { "discussion_id": discussion, "comment": link })
            })
            .await
            .map(drop)
    }

    /// Every user's vote in `discussion`, by comment link (one `find`), for an export: call
    /// after [`VoteBook::settle`], so no vote is half counted.
    pub(super) async fn all(
        &self,
        discussion: &str,
    ) -> Result<std::collections::HashMap<String, Vec<(String, Vote)>>> {
        let stored = self
            .backend
            .find_all("export votes", || {
                self.votes
                    .find(doc! { "discussion_id": discussion })
                    .sort(doc! { "comment": 1, "user": 1 })
            })
            .await?;
        let mut votes: std::collections::HashMap<String, Vec<(String, Vote)>> =
            std::collections::HashMap::new();
        for document in &stored {
            let (Ok(link), Ok(user)) = (document.get_str("comment"), document.get_str("user"))
            else {
                return Err(self.corrupt(document, "a vote without its comment or user"));
            };
            if let Some(vote) = Vote::of_value(value(document)) {
                votes
                    .entry(link.to_owned())
                    .or_default()
                    .push((user.to_owned(), vote));
            }
        }
        Ok(votes)
    }

    /// Writes `votes` (`(link, user, vote)`) of `discussion` as settled votes (one `insert`,
    /// duplicates refused: repeating it writes nothing more), for an import whose comments carry
    /// their counts already.
    pub(super) async fn import(
        &self,
        discussion: &str,
        votes: &[(String, String, Vote)],
    ) -> Result<()> {
        if votes.is_empty() {
            return Ok(());
        }
        let at = bson::DateTime::now();
        let documents: Vec<Document> = votes
            .iter()
            .map(|(link, user, vote)| {
                let pair = Pair {
                    discussion,
                    link,
                    user,
                };
                doc! {
                    "_id": pair.id(), "discussion_id": discussion, "comment": link.as_str(),
                    "user": user.as_str(), "value": vote.value(), "at": at,
                }
            })
            .collect();
        self.backend.insert_many_once(&self.votes, documents).await
    }

    /// The votes collection.
    pub(super) fn collection(&self) -> &Collection<Document> {
        &self.votes
    }

    /// The backend the votes are written through.
    pub(super) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The filter selecting the stored vote `stored`: [`Pair::key`].
    fn stored_key(&self, stored: &Document) -> Result<Document> {
        let id = stored
            .get_document("_id")
            .map_err(|_| self.corrupt(stored, "a vote without its _id"))?;
        let field = |name: &str| {
            stored
                .get_str(name)
                .map_err(|_| self.corrupt(stored, "a vote without its discussion or comment"))
        };
        Ok(doc! {
            "_id": id,
            "discussion_id": field("discussion_id")?,
            "comment": field("comment")?,
        })
    }

    fn corrupt(&self, stored: &Document, reason: &str) -> Error {
        bson_ext::corrupt(self.votes.name(), stored.get("_id").cloned(), reason)
    }
}

/// What a vote knows of its pair before a round.
enum Known {
    /// The value it holds (a first vote assumes none).
    Value(i32),
    /// Its document as read, if any.
    Stored(Option<Document>),
}

/// A change of a pair's vote, to claim.
#[derive(Clone, Copy)]
struct Change {
    /// The value replaced (0: none).
    from: i32,
    /// The value written (0: none, a retraction).
    to: i32,
    /// The change of counts it makes.
    delta: Delta,
    /// Its operation id.
    op: ObjectId,
    /// Whether the pair has a document (else the claim inserts one).
    exists: bool,
}

/// What a claim found.
enum Claim {
    /// This call's change is written, with its mark.
    Mine,
    /// The pair holds this instead (a vote, a mark of another call, or nothing).
    Other(Option<Document>),
}

/// A vote's pair: who votes on which comment of which discussion.
struct Pair<'a> {
    discussion: &'a str,
    link: &'a str,
    user: &'a str,
}

impl Pair<'_> {
    fn id(&self) -> Document {
        doc! { "discussion": self.discussion, "comment": self.link, "user": self.user }
    }

    /// The filter selecting the pair's vote: its `_id`, and the shard key's fields, so a sharded
    /// cluster routes every command of a vote to one shard.
    fn key(&self) -> Document {
        doc! { "_id": self.id(), "discussion_id": self.discussion, "comment": self.link }
    }
}

/// A stored vote's value: 1, -1, or 0 (a retraction being counted, or none).
fn value(stored: &Document) -> i32 {
    bson_ext::integer(stored, "value").map_or(0, |v| v.signum() as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_move_one_vote() {
        assert_eq!(Delta::between(0, 1), Delta { ups: 1, downs: 0 });
        assert_eq!(Delta::between(1, -1), Delta { ups: -1, downs: 1 });
        assert_eq!(Delta::between(-1, 0), Delta { ups: 0, downs: -1 });
        assert_eq!(Delta::between(0, -1), Delta { ups: 0, downs: 1 });
        assert_eq!(Delta::between(1, 0), Delta { ups: -1, downs: 0 });
    }
}
