//! Background workers ([`Worker`]), started by [`JobQueue::start_worker`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{JobHandler, JobQueue};
use crate::retry::jittered;

impl JobQueue {
    /// Starts a worker on the current tokio runtime: it runs [`JobQueue::run_once`] in a loop
    /// while it finds jobs. When none is due it sleeps, first for the poll interval, then twice
    /// as long after each look that finds nothing, up to the maximum poll interval (by default
    /// 50 ms doubling to 2 s: about one `find` every 2 s once idle); a job it finds, or one
    /// enqueued through this queue or a clone of it, brings the sleep back to the poll interval,
    /// and such an enqueue wakes it at once. A round that fails (its commands' transient
    /// failures outlasted the retry budget, or a permanent failure) is followed by a sleep of
    /// the retry policy's backoff for that many failures in a row (its longest backoff when the
    /// database is unreachable), at least the poll interval: a worker rides out an outage at a
    /// bounded rate of commands and resumes when the server answers.
    ///
    /// The worker runs as long as its [`Worker`] handle lives: dropping the handle stops it
    /// after the batch it is running, like [`Worker::stop`] without the wait.
    #[must_use = "dropping the Worker stops it; keep the handle for as long as it should run"]
    pub fn start_worker(&self, handler: Arc<dyn JobHandler>) -> Worker {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let mut enqueued = self.enqueued.subscribe();
        let queue = self.clone();
        let state = Arc::new(WorkerState::default());
        let shared = state.clone();
        let task = tokio::spawn(crate::observe::worker(async move {
            crate::observe::event!(
                debug,
                worker = crate::observe::worker_number(),
                "job queue worker started"
            );
            let mut idle_sleep = queue.settings.poll_interval;
            let mut failures_in_a_row = 0;
            // Stopped by `stop`, or by the handle being dropped (which closes the channel).
            while stopped.has_changed().is_ok() && !*stopped.borrow() {
                enqueued.borrow_and_update();
                let pause = match queue.run_round(&*handler).await {
                    Ok(0) => {
                        failures_in_a_row = 0;
                        let pause = idle_sleep;
                        idle_sleep = (idle_sleep * 2).min(queue.settings.max_poll_interval);
                        pause
                    }
                    Ok(_) => {
                        failures_in_a_row = 0;
                        idle_sleep = queue.settings.poll_interval;
                        continue;
                    }
                    Err(error) => {
                        crate::observe::event!(
                            warn,
                            worker = crate::observe::worker_number(),
                            error = error.kind(),
                            "job queue worker round failed; backing off"
                        );
                        *shared
                            .last_error
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = Some(error.to_string());
                        shared.failed_rounds.fetch_add(1, Ordering::Relaxed);
                        failures_in_a_row += 1;
                        let policy = queue.backend.retry_policy();
                        // An unreachable database will not be back in milliseconds: wait the
                        // longest backoff before looking again.
                        let backoff = if error.is_unreachable() {
                            policy.backoff(u32::MAX)
                        } else {
                            policy.backoff(failures_in_a_row)
                        };
                        jittered(backoff).max(queue.settings.poll_interval)
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = enqueued.changed() => idle_sleep = queue.settings.poll_interval,
                    _ = stopped.changed() => {}
                }
            }
        }));
        Worker { stop, task, state }
    }
}

/// A running worker; see [`JobQueue::start_worker`]. Dropping it stops the worker after the
/// batch it is running; [`Worker::stop`] does the same and waits for it.
#[derive(Debug)]
#[must_use = "dropping the Worker stops it; keep the handle for as long as it should run"]
pub struct Worker {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    state: Arc<WorkerState>,
}

/// What a worker's task reports to its [`Worker`].
#[derive(Debug, Default)]
struct WorkerState {
    last_error: Mutex<Option<String>>,
    failed_rounds: AtomicU64,
}

impl Worker {
    /// Asks the worker to stop after the batch it is running, and waits for it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }

    /// Stops the worker at once, even in the middle of a job, as if its process died: its claims
    /// stay until their lease runs out, then another worker runs those jobs.
    pub fn abort(self) {
        self.task.abort();
    }

    /// The last server error the worker met while claiming or completing jobs (it keeps going,
    /// retrying after its poll interval, backing off as when idle). Handler errors are recorded on their jobs instead.
    pub fn last_error(&self) -> Option<String> {
        self.state
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many of the worker's rounds ([`JobQueue::run_once`]) have failed since it started:
    /// each is followed by a backoff (see [`JobQueue::start_worker`]).
    pub fn failed_rounds(&self) -> u64 {
        self.state.failed_rounds.load(Ordering::Relaxed)
    }

    /// Whether the worker's task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}
