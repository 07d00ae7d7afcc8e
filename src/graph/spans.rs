//! Every span the follow graph opens, one per public operation, named `graph.<operation>` (see
//! [`crate::observe`] for what each span records). Operations open their span through this
//! table, so the names live in one place.

use crate::observe::{self, Operation};

/// An operation of the follow graph, as its span names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `graph.dismiss`
    Dismiss,
    /// `graph.block`
    Block,
    /// `graph.unblock`
    Unblock,
    /// `graph.blocked`
    Blocked,
    /// `graph.following`
    Following,
    /// `graph.followers`
    Followers,
    /// `graph.members`
    Members,
    /// `graph.follows_any`
    FollowsAny,
    /// `graph.followers_among`
    FollowersAmong,
    /// `graph.subscription`
    Subscription,
    /// `graph.stats`
    Stats,
    /// `graph.recommendations`
    Recommendations,
    /// `graph.follow`
    Follow,
    /// `graph.unfollow`
    Unfollow,
    /// `graph.follow_group`
    FollowGroup,
    /// `graph.unfollow_group`
    UnfollowGroup,
    /// `graph.add_member`
    AddMember,
    /// `graph.remove_member`
    RemoveMember,
    /// `graph.rebuild`
    Rebuild,
    /// `graph.recount`
    Recount,
    /// `graph.create_indexes`
    CreateIndexes,
    /// `graph.shard_collections`
    ShardCollections,
    /// `graph.add_user`
    AddUser,
    /// `graph.add_group`
    AddGroup,
}

impl Op {
    /// The operation's span, ready to run its work in.
    pub(crate) fn span(self) -> Operation {
        match self {
            Op::Dismiss => observe::operation!("graph.dismiss"),
            Op::Block => observe::operation!("graph.block"),
            Op::Unblock => observe::operation!("graph.unblock"),
            Op::Blocked => observe::operation!("graph.blocked"),
            Op::Following => observe::operation!("graph.following"),
            Op::Followers => observe::operation!("graph.followers"),
            Op::Members => observe::operation!("graph.members"),
            Op::FollowsAny => observe::operation!("graph.follows_any"),
            Op::FollowersAmong => observe::operation!("graph.followers_among"),
            Op::Subscription => observe::operation!("graph.subscription"),
            Op::Stats => observe::operation!("graph.stats"),
            Op::Recommendations => observe::operation!("graph.recommendations"),
            Op::Follow => observe::operation!("graph.follow"),
            Op::Unfollow => observe::operation!("graph.unfollow"),
            Op::FollowGroup => observe::operation!("graph.follow_group"),
            Op::UnfollowGroup => observe::operation!("graph.unfollow_group"),
            Op::AddMember => observe::operation!("graph.add_member"),
            Op::RemoveMember => observe::operation!("graph.remove_member"),
            Op::Rebuild => observe::operation!("graph.rebuild"),
            Op::Recount => observe::operation!("graph.recount"),
            Op::CreateIndexes => observe::operation!("graph.create_indexes"),
            Op::ShardCollections => observe::operation!("graph.shard_collections"),
            Op::AddUser => observe::operation!("graph.add_user"),
            Op::AddGroup => observe::operation!("graph.add_group"),
        }
    }
}
