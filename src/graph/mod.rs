//! The follow graph: users follow users directly, or follow groups and thereby their members
//! (seed 002), with subscriptions that record every route and per-user follower counts.
//!
//! # Collections (names configurable through [`FollowGraphBuilder`])
//!
//! | collection | documents | indexes | shard key |
//! |---|---|---|---|
//! | `graph_users` | `{_id: user, followers, following, since}`: the per-user stats document | `_id` | `{_id: "hashed"}` |
//! | `graph_groups` | `{_id: group, since}` | `_id` | `{_id: "hashed"}` |
//! | `follows` | `{owner, kind: "user" \| "group", target, since}`: the direct relations | unique `{owner, kind, target}`, `{kind, target, owner}` | `{owner: 1}` |
//! | `group_members` | `{group, user, since}` | unique `{group, user}` | `{group: 1, user: 1}` |
//! | `subscriptions` | `{owner, user, origins: ["!", "#groupX", ...], since}`, and `pending: {op, delta}` while its count change is under way | unique `{owner, user}`, `{user, owner}` | `{owner: 1, user: 1}` |
//! | `graph_exclusions` | `{owner, user, kind: "dismiss" \| "block", since}`: whom a user dismissed from their recommendations or blocked | unique `{owner, kind, user}`, `{user, kind, owner}` | `{owner: 1}` |
//! | `graph_locks` | lease locks (see below) | `_id` | — |
//!
//! With a group boost on ([`RecommendOptions::group_boost`]), `group_members` also has an index
//! `{user, group}`.
//!
//! A subscription exists while it has at least one origin: `"!"` for a direct follow, `"#g"` for
//! group `g`. "Whom does A follow, by any route" is one keyset-paged range of the
//! `{owner, user}` index ([`FollowGraph::following`]); "who follows B, by any route" one range of
//! `{user, owner}` ([`FollowGraph::followers`]); a user reached by several routes is one document,
//! so neither query repeats anyone. Relations and memberships are documents of their own, never
//! arrays: no document grows with a user's followers, so a celebrity with millions of them
//! overflows nothing. The seed keeps `followingUsers`, `followingGroups` and `members` arrays.
//!
//! # People you may know
//!
//! [`FollowGraph::recommendations`] ranks the users whom the people a user follows follow (and
//! the user does not), by how many of them do, with the reasons ("followed by ann, bob and 4
//! others you follow"), optionally boosted by groups both users are members of. It is computed
//! when asked, from the subscriptions, by a read bounded whatever the graph (at most
//! [`RecommendOptions::followees`] followees, and [`RecommendOptions::per_followee`]
//! subscriptions of each, hubs sampled, nobody's followers listed): one `aggregate` with
//! `$graphLookup` where the server has it, three `find`s elsewhere, then two `find`s that check
//! the page against the subscriptions and exclusions as they are at that moment, so anyone
//! followed, dismissed or blocked before them is never returned. Pages are keyset pages of the
//! ranking. [`FollowGraph::dismiss`] takes a candidate out for good; [`FollowGraph::block`]
//! also removes the direct follows between the two users and refuses new ones until
//! [`FollowGraph::unblock`] (see its docs for what a block leaves: routes through groups). An
//! incrementally maintained candidates collection was measured against this read and not kept:
//! see `docs/GRAPH.md` ("People you may know") and `docs/BENCHMARKS.md`.
//!
//! # How it stays correct under concurrency
//!
//! - Relations and memberships are inserted and deleted under unique indexes, which is atomic on
//!   every server; repeating a follow or unfollow changes nothing.
//! - A user's subscriptions are changed only while holding that user's lease lock
//!   (`owner:<user>` in `graph_locks`), taken for up to 50 users per `insert`. With the owner
//!   fixed, reading which subscriptions exist, adding or pulling an origin, and deleting the ones
//!   left without origins cannot interleave with another writer, so each subscription created or
//!   removed is known exactly and the counts follow it.
//! - Changes that fan out over a group (following or unfollowing it, adding or removing a member)
//!   hold the group's lock (`group:<group>`) for their duration: otherwise an unfollow of the
//!   group and a removal of one of its members, each reading what the other just deleted, could
//!   both miss the subscription they share. Lock order is always group, then owners, then stats;
//!   owner locks are taken in rounds that never hold some while waiting for others.
//! - Follower and following counts are `$inc`s on the stats document, atomic on MongoDB. On
//!   servers without atomic updates (FerretDB 1.x) the stats documents are locked too
//!   (`stats:<user>`).
//! - A change records the count change it owes on the subscriptions it creates or removes
//!   (`pending: {op, delta}`; a removed subscription has no origin left until it is deleted, and
//!   is not listed), moves the counts by one `$inc` per stats document carrying the operation's
//!   id (which the stats document keeps among its 100 newest), then clears the marks. Every
//!   change first finishes the marks it meets in its scope, with the id stored there. So an
//!   operation that failed between a subscription write and its count update (an outage,
//!   retries exhausted) is completed, counts included, by calling it again (or by any change,
//!   rebuild or recount that meets its marks), and counts nothing twice while fewer than 100
//!   other changes of the same users' counts come in between.
//! - A lock whose holder died is taken over after its lease (2 minutes; 5 minutes for group
//!   locks, renewed as the change runs over the group).
//! - Every follow, unfollow and membership change re-applies its subscription change even when
//!   the relation already was as asked, so repeating an operation that failed half-way completes
//!   its subscriptions. [`FollowGraph::rebuild`] recomputes one user's subscriptions from the
//!   direct relations (what the seed's map-reduce did, which MongoDB has deprecated) and resets
//!   its `following` count; [`FollowGraph::recount`] sets both counts from the subscriptions.
//! - Long changes renew their group lock before each page of 500 users; one that finds its
//!   lease taken over stops with [`Error::RetriesExhausted`], and repeating it completes it.
//!
//! # Costs (commands, MongoDB)
//!
//! A direct follow: 1 `find` (both users exist), 1 lock `insert`, 1 `find` (no block between
//! them), 1 `insert` (the relation), then for the subscription 1 `find`, 1 `insert` (marked), 1
//! `update` of both stats documents (a statement each), 1 `update` that clears the mark, 1 lock
//! `delete`: 9. An unfollow: 8, with the relation's `delete`, the `update` that empties and
//! marks the subscription, and its `delete`, and no block check. Following or unfollowing again
//! when nothing changes: 1 `find` and at most 1 `update` for the subscription. A change over a
//! group of M members (or F followers): the same per round of 50 users, plus one `find` per
//! 500. On FerretDB the stats update is locked too (+2). A page of recommendations: 3 to 5
//! commands, more with hubs and the group boost ([`FollowGraph::recommendations`]).

mod builder;
mod exclusions;
mod follow_source;
mod follows;
mod paging;
mod recommend;
mod types;

pub use builder::FollowGraphBuilder;
/// A cursor of [`FollowGraph::followers`] or [`FollowGraph::following`] after the user `id`.
pub(crate) use paging::{after as cursor_after, List};
use paging::{page_of, trim};
pub use types::{Origin, RebuildReport, RecommendOptions, Recommendation, Subscription, UserStats};

pub use follows::{DynFollowSource, FollowList, FollowSource};
mod subscriptions;

use std::collections::BTreeSet;
use std::time::Duration;

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::{Collection, Database};

use crate::backend::Backend;
use crate::bson_ext;
use crate::config::StoreConfig;
use crate::lease_lock::{Lease, LeaseLocks};
use crate::notifications::{Activity, Kind as NotificationKind, Outbox};
use crate::sharding::ShardKey;
use crate::validate;
use crate::{Entity, Error, Page, PageRequest, Result};

/// Members or followers read per query while fanning a change out over a group.
const SCAN_PAGE: i64 = 500;
/// Lease of owner and stats locks: a round of 50 users, which on servers without atomic updates
/// may wait up to a minute for stats locks.
const LEASE: Duration = Duration::from_secs(120);
/// Lease of group locks, renewed before each page of 500 users a group change runs over.
const GROUP_LEASE: Duration = Duration::from_secs(300);

/// The follow graph with groups. See the [module docs](self) for its collections and
/// guarantees.
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use mongo_social::graph::{FollowGraph, Origin};
/// use mongo_social::PageRequest;
///
/// let graph = FollowGraph::new(&db);
/// graph.create_indexes().await?;
/// for user in ["ann", "bob", "cat"] {
///     graph.add_user(user).await?;
/// }
/// graph.add_group("rustaceans").await?;
/// graph.add_member("rustaceans", "bob").await?;
/// graph.add_member("rustaceans", "cat").await?;
/// graph.follow("ann", "bob").await?;
/// graph.follow_group("ann", "rustaceans").await?;
///
/// let following = graph.following("ann", PageRequest::first(100)).await?;
/// assert_eq!(following.items[0].user, "bob");
/// assert_eq!(following.items[0].origins, [Origin::Direct, Origin::Group("rustaceans".into())]);
/// assert_eq!(graph.stats("bob").await?.followers, 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FollowGraph {
    /// The server's differences: the stats documents' writers take turns where updates are not
    /// atomic.
    backend: Backend,
    users: Collection<Document>,
    groups: Collection<Document>,
    follows: Collection<Document>,
    members: Collection<Document>,
    subscriptions: Collection<Document>,
    /// Dismissed and blocked users, `{owner, user, kind: "dismiss" | "block", since}`.
    exclusions: Collection<Document>,
    /// How recommendations are read and ranked.
    recommend: RecommendOptions,
    /// Owners' subscriptions are rebuilt one writer at a time, on every server.
    owner_locks: LeaseLocks,
    /// A group's changes are fanned out one at a time, on every server.
    group_locks: LeaseLocks,
    /// Where direct follows and unfollows are notified, if the application asked.
    outbox: Option<Outbox>,
}

/// What a direct follow of `user` by `owner` tells the notifier: `user` is followed.
fn follow_activity(owner: &str, user: &str) -> Activity {
    Activity::new(user, NotificationKind::Follow, user, owner)
}

/// A change of a group's relations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupChange {
    /// A user follows the group.
    Follow,
    /// A user unfollows the group.
    Unfollow,
    /// A user joins the group.
    Join,
    /// A user leaves the group.
    Leave,
}

/// Which relation a `follows` document records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    User,
    Group,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::User => "user",
            Kind::Group => "group",
        }
    }
}

impl FollowGraph {
    /// A graph in `database` with the default collection names.
    pub fn new(database: &Database) -> Self {
        Self::builder(database)
            .build()
            .expect("the default configuration is valid")
    }

    /// The notifications the graph owes, when it was built with a
    /// [`notifier`](FollowGraphBuilder::notifier): run its worker (or `run_pending`) to deliver
    /// those whose first attempt failed.
    pub fn outbox(&self) -> Option<&Outbox> {
        self.outbox.as_ref()
    }

    /// A builder to configure collection names.
    pub fn builder(database: &Database) -> FollowGraphBuilder {
        FollowGraphBuilder {
            config: StoreConfig::new(database),
            notifier: None,
            recommend: RecommendOptions::default(),
        }
    }

    /// Creates the indexes the graph needs (idempotent, safe on every start). The unique ones
    /// are what record a relation, a membership or a subscription once, so a graph that was not
    /// told to create them creates them before its first follow, unfollow, membership change,
    /// rebuild or recount.
    pub async fn create_indexes(&self) -> Result<()> {
        self.backend.create_indexes().await
    }

    /// The shard key each collection should have, and why.
    pub fn shard_keys(&self) -> Vec<ShardKey> {
        vec![
            ShardKey::new(
                self.subscriptions.name(),
                doc! { "owner": 1, "user": 1 },
                "whom a user follows is one shard's range; who follows a user is a scatter \
                 query on the {user, owner} index, paid by the rarer question (delivery pages \
                 through it in the background)",
            ),
            ShardKey::new(
                self.follows.name(),
                doc! { "owner": 1 },
                "a user's direct relations, read by rebuild, live on one shard",
            ),
            ShardKey::new(
                self.members.name(),
                doc! { "group": 1, "user": 1 },
                "a group's members page from one shard; user splits very large groups; a \
                 user's own groups (asked by the recommendations' group boost only) scatter",
            ),
            ShardKey::new(
                self.exclusions.name(),
                doc! { "owner": 1 },
                "a user's dismissals and blocks live on one shard; a recommendation page also asks \
                 which of its candidates blocked the user, by owner among them: a few shards",
            ),
            ShardKey::new(
                self.users.name(),
                doc! { "_id": "hashed" },
                "stats documents are read and counted one at a time; hashing spreads hot users",
            ),
            ShardKey::new(
                self.groups.name(),
                doc! { "_id": "hashed" },
                "groups are looked up by id only",
            ),
        ]
    }

    /// Registers a user (with zero counts). Idempotent.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"user"`) for an id blank or over
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES), before any command.
    pub async fn add_user(&self, user: &str) -> Result<()> {
        validate::user_id("user", user)?;
        let document = doc! {
            "_id": user, "followers": 0_i64, "following": 0_i64, "since": bson::DateTime::now(),
        };
        self.backend
            .insert_once(&self.users, document)
            .await
            .map(drop)
    }

    /// Registers a group. Idempotent.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"group id"`) for an id blank or
    /// over [`MAX_ID_BYTES`](crate::MAX_ID_BYTES), before any command: the graph stores ids
    /// only, so this is the one limit on what it stores.
    pub async fn add_group(&self, group: &str) -> Result<()> {
        validate::id("group id", group)?;
        self.backend
            .insert_once(
                &self.groups,
                doc! { "_id": group, "since": bson::DateTime::now() },
            )
            .await
            .map(drop)
    }

    /// `owner` follows `user` directly. Returns whether the relation is new; following again
    /// changes nothing (and completes a follow that failed half-way, counts included).
    ///
    /// # Errors
    ///
    /// [`Invalid::SelfAction`](crate::error::Invalid::SelfAction), [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank id,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"owner"`, `"user"`) for one over
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES), [`Error::NotFound`] for a user not registered, [`Forbidden::Blocked`](crate::error::Forbidden::Blocked) if either blocked the other
    /// ([`FollowGraph::block`]), all before anything is written.
    pub async fn follow(&self, owner: &str, user: &str) -> Result<bool> {
        self.check_pair(owner, user).await?;
        self.backend.ensure_indexes().await?;
        // The relation and its subscription change together under the owner's lock, so a
        // follow and an unfollow of the same pair cannot leave them disagreeing.
        let new = self
            .owner_locks
            .with_lock(&owner_key(owner), async {
                // Under the lock a block's removal of this follow also takes: a block recorded
                // before this check refuses the follow, one recorded after it removes it.
                self.refuse_blocked(owner, user).await?;
                let new = self.relate(owner, Kind::User, user).await?;
                self.add_round(vec![owner.to_owned()], &[user.to_owned()], &Origin::Direct)
                    .await?;
                Ok(new)
            })
            .await?;
        // On every call, new or repeated: the notification is idempotent, so repeating a follow
        // whose notification was lost completes it. Queued, never failing the follow.
        if let Some(outbox) = &self.outbox {
            outbox.notify(follow_activity(owner, user)).await;
        }
        Ok(new)
    }

    /// `owner` stops following `user` directly; a subscription through a group stays. Returns
    /// whether there was a direct relation.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow`].
    pub async fn unfollow(&self, owner: &str, user: &str) -> Result<bool> {
        self.check_pair(owner, user).await?;
        self.backend.ensure_indexes().await?;
        self.remove_direct(owner, user).await
    }

    /// Removes `owner`'s direct follow of `user` (relation, direct origin, counts, and the
    /// notification), whether or not there was one; whether there was.
    async fn remove_direct(&self, owner: &str, user: &str) -> Result<bool> {
        let existed = self
            .owner_locks
            .with_lock(&owner_key(owner), async {
                let existed = self.unrelate(owner, Kind::User, user).await?;
                self.remove_round(vec![owner.to_owned()], &[user.to_owned()], &Origin::Direct)
                    .await?;
                Ok(existed)
            })
            .await?;
        // On every call, as a follow notifies: a repeat completes a withdrawal that failed.
        if let Some(outbox) = &self.outbox {
            outbox.withdraw(follow_activity(owner, user)).await;
        }
        Ok(existed)
    }

    /// `owner` follows `group`, and so every member, now and later (but not itself). Following a
    /// group with no members is allowed: it subscribes to nobody until members are added.
    /// Returns whether the relation is new.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank user id or group id,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) for one over
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES) (`"owner"` or, adding and removing members,
    /// `"user"`; `"group id"`), both before any command; [`Error::NotFound`] for an unregistered
    /// user or group.
    pub async fn follow_group(&self, owner: &str, group: &str) -> Result<bool> {
        self.change_group(group, owner, GroupChange::Follow).await
    }

    /// `owner` stops following `group`; subscriptions with another route stay. Returns whether
    /// there was a relation.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow_group`].
    pub async fn unfollow_group(&self, owner: &str, group: &str) -> Result<bool> {
        self.change_group(group, owner, GroupChange::Unfollow).await
    }

    /// Adds `user` to `group`: every follower of the group now follows `user` too. Returns
    /// whether the membership is new.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow_group`].
    pub async fn add_member(&self, group: &str, user: &str) -> Result<bool> {
        self.change_group(group, user, GroupChange::Join).await
    }

    /// Removes `user` from `group`: the group's followers stop following `user` unless they
    /// have another route. Returns whether `user` was a member.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow_group`].
    pub async fn remove_member(&self, group: &str, user: &str) -> Result<bool> {
        self.change_group(group, user, GroupChange::Leave).await
    }

    /// Records `change` of `user` and `group`, then adds or removes the group's origin on every
    /// subscription it concerns: `user`'s to each member (follow, unfollow), or each follower's
    /// to `user` (join, leave). Holds the group's lock, renewed before each page of 500.
    async fn change_group(&self, group: &str, user: &str, change: GroupChange) -> Result<bool> {
        // The user follows the group, or is a member of it.
        let role = match change {
            GroupChange::Follow | GroupChange::Unfollow => "owner",
            GroupChange::Join | GroupChange::Leave => "user",
        };
        self.check_user_and_group(role, user, group).await?;
        self.backend.ensure_indexes().await?;
        let origin = Origin::Group(group.to_owned());
        let add = matches!(change, GroupChange::Follow | GroupChange::Join);
        self.group_locks
            .with_lease(&group_key(group), |lease| async move {
                let changed = match change {
                    GroupChange::Follow => self.relate(user, Kind::Group, group).await?,
                    GroupChange::Unfollow => self.unrelate(user, Kind::Group, group).await?,
                    GroupChange::Join => {
                        let member =
                            doc! { "group": group, "user": user, "since": bson::DateTime::now() };
                        self.backend.insert_once(&self.members, member).await?
                    }
                    GroupChange::Leave => {
                        let member = doc! { "group": group, "user": user };
                        self.delete_one(&self.members, member).await?
                    }
                };
                let (one, origin) = (&[user.to_owned()], &origin);
                let by_members = matches!(change, GroupChange::Follow | GroupChange::Unfollow);
                let (collection, filter, field) = if by_members {
                    (&self.members, doc! { "group": group }, "user")
                } else {
                    (&self.follows, self.group_followers(group), "owner")
                };
                self.each_page(
                    collection,
                    filter,
                    field,
                    Some(&lease),
                    |others| async move {
                        if by_members {
                            self.change_origin(one, &others, origin, add).await
                        } else {
                            self.change_origin(&others, one, origin, add).await
                        }
                    },
                )
                .await?;
                Ok(changed)
            })
            .await
    }

    /// Whom `owner` follows, by any route: one page of the `{owner, user}` index, by user id.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) (also for a cursor of another list:
    /// another user's or group's, or the other direction), [`Invalid::PageLimit`](crate::error::Invalid::PageLimit), [`Invalid::Blank`](crate::error::Invalid::Blank) (a blank user id,
    /// or group id for a group's members).
    pub async fn following(&self, owner: &str, page: PageRequest) -> Result<Page<Subscription>> {
        validate::user_id("owner", owner)?;
        let list = List::Following(owner);
        self.subscription_page(listed(doc! { "owner": owner }), "user", list, page)
            .await
    }

    /// Who follows `user`, by any route: one page of the `{user, owner}` index, by owner id.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::following`].
    pub async fn followers(&self, user: &str, page: PageRequest) -> Result<Page<Subscription>> {
        validate::user_id("user", user)?;
        let list = List::Followers(user);
        self.subscription_page(listed(doc! { "user": user }), "owner", list, page)
            .await
    }

    /// The members of `group`, by user id.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::following`].
    pub async fn members(&self, group: &str, page: PageRequest) -> Result<Page<String>> {
        validate::id("group id", group)?;
        let list = List::Members(group);
        let documents =
            page_of(&self.members, doc! { "group": group }, "user", list, &page).await?;
        let ids: Vec<String> = documents
            .iter()
            .filter_map(|d| d.get_str("user").ok().map(str::to_owned))
            .collect();
        Ok(trim(ids, page.limit, list, String::as_str))
    }

    /// Which of `users` `owner` follows, by any route (one query).
    pub async fn follows_any(&self, owner: &str, users: &[String]) -> Result<Vec<String>> {
        validate::user_id("owner", owner)?;
        self.subscribed(("owner", owner), ("user", users)).await
    }

    /// Which of `owners` follow `user`, by any route (one query).
    pub async fn followers_among(&self, user: &str, owners: &[String]) -> Result<Vec<String>> {
        validate::user_id("user", user)?;
        self.subscribed(("user", user), ("owner", owners)).await
    }

    /// The `other.0` of each subscription whose `fixed.0` is `fixed.1` and whose `other.0` is
    /// one of `other.1`.
    async fn subscribed(
        &self,
        fixed: (&str, &str),
        other: (&str, &[String]),
    ) -> Result<Vec<String>> {
        if other.1.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<Document> = self
            .subscriptions
            .find(listed(
                doc! { fixed.0: fixed.1, other.0: { "$in": other.1 } },
            ))
            .projection(doc! { other.0: 1 })
            .await?
            .try_collect()
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| d.get_str(other.0).ok().map(str::to_owned))
            .collect())
    }

    /// Whether and how `owner` follows `user`.
    pub async fn subscription(&self, owner: &str, user: &str) -> Result<Option<Subscription>> {
        validate::user_id("owner", owner)?;
        validate::user_id("user", user)?;
        let found = self
            .subscriptions
            .find_one(listed(doc! { "owner": owner, "user": user }))
            .await?;
        let collection = self.subscriptions.name();
        found
            .as_ref()
            .map(|found| Subscription::from_document(collection, found))
            .transpose()
    }

    /// A user's follower and following counts (one read of the stats document).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unregistered user.
    pub async fn stats(&self, user: &str) -> Result<UserStats> {
        validate::user_id("user", user)?;
        let found = self
            .users
            .find_one(doc! { "_id": user })
            .await?
            .ok_or_else(|| not_found(Entity::User, user))?;
        Ok(UserStats {
            followers: bson_ext::count(&found, "followers"),
            following: bson_ext::count(&found, "following"),
        })
    }

    /// Recomputes `owner`'s subscriptions from the direct relations (the users and groups it
    /// follows, and the groups' members), fixing any that disagree, and the counts with them.
    ///
    /// This replaces the seed's per-user map-reduce, deprecated in MongoDB: the relations are
    /// read with indexed queries, the difference is computed here, and only subscriptions that
    /// differ are written, under the owner's lock.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unregistered user.
    pub async fn rebuild(&self, owner: &str) -> Result<RebuildReport> {
        validate::user_id("owner", owner)?;
        self.check_users(&[owner]).await?;
        self.backend.ensure_indexes().await?;
        self.owner_locks
            .with_lock(&owner_key(owner), self.rebuild_locked(owner))
            .await
    }

    /// Sets `user`'s counts from the subscriptions that exist: `following` exactly (under the
    /// user's lock), `followers` from a count of the `{user, owner}` index range.
    ///
    /// Counts are kept exact by every operation, and one interrupted between its subscription
    /// write and its count update is completed by calling it again (see the
    /// [module docs](self)). This is the repair for counts that went wrong by other means (a
    /// stats document edited by hand, a repeat that came after more than 100 other changes of
    /// the same user's counts). It first finishes the changes left pending on `user`'s
    /// subscriptions, either way, under their owners' locks. The `followers` it sets is exact
    /// when no one follows or unfollows `user` meanwhile (on MongoDB, `followers` changes without
    /// a lock on `user`); run it when that is quiet.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unregistered user.
    pub async fn recount(&self, user: &str) -> Result<UserStats> {
        validate::user_id("user", user)?;
        self.check_users(&[user]).await?;
        self.backend.ensure_indexes().await?;
        // Changes left pending on `user`'s subscriptions are finished first: afterwards they
        // would move the counts set here.
        self.finish_pending_to(user).await?;
        let followers = self
            .subscriptions
            .count_documents(doc! { "user": user })
            .await?;
        self.set_count(user, subscriptions::Count::Followers, followers as i64)
            .await?;
        self.owner_locks
            .with_lock(&owner_key(user), async {
                self.finish_pending(&doc! { "owner": user }).await?;
                let following = self
                    .subscriptions
                    .count_documents(doc! { "owner": user })
                    .await?;
                self.set_count(user, subscriptions::Count::Following, following as i64)
                    .await
            })
            .await?;
        self.stats(user).await
    }

    /// Fails unless `owner` and `user` are distinct registered users.
    async fn check_pair(&self, owner: &str, user: &str) -> Result<()> {
        validate::user_id("owner", owner)?;
        validate::user_id("user", user)?;
        if owner == user {
            return Err(Error::InvalidInput(crate::error::Invalid::SelfAction {
                user: owner.to_owned(),
                action: "follow",
            }));
        }
        self.check_users(&[owner, user]).await
    }

    /// Fails unless every one of `ids` is a registered user.
    async fn check_users(&self, ids: &[&str]) -> Result<()> {
        let found: Vec<Document> = self
            .users
            .find(doc! { "_id": { "$in": ids } })
            .projection(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        let found: BTreeSet<&str> = found.iter().filter_map(|d| d.get_str("_id").ok()).collect();
        match ids.iter().find(|id| !found.contains(*id)) {
            Some(missing) => Err(not_found(Entity::User, missing)),
            None => Ok(()),
        }
    }

    /// Fails unless `user` (in the role `role`) and `group` are registered.
    async fn check_user_and_group(
        &self,
        role: &'static str,
        user: &str,
        group: &str,
    ) -> Result<()> {
        validate::user_id(role, user)?;
        validate::id("group id", group)?;
        self.check_users(&[user]).await?;
        if self.groups.find_one(doc! { "_id": group }).await?.is_none() {
            return Err(not_found(Entity::Group, group));
        }
        Ok(())
    }

    /// Records that `owner` follows `target`; whether the record is new.
    async fn relate(&self, owner: &str, kind: Kind, target: &str) -> Result<bool> {
        self.backend
            .insert_once(
                &self.follows,
                doc! {
                    "owner": owner, "kind": kind.as_str(), "target": target,
                    "since": bson::DateTime::now(),
                },
            )
            .await
    }

    /// Deletes the record that `owner` follows `target`; whether there was one.
    async fn unrelate(&self, owner: &str, kind: Kind, target: &str) -> Result<bool> {
        let relation = doc! { "owner": owner, "kind": kind.as_str(), "target": target };
        self.delete_one(&self.follows, relation).await
    }

    /// Deletes the document matching `filter`, retrying transient failures (deleting twice
    /// deletes once); whether this call saw one deleted. When an attempt deleted it but its reply
    /// was lost, the retry finds nothing and the answer is `false`: the document is gone either
    /// way.
    async fn delete_one(
        &self,
        collection: &Collection<Document>,
        filter: Document,
    ) -> Result<bool> {
        let deleted = self
            .backend
            .retry("delete", || async {
                Ok(collection.delete_one(filter.clone()).await?)
            })
            .await?;
        Ok(deleted.deleted_count > 0)
    }

    fn group_followers(&self, group: &str) -> Document {
        doc! { "kind": Kind::Group.as_str(), "target": group }
    }

    /// Calls `work` with each page of `field` values of the documents matching `filter`, in
    /// `field` order, renewing `lease` (if any) before each page.
    async fn each_page<F, Fut>(
        &self,
        collection: &Collection<Document>,
        filter: Document,
        field: &str,
        lease: Option<&Lease>,
        mut work: F,
    ) -> Result<()>
    where
        F: FnMut(Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let mut after: Option<String> = None;
        loop {
            if let Some(lease) = lease {
                lease.renew().await?;
            }
            let mut query = filter.clone();
            if let Some(after) = &after {
                query.insert(field, doc! { "$gt": after });
            }
            let documents: Vec<Document> = collection
                .find(query)
                .projection(doc! { field: 1 })
                .sort(doc! { field: 1 })
                .limit(SCAN_PAGE)
                .await?
                .try_collect()
                .await?;
            let ids: Vec<String> = documents
                .iter()
                .filter_map(|d| d.get_str(field).ok().map(str::to_owned))
                .collect();
            let Some(last) = ids.last().cloned() else {
                return Ok(());
            };
            let full = ids.len() as i64 == SCAN_PAGE;
            work(ids).await?;
            if !full {
                return Ok(());
            }
            after = Some(last);
        }
    }

    async fn subscription_page(
        &self,
        filter: Document,
        field: &str,
        list: List<'_>,
        page: PageRequest,
    ) -> Result<Page<Subscription>> {
        let documents = page_of(&self.subscriptions, filter, field, list, &page).await?;
        let items = documents
            .iter()
            .map(|found| Subscription::from_document(self.subscriptions.name(), found))
            .collect::<Result<Vec<_>>>()?;
        Ok(trim(items, page.limit, list, |s| {
            if field == "user" {
                &s.user
            } else {
                &s.owner
            }
        }))
    }
}

/// `filter` for subscriptions that have a route: one without origins is being removed (its
/// count change still pending) and is no longer listed.
fn listed(mut filter: Document) -> Document {
    filter.insert("origins.0", doc! { "$exists": true });
    filter
}

fn not_found(what: Entity, id: &str) -> Error {
    Error::NotFound {
        what,
        id: id.to_owned(),
    }
}

fn owner_key(owner: &str) -> String {
    format!("owner:{owner}")
}

fn group_key(group: &str) -> String {
    format!("group:{group}")
}

fn stats_key(user: &str) -> String {
    format!("stats:{user}")
}
