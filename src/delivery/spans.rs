//! Every span delivery to followers opens, one per public operation, named `delivery.<operation>` (see
//! [`crate::observe`] for what each span records). Operations open their span through this
//! table, so the names live in one place.

use crate::observe::{self, Operation};

/// An operation of delivery to followers, as its span names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `delivery.create_indexes`
    CreateIndexes,
    /// `delivery.shard_collections`
    ShardCollections,
    /// `delivery.post`
    Post,
    /// `delivery.touch`
    Touch,
    /// `delivery.follow`
    Follow,
    /// `delivery.unfollow`
    Unfollow,
    /// `delivery.is_celebrity`
    IsCelebrity,
    /// `delivery.run_pending`
    RunPending,
    /// `delivery.wait_until_drained`
    WaitUntilDrained,
    /// `delivery.timeline`
    Timeline,
}

impl Op {
    /// The operation's span, ready to run its work in.
    pub(crate) fn span(self) -> Operation {
        match self {
            Op::CreateIndexes => observe::operation!("delivery.create_indexes"),
            Op::ShardCollections => observe::operation!("delivery.shard_collections"),
            Op::Post => observe::operation!("delivery.post"),
            Op::Touch => observe::operation!("delivery.touch"),
            Op::Follow => observe::operation!("delivery.follow"),
            Op::Unfollow => observe::operation!("delivery.unfollow"),
            Op::IsCelebrity => observe::operation!("delivery.is_celebrity"),
            Op::RunPending => observe::operation!("delivery.run_pending"),
            Op::WaitUntilDrained => observe::operation!("delivery.wait_until_drained"),
            Op::Timeline => observe::operation!("delivery.timeline"),
        }
    }
}
