//! Building a graph, its indexes and shard keys, and registering users and groups.

use bson::doc;
use mongodb::Database;

use super::{FollowGraph, FollowGraphBuilder, RecommendOptions};
use crate::config::{new_with_defaults, outbox_accessor, StoreConfig};
use crate::error::Result;
use crate::observe::spans::Op;
use crate::sharding::{self, ShardKey};
use crate::validate;

impl FollowGraph {
    new_with_defaults!("A graph in `database` with the default collection names.");

    outbox_accessor!(FollowGraphBuilder);

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
        self.backend
            .create_indexes_in(Op::GraphCreateIndexes.span())
            .await
    }

    /// Shards the graph's collections on [`FollowGraph::shard_keys`] when connected to a
    /// `mongos` (or a front end that answers as one); see
    /// [`crate::sharding::shard_collections`] for the key forms each engine takes, the order
    /// (on a new deployment, before the indexes) and the unique indexes (follows, members,
    /// subscriptions, exclusions) on engines that restrict them on sharded collections.
    ///
    /// ```no_run
    /// # async fn demo(graph: &mongo_social::FollowGraph) -> mongo_social::Result<()> {
    /// graph.shard_collections().await?;
    /// graph.create_indexes().await?;
    /// # Ok(()) }
    /// ```
    pub async fn shard_collections(&self) -> Result<()> {
        let keys = self.shard_keys();
        sharding::shard_collections_in(
            Op::GraphShardCollections.span(),
            self.backend.database(),
            &keys,
        )
        .await
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
            ShardKey::hashed_id(
                self.users.name(),
                "stats documents are read and counted one at a time; hashing spreads hot users",
            ),
            ShardKey::hashed_id(
                self.groups.name(),
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
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), before any command.
    pub async fn add_user(&self, user: &str) -> Result<()> {
        Op::GraphAddUser.span()
            .run(async move {
                validate::user_id("user", user)?;
                let document = doc! {
                    "_id": user, "followers": 0_i64, "following": 0_i64, "since": bson::DateTime::now(),
                };
                self.backend
                    .insert_once(&self.users, document)
                    .await
                    .map(drop)
            })
            .await
    }

    /// Registers a group. Idempotent.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"group id"`) for an id blank or
    /// over [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), before any command: the graph stores ids
    /// only, so this is the one limit on what it stores.
    pub async fn add_group(&self, group: &str) -> Result<()> {
        Op::GraphAddGroup
            .span()
            .run(async move {
                validate::id("group id", group)?;
                self.backend
                    .insert_once(
                        &self.groups,
                        doc! { "_id": group, "since": bson::DateTime::now() },
                    )
                    .await
                    .map(drop)
            })
            .await
    }
}
