//! The span of every public operation of delivery to followers, the social feed, the follow
//! graph and the notification store (`<store>.<operation>`; see [`crate::observe`] for what each
//! span records), so that the names live in one place. The inbox and comment stores open theirs
//! through [`super::store_operation`] (they carry the strategy), and the job queue through
//! [`crate::jobs`]' own table (its spans carry the job's kind).

use super::Operation;

/// An operation, as its span names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `delivery.create_indexes`
    DeliveryCreateIndexes,
    /// `delivery.shard_collections`
    DeliveryShardCollections,
    /// `delivery.post`
    DeliveryPost,
    /// `delivery.touch`
    DeliveryTouch,
    /// `delivery.follow`
    DeliveryFollow,
    /// `delivery.unfollow`
    DeliveryUnfollow,
    /// `delivery.is_celebrity`
    DeliveryIsCelebrity,
    /// `delivery.run_pending`
    DeliveryRunPending,
    /// `delivery.wait_until_drained`
    DeliveryWaitUntilDrained,
    /// `delivery.timeline`
    DeliveryTimeline,
    /// `feed.feeds.page`
    FeedFeedsPage,
    /// `feed.feeds.items`
    FeedFeedsItems,
    /// `feed.feeds.refresh_hot`
    FeedFeedsRefreshHot,
    /// `feed.feeds.schedule_hot_refresh`
    FeedFeedsScheduleHotRefresh,
    /// `feed.feeds.rebuild_user`
    FeedFeedsRebuildUser,
    /// `feed.likes.add_to_counter`
    FeedLikesAddToCounter,
    /// `feed.likes.counters`
    FeedLikesCounters,
    /// `feed.likes.recount`
    FeedLikesRecount,
    /// `feed.likes.like`
    FeedLikesLike,
    /// `feed.likes.unlike`
    FeedLikesUnlike,
    /// `feed.likes.is_liked`
    FeedLikesIsLiked,
    /// `feed.likes.settle`
    FeedLikesSettle,
    /// `feed.posts.create`
    FeedPostsCreate,
    /// `feed.posts.get`
    FeedPostsGet,
    /// `feed.posts.get_many`
    FeedPostsGetMany,
    /// `feed.search.page`
    FeedSearchPage,
    /// `feed.run_pending`
    FeedRunPending,
    /// `feed.wait_until_drained`
    FeedWaitUntilDrained,
    /// `feed.create_indexes`
    FeedCreateIndexes,
    /// `feed.shard_collections`
    FeedShardCollections,
    /// `feed.users.create`
    FeedUsersCreate,
    /// `feed.users.get`
    FeedUsersGet,
    /// `feed.users.put_extended`
    FeedUsersPutExtended,
    /// `feed.users.get_extended`
    FeedUsersGetExtended,
    /// `feed.users.rename`
    FeedUsersRename,
    /// `feed.users.rename_in_background`
    FeedUsersRenameInBackground,
    /// `feed.users.propagate`
    FeedUsersPropagate,
    /// `feed.users.run_propagation`
    FeedUsersRunPropagation,
    /// `feed.users.unfinished_propagations`
    FeedUsersUnfinishedPropagations,
    /// `feed.users.resume_propagations`
    FeedUsersResumePropagations,
    /// `graph.dismiss`
    GraphDismiss,
    /// `graph.block`
    GraphBlock,
    /// `graph.unblock`
    GraphUnblock,
    /// `graph.blocked`
    GraphBlocked,
    /// `graph.following`
    GraphFollowing,
    /// `graph.followers`
    GraphFollowers,
    /// `graph.members`
    GraphMembers,
    /// `graph.follows_any`
    GraphFollowsAny,
    /// `graph.followers_among`
    GraphFollowersAmong,
    /// `graph.subscription`
    GraphSubscription,
    /// `graph.stats`
    GraphStats,
    /// `graph.recommendations`
    GraphRecommendations,
    /// `graph.follow`
    GraphFollow,
    /// `graph.unfollow`
    GraphUnfollow,
    /// `graph.follow_group`
    GraphFollowGroup,
    /// `graph.unfollow_group`
    GraphUnfollowGroup,
    /// `graph.add_member`
    GraphAddMember,
    /// `graph.remove_member`
    GraphRemoveMember,
    /// `graph.rebuild`
    GraphRebuild,
    /// `graph.recount`
    GraphRecount,
    /// `graph.create_indexes`
    GraphCreateIndexes,
    /// `graph.shard_collections`
    GraphShardCollections,
    /// `graph.add_user`
    GraphAddUser,
    /// `graph.add_group`
    GraphAddGroup,
    /// `notifications.outbox.run_pending`
    NotificationsOutboxRunPending,
    /// `notifications.outbox.pending`
    NotificationsOutboxPending,
    /// `notifications.outbox.failed`
    NotificationsOutboxFailed,
    /// `notifications.create_indexes`
    NotificationsCreateIndexes,
    /// `notifications.shard_collections`
    NotificationsShardCollections,
    /// `notifications.notify`
    NotificationsNotify,
    /// `notifications.withdraw`
    NotificationsWithdraw,
    /// `notifications.page`
    NotificationsPage,
    /// `notifications.counts`
    NotificationsCounts,
    /// `notifications.mark_seen`
    NotificationsMarkSeen,
    /// `notifications.mark_all_read`
    NotificationsMarkAllRead,
    /// `notifications.mark_read`
    NotificationsMarkRead,
    /// `notifications.trim`
    NotificationsTrim,
}

impl Op {
    /// The operation's span, ready to run its work in.
    pub(crate) fn span(self) -> Operation {
        match self {
            Op::FeedUsersUnfinishedPropagations => {
                super::operation!("feed.users.unfinished_propagations")
            }
            Op::DeliveryCreateIndexes => super::operation!("delivery.create_indexes"),
            Op::DeliveryShardCollections => super::operation!("delivery.shard_collections"),
            Op::DeliveryPost => super::operation!("delivery.post"),
            Op::DeliveryTouch => super::operation!("delivery.touch"),
            Op::DeliveryFollow => super::operation!("delivery.follow"),
            Op::DeliveryUnfollow => super::operation!("delivery.unfollow"),
            Op::DeliveryIsCelebrity => super::operation!("delivery.is_celebrity"),
            Op::DeliveryRunPending => super::operation!("delivery.run_pending"),
            Op::DeliveryWaitUntilDrained => super::operation!("delivery.wait_until_drained"),
            Op::DeliveryTimeline => super::operation!("delivery.timeline"),
            Op::FeedFeedsPage => super::operation!("feed.feeds.page"),
            Op::FeedFeedsItems => super::operation!("feed.feeds.items"),
            Op::FeedFeedsRefreshHot => super::operation!("feed.feeds.refresh_hot"),
            Op::FeedFeedsScheduleHotRefresh => super::operation!("feed.feeds.schedule_hot_refresh"),
            Op::FeedFeedsRebuildUser => super::operation!("feed.feeds.rebuild_user"),
            Op::FeedLikesAddToCounter => super::operation!("feed.likes.add_to_counter"),
            Op::FeedLikesCounters => super::operation!("feed.likes.counters"),
            Op::FeedLikesRecount => super::operation!("feed.likes.recount"),
            Op::FeedLikesLike => super::operation!("feed.likes.like"),
            Op::FeedLikesUnlike => super::operation!("feed.likes.unlike"),
            Op::FeedLikesIsLiked => super::operation!("feed.likes.is_liked"),
            Op::FeedLikesSettle => super::operation!("feed.likes.settle"),
            Op::FeedPostsCreate => super::operation!("feed.posts.create"),
            Op::FeedPostsGet => super::operation!("feed.posts.get"),
            Op::FeedPostsGetMany => super::operation!("feed.posts.get_many"),
            Op::FeedSearchPage => super::operation!("feed.search.page"),
            Op::FeedRunPending => super::operation!("feed.run_pending"),
            Op::FeedWaitUntilDrained => super::operation!("feed.wait_until_drained"),
            Op::FeedCreateIndexes => super::operation!("feed.create_indexes"),
            Op::FeedShardCollections => super::operation!("feed.shard_collections"),
            Op::FeedUsersCreate => super::operation!("feed.users.create"),
            Op::FeedUsersGet => super::operation!("feed.users.get"),
            Op::FeedUsersPutExtended => super::operation!("feed.users.put_extended"),
            Op::FeedUsersGetExtended => super::operation!("feed.users.get_extended"),
            Op::FeedUsersRename => super::operation!("feed.users.rename"),
            Op::FeedUsersRenameInBackground => super::operation!("feed.users.rename_in_background"),
            Op::FeedUsersPropagate => super::operation!("feed.users.propagate"),
            Op::FeedUsersRunPropagation => super::operation!("feed.users.run_propagation"),
            Op::FeedUsersResumePropagations => super::operation!("feed.users.resume_propagations"),
            Op::GraphDismiss => super::operation!("graph.dismiss"),
            Op::GraphBlock => super::operation!("graph.block"),
            Op::GraphUnblock => super::operation!("graph.unblock"),
            Op::GraphBlocked => super::operation!("graph.blocked"),
            Op::GraphFollowing => super::operation!("graph.following"),
            Op::GraphFollowers => super::operation!("graph.followers"),
            Op::GraphMembers => super::operation!("graph.members"),
            Op::GraphFollowsAny => super::operation!("graph.follows_any"),
            Op::GraphFollowersAmong => super::operation!("graph.followers_among"),
            Op::GraphSubscription => super::operation!("graph.subscription"),
            Op::GraphStats => super::operation!("graph.stats"),
            Op::GraphRecommendations => super::operation!("graph.recommendations"),
            Op::GraphFollow => super::operation!("graph.follow"),
            Op::GraphUnfollow => super::operation!("graph.unfollow"),
            Op::GraphFollowGroup => super::operation!("graph.follow_group"),
            Op::GraphUnfollowGroup => super::operation!("graph.unfollow_group"),
            Op::GraphAddMember => super::operation!("graph.add_member"),
            Op::GraphRemoveMember => super::operation!("graph.remove_member"),
            Op::GraphRebuild => super::operation!("graph.rebuild"),
            Op::GraphRecount => super::operation!("graph.recount"),
            Op::GraphCreateIndexes => super::operation!("graph.create_indexes"),
            Op::GraphShardCollections => super::operation!("graph.shard_collections"),
            Op::GraphAddUser => super::operation!("graph.add_user"),
            Op::GraphAddGroup => super::operation!("graph.add_group"),
            Op::NotificationsOutboxRunPending => {
                super::operation!("notifications.outbox.run_pending")
            }
            Op::NotificationsOutboxPending => super::operation!("notifications.outbox.pending"),
            Op::NotificationsOutboxFailed => super::operation!("notifications.outbox.failed"),
            Op::NotificationsCreateIndexes => super::operation!("notifications.create_indexes"),
            Op::NotificationsShardCollections => {
                super::operation!("notifications.shard_collections")
            }
            Op::NotificationsNotify => super::operation!("notifications.notify"),
            Op::NotificationsWithdraw => super::operation!("notifications.withdraw"),
            Op::NotificationsPage => super::operation!("notifications.page"),
            Op::NotificationsCounts => super::operation!("notifications.counts"),
            Op::NotificationsMarkSeen => super::operation!("notifications.mark_seen"),
            Op::NotificationsMarkAllRead => super::operation!("notifications.mark_all_read"),
            Op::NotificationsMarkRead => super::operation!("notifications.mark_read"),
            Op::NotificationsTrim => super::operation!("notifications.trim"),
        }
    }
}
