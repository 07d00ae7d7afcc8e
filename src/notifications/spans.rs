//! Every span the notification store opens, one per public operation, named `notifications.<operation>` (see
//! [`crate::observe`] for what each span records). Operations open their span through this
//! table, so the names live in one place.

use crate::observe::{self, Operation};

/// An operation of the notification store, as its span names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `notifications.outbox.run_pending`
    OutboxRunPending,
    /// `notifications.outbox.pending`
    OutboxPending,
    /// `notifications.outbox.failed`
    OutboxFailed,
    /// `notifications.create_indexes`
    CreateIndexes,
    /// `notifications.shard_collections`
    ShardCollections,
    /// `notifications.notify`
    Notify,
    /// `notifications.withdraw`
    Withdraw,
    /// `notifications.page`
    Page,
    /// `notifications.counts`
    Counts,
    /// `notifications.mark_seen`
    MarkSeen,
    /// `notifications.mark_all_read`
    MarkAllRead,
    /// `notifications.mark_read`
    MarkRead,
    /// `notifications.trim`
    Trim,
}

impl Op {
    /// The operation's span, ready to run its work in.
    pub(crate) fn span(self) -> Operation {
        match self {
            Op::OutboxRunPending => observe::operation!("notifications.outbox.run_pending"),
            Op::OutboxPending => observe::operation!("notifications.outbox.pending"),
            Op::OutboxFailed => observe::operation!("notifications.outbox.failed"),
            Op::CreateIndexes => observe::operation!("notifications.create_indexes"),
            Op::ShardCollections => observe::operation!("notifications.shard_collections"),
            Op::Notify => observe::operation!("notifications.notify"),
            Op::Withdraw => observe::operation!("notifications.withdraw"),
            Op::Page => observe::operation!("notifications.page"),
            Op::Counts => observe::operation!("notifications.counts"),
            Op::MarkSeen => observe::operation!("notifications.mark_seen"),
            Op::MarkAllRead => observe::operation!("notifications.mark_all_read"),
            Op::MarkRead => observe::operation!("notifications.mark_read"),
            Op::Trim => observe::operation!("notifications.trim"),
        }
    }
}
