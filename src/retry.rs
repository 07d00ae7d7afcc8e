//! Transient failures: which ones they are, and retrying around them.
//!
//! One policy ([`RetryPolicy`]) for every write path. [`retry`] runs an operation, and while it
//! fails with a transient error ([`Error::is_retryable`]) and the policy's budget lasts, sleeps a
//! jittered, doubling backoff and runs it again. Only operations that are idempotent (running them
//! twice has the effect of running them once) are passed to it; each call site says why its
//! operation is. Past the budget the caller gets [`Error::RetriesExhausted`], which says the
//! operation may be partly applied.

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::time::Instant;

use bson::{Bson, Document};

use crate::{Error, Result};

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

/// Server error codes that mean "try again": the node stepped down, is shutting down or was
/// unreachable, a write conflicted with another, a lock or time limit ran out.
///
/// The MongoDB codes are the drivers' retryable-read/write sets plus `WriteConflict` and
/// `LockTimeout`; 16908292 is PostgreSQL's `deadlock_detected` as DocumentDB (FerretDB 2.x,
/// Azure Cosmos DB for MongoDB vCore) reports it.
pub(crate) const TRANSIENT_CODES: &[(i32, &str)] = &[
    (6, "HostUnreachable"),
    (7, "HostNotFound"),
    (24, "LockTimeout"),
    (89, "NetworkTimeout"),
    (91, "ShutdownInProgress"),
    (112, "WriteConflict"),
    (189, "PrimarySteppedDown"),
    (262, "ExceededTimeLimit"),
    (9001, "SocketException"),
    (10107, "NotWritablePrimary"),
    (11600, "InterruptedAtShutdown"),
    (11602, "InterruptedDueToReplStateChange"),
    (13435, "NotPrimaryNoSecondaryOk"),
    (13436, "NotPrimaryOrSecondary"),
    (16908292, "deadlock detected (DocumentDB)"),
];

/// Error labels that mark an error as transient whatever its code.
pub(crate) const TRANSIENT_LABELS: &[&str] = &[
    "RetryableWriteError",
    "TransientTransactionError",
    "RetryableError",
];

/// Whether a server error code is transient.
pub(crate) fn is_transient_code(code: i32) -> bool {
    TRANSIENT_CODES.iter().any(|(known, _)| *known == code)
}

/// Whether one entry of a reply's `writeErrors` (or its `writeConcernError`) is transient.
pub(crate) fn is_transient_write_error(error: &Document) -> bool {
    let code = match error.get("code") {
        Some(Bson::Int32(code)) => Some(*code),
        Some(Bson::Int64(code)) => i32::try_from(*code).ok(),
        Some(Bson::Double(code)) => Some(*code as i32),
        _ => None,
    };
    let labelled = error.get_array("errorLabels").is_ok_and(|labels| {
        labels
            .iter()
            .any(|label| matches!(label, Bson::String(l) if TRANSIENT_LABELS.contains(&l.as_str())))
    });
    labelled || code.is_some_and(is_transient_code)
}

/// Whether an error from the driver is transient: a network or I/O error, a cleared connection
/// pool, no server found in time, a transient label, or a transient code (of the command, of any
/// write error, or of the write concern error).
pub(crate) fn is_transient_driver_error(error: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    if TRANSIENT_LABELS
        .iter()
        .any(|label| error.contains_label(label))
    {
        return true;
    }
    match &*error.kind {
        ErrorKind::Io(_)
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::ServerSelection { .. } => true,
        ErrorKind::Command(command) => is_transient_code(command.code),
        ErrorKind::Write(WriteFailure::WriteError(write)) => is_transient_code(write.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(concern)) => {
            is_transient_code(concern.code)
        }
        // Transient only if every error is: a duplicate key next to a deadlock is not retried
        // blindly, the caller sorts it out.
        ErrorKind::InsertMany(failure) => {
            let writes = failure.write_errors.as_deref().unwrap_or_default();
            let concern = failure.write_concern_error.as_ref();
            (!writes.is_empty() || concern.is_some())
                && writes.iter().all(|write| is_transient_code(write.code))
                && concern.is_none_or(|concern| is_transient_code(concern.code))
        }
        _ => false,
    }
}

/// How long and how often write paths retry transient failures.
///
/// A transient failure (see [`Error::is_retryable`]) is retried after a backoff that starts at
/// [`initial_backoff`](Self::initial_backoff) and doubles up to
/// [`max_backoff`](Self::max_backoff), each sleep jittered to between half and all of it, until
/// [`budget`](Self::budget) has passed since the first attempt. Then the operation fails with
/// [`Error::RetriesExhausted`]. The defaults: a 10-second budget, backoff from 10 ms doubling to
/// 1 s.
///
/// ```
/// use std::time::Duration;
/// use mongo_social::RetryPolicy;
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
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            budget: Duration::from_secs(10),
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_secs(1),
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

    /// How long after the first attempt a new attempt may still start (default 10 s).
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// The first backoff (default 10 ms); at least 1 ms is used.
    pub fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// The longest backoff (default 1 s).
    pub fn max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff;
        self
    }

    /// The retry budget.
    pub fn max_elapsed(&self) -> Duration {
        self.budget
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
}

impl<'a> Backoff<'a> {
    /// Starts timing an operation's first attempt.
    pub(crate) fn new(policy: &'a RetryPolicy, operation: &'static str) -> Self {
        Self {
            policy,
            operation,
            started: Instant::now(),
            attempt: 1,
        }
    }

    /// After a transient `error`, sleeps before the next attempt; or, past the budget, returns
    /// the error to give up with: `error` itself after a single attempt, otherwise
    /// [`Error::RetriesExhausted`].
    pub(crate) async fn wait(&mut self, error: Error) -> Result<()> {
        let pause = jittered(self.policy.backoff(self.attempt));
        if self.started.elapsed() + pause > self.policy.budget {
            if self.attempt == 1 {
                return Err(error);
            }
            return Err(Error::RetriesExhausted {
                operation: self.operation,
                attempts: self.attempt,
                elapsed: self.started.elapsed(),
                last: Box::new(error),
            });
        }
        tokio::time::sleep(pause).await;
        self.attempt += 1;
        Ok(())
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
        match run().await {
            Ok(value) => return Ok(value),
            Err(error) if error.is_transient() => backoff.wait(error).await?,
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

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
                    Err(Error::Write {
                        code: 112,
                        message: "WriteConflict".into(),
                        source: None,
                    })
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
            async {
                Err(Error::Write {
                    code: 16908292,
                    message: "deadlock detected".into(),
                    source: None,
                })
            }
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
            async {
                Err(Error::Write {
                    code: 11000,
                    message: "E11000 duplicate key".into(),
                    source: None,
                })
            }
        })
        .await;
        assert!(matches!(result, Err(Error::Write { code: 11000, .. })));
        assert_eq!(calls, 1);
    }

    /// Replies as servers send them: `writeErrors` entries of an `update` command, and whole
    /// command failures.
    #[test]
    fn classifies_recorded_write_errors() {
        for (code, name) in TRANSIENT_CODES {
            let entry = doc! { "index": 0, "code": *code, "errmsg": *name };
            assert!(is_transient_write_error(&entry), "{code} {name}");
            let as_error = Error::Write {
                code: *code,
                message: name.to_string(),
                source: None,
            };
            assert!(as_error.is_retryable(), "{code} {name}");
        }
        // DocumentDB over PostgreSQL, two senders crossing (FerretDB 2.x).
        let deadlock = doc! {
            "n": 3, "nModified": 3,
            "writeErrors": [{ "index": 2, "code": 16908292, "errmsg": "deadlock detected" }],
            "ok": 1.0,
        };
        let entry = deadlock.get_array("writeErrors").unwrap()[0]
            .as_document()
            .unwrap();
        assert!(is_transient_write_error(entry));
        let labelled = doc! { "code": 2, "errmsg": "x", "errorLabels": ["RetryableWriteError"] };
        assert!(is_transient_write_error(&labelled));
        for (code, name) in [
            (11000, "E11000 duplicate key error"),
            (2, "BadValue"),
            (9, "FailedToParse"),
            (10334, "BSONObjectTooLarge"),
            (17419, "document too large"),
            (13, "Unauthorized"),
            (121, "DocumentValidationFailure"),
        ] {
            let entry = doc! { "index": 0, "code": code, "errmsg": name };
            assert!(!is_transient_write_error(&entry), "{code} {name}");
            assert!(!Error::Write {
                code,
                message: name.into(),
                source: None,
            }
            .is_retryable());
        }
    }

    /// Driver errors built from recorded command replies.
    #[test]
    fn classifies_recorded_command_failures() {
        fn from_reply(reply: Document) -> mongodb::error::Error {
            let command: mongodb::error::CommandError =
                bson::from_document(reply).expect("a command error");
            mongodb::error::ErrorKind::Command(command).into()
        }
        for (code, name) in TRANSIENT_CODES {
            let error = from_reply(doc! { "ok": 0.0, "code": *code, "codeName": *name,
            "errmsg": "recorded" });
            assert!(is_transient_driver_error(&error), "{code} {name}");
            assert!(Error::from(error).is_retryable(), "{code} {name}");
        }
        // Labels as a reply carries them (`errorLabels`), whatever the code.
        for label in TRANSIENT_LABELS {
            let reply = doc! { "ok": 0.0, "code": 251, "codeName": "NoSuchTransaction",
            "errmsg": "recorded", "errorLabels": [*label] };
            assert!(is_transient_write_error(&reply), "{label}");
        }
        let unlabelled = doc! { "ok": 0.0, "code": 251, "errorLabels": ["NoWritesPerformed"] };
        assert!(!is_transient_write_error(&unlabelled));
        for (code, name) in [
            (11000, "DuplicateKey"),
            (2, "BadValue"),
            (26, "NamespaceNotFound"),
        ] {
            let error =
                from_reply(doc! { "ok": 0.0, "code": code, "codeName": name, "errmsg": "x" });
            assert!(!is_transient_driver_error(&error), "{code} {name}");
            assert!(!Error::from(error).is_retryable(), "{code} {name}");
        }
        let reset = mongodb::error::Error::from(mongodb::error::ErrorKind::Io(
            std::sync::Arc::new(std::io::ErrorKind::ConnectionReset.into()),
        ));
        assert!(Error::from(reset).is_retryable());
        let unsupported: mongodb::error::Error =
            mongodb::error::ErrorKind::SessionsNotSupported.into();
        assert!(!Error::from(unsupported).is_retryable());
    }
}
