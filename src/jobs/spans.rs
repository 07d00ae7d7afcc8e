//! Every span the job queue opens, one per public operation, named `jobs.<operation>` (see
//! [`crate::observe`] for what each span records). Operations open their span through this
//! table, so the names live in one place.

use super::Job;
use crate::observe::{self, Operation};

/// An operation of the job queue, as its span names it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op<'a> {
    /// `jobs.enqueue`, with the job's kind
    Enqueue(&'a str),
    /// `jobs.enqueue_once`, with the job's kind
    EnqueueOnce(&'a str),
    /// `jobs.run`: one job run by a handler, with its id, kind, attempt and worker
    Run(&'a Job),
    /// `jobs.cancel`
    Cancel,
    /// `jobs.pending`
    Pending,
    /// `jobs.failed`
    Failed,
    /// `jobs.wait_until_drained`
    WaitUntilDrained,
    /// `jobs.create_indexes`
    CreateIndexes,
    /// `jobs.shard_collections`
    ShardCollections,
    /// `jobs.run_pending`
    RunPending,
    /// `jobs.run_once`
    RunOnce,
}

impl Op<'_> {
    /// The operation's span, ready to run its work in.
    pub(crate) fn span(self) -> Operation {
        match self {
            Op::Enqueue(_kind) => observe::operation!("jobs.enqueue", kind = _kind),
            Op::EnqueueOnce(_kind) => observe::operation!("jobs.enqueue_once", kind = _kind),
            Op::Run(_job) => observe::operation!(
                "jobs.run",
                job = %_job.id,
                kind = _job.kind.as_str(),
                attempt = _job.attempts + 1,
                worker = observe::worker_number(),
            ),
            Op::Cancel => observe::operation!("jobs.cancel"),
            Op::Pending => observe::operation!("jobs.pending"),
            Op::Failed => observe::operation!("jobs.failed"),
            Op::WaitUntilDrained => observe::operation!("jobs.wait_until_drained"),
            Op::CreateIndexes => observe::operation!("jobs.create_indexes"),
            Op::ShardCollections => observe::operation!("jobs.shard_collections"),
            Op::RunPending => observe::operation!("jobs.run_pending"),
            Op::RunOnce => observe::operation!("jobs.run_once"),
        }
    }
}
