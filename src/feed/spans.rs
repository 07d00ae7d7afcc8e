//! Every span the social feed opens, one per public operation, named `feed.<operation>` (see
//! [`crate::observe`] for what each span records). Operations open their span through this
//! table, so the names live in one place.

use crate::observe::{self, Operation};

/// An operation of the social feed, as its span names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `feed.feeds.page`
    FeedsPage,
    /// `feed.feeds.items`
    FeedsItems,
    /// `feed.feeds.refresh_hot`
    FeedsRefreshHot,
    /// `feed.feeds.schedule_hot_refresh`
    FeedsScheduleHotRefresh,
    /// `feed.feeds.rebuild_user`
    FeedsRebuildUser,
    /// `feed.likes.add_to_counter`
    LikesAddToCounter,
    /// `feed.likes.counters`
    LikesCounters,
    /// `feed.likes.recount`
    LikesRecount,
    /// `feed.likes.like`
    LikesLike,
    /// `feed.likes.unlike`
    LikesUnlike,
    /// `feed.likes.is_liked`
    LikesIsLiked,
    /// `feed.likes.settle`
    LikesSettle,
    /// `feed.posts.create`
    PostsCreate,
    /// `feed.posts.get`
    PostsGet,
    /// `feed.posts.get_many`
    PostsGetMany,
    /// `feed.search.page`
    SearchPage,
    /// `feed.run_pending`
    RunPending,
    /// `feed.wait_until_drained`
    WaitUntilDrained,
    /// `feed.create_indexes`
    CreateIndexes,
    /// `feed.shard_collections`
    ShardCollections,
    /// `feed.users.create`
    UsersCreate,
    /// `feed.users.get`
    UsersGet,
    /// `feed.users.put_extended`
    UsersPutExtended,
    /// `feed.users.get_extended`
    UsersGetExtended,
    /// `feed.users.rename`
    UsersRename,
    /// `feed.users.rename_in_background`
    UsersRenameInBackground,
    /// `feed.users.propagate`
    UsersPropagate,
    /// `feed.users.run_propagation`
    UsersRunPropagation,
    /// `feed.users.unfinished_propagations`
    UsersUnfinishedPropagations,
    /// `feed.users.resume_propagations`
    UsersResumePropagations,
}

impl Op {
    /// The operation's span, ready to run its work in.
    pub(crate) fn span(self) -> Operation {
        match self {
            Op::FeedsPage => observe::operation!("feed.feeds.page"),
            Op::FeedsItems => observe::operation!("feed.feeds.items"),
            Op::FeedsRefreshHot => observe::operation!("feed.feeds.refresh_hot"),
            Op::FeedsScheduleHotRefresh => observe::operation!("feed.feeds.schedule_hot_refresh"),
            Op::FeedsRebuildUser => observe::operation!("feed.feeds.rebuild_user"),
            Op::LikesAddToCounter => observe::operation!("feed.likes.add_to_counter"),
            Op::LikesCounters => observe::operation!("feed.likes.counters"),
            Op::LikesRecount => observe::operation!("feed.likes.recount"),
            Op::LikesLike => observe::operation!("feed.likes.like"),
            Op::LikesUnlike => observe::operation!("feed.likes.unlike"),
            Op::LikesIsLiked => observe::operation!("feed.likes.is_liked"),
            Op::LikesSettle => observe::operation!("feed.likes.settle"),
            Op::PostsCreate => observe::operation!("feed.posts.create"),
            Op::PostsGet => observe::operation!("feed.posts.get"),
            Op::PostsGetMany => observe::operation!("feed.posts.get_many"),
            Op::SearchPage => observe::operation!("feed.search.page"),
            Op::RunPending => observe::operation!("feed.run_pending"),
            Op::WaitUntilDrained => observe::operation!("feed.wait_until_drained"),
            Op::CreateIndexes => observe::operation!("feed.create_indexes"),
            Op::ShardCollections => observe::operation!("feed.shard_collections"),
            Op::UsersCreate => observe::operation!("feed.users.create"),
            Op::UsersGet => observe::operation!("feed.users.get"),
            Op::UsersPutExtended => observe::operation!("feed.users.put_extended"),
            Op::UsersGetExtended => observe::operation!("feed.users.get_extended"),
            Op::UsersRename => observe::operation!("feed.users.rename"),
            Op::UsersRenameInBackground => observe::operation!("feed.users.rename_in_background"),
            Op::UsersPropagate => observe::operation!("feed.users.propagate"),
            Op::UsersRunPropagation => observe::operation!("feed.users.run_propagation"),
            Op::UsersUnfinishedPropagations => {
                observe::operation!("feed.users.unfinished_propagations")
            }
            Op::UsersResumePropagations => observe::operation!("feed.users.resume_propagations"),
        }
    }
}
