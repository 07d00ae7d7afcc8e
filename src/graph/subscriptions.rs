//! Changing subscriptions under owner locks, and the counts that follow them.

use std::collections::{BTreeMap, BTreeSet};

use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use super::{owner_key, stats_key, FollowGraph, Kind, Origin, RebuildReport, ROUND};
use crate::retry::{once_per_op, retry};
use crate::update_batch::insert_many_once;
use crate::Result;

/// A subscription by its `(owner, user)`.
type Pair = (String, String);

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
        self.owner_locks
            .in_rounds(&keys, ROUND, |taken| async move {
                let owners = owners_of(taken);
                if add {
                    self.add_round(owners, users, origin).await
                } else {
                    self.remove_round(owners, users, origin).await
                }
            })
            .await
    }

    /// [`Self::add_origin`] for owners whose locks are held.
    pub(super) async fn add_round(
        &self,
        owners: Vec<String>,
        users: &[String],
        origin: &Origin,
    ) -> Result<()> {
        let stored = origin.as_stored();
        let scope = doc! { "owner": { "$in": &owners }, "user": { "$in": users } };
        let existing = self.pairs(scope.clone()).await?;
        let now = bson::DateTime::now();
        let created: Vec<Pair> = owners
            .iter()
            .flat_map(|owner| users.iter().map(move |user| (owner.clone(), user.clone())))
            .filter(|(owner, user)| {
                owner != user && !existing.contains(&(owner.clone(), user.clone()))
            })
            .collect();
        if !existing.is_empty() {
            // `$addToSet`: adding twice adds once.
            let update = doc! { "$addToSet": { "origins": &stored } };
            self.update_many(scope, update).await?;
        }
        if !created.is_empty() {
            // The owners' locks are held: a subscription refused by the unique `{owner, user}`
            // index was inserted by an earlier attempt of this insert.
            let documents = created
                .iter()
                .map(|(owner, user)| {
                    doc! { "owner": owner, "user": user, "origins": [&stored], "since": now }
                })
                .collect();
            insert_many_once(&self.retry, &self.subscriptions, documents).await?;
        }
        self.count(&created, 1).await
    }

    /// [`Self::remove_origin`] for owners whose locks are held.
    pub(super) async fn remove_round(
        &self,
        owners: Vec<String>,
        users: &[String],
        origin: &Origin,
    ) -> Result<()> {
        let stored = origin.as_stored();
        let scope = doc! { "owner": { "$in": &owners }, "user": { "$in": users } };
        let mut with_origin = scope.clone();
        with_origin.insert("origins", &stored);
        // `$pull` and a filtered delete: both change nothing the second time.
        let update = doc! { "$pull": { "origins": &stored } };
        self.update_many(with_origin, update).await?;
        let mut emptied = scope;
        emptied.insert("origins", doc! { "$size": 0 });
        let removed: Vec<Pair> = self.pairs(emptied.clone()).await?.into_iter().collect();
        if !removed.is_empty() {
            retry(&self.retry, "delete subscriptions", || async {
                self.subscriptions.delete_many(emptied.clone()).await?;
                Ok(())
            })
            .await?;
        }
        self.count(&removed, -1).await
    }

    /// The `(owner, user)` of every subscription matching `filter`.
    async fn pairs(&self, filter: Document) -> Result<BTreeSet<Pair>> {
        let found: Vec<Document> = retry(&self.retry, "find subscriptions", || async {
            Ok(self
                .subscriptions
                .find(filter.clone())
                .projection(doc! { "owner": 1, "user": 1 })
                .await?
                .try_collect()
                .await?)
        })
        .await?;
        Ok(found
            .iter()
            .filter_map(|d| {
                Some((
                    d.get_str("owner").ok()?.to_owned(),
                    d.get_str("user").ok()?.to_owned(),
                ))
            })
            .collect())
    }

    /// Moves the counts by `delta` for each subscription in `pairs`: the owner's `following`,
    /// the user's `followers`.
    async fn count(&self, pairs: &[Pair], delta: i64) -> Result<()> {
        let mut deltas: BTreeMap<(String, Count), i64> = BTreeMap::new();
        for (owner, user) in pairs {
            *deltas.entry((owner.clone(), Count::Following)).or_default() += delta;
            *deltas.entry((user.clone(), Count::Followers)).or_default() += delta;
        }
        self.adjust(deltas).await
    }

    /// `$inc`s the stats documents by `deltas`, locking them where updates are not atomic.
    async fn adjust(&self, deltas: BTreeMap<(String, Count), i64>) -> Result<()> {
        if deltas.is_empty() {
            return Ok(());
        }
        let users: BTreeSet<&String> = deltas.keys().map(|(user, _)| user).collect();
        let keys: Vec<String> = users.into_iter().map(|user| stats_key(user)).collect();
        self.stats
            .in_rounds(&keys, ROUND, |taken| self.apply(&deltas, Some(taken)))
            .await
    }

    /// `$inc`s the stats documents by `deltas` (only those of users whose stats lock is in
    /// `locked`, when given): one `update` per distinct (count, delta).
    async fn apply(
        &self,
        deltas: &BTreeMap<(String, Count), i64>,
        locked: Option<Vec<String>>,
    ) -> Result<()> {
        let locked: Option<BTreeSet<String>> = locked.map(|keys| keys.into_iter().collect());
        let mut by_change: BTreeMap<(Count, i64), Vec<&str>> = BTreeMap::new();
        for ((user, count), delta) in deltas {
            let included = locked
                .as_ref()
                .is_none_or(|keys| keys.contains(&stats_key(user)));
            if included && *delta != 0 {
                by_change.entry((*count, *delta)).or_default().push(user);
            }
        }
        for ((count, delta), users) in by_change {
            // Applied once under retries: each stats document records the change's id.
            let mut filter = doc! { "_id": { "$in": users } };
            let mut update = doc! { "$inc": { count.field(): delta } };
            once_per_op(&mut filter, &mut update, bson::oid::ObjectId::new());
            retry(&self.retry, "count update", || async {
                self.users
                    .update_many(filter.clone(), update.clone())
                    .await?;
                Ok(())
            })
            .await?;
        }
        Ok(())
    }

    /// `update_many` on subscriptions, retried: callers pass idempotent updates only.
    async fn update_many(&self, filter: Document, update: Document) -> Result<()> {
        retry(&self.retry, "update subscriptions", || async {
            self.subscriptions
                .update_many(filter.clone(), update.clone())
                .await?;
            Ok(())
        })
        .await
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

        let existing: Vec<Document> = self
            .subscriptions
            .find(doc! { "owner": owner })
            .await?
            .try_collect()
            .await?;
        let mut report = RebuildReport::default();
        let mut removed = Vec::new();
        for document in &existing {
            let Ok(user) = document.get_str("user") else {
                continue;
            };
            let origins: BTreeSet<String> = document
                .get_array("origins")
                .map(|origins| {
                    origins
                        .iter()
                        .filter_map(Bson::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            match desired.remove(user) {
                None => removed.push((owner.to_owned(), user.to_owned())),
                Some(wanted) if wanted == origins => report.unchanged += 1,
                Some(wanted) => {
                    let wanted: Vec<String> = wanted.into_iter().collect();
                    let update = doc! { "$set": { "origins": wanted } };
                    self.update_many(doc! { "owner": owner, "user": user }, update)
                        .await?;
                    report.corrected += 1;
                }
            }
        }
        if !removed.is_empty() {
            let users: Vec<&String> = removed.iter().map(|(_, user)| user).collect();
            let filter = doc! { "owner": owner, "user": { "$in": users } };
            retry(&self.retry, "delete subscriptions", || async {
                self.subscriptions.delete_many(filter.clone()).await?;
                Ok(())
            })
            .await?;
        }
        let now = bson::DateTime::now();
        let created: Vec<Pair> = desired
            .keys()
            .map(|user| (owner.to_owned(), user.clone()))
            .collect();
        if !desired.is_empty() {
            let documents = desired
                .into_iter()
                .map(|(user, origins)| {
                    let origins: Vec<String> = origins.into_iter().collect();
                    doc! { "owner": owner, "user": user, "origins": origins, "since": now }
                })
                .collect();
            insert_many_once(&self.retry, &self.subscriptions, documents).await?;
        }
        report.created = created.len();
        report.removed = removed.len();
        // Followers move by what changed. The owner's `following` changes only under the owner's
        // lock, held here, so it is set outright: this also repairs a count left off by an
        // operation interrupted between its subscription write and its count update.
        let mut followers: BTreeMap<(String, Count), i64> = BTreeMap::new();
        for (_, user) in &created {
            followers.insert((user.clone(), Count::Followers), 1);
        }
        for (_, user) in &removed {
            followers.insert((user.clone(), Count::Followers), -1);
        }
        self.adjust(followers).await?;
        let following = report.created + report.corrected + report.unchanged;
        self.set_count(owner, Count::Following, following as i64)
            .await?;
        Ok(report)
    }

    /// Sets one count of `user`'s stats outright (locking the stats document where updates are
    /// not atomic, so a concurrent `$inc` of the other count is not lost).
    pub(super) async fn set_count(&self, user: &str, count: Count, value: i64) -> Result<()> {
        // A `$set`: setting twice sets once.
        let update = retry(&self.retry, "set count", || async {
            self.users
                .update_one(
                    doc! { "_id": user },
                    doc! { "$set": { count.field(): value } },
                )
                .await?;
            Ok(())
        });
        self.stats.run_one(&stats_key(user), update).await
    }
}

/// The owner ids of owner lock keys.
fn owners_of(keys: Vec<String>) -> Vec<String> {
    keys.into_iter()
        .map(|key| key.strip_prefix("owner:").map(str::to_owned).unwrap_or(key))
        .collect()
}
