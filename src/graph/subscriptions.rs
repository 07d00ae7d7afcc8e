//! Changing subscriptions under owner locks, and the counts that follow them.
//!
//! # Each change counted once, across a failure and its repeat
//!
//! A subscription and the stats documents holding its counts are different documents, and not
//! every server has transactions, so an operation that creates or removes subscriptions writes
//! them in steps, and records the count change it still owes on the subscriptions themselves:
//!
//! 1. **Mark.** A created subscription is inserted with `pending: {op, delta: 1}`; a removed one
//!    has its origins emptied and gets `pending: {op, delta: -1}`. `op` is one new id per
//!    operation (per round of 50 owners).
//! 2. **Count.** Each owner's `following` and each user's `followers` move by the sum of the
//!    marks on it, one `$inc` per stats document carrying `op` ([`once_per_op`]): a stats
//!    document applies one operation's change once, however often it is sent.
//! 3. **Clear.** The marks of created subscriptions are unset; removed subscriptions are deleted.
//!
//! Every change reads the subscriptions in its scope under the owners' locks before it writes,
//! and first finishes the marks it meets ([`FollowGraph::finish`]): it sums every mark of the
//! same `op` on the same stats documents (so it computes the very `$inc` the interrupted
//! operation sent, or would have), applies it under that `op`, and clears the marks. So
//! repeating an operation that failed between its steps completes it, counting nothing twice and
//! nothing less; so does any other change that meets its marks, `rebuild` and `recount`.
//!
//! A subscription without origins is one being removed: reads do not list it.
//!
//! A stats document remembers its 100 newest operation ids, so a repeat that finishes marks
//! whose counts had already been applied (an operation cut off in step 3) applies nothing again
//! while fewer than 100 other changes reached those stats documents in between.
//!
//! What it costs a change that does not fail: nothing for the marks themselves (a created
//! subscription is inserted with its mark; a removed one is emptied and marked by the update
//! that replaces its `$pull`), one `update` command for the counts of every stats document
//! involved (a statement each), and one for step 3 (the unmark of created subscriptions; the
//! `delete` of removed ones, which a removal needs anyway). A direct follow is 9 commands on
//! MongoDB (one of them its block check), an unfollow 8.

use std::collections::{BTreeMap, BTreeSet};

use bson::oid::ObjectId;
use bson::{doc, Document};

use super::{owner_key, stats_key, FollowGraph, Kind, Origin, RebuildReport, LEASE};
use crate::retry::once_per_op;
use crate::Result;

/// A subscription by its `(owner, user)`.
type Pair = (String, String);

/// Count changes by stats document and count.
type Deltas = BTreeMap<(String, Count), i64>;

/// Which count of a stats document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Count {
    Followers,
    Following,
}

impl Count {
    fn field(self) -> &'static str {
        match self {
            Count::Followers => "followers",
            Count::Following => "following",
        }
    }
}

/// The count change a subscription still owes: the operation that made it, and `+1` (created)
/// or `-1` (removed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mark {
    op: ObjectId,
    delta: i64,
}

impl Mark {
    fn stored(self) -> Document {
        doc! { "op": self.op, "delta": self.delta }
    }

    fn is_removal(self) -> bool {
        self.delta < 0
    }
}

/// A subscription as a change reads it.
#[derive(Clone, Debug)]
struct Found {
    owner: String,
    user: String,
    origins: Vec<String>,
    mark: Option<Mark>,
}

impl Found {
    fn from_document(document: &Document) -> Option<Self> {
        let mark = document.get_document("pending").ok().and_then(|pending| {
            Some(Mark {
                op: pending.get_object_id("op").ok()?,
                delta: crate::bson_ext::integer(pending, "delta")?.signum(),
            })
        });
        Some(Self {
            owner: document.get_str("owner").ok()?.to_owned(),
            user: document.get_str("user").ok()?.to_owned(),
            origins: crate::bson_ext::strings(document, "origins"),
            mark,
        })
    }

    fn pair(&self) -> Pair {
        (self.owner.clone(), self.user.clone())
    }
}

impl FollowGraph {
    /// Adds `origin` to every subscription in `owners` × `users` (one side holds one id),
    /// creating the missing ones and never one of a user to itself, or removes it, deleting the
    /// ones left without a route; the counts follow. Runs in rounds holding the owners' locks.
    pub(super) async fn change_origin(
        &self,
        owners: &[String],
        users: &[String],
        origin: &Origin,
        add: bool,
    ) -> Result<()> {
        let keys: Vec<String> = owners.iter().map(|owner| owner_key(owner)).collect();
        self.backend
            .lease_locked_in_rounds(LEASE, &keys, |taken| async move {
                self.change_round(owners_of(taken), users, origin, add)
                    .await
            })
            .await
    }

    /// Adds `origin` to (`add`) or removes it from the subscriptions of `owners` (whose locks
    /// are held) to `users`: one round of [`FollowGraph::change_origin`].
    pub(super) async fn change_round(
        &self,
        owners: Vec<String>,
        users: &[String],
        origin: &Origin,
        add: bool,
    ) -> Result<()> {
        let stored = origin.as_stored();
        let scope = doc! { "owner": { "$in": &owners }, "user": { "$in": users } };
        if add {
            self.add_round(&owners, users, stored, scope).await
        } else {
            self.remove_round(stored, scope).await
        }
    }

    /// Adds the stored origin `stored` to the subscriptions in `scope`, of `owners` to `users`,
    /// creating the missing ones.
    async fn add_round(
        &self,
        owners: &[String],
        users: &[String],
        stored: String,
        scope: Document,
    ) -> Result<()> {
        let existing: BTreeSet<Pair> = self.settle(&scope).await?.iter().map(Found::pair).collect();
        if !existing.is_empty() {
            // `$addToSet`: adding twice adds once.
            let update = doc! { "$addToSet": { "origins": &stored } };
            self.update_many(scope.clone(), update).await?;
        }
        let created: Vec<(Pair, Vec<String>)> = owners
            .iter()
            .flat_map(|owner| users.iter().map(move |user| (owner.clone(), user.clone())))
            .filter(|pair| pair.0 != pair.1 && !existing.contains(pair))
            .map(|pair| (pair, vec![stored.clone()]))
            .collect();
        self.commit(&scope, created, Vec::new()).await
    }

    /// Removes the stored origin `stored` from the subscriptions in `scope`, deleting the ones
    /// it was the last route of.
    async fn remove_round(&self, stored: String, scope: Document) -> Result<()> {
        let existing = self.settle(&scope).await?;
        // The owners' locks are held: what was read is what is stored.
        let removed: Vec<Pair> = existing
            .iter()
            .filter(|found| found.origins.iter().all(|o| *o == stored))
            .map(Found::pair)
            .collect();
        let kept = existing
            .iter()
            .any(|found| found.origins.contains(&stored) && found.origins.len() > 1);
        // The removed ones first lose all their origins, in their mark: this `$pull` then
        // leaves no subscription without origins and without a mark.
        self.commit(&scope, Vec::new(), removed).await?;
        if kept {
            let mut with_origin = scope;
            with_origin.insert("origins", &stored);
            // `$pull`: pulling twice pulls once.
            let update = doc! { "$pull": { "origins": &stored } };
            self.update_many(with_origin, update).await?;
        }
        Ok(())
    }

    /// Creates `created` (with their origins) and removes `removed` (which exist, unmarked) as
    /// one operation in `scope`, whose owners' locks are held: marks them, moves the counts, and
    /// clears the marks (see the [module docs](self)).
    async fn commit(
        &self,
        scope: &Document,
        created: Vec<(Pair, Vec<String>)>,
        removed: Vec<Pair>,
    ) -> Result<()> {
        if created.is_empty() && removed.is_empty() {
            return Ok(());
        }
        let op = ObjectId::new();
        let mut deltas = Deltas::new();
        let changes = created
            .iter()
            .map(|(pair, _)| (pair, 1))
            .chain(removed.iter().map(|pair| (pair, -1)));
        for ((owner, user), delta) in changes {
            *deltas.entry((owner.clone(), Count::Following)).or_default() += delta;
            *deltas.entry((user.clone(), Count::Followers)).or_default() += delta;
        }
        let (creates, removes) = (!created.is_empty(), !removed.is_empty());
        if removes {
            // A `$set`: setting twice sets once.
            let mark = Mark { op, delta: -1 }.stored();
            let update = doc! { "$set": { "origins": [], "pending": mark } };
            self.update_many(pairs_filter(&removed), update).await?;
        }
        if creates {
            let now = bson::DateTime::now();
            let mark = Mark { op, delta: 1 }.stored();
            let documents = created
                .into_iter()
                .map(|((owner, user), origins)| {
                    doc! {
                        "owner": owner, "user": user, "origins": origins, "since": now,
                        "pending": mark.clone(),
                    }
                })
                .collect();
            // The owners' locks are held: a subscription refused by the unique `{owner, user}`
            // index was inserted by an earlier attempt of this insert.
            self.backend
                .insert_many_once(&self.subscriptions, documents)
                .await?;
        }
        self.adjust(vec![(op, deltas)]).await?;
        self.clear(scope, &[op], creates, removes).await
    }

    /// Reads the subscriptions in `scope` (whose owners' locks are held), finishes the changes
    /// left pending on them, and returns them as they now are: the removed ones gone, the
    /// created ones unmarked.
    async fn settle(&self, scope: &Document) -> Result<Vec<Found>> {
        let mut found = self.read(scope.clone()).await?;
        if found.iter().any(|found| found.mark.is_some()) {
            self.finish(scope, &found).await?;
            found.retain(|found| !found.mark.is_some_and(Mark::is_removal));
            for found in &mut found {
                found.mark = None;
            }
        }
        Ok(found)
    }

    /// Finishes the changes left pending on the subscriptions in `scope` (whose owners' locks
    /// are held): reads only the marked ones.
    pub(super) async fn finish_pending(&self, scope: &Document) -> Result<()> {
        let mut marked = scope.clone();
        marked.insert("pending", doc! { "$exists": true });
        let found = self.read(marked).await?;
        self.finish(scope, &found).await
    }

    /// Finishes the changes left pending on subscriptions to `user`, under their owners' locks
    /// (taken in rounds of 50).
    pub(super) async fn finish_pending_to(&self, user: &str) -> Result<()> {
        let marked = self
            .read(doc! { "user": user, "pending": { "$exists": true } })
            .await?;
        let owners: BTreeSet<String> = marked.into_iter().map(|found| found.owner).collect();
        if owners.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = owners.iter().map(|owner| owner_key(owner)).collect();
        self.backend
            .lease_locked_in_rounds(LEASE, &keys, |taken| async move {
                let scope = doc! { "owner": { "$in": owners_of(taken) }, "user": user };
                self.finish_pending(&scope).await
            })
            .await
    }

    /// Completes the operations that marked any of `found` (read in `scope`, whose owners'
    /// locks are held, so none of those operations is still running): applies each one's count
    /// changes on the stats documents of these subscriptions, under its own id, and clears the
    /// marks in `scope`.
    ///
    /// An operation's `$inc` of a stats document is the sum of all its marks on that document,
    /// some of which may lie outside `scope` (an owner that followed a group of 3 has 3 marks,
    /// and a follow of one of the 3 reads one): they are read here too, by owner and by user.
    /// Those outside `scope` keep their marks, for the change that meets them to finish the
    /// other stats documents they concern; the ones applied here are then skipped by their ids.
    async fn finish(&self, scope: &Document, found: &[Found]) -> Result<()> {
        let marked: Vec<(&Found, Mark)> = found
            .iter()
            .filter_map(|found| found.mark.map(|mark| (found, mark)))
            .collect();
        if marked.is_empty() {
            return Ok(());
        }
        let ops: BTreeSet<ObjectId> = marked.iter().map(|(_, mark)| mark.op).collect();
        let mut changes = Vec::with_capacity(ops.len());
        for op in &ops {
            let of_op = || marked.iter().filter(|(_, mark)| mark.op == *op);
            let owners: BTreeSet<&str> = of_op().map(|(found, _)| found.owner.as_str()).collect();
            let users: BTreeSet<&str> = of_op().map(|(found, _)| found.user.as_str()).collect();
            let (some_owners, some_users): (Vec<&str>, Vec<&str>) = (
                owners.iter().copied().collect(),
                users.iter().copied().collect(),
            );
            let all = self
                .read(doc! {
                    "pending.op": op,
                    "$or": [{ "owner": { "$in": some_owners } }, { "user": { "$in": some_users } }],
                })
                .await?;
            let mut deltas = Deltas::new();
            for (found, mark) in all
                .iter()
                .filter_map(|found| found.mark.map(|mark| (found, mark)))
                .filter(|(_, mark)| mark.op == *op)
            {
                if owners.contains(found.owner.as_str()) {
                    *deltas
                        .entry((found.owner.clone(), Count::Following))
                        .or_default() += mark.delta;
                }
                if users.contains(found.user.as_str()) {
                    *deltas
                        .entry((found.user.clone(), Count::Followers))
                        .or_default() += mark.delta;
                }
            }
            changes.push((*op, deltas));
        }
        self.adjust(changes).await?;
        let ops: Vec<ObjectId> = ops.into_iter().collect();
        let created = marked.iter().any(|(_, mark)| !mark.is_removal());
        let removed = marked.iter().any(|(_, mark)| mark.is_removal());
        self.clear(scope, &ops, created, removed).await
    }

    /// Step 3: unsets the marks of `ops` on created subscriptions in `scope` (if `created`),
    /// deletes the subscriptions in `scope` that `ops` removed (if `removed`).
    async fn clear(
        &self,
        scope: &Document,
        ops: &[ObjectId],
        created: bool,
        removed: bool,
    ) -> Result<()> {
        let of = |delta: i64| {
            let mut filter = scope.clone();
            filter.insert("pending.op", doc! { "$in": ops });
            filter.insert("pending.delta", delta);
            filter
        };
        if created {
            // `$unset` filtered by the mark: the second time, nothing matches.
            let update = doc! { "$unset": { "pending": "" } };
            self.update_many(of(1), update).await?;
        }
        if removed {
            let filter = of(-1);
            // A filtered delete: deleting twice deletes once.
            self.backend
                .command("delete subscriptions", || {
                    self.subscriptions.delete_many(filter.clone())
                })
                .await?;
        }
        Ok(())
    }

    /// Every subscription matching `filter`: its pair, origins and mark.
    async fn read(&self, filter: Document) -> Result<Vec<Found>> {
        let found: Vec<Document> = self
            .backend
            .find_all("find subscriptions", || {
                self.subscriptions
                    .find(filter.clone())
                    .projection(doc! { "owner": 1, "user": 1, "origins": 1, "pending": 1 })
            })
            .await?;
        Ok(found.iter().filter_map(Found::from_document).collect())
    }

    /// Moves the counts by each operation's deltas, under its id (so each stats document applies
    /// each operation once), locking the stats documents where updates are not atomic.
    async fn adjust(&self, mut changes: Vec<(ObjectId, Deltas)>) -> Result<()> {
        for (_, deltas) in &mut changes {
            deltas.retain(|_, delta| *delta != 0);
        }
        changes.retain(|(_, deltas)| !deltas.is_empty());
        if changes.is_empty() {
            return Ok(());
        }
        let users: BTreeSet<&String> = changes
            .iter()
            .flat_map(|(_, deltas)| deltas.keys().map(|(user, _)| user))
            .collect();
        let keys: Vec<String> = users.into_iter().map(|user| stats_key(user)).collect();
        self.backend
            .exclusive_in_rounds(&keys, |taken| self.apply(&changes, Some(taken)))
            .await
    }

    /// `$inc`s the stats documents by `changes` (only those of users whose stats lock is in
    /// `locked`, when given), in one `update` command: a statement per operation and distinct
    /// change, both counts of a document in one statement.
    async fn apply(
        &self,
        changes: &[(ObjectId, Deltas)],
        locked: Option<Vec<String>>,
    ) -> Result<()> {
        let locked: Option<BTreeSet<String>> = locked.map(|keys| keys.into_iter().collect());
        let mut batch = self.backend.update_batch(self.users.name());
        for (op, deltas) in changes {
            let mut by_user: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
            for ((user, count), delta) in deltas {
                let included = locked
                    .as_ref()
                    .is_none_or(|keys| keys.contains(&stats_key(user)));
                if included {
                    let both = by_user.entry(user.as_str()).or_default();
                    match count {
                        Count::Following => both.0 += delta,
                        Count::Followers => both.1 += delta,
                    }
                }
            }
            let mut by_change: BTreeMap<(i64, i64), Vec<&str>> = BTreeMap::new();
            for (user, change) in by_user {
                by_change.entry(change).or_default().push(user);
            }
            for ((following, followers), users) in by_change {
                let mut inc = Document::new();
                for (count, delta) in [(Count::Following, following), (Count::Followers, followers)]
                {
                    if delta != 0 {
                        inc.insert(count.field(), delta);
                    }
                }
                if inc.is_empty() {
                    continue;
                }
                // Applied once under retries and repeats: each stats document records the
                // operation's id.
                let mut filter = doc! { "_id": { "$in": users } };
                let mut update = doc! { "$inc": inc };
                once_per_op(&mut filter, &mut update, *op);
                batch.push_multi(filter, update)?;
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        // No statement upserts, so none meets a duplicate key: every one ran or failed the call.
        batch.run().await.map(drop)
    }

    /// `update_many` on subscriptions, retried: callers pass idempotent updates only.
    async fn update_many(&self, filter: Document, update: Document) -> Result<()> {
        self.backend
            .command("update subscriptions", || {
                self.subscriptions
                    .update_many(filter.clone(), update.clone())
            })
            .await
            .map(drop)
    }

    /// [`FollowGraph::rebuild`] with the owner's lock held.
    pub(super) async fn rebuild_locked(&self, owner: &str) -> Result<RebuildReport> {
        let mut desired: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let direct = doc! { "owner": owner, "kind": Kind::User.as_str() };
        self.each_page(&self.follows, direct, "target", None, |users| {
            for user in users.into_iter().filter(|user| user != owner) {
                desired
                    .entry(user)
                    .or_default()
                    .insert(Origin::Direct.as_stored());
            }
            std::future::ready(Ok(()))
        })
        .await?;
        let mut groups = Vec::new();
        let followed = doc! { "owner": owner, "kind": Kind::Group.as_str() };
        self.each_page(&self.follows, followed, "target", None, |page| {
            groups.extend(page);
            std::future::ready(Ok(()))
        })
        .await?;
        for group in groups {
            let origin = Origin::Group(group.clone()).as_stored();
            self.each_page(
                &self.members,
                doc! { "group": &group },
                "user",
                None,
                |members| {
                    for member in members.into_iter().filter(|member| member != owner) {
                        desired.entry(member).or_default().insert(origin.clone());
                    }
                    std::future::ready(Ok(()))
                },
            )
            .await?;
        }

        let scope = doc! { "owner": owner };
        let existing = self.settle(&scope).await?;
        let mut report = RebuildReport::default();
        let mut removed = Vec::new();
        for found in existing {
            let origins: BTreeSet<String> = found.origins.iter().cloned().collect();
            match desired.remove(&found.user) {
                None => removed.push(found.pair()),
                Some(wanted) if wanted == origins => report.unchanged += 1,
                Some(wanted) => {
                    let wanted: Vec<String> = wanted.into_iter().collect();
                    let update = doc! { "$set": { "origins": wanted } };
                    let filter = doc! { "owner": owner, "user": &found.user };
                    self.update_many(filter, update).await?;
                    report.corrected += 1;
                }
            }
        }
        report.created = desired.len();
        report.removed = removed.len();
        let created = desired
            .into_iter()
            .map(|(user, origins)| ((owner.to_owned(), user), origins.into_iter().collect()))
            .collect();
        self.commit(&scope, created, removed).await?;
        // The owner's `following` changes only under the owner's lock, held here, so it is also
        // set outright: this repairs a count that went wrong by other means (a stats document
        // edited by hand, a change finished after its id left the stats document's memory).
        let following = report.created + report.corrected + report.unchanged;
        self.set_count(owner, Count::Following, following as i64)
            .await?;
        Ok(report)
    }

    /// Sets one count of `user`'s stats outright (locking the stats document where updates are
    /// not atomic, so a concurrent `$inc` of the other count is not lost).
    pub(super) async fn set_count(&self, user: &str, count: Count, value: i64) -> Result<()> {
        // A `$set`: setting twice sets once.
        let update = self.backend.retry("set count", || async {
            self.users
                .update_one(
                    doc! { "_id": user },
                    doc! { "$set": { count.field(): value } },
                )
                .await?;
            Ok(())
        });
        self.backend.exclusive_one(&stats_key(user), update).await
    }
}

/// A filter matching exactly the subscriptions `pairs`: all of one owner or all to one user (as
/// in every round), or any set of pairs.
fn pairs_filter(pairs: &[Pair]) -> Document {
    let owners: BTreeSet<&str> = pairs.iter().map(|(owner, _)| owner.as_str()).collect();
    let users: BTreeSet<&str> = pairs.iter().map(|(_, user)| user.as_str()).collect();
    let (owners, users): (Vec<&str>, Vec<&str>) =
        (owners.into_iter().collect(), users.into_iter().collect());
    if owners.len() == 1 || users.len() == 1 {
        return doc! { "owner": { "$in": owners }, "user": { "$in": users } };
    }
    let each: Vec<Document> = pairs
        .iter()
        .map(|(owner, user)| doc! { "owner": owner, "user": user })
        .collect();
    doc! { "$or": each }
}

/// The owner ids of owner lock keys.
fn owners_of(keys: Vec<String>) -> Vec<String> {
    keys.into_iter()
        .map(|key| key.strip_prefix("owner:").map(str::to_owned).unwrap_or(key))
        .collect()
}
