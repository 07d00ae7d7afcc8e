//! The span of every public operation of delivery to followers, the social feed, the follow
//! graph and the notification store (`<store>.<operation>`; see [`crate::observe`] for what each
//! span records), so that the names live in one place. The inbox and comment stores open theirs
//! through [`super::store_operation`] (they carry the strategy), and the job queue through
//! [`crate::jobs`]' own table (its spans carry the job's kind).

use super::Operation;

/// The table of operations: each variant of [`Op`] with its span's name (documented as it).
macro_rules! operations {
    ($($variant:ident => $name:literal,)*) => {
        /// An operation, as its span names it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Op {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl Op {
            /// The operation's span, ready to run its work in.
            pub(crate) fn span(self) -> Operation {
                match self {
                    $(Op::$variant => super::operation!($name),)*
                }
            }
        }
    };
}

operations! {
    FeedUsersUnfinishedPropagations => "feed.users.unfinished_propagations",
    DeliveryCreateIndexes => "delivery.create_indexes",
    DeliveryShardCollections => "delivery.shard_collections",
    DeliveryPost => "delivery.post",
    DeliveryTouch => "delivery.touch",
    DeliveryFollow => "delivery.follow",
    DeliveryUnfollow => "delivery.unfollow",
    DeliveryIsCelebrity => "delivery.is_celebrity",
    DeliveryRunPending => "delivery.run_pending",
    DeliveryWaitUntilDrained => "delivery.wait_until_drained",
    DeliveryTimeline => "delivery.timeline",
    FeedFeedsPage => "feed.feeds.page",
    FeedFeedsItems => "feed.feeds.items",
    FeedFeedsRefreshHot => "feed.feeds.refresh_hot",
    FeedFeedsScheduleHotRefresh => "feed.feeds.schedule_hot_refresh",
    FeedFeedsRebuildUser => "feed.feeds.rebuild_user",
    FeedLikesAddToCounter => "feed.likes.add_to_counter",
    FeedLikesCounters => "feed.likes.counters",
    FeedLikesRecount => "feed.likes.recount",
    FeedLikesLike => "feed.likes.like",
    FeedLikesUnlike => "feed.likes.unlike",
    FeedLikesIsLiked => "feed.likes.is_liked",
    FeedLikesSettle => "feed.likes.settle",
    FeedPostsCreate => "feed.posts.create",
    FeedPostsGet => "feed.posts.get",
    FeedPostsGetMany => "feed.posts.get_many",
    FeedSearchPage => "feed.search.page",
    FeedRunPending => "feed.run_pending",
    FeedWaitUntilDrained => "feed.wait_until_drained",
    FeedCreateIndexes => "feed.create_indexes",
    FeedShardCollections => "feed.shard_collections",
    FeedUsersCreate => "feed.users.create",
    FeedUsersGet => "feed.users.get",
    FeedUsersPutExtended => "feed.users.put_extended",
    FeedUsersGetExtended => "feed.users.get_extended",
    FeedUsersRename => "feed.users.rename",
    FeedUsersRenameInBackground => "feed.users.rename_in_background",
    FeedUsersPropagate => "feed.users.propagate",
    FeedUsersRunPropagation => "feed.users.run_propagation",
    FeedUsersResumePropagations => "feed.users.resume_propagations",
    GraphDismiss => "graph.dismiss",
    GraphBlock => "graph.block",
    GraphUnblock => "graph.unblock",
    GraphBlocked => "graph.blocked",
    GraphFollowing => "graph.following",
    GraphFollowers => "graph.followers",
    GraphMembers => "graph.members",
    GraphFollowsAny => "graph.follows_any",
    GraphFollowersAmong => "graph.followers_among",
    GraphSubscription => "graph.subscription",
    GraphStats => "graph.stats",
    GraphRecommendations => "graph.recommendations",
    GraphFollow => "graph.follow",
    GraphUnfollow => "graph.unfollow",
    GraphFollowGroup => "graph.follow_group",
    GraphUnfollowGroup => "graph.unfollow_group",
    GraphAddMember => "graph.add_member",
    GraphRemoveMember => "graph.remove_member",
    GraphRebuild => "graph.rebuild",
    GraphRecount => "graph.recount",
    GraphCreateIndexes => "graph.create_indexes",
    GraphShardCollections => "graph.shard_collections",
    GraphAddUser => "graph.add_user",
    GraphAddGroup => "graph.add_group",
    NotificationsOutboxRunPending => "notifications.outbox.run_pending",
    NotificationsOutboxPending => "notifications.outbox.pending",
    NotificationsOutboxFailed => "notifications.outbox.failed",
    NotificationsCreateIndexes => "notifications.create_indexes",
    NotificationsShardCollections => "notifications.shard_collections",
    NotificationsNotify => "notifications.notify",
    NotificationsWithdraw => "notifications.withdraw",
    NotificationsPage => "notifications.page",
    NotificationsCounts => "notifications.counts",
    NotificationsMarkSeen => "notifications.mark_seen",
    NotificationsMarkAllRead => "notifications.mark_all_read",
    NotificationsMarkRead => "notifications.mark_read",
    NotificationsTrim => "notifications.trim",
}
