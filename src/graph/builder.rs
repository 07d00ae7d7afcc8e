//! Configuring a [`FollowGraph`].

use std::sync::Arc;

use bson::doc;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use super::{FollowGraph, RecommendOptions, GROUP_LEASE, LEASE};
use crate::config::{store_builder_methods, StoreConfig};
use crate::notifications::{DynNotifier, Outbox};
use crate::Result;

/// The graph's collections, by default name.
pub(crate) const COLLECTIONS: [&str; 7] = [
    "graph_users",
    "graph_groups",
    "follows",
    "group_members",
    "subscriptions",
    "graph_exclusions",
    "graph_locks",
];

/// Configures a [`FollowGraph`].
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct FollowGraphBuilder {
    pub(super) config: StoreConfig,
    pub(super) notifier: Option<Arc<DynNotifier>>,
    pub(super) recommend: RecommendOptions,
}

impl FollowGraphBuilder {
    store_builder_methods!();

    /// Tells `notifier` (a [`NotificationStore`](crate::NotificationStore), say) of every
    /// direct follow ([`Kind::Follow`](crate::notifications::Kind::Follow) on the followed user,
    /// who is notified, by the follower) and withdraws it on unfollow. Group follows and
    /// memberships notify nobody. Off by default.
    ///
    /// The notification never fails the follow (or the unfollow): it is queued in the graph's
    /// own database, in the collection `<follows>_outbox`, and tried at once (for at most 2
    /// seconds); one that could not be delivered then is delivered by the graph's
    /// [`outbox`](FollowGraph::outbox) worker, at least once (see [`Outbox`]). On, a follow or
    /// an unfollow costs 2 commands more in the graph's database (queue, then complete) besides
    /// the notifier's own.
    pub fn notifier(mut self, notifier: Arc<DynNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// How [`FollowGraph::recommendations`] reads and ranks (default
    /// [`RecommendOptions::default`]).
    pub fn recommendations(mut self, options: RecommendOptions) -> Self {
        self.recommend = options;
        self
    }

    /// The graph.
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidConfig`] for a prefix or name that makes an unusable collection
    /// name, two collections given one name, a name given to a collection the graph does not
    /// have, or a recommendation option out of its range.
    pub fn build(self) -> Result<FollowGraph> {
        self.recommend.check()?;
        let [users, groups, follows, members, subscriptions, exclusions, locks] =
            self.config.names(COLLECTIONS)?;
        let database = self.config.database();
        let follows = database.collection(&follows);
        let members = database.collection(&members);
        let subscriptions = database.collection(&subscriptions);
        let exclusions = database.collection(&exclusions);
        let outbox = self
            .notifier
            .map(|notifier| {
                Outbox::build(
                    &self.config,
                    &Outbox::collection_for(follows.name()),
                    notifier,
                )
            })
            .transpose()?;
        // The graph's indexes, each built alike: the unique ones record a relation, a membership,
        // a subscription or an exclusion once; the others read them from their other end.
        let mut indexes = vec![
            (&follows, doc! { "owner": 1, "kind": 1, "target": 1 }, true),
            (&follows, doc! { "kind": 1, "target": 1, "owner": 1 }, false),
            (&members, doc! { "group": 1, "user": 1 }, true),
            (&subscriptions, doc! { "owner": 1, "user": 1 }, true),
            (&subscriptions, doc! { "user": 1, "owner": 1 }, false),
            (&exclusions, doc! { "owner": 1, "kind": 1, "user": 1 }, true),
            (
                &exclusions,
                doc! { "user": 1, "kind": 1, "owner": 1 },
                false,
            ),
        ];
        if self.recommend.group_boost > 0 {
            // The user's groups, for the boost.
            indexes.push((&members, doc! { "user": 1, "group": 1 }, false));
        }
        let backend = indexes.into_iter().fold(
            self.config.backend(&locks, LEASE),
            |backend, (collection, keys, unique)| {
                let model = IndexModel::builder()
                    .keys(keys)
                    .options(unique.then(|| IndexOptions::builder().unique(true).build()))
                    .build();
                backend.with_index(collection, model)
            },
        );
        Ok(FollowGraph {
            users: database.collection(&users),
            groups: database.collection(&groups),
            follows,
            members,
            subscriptions,
            exclusions,
            recommend: self.recommend,
            owner_locks: backend.lease_locks(LEASE),
            group_locks: backend.lease_locks(GROUP_LEASE),
            backend,
            outbox,
        })
    }
}
