//! Claiming due jobs, running them and recording their failures.

use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::{doc, Document};

use super::{Job, JobHandler, JobQueue};
use crate::error::{Error, Result};
use crate::jobs::spans::Op;
use crate::observe;

/// A worker looks at this many batches of due jobs and claims the first free one.
const CANDIDATE_BATCHES: usize = 4;

impl JobQueue {
    /// Runs due jobs with `handler` in this task, batch after batch, until none is due; returns
    /// how many ran. For tests, scripts and applications without a worker. The stores built on
    /// the queue ([`crate::delivery::Delivery`], [`crate::FeedStore`]) have a `run_pending` of
    /// their own that passes their handler.
    pub async fn run_pending(&self, handler: &dyn JobHandler) -> Result<usize> {
        let mut total = 0;
        Op::RunPending
            .span()
            .run(async {
                loop {
                    let ran = self.run_round(handler).await?;
                    if ran == 0 {
                        return Ok(total);
                    }
                    total += ran;
                }
            })
            .await
    }

    /// Claims up to one batch of due jobs and runs them with `handler`, one after the other,
    /// starting no further job once three quarters of the lease have passed since the claim (the
    /// jobs not started are released for a later claim). Returns how many jobs were claimed (0
    /// when none was due or all were claimed elsewhere).
    ///
    /// A handler error is recorded on its job (which is retried later), not returned.
    ///
    /// # Errors
    ///
    /// Server errors while claiming, re-reading or completing jobs; the claims are then released
    /// (or, if releasing fails too, left to their lease) and the first error is returned.
    pub async fn run_once(&self, handler: &dyn JobHandler) -> Result<usize> {
        Op::RunOnce.span().run(self.run_round(handler)).await
    }

    /// [`JobQueue::run_once`], without its span: a worker's round, which emits only for the jobs
    /// it claims.
    pub(super) async fn run_round(&self, handler: &dyn JobHandler) -> Result<usize> {
        let due = self.due_jobs().await?;
        if due.is_empty() {
            return Ok(0);
        }
        let keys: Vec<String> = due.iter().map(|id| id.to_hex()).collect();
        let token = ObjectId::new();
        // Workers start at different batches of the due jobs, so they do not all contend for
        // the oldest one.
        let batches: Vec<&[String]> = keys.chunks(self.settings.batch).collect();
        let first = usize::from(token.bytes()[11]) % batches.len();
        let mut taken = Vec::new();
        let mut claimed_at = Instant::now();
        for offset in 0..batches.len() {
            claimed_at = Instant::now();
            taken = self
                .locks
                .try_acquire(batches[(first + offset) % batches.len()], token)
                .await?;
            if !taken.is_empty() {
                break;
            }
        }
        if taken.is_empty() {
            // Everything is claimed: by live workers, or by dead ones whose lease ran out.
            self.locks.break_expired(&keys).await?;
            claimed_at = Instant::now();
            taken = self.locks.try_acquire(batches[first], token).await?;
            if taken.is_empty() {
                return Ok(0);
            }
        }
        let deadline = claimed_at + (self.settings.lease - self.settings.lease / 4);
        let claimed = taken.len();
        observe::event!(debug, jobs = %taken.join(","), claimed, "jobs claimed");
        let outcome = match self.claimed_jobs(&taken).await {
            Ok(jobs) => self.run_claimed(handler, jobs, deadline).await,
            Err(error) => {
                observe::event!(debug, jobs = %taken.join(","), "jobs handed back unrun");
                Err(error)
            }
        };
        // The claims are given back whatever happened (through an outage, in the background);
        // a lock left behind only delays a retry. The first error is the one reported.
        let released = self.locks.give_back(&taken, token).await;
        outcome?;
        released?;
        Ok(claimed)
    }

    /// The claimed jobs that are still due: a job completed (or failed and postponed) by another
    /// worker between our `find` and our claim is gone (or not due) now.
    async fn claimed_jobs(&self, taken: &[String]) -> Result<Vec<Job>> {
        // An empty `$in` matches nothing, and on a shard key it crashes a sharded engine (see
        // `src/server/family/`): no command.
        if taken.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<ObjectId> = taken
            .iter()
            .filter_map(|key| ObjectId::parse_str(key).ok())
            .collect();
        let now = bson::DateTime::now();
        let found: Vec<Document> = self
            .backend
            .find_all("find claimed jobs", || {
                self.jobs
                    .find(doc! {
                        "_id": { "$in": &ids },
                        "failed": false,
                        "not_before": { "$lte": now },
                    })
                    .sort(doc! { "_id": 1 })
            })
            .await?;
        found
            .into_iter()
            .map(|job| crate::bson_ext::decode(self.jobs.name(), job))
            .collect()
    }

    /// Runs the jobs in order; from the second on, only while `deadline` has not passed.
    async fn run_claimed(
        &self,
        handler: &dyn JobHandler,
        jobs: Vec<Job>,
        deadline: Instant,
    ) -> Result<()> {
        for (index, mut job) in jobs.into_iter().enumerate() {
            if index > 0 && Instant::now() >= deadline {
                // This one and the rest are released with the claim and run by a later one.
                observe::event!(
                    debug,
                    job = %job.id,
                    kind = job.kind.as_str(),
                    "job handed back unrun"
                );
                continue;
            }
            job.deadline = Some(deadline);
            // The handler's failure is recorded on the job: only a failure to record it stops
            // the round.
            let _handled = Op::Run(&job)
                .span()
                .run_nested(self.run_job(handler, &job))
                .await?;
        }
        Ok(())
    }

    /// Runs `job` and deletes it, or records its failure: the handler's outcome, after it is
    /// recorded.
    async fn run_job(&self, handler: &dyn JobHandler, job: &Job) -> Result<Result<()>> {
        match handler.handle(job).await {
            Ok(()) => {
                // A delete by `_id`: a retry finds nothing more to delete.
                // Background work: an outage is waited out within the budget.
                self.backend
                    .retry_through_outages("complete job", || async {
                        self.jobs.delete_one(doc! { "_id": job.id }).await?;
                        Ok(())
                    })
                    .await?;
                observe::event!(debug, job = %job.id, kind = job.kind.as_str(), "job finished");
                Ok(Ok(()))
            }
            Err(error) => {
                self.record_failure(job, &error).await?;
                Ok(Err(error))
            }
        }
    }

    async fn record_failure(&self, job: &Job, error: &Error) -> Result<()> {
        let attempts = job.attempts + 1;
        // The first retry waits `retry_delay`, each later one twice the one before.
        let delay = self
            .settings
            .retry_delay
            .saturating_mul(1 << (attempts - 1).min(16))
            .min(Duration::from_secs(300));
        let not_before = bson::DateTime::from_millis(
            bson::DateTime::now().timestamp_millis() + delay.as_millis() as i64,
        );
        let update = doc! { "$set": {
            "attempts": attempts,
            "not_before": not_before,
            "failed": attempts >= self.settings.max_attempts,
            "last_error": failure_text(error),
        } };
        observe::event!(
            warn,
            job = %job.id,
            kind = job.kind.as_str(),
            attempt = attempts,
            error = error.kind(),
            given_up = attempts >= self.settings.max_attempts,
            retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "job failed"
        );
        // Absolute values, not an `$inc`: a retry sets the same ones again.
        self.backend
            .retry_through_outages("record job failure", || async {
                self.jobs
                    .update_one(doc! { "_id": job.id }, update.clone())
                    .await?;
                Ok(())
            })
            .await
    }

    async fn due_jobs(&self) -> Result<Vec<ObjectId>> {
        let now = bson::DateTime::now();
        let due: Vec<Document> = self
            .backend
            .find_all("find due jobs", || {
                self.jobs
                    .find(doc! { "failed": false, "not_before": { "$lte": now } })
                    .sort(doc! { "not_before": 1, "_id": 1 })
                    .projection(doc! { "_id": 1 })
                    .limit((self.settings.batch * CANDIDATE_BATCHES) as i64)
            })
            .await?;
        Ok(due
            .iter()
            .filter_map(|job| job.get_object_id("_id").ok())
            .collect())
    }
}

/// The most of a failure's text a job keeps as its `last_error`, in bytes: with the job's other
/// fields, within the room [`JobQueue::MAX_PAYLOAD_BYTES`] leaves in its document.
const MAX_ERROR_BYTES: usize = 4 * 1024;

/// The text a job keeps of `error`: its message, cut to [`MAX_ERROR_BYTES`] (at a character
/// boundary, marked with an ellipsis), so recording a failure never makes the job's document
/// too large to store.
fn failure_text(error: &Error) -> String {
    let mut text = error.to_string();
    if text.len() > MAX_ERROR_BYTES {
        let ellipsis = "…";
        let mut end = MAX_ERROR_BYTES - ellipsis.len();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(ellipsis);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_failure_is_cut_to_fit_the_job() {
        let job: Job = bson::from_document(doc! {
            "_id": ObjectId::new(), "kind": "k", "payload": {}, "attempts": 0,
        })
        .unwrap();
        let short = job.error("no such template");
        assert_eq!(failure_text(&short), short.to_string());
        let long = Error::InvalidConfig {
            reason: "é".repeat(MAX_ERROR_BYTES),
        };
        let text = failure_text(&long);
        assert!(
            text.len() <= MAX_ERROR_BYTES && text.ends_with('…'),
            "{}",
            text.len()
        );
        assert!(long.to_string().starts_with(text.trim_end_matches('…')));
    }
}
