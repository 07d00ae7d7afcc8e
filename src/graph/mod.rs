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
//! - Follower and following counts are `$inc`s on the stats document, atomic on MongoDB. Where
//!   updates are not atomic the stats documents are locked too (`stats:<user>`).
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
//!   lease taken over stops with
//!   [`Error::RetriesExhausted`](crate::error::Error::RetriesExhausted), and repeating it
//!   completes it.
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
//! 500. Where updates are not atomic the stats update is locked too (+2). A page of
//! recommendations: 3 to 5 commands, more with hubs and the group boost
//! ([`FollowGraph::recommendations`]).

mod builder;
mod checks;
mod exclusions;
mod follow_source;
mod follows;
mod paging;
mod reads;
mod recommend;
mod relations;
mod repair;
mod setup;
mod types;

pub use builder::FollowGraphBuilder;
/// A cursor of [`FollowGraph::followers`] or [`FollowGraph::following`] after the user `id`.
pub(crate) use paging::{after as cursor_after, List};
pub use types::{Origin, RebuildReport, RecommendOptions, Recommendation, Subscription, UserStats};

pub use follows::{DynFollowSource, FollowList, FollowSource};
mod subscriptions;

use std::time::Duration;

use bson::{doc, Document};
use mongodb::Collection;

use crate::backend::lease_lock::LeaseLocks;
use crate::backend::Backend;
use crate::notifications::Outbox;

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

/// `filter` for subscriptions that have a route: one without origins is being removed (its
/// count change still pending) and is no longer listed.
fn listed(mut filter: Document) -> Document {
    filter.insert("origins.0", doc! { "$exists": true });
    filter
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
