//! A job as a handler receives it ([`Job`]), and the handler ([`JobHandler`]).

use std::fmt;
use std::time::Instant;

use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::Document;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One job as a handler receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The job's id, assigned when it was enqueued.
    #[serde(rename = "_id")]
    pub id: ObjectId,
    /// What to do, for the handler to dispatch on (such as `"post_created"`).
    pub kind: String,
    /// The job's arguments.
    pub payload: Document,
    /// How many earlier runs failed.
    pub attempts: u32,
    /// When the claim stops covering new work; set by the queue when it runs the job.
    #[serde(skip)]
    pub(super) deadline: Option<Instant>,
}

impl Job {
    /// An [`Error::Handler`] for this job: how an application's [`JobHandler`] reports a failure
    /// of its own. The queue records the error's text on the job and runs it again later.
    ///
    /// ```
    /// use mongo_social::jobs::{Job, JobHandler};
    ///
    /// #[derive(Debug)]
    /// struct Greet;
    ///
    /// #[async_trait::async_trait]
    /// impl JobHandler for Greet {
    ///     async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
    ///         let who = job.payload.get_str("who").map_err(|error| job.error(error))?;
    ///         println!("hello, {who}");
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn error(&self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::Handler {
            kind: self.kind.clone(),
            source: source.into(),
        }
    }

    /// When the worker's claim on this job stops covering new work: the claim time plus the
    /// lease less a quarter of the lease (`None` for a job that no queue is running). A handler
    /// whose work can outlast it should stop by then, record its progress and enqueue a job for
    /// the rest; work started after it may overlap a second run of the job on another worker.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

/// The application's code for running jobs.
///
/// Must be idempotent: a job can run more than once (see the [module docs](super)).
///
/// An application implements it, for its own jobs; the crate calls it (the delivery and the feed
/// implement it for theirs).
#[async_trait]
pub trait JobHandler: Send + Sync + fmt::Debug + 'static {
    /// Runs one job. An error leaves the job in the queue, retried after a back-off, and marked
    /// failed after [`JobQueueBuilder::max_attempts`] runs; its text is kept on the job as
    /// `last_error`. A failure of the application's own is an [`Error::Handler`], made with
    /// [`Job::error`]; errors of this crate's stores pass through `?` as they are.
    ///
    /// [`JobQueueBuilder::max_attempts`]: super::JobQueueBuilder::max_attempts
    async fn handle(&self, job: &Job) -> Result<()>;
}
