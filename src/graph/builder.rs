//! Configuring a [`FollowGraph`].

use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::{Database, IndexModel};

use super::{FollowGraph, GROUP_LEASE, LEASE};
use crate::backend::Exclusive;
use crate::indexes::Indexes;
use crate::lease_lock::LeaseLocks;
use crate::retry::RetryPolicy;
use crate::validate::check_collection_name;
use crate::Result;

/// Configures a [`FollowGraph`].
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct FollowGraphBuilder {
    pub(super) database: Database,
    pub(super) names: [String; 6],
    pub(super) retry: RetryPolicy,
}

impl FollowGraphBuilder {
    /// Prefixes every collection name with `prefix` (default: none), to keep several graphs in
    /// one database.
    pub fn collection_prefix(mut self, prefix: &str) -> Self {
        for name in &mut self.names {
            *name = format!("{prefix}{name}");
        }
        self
    }

    /// How transient failures are retried (default [`RetryPolicy::default`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The graph.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidConfig`] for a prefix that makes an unusable collection name.
    pub fn build(self) -> Result<FollowGraph> {
        for name in &self.names {
            check_collection_name(name)?;
        }
        let [users, groups, follows, members, subscriptions, locks] = self.names;
        let locks = self.database.collection(&locks);
        let follows = self.database.collection(&follows);
        let members = self.database.collection(&members);
        let subscriptions = self.database.collection(&subscriptions);
        let index = |keys: Document, unique: bool| {
            IndexModel::builder()
                .keys(keys)
                .options(unique.then(|| IndexOptions::builder().unique(true).build()))
                .build()
        };
        let indexes = Indexes::new()
            .with(
                &follows,
                index(doc! { "owner": 1, "kind": 1, "target": 1 }, true),
            )
            .with(
                &follows,
                index(doc! { "kind": 1, "target": 1, "owner": 1 }, false),
            )
            .with(&members, index(doc! { "group": 1, "user": 1 }, true))
            .with(&subscriptions, index(doc! { "owner": 1, "user": 1 }, true))
            .with(&subscriptions, index(doc! { "user": 1, "owner": 1 }, false));
        Ok(FollowGraph {
            users: self.database.collection(&users),
            groups: self.database.collection(&groups),
            follows,
            members,
            subscriptions,
            indexes,
            owner_locks: LeaseLocks::new(locks.clone(), LEASE, self.retry),
            group_locks: LeaseLocks::new(locks.clone(), GROUP_LEASE, self.retry),
            stats: Exclusive::over(&self.database, locks, LEASE, self.retry),
            retry: self.retry,
            database: self.database,
        })
    }
}
