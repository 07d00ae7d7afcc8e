//! A durable background job queue in a MongoDB collection, with leased claims.
//!
//! A job is one document `{_id, kind, payload, attempts, not_before, failed}`. Workers poll for
//! jobs that are due, claim them with a leased lock document (an `insert` on a unique `_id`,
//! atomic on every server, including those whose `findAndModify` is not), run the
//! application's [`JobHandler`], then delete the job and the lock. A worker that dies keeps its
//! claim only until the lease runs out; the next worker that finds the job breaks the expired lock
//! and runs the job again.
//!
//! Delivery is therefore *at least once*: a job whose handler outlives the lease, or whose worker
//! dies after the handler's writes but before the job is deleted, runs twice. Handlers must be
//! idempotent (the feed's handlers are: adding a post to a feed that already holds it changes
//! nothing). Within a lease, a job runs on one worker at a time.
//!
//! A claim covers a batch of jobs run one after the other, so a worker keeps to its lease: it
//! notes when it claimed the batch and starts no further job of it once the lease less a margin
//! of a quarter of the lease has passed (the first job of a batch always runs); the jobs not
//! started are released at once, for the next claim. A handler whose work can be long reads
//! [`Job::deadline`], stops by then and leaves the rest to a job it enqueues (as the feed's
//! propagation jobs do). A handler that runs past its lease can still run concurrently with
//! another worker that broke its expired claim.
//!
//! An idle worker looks for due jobs with one `find`, sleeping between looks for the poll
//! interval (50 ms by default), doubled after each look that finds nothing up to the maximum
//! poll interval (2 s by default); a job found, or enqueued through the queue in this process,
//! brings it back to the poll interval. A worker runs while its [`Worker`] handle lives.
//!
//! Commands per job, with a batch of one: `find` (due jobs), `insert` (lock), `find` (re-check
//! the job still exists), the handler's own, `delete` (job), `delete` (lock). A batch of `n` jobs
//! costs the same first three commands once. A worker looks at the due jobs of four batches and
//! starts claiming at a batch of its own, so concurrent workers rarely contend for the same jobs;
//! each batch found taken costs one more `insert`.
//!
//! # Transient failures
//!
//! Every command of the queue is retried on transient failures under its [`RetryPolicy`](crate::retry::RetryPolicy)
//! ([`JobQueueBuilder::retry_policy`]), and none applies twice: an enqueue carries its job's
//! `_id` (a retry that meets the stored job counts it as its own insert), a claim is a lock
//! insert whose retry recognises its own token, completing a job and releasing claims are
//! deletes by `_id` (and token), and recording a failure `$set`s absolute values (the attempt
//! count the run started with, plus one). A handler that fails during an outage has its failure
//! recorded and its claim released through those retries, so its job runs again
//! [`JobQueueBuilder::retry_delay`] after the server is back, not after the lease. A worker
//! whose rounds keep failing (past the retry budget) backs off as the policy does, from its
//! initial backoff doubling to its longest, and keeps going.

mod builder;
mod job;
mod queue;
mod run;
mod spans;
mod worker;

pub use builder::JobQueueBuilder;
pub use job::{Job, JobHandler};
pub use queue::JobQueue;
pub use worker::Worker;
