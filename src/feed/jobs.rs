//! The feed's background jobs: every kind, what it carries, and how a worker runs it.
//!
//! | kind | payload | queued by | runs |
//! |---|---|---|---|
//! | `post_created` | `{post, created}` | [`super::Posts::create`], before the post is inserted | the post's fan-out into "latest", its author's and their followers' feeds |
//! | `propagate` | `{propagation}` | [`super::Users::rename_in_background`]; a `propagate` job that reached its deadline | batches of a chunk propagation until the claim's deadline, then a new job for the rest |
//! | `refresh_hot` | `{}` | [`super::Feeds::schedule_hot_refresh`] | the "hot" feed's refresh |
//!
//! Every job is idempotent: a job can run more than once (see [`crate::jobs`]).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Document};

use super::state::FeedState;
use super::types::PostId;
use super::{lists, propagation};
use crate::jobs::{Job, JobHandler, JobQueue};
use crate::{Error, Result};

/// A feed job, as queued and as run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum FeedJob {
    /// Put a new post into the feeds. `created` is the post's, for telling a post not stored
    /// yet from one never stored (absent from jobs queued by hand: a missing post is dropped).
    PostCreated {
        post: PostId,
        created: Option<bson::DateTime>,
    },
    /// Run a recorded chunk propagation from where it stopped.
    Propagate { propagation: ObjectId },
    /// Recompute the "hot" feed.
    RefreshHot,
}

impl FeedJob {
    const POST_CREATED: &'static str = "post_created";
    const PROPAGATE: &'static str = "propagate";
    const REFRESH_HOT: &'static str = "refresh_hot";

    /// Queues the job (one `insert`); returns its id.
    pub(super) async fn enqueue(self, queue: &JobQueue) -> Result<ObjectId> {
        let id = ObjectId::new();
        self.enqueue_once(queue, id).await?;
        Ok(id)
    }

    /// Queues the job under `id` unless a job with that id is queued (one `insert`).
    pub(super) async fn enqueue_once(self, queue: &JobQueue, id: ObjectId) -> Result<bool> {
        let (kind, payload) = match self {
            FeedJob::PostCreated { post, created } => {
                let mut payload = doc! { "post": post.0 };
                if let Some(created) = created {
                    payload.insert("created", created);
                }
                (Self::POST_CREATED, payload)
            }
            FeedJob::Propagate { propagation } => {
                (Self::PROPAGATE, doc! { "propagation": propagation })
            }
            FeedJob::RefreshHot => (Self::REFRESH_HOT, Document::new()),
        };
        queue.enqueue_once(id, kind, payload).await
    }

    /// The job `job` holds, or an error for a kind or payload no feed job has.
    fn parse(job: &Job) -> Result<Self> {
        let payload = &job.payload;
        match job.kind.as_str() {
            Self::POST_CREATED => Ok(FeedJob::PostCreated {
                post: PostId(payload.get_object_id("post").map_err(|_| bad_job(job))?),
                created: payload.get_datetime("created").ok().copied(),
            }),
            Self::PROPAGATE => Ok(FeedJob::Propagate {
                propagation: payload
                    .get_object_id("propagation")
                    .map_err(|_| bad_job(job))?,
            }),
            Self::REFRESH_HOT => Ok(FeedJob::RefreshHot),
            _ => Err(bad_job(job)),
        }
    }

    /// Runs the job, claimed as `job`.
    async fn run(self, inner: &FeedState, job: &Job) -> Result<()> {
        match self {
            FeedJob::PostCreated { post, created } => {
                lists::fan_out_post(inner, post, created).await
            }
            FeedJob::Propagate { propagation } => {
                // Batches stop at the claim's deadline, so the job never outlives its lease by
                // more than one batch; the rest goes to a new job, resuming from the record.
                match propagation::run(inner, propagation, None, job.deadline()).await {
                    Ok(status) if !status.done => {
                        FeedJob::Propagate { propagation }
                            .enqueue(&inner.jobs)
                            .await?;
                        Ok(())
                    }
                    Ok(_) | Err(Error::NotFound { .. }) => Ok(()),
                    Err(error) => Err(error),
                }
            }
            FeedJob::RefreshHot => lists::refresh_hot(inner).await.map(|_| ()),
        }
    }
}

fn bad_job(job: &Job) -> Error {
    Error::InvalidConfig {
        reason: format!("feed job {} of kind `{}` cannot be run", job.id, job.kind),
    }
}

/// Runs a store's jobs; see [`super::FeedStore::start_worker`].
pub(super) struct FeedJobs(pub(super) Arc<FeedState>);

impl fmt::Debug for FeedJobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FeedJobs").field(&self.0).finish()
    }
}

#[async_trait]
impl JobHandler for FeedJobs {
    async fn handle(&self, job: &Job) -> Result<()> {
        FeedJob::parse(job)?.run(&self.0, job).await
    }
}
