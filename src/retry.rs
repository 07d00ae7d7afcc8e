//! The retry policy every store follows: [`RetryPolicy`], how long an operation keeps trying
//! through transient failures (write conflicts, deadlocks, lost connections) before it reports
//! [`Error::Unreachable`] or
//! [`Error::RetriesExhausted`].
//
//
// One policy ([`RetryPolicy`]) for every write path. [`retry`] runs an operation, and while it
// fails with a transient error (see [`crate::error::transient`] for which those are, and how a
// failure the request caused is told apart) and the policy's budget lasts, sleeps a jittered,
// doubling backoff and runs it again. Only operations that are idempotent (running them twice
// has the effect of running them once) are passed to it; each call site says why its operation
// is.
//
// The budget bounds the wait: an attempt after a failure is abandoned when the budget runs out,
// and the first attempt is bounded by the driver's own timeouts (`serverSelectionTimeoutMS`,
// which [`RetryPolicy::apply_to`] sets to the budget). Past the budget the caller gets
// [`Error::Unreachable`] when the last failure was the database's absence, and
// [`Error::RetriesExhausted`] (which says the operation may be partly applied) otherwise.

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::time::Instant;

use bson::Document;
use mongodb::options::ClientOptions;

use crate::error::{Error, Result};
use crate::observe;
use crate::setters::builder_setters;

/// How many recent operation ids a document keeps in `ops` (see [`once_per_op`]).
pub(crate) const RECENT_OPS: i32 = 100;

/// Makes an `$inc` (or any update) apply once however often it is retried: `filter` no longer
/// matches a document holding `op` in its `ops`, and `update` pushes `op` there, keeping the
/// [`RECENT_OPS`] newest. Exact while fewer than that many other operations change one document
/// during one operation's retries.
pub(crate) fn once_per_op(filter: &mut Document, update: &mut Document, op: bson::oid::ObjectId) {
    once_per_op_in(filter, update, "ops", RECENT_OPS, op);
}

/// [`once_per_op`] with the ids kept in `field`, the `keep` newest: for a document of the
/// application's own (an embedded discussion) or one that many operations change (a page of
/// comments).
pub(crate) fn once_per_op_in(
    filter: &mut Document,
    update: &mut Document,
    field: &str,
    keep: i32,
    op: bson::oid::ObjectId,
) {
    filter.insert(field, bson::doc! { "$ne": op });
    update.insert(
        "$push",
        bson::doc! { field: { "$each": [op], "$slice": -keep } },
    );
}

/// How long and how often write paths retry transient failures.
///
/// A transient failure (see [`Error::is_retryable`]) is retried after a backoff that starts at
/// [`initial_backoff`](Self::initial_backoff) and doubles up to
/// [`max_backoff`](Self::max_backoff), each sleep jittered to between half and all of it, until
/// [`budget`](Self::budget) has passed since the first attempt; an attempt still waiting then
/// is abandoned. Then the operation fails with [`Error::Unreachable`] if the database could not
/// be reached, or [`Error::RetriesExhausted`] otherwise. The defaults: a 10-second budget, backoff
/// from 10 ms doubling to 1 s.
///
/// A first attempt that finds no server waits as long as the client's server selection timeout
/// (`serverSelectionTimeoutMS`, 30 s by default) and is not retried: the driver has waited for a
/// server already. The library cannot change a client's options; [`RetryPolicy::apply_to`] sets
/// that timeout (and the connect timeout) to the budget on the options a client is built from, so
/// that every operation of every store answers within the budget when the database is gone.
///
/// ```
/// use std::time::Duration;
/// use mongo_social::retry::RetryPolicy;
///
/// let patient = RetryPolicy::default().budget(Duration::from_secs(60));
/// assert_eq!(patient.max_elapsed(), Duration::from_secs(60));
/// assert_eq!(RetryPolicy::never().max_elapsed(), Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    budget: Duration,
    initial_backoff: Duration,
    max_backoff: Duration,
    /// Whether a failed server selection is retried too: for background work (a worker
    /// completing its jobs, a lock given back) that should wait an outage out within its budget
    /// rather than report it.
    through_outages: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            budget: Duration::from_secs(10),
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_secs(1),
            through_outages: false,
        }
    }
}

impl RetryPolicy {
    /// No retries: every failure is returned as it happened.
    pub fn never() -> Self {
        Self {
            budget: Duration::ZERO,
            ..Self::default()
        }
    }

    builder_setters! {
        /// How long after the first attempt a new attempt may still start (default 10 s).
        budget: Duration,

        /// The first backoff (default 10 ms); at least 1 ms is used.
        initial_backoff: Duration,

        /// The longest backoff (default 1 s).
        max_backoff: Duration,
    }

    /// The retry budget.
    pub fn max_elapsed(&self) -> Duration {
        self.budget
    }

    /// Sets the driver's own timeouts on `options` so that this policy's budget bounds how long
    /// any operation waits for an absent database: the server selection timeout and the connect
    /// timeout become the budget where they are unset or longer. Call it on the options of the
    /// client the stores use.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mongo_social::retry::RetryPolicy;
    /// use mongodb::options::ClientOptions;
    ///
    /// let mut options = ClientOptions::default();
    /// RetryPolicy::default().budget(Duration::from_secs(5)).apply_to(&mut options);
    /// assert_eq!(options.server_selection_timeout, Some(Duration::from_secs(5)));
    /// assert_eq!(options.connect_timeout, Some(Duration::from_secs(5)));
    /// ```
    pub fn apply_to(&self, options: &mut ClientOptions) {
        /// The driver's defaults.
        const SERVER_SELECTION: Duration = Duration::from_secs(30);
        const CONNECT: Duration = Duration::from_secs(10);
        let bound = self.budget.max(Duration::from_millis(100));
        let cap = |current: Option<Duration>, default: Duration| {
            Some(current.unwrap_or(default).min(bound))
        };
        options.server_selection_timeout = cap(options.server_selection_timeout, SERVER_SELECTION);
        options.connect_timeout = cap(options.connect_timeout, CONNECT);
    }

    /// This policy for background work: a database that cannot be reached is waited for within
    /// the budget (a failed server selection retried), not reported at once.
    pub(crate) fn through_outages(mut self) -> Self {
        self.through_outages = true;
        self
    }

    /// Whether this policy retries `error`: a transient failure (see
    /// [`crate::error::transient`]), or any unreachable database where it waits outages out.
    pub(crate) fn retries(&self, error: &Error) -> bool {
        error.is_transient() || (self.through_outages && error.is_unreachable())
    }

    /// The backoff before attempt `attempt + 1` (attempt counts from 1), without jitter.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let first = self.initial_backoff.max(Duration::from_millis(1));
        let doubled = first.saturating_mul(1 << attempt.saturating_sub(1).min(20));
        doubled.min(self.max_backoff.max(first))
    }
}

/// A sleep of between half and all of `backoff`, so that writers that failed together do not
/// retry together.
pub(crate) fn jittered(backoff: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let half = backoff / 2;
    let nanos = half.as_nanos().max(1) as u64;
    half + Duration::from_nanos(random % nanos)
}

/// The waits between attempts of one operation under a [`RetryPolicy`].
#[derive(Debug)]
pub(crate) struct Backoff<'a> {
    policy: &'a RetryPolicy,
    operation: &'static str,
    started: Instant,
    attempt: u32,
    /// The last transient failure, for the error an attempt abandoned at the budget's end gives.
    last: Option<Error>,
}

impl<'a> Backoff<'a> {
    /// Starts timing an operation's first attempt.
    pub(crate) fn new(policy: &'a RetryPolicy, operation: &'static str) -> Self {
        Self {
            policy,
            operation,
            started: Instant::now(),
            attempt: 1,
            last: None,
        }
    }

    /// Runs one attempt: the first as long as it takes (the driver's timeouts bound it), a later
    /// one only until the budget runs out, after which it is abandoned and the operation gives
    /// up with its last failure.
    pub(crate) async fn attempt<T>(
        &mut self,
        attempt: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.attempt == 1 {
            return attempt.await;
        }
        let left = self.policy.budget.saturating_sub(self.started.elapsed());
        match tokio::time::timeout(left, attempt).await {
            Ok(outcome) => outcome,
            Err(_) => {
                let last = self.last.take().unwrap_or_else(|| Error::Unreachable {
                    reason: "no reply".to_owned(),
                    source: None,
                });
                observe::event!(
                    warn,
                    operation = self.operation,
                    attempts = self.attempt,
                    error = "no_reply",
                    "retry budget spent waiting for a reply; giving up"
                );
                Err(self.give_up(last, " (no reply before the retry budget ran out)"))
            }
        }
    }

    /// After a transient `error`, sleeps before the next attempt; or, past the budget, returns
    /// the error to give up with (see [`Backoff::give_up`]).
    pub(crate) async fn wait(&mut self, error: Error) -> Result<()> {
        let pause = jittered(self.policy.backoff(self.attempt));
        if self.started.elapsed() + pause > self.policy.budget {
            observe::event!(
                warn,
                operation = self.operation,
                attempts = self.attempt,
                error = error.kind(),
                code = error.code(),
                "retry budget spent; giving up"
            );
            return Err(self.give_up(error, ""));
        }
        observe::event!(
            info,
            operation = self.operation,
            attempt = self.attempt,
            error = error.kind(),
            code = error.code(),
            label = observe::label(&error).as_deref(),
            delay_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
            "retrying after a transient failure"
        );
        self.last = Some(error);
        tokio::time::sleep(pause).await;
        self.attempt += 1;
        Ok(())
    }

    /// The error an operation gives up with after `last`: an [`Error::Unreachable`] as it is
    /// (saying how long it lasted), so an outage reads the same from every operation; after a
    /// single attempt, `last` itself; otherwise [`Error::RetriesExhausted`].
    fn give_up(&self, last: Error, note: &str) -> Error {
        match last {
            Error::Unreachable { reason, source } if self.attempt > 1 => Error::Unreachable {
                reason: format!(
                    "{reason}{note}; {} attempts in {:.1?}",
                    self.attempt,
                    self.started.elapsed()
                ),
                source,
            },
            last if self.attempt == 1 => last,
            last => Error::RetriesExhausted {
                operation: self.operation,
                attempts: self.attempt,
                last: Some(Box::new(last)),
            },
        }
    }
}

/// Runs `operation` until it succeeds, fails with an error that is not transient, or `policy`'s
/// budget is spent. `operation` must be idempotent: it may have been applied by an attempt whose
/// reply was lost.
///
/// # Errors
///
/// The first error that is not transient, as it is; a transient one past the budget as
/// [`Backoff::wait`] says.
pub(crate) async fn retry<T, F, Fut>(
    policy: &RetryPolicy,
    operation: &'static str,
    mut run: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut backoff = Backoff::new(policy, operation);
    loop {
        // Boxed: operations nest retries (a retried read inside a locked write), and each
        // level would otherwise hold its attempt's whole state inline, twice.
        match backoff.attempt(Box::pin(run())).await {
            Ok(value) => return Ok(value),
            Err(error) if policy.retries(&error) => backoff.wait(error).await?,
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap() {
        let policy = RetryPolicy::default();
        let steps: Vec<u64> = (1..=9)
            .map(|a| policy.backoff(a).as_millis() as u64)
            .collect();
        assert_eq!(steps, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        for _ in 0..100 {
            let pause = jittered(Duration::from_millis(100));
            assert!(pause >= Duration::from_millis(50) && pause <= Duration::from_millis(100));
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn retries_transient_failures_within_the_budget() {
        let policy = RetryPolicy::default().budget(Duration::from_secs(2));
        let mut calls = 0;
        let result = retry(&policy, "test", || {
            calls += 1;
            let call = calls;
            async move {
                if call < 4 {
                    Err(Error::from_reply(112, "WriteConflict"))
                } else {
                    Ok(call)
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), 4);

        let mut calls = 0;
        let result: Result<()> = retry(&policy, "test", || {
            calls += 1;
            async { Err(Error::from_reply(16908292, "deadlock detected")) }
        })
        .await;
        let error = result.unwrap_err();
        assert!(matches!(error, Error::RetriesExhausted { .. }), "{error}");
        assert!(error.is_retryable());
        // 10 + 20 + ... + 640 ms at most, then 1 s steps: about 8 attempts within 2 s.
        assert!((6..=12).contains(&calls), "{calls} attempts");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn never_retries_a_permanent_failure() {
        let mut calls = 0;
        let result: Result<()> = retry(&RetryPolicy::default(), "test", || {
            calls += 1;
            async { Err(Error::from_reply(11000, "E11000 duplicate key")) }
        })
        .await;
        assert!(matches!(
            result,
            Err(Error::Database {
                code: Some(11000),
                ..
            })
        ));
        assert_eq!(calls, 1);
    }

    /// An outage reads as [`Error::Unreachable`] however many attempts it took, and an attempt
    /// still waiting when the budget runs out is abandoned.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_outage_gives_up_as_unreachable_within_the_budget() {
        let policy = RetryPolicy::default().budget(Duration::from_secs(2));
        let lost = || Error::Unreachable {
            reason: "the connection failed: reset".into(),
            source: None,
        };
        let started = Instant::now();
        let result: Result<()> = retry(&policy, "test", || async { Err(lost()) }).await;
        let error = result.unwrap_err();
        assert!(error.is_unreachable(), "{error:?}");
        assert!(started.elapsed() <= Duration::from_secs(2));

        // The second attempt hangs (a server that accepts and never answers): abandoned at 2 s.
        let started = Instant::now();
        let mut calls = 0;
        let result: Result<()> = retry(&policy, "test", || {
            calls += 1;
            let call = calls;
            async move {
                if call == 1 {
                    Err(lost())
                } else {
                    std::future::pending().await
                }
            }
        })
        .await;
        let error = result.unwrap_err();
        assert!(error.is_unreachable(), "{error:?}");
        assert!(
            error.to_string().contains("retry budget ran out"),
            "{error}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
