//! Leased per-key locks made of documents, for servers whose updates are not atomic.
//!
//! Taking a lock is inserting `{_id: key, token, expires}`: the unique `_id` makes the insert
//! atomic on every server, including FerretDB 1.x, whose updates are not. Many keys are locked in
//! one unordered `insert`; a key already held fails with a duplicate key error and is retried
//! later by the caller. A holder that dies leaves its lock until `expires`; the next contender
//! then removes it. So does a holder that is merely slower than its lease: work that may run
//! long renews its lease as it goes ([`Lease::renew`]), and stops with [`Error::RetriesExhausted`] if
//! the lease was taken over. Removal of an expired lock races with a third contender, and at
//! worst lets two writers in once.
//!
//! Every command is retried on transient failures under the owner's [`RetryPolicy`]: a retried
//! `insert` that meets a lock held under its own token counts it as taken (the attempt whose reply
//! was lost took it); releases, renewals and the breaking of expired locks are filtered deletes
//! and `$set`s, which change nothing the second time.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use super::update_batch::{insert_failure, InsertFailure};
use crate::error::{Error, Result};
use crate::observe;
use crate::retry::{retry, RetryPolicy};

/// Times a writer finds its locks all taken before giving up; with [`backoff`], about a minute.
pub(crate) const MAX_LOCK_WAITS: usize = 3000;

/// How long to sleep after the `waits`-th failed attempt: 1 to 24 ms, growing with the number of
/// waits, jittered by the clock so waiters spread out.
pub(crate) fn backoff(waits: usize) -> Duration {
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos() % 8) as u64;
    Duration::from_millis(1 + jitter + (waits.min(16) as u64))
}

#[derive(Clone, Debug)]
pub(crate) struct LeaseLocks {
    locks: Collection<Document>,
    lease: Duration,
    retry: RetryPolicy,
}

impl LeaseLocks {
    pub(crate) fn new(locks: Collection<Document>, lease: Duration, retry: RetryPolicy) -> Self {
        Self {
            locks,
            lease,
            retry,
        }
    }

    /// The same locks collection, with locks that last `lease`.
    pub(crate) fn lasting(&self, lease: Duration) -> Self {
        Self {
            lease,
            ..self.clone()
        }
    }

    /// The name of the collection holding the locks.
    pub(crate) fn collection_name(&self) -> &str {
        self.locks.name()
    }

    /// Locks as many of `keys` as are free, returning those taken under `token`.
    ///
    /// # Errors
    ///
    /// A failure other than a key already locked, or transient failures past the retry budget;
    /// the locks this call took are then given back (or, if that fails too, left to expire).
    pub(crate) async fn try_acquire(
        &self,
        keys: &[String],
        token: ObjectId,
    ) -> Result<Vec<String>> {
        let expires = bson::DateTime::from_millis(
            bson::DateTime::now().timestamp_millis() + self.lease.as_millis() as i64,
        );
        let mut retried = false;
        let outcome = retry(&self.retry, "lock", || {
            let again = std::mem::replace(&mut retried, true);
            self.insert_locks(keys, token, expires, again)
        })
        .await;
        match outcome {
            Ok(taken) => Ok(taken),
            Err(error) => {
                // Some locks may have been taken before the failure: give them back first.
                self.give_back(keys, token).await?;
                Err(error)
            }
        }
    }

    /// One attempt at inserting the locks on `keys`. On a retry (`again`), a key refused as
    /// already locked may be held under `token` by the attempt whose reply was lost: one `find`
    /// tells.
    async fn insert_locks(
        &self,
        keys: &[String],
        token: ObjectId,
        expires: bson::DateTime,
        again: bool,
    ) -> Result<Vec<String>> {
        let locks = keys
            .iter()
            .map(|key| doc! { "_id": key, "token": token, "expires": expires });
        let refused = match self.locks.insert_many(locks).ordered(false).await {
            Ok(_) => return Ok(keys.to_vec()),
            Err(error) => match insert_failure(error) {
                InsertFailure::Duplicates(refused) => refused,
                InsertFailure::Transient(error) | InsertFailure::Other(error) => return Err(error),
            },
        };
        let mut taken = vec![true; keys.len()];
        for index in refused {
            if let Some(slot) = taken.get_mut(index) {
                *slot = false;
            }
        }
        if again && taken.contains(&false) {
            let refused: Vec<&String> = keys
                .iter()
                .zip(&taken)
                .filter(|(_, taken)| !**taken)
                .map(|(key, _)| key)
                .collect();
            let ours: Vec<Document> = self
                .locks
                .find(doc! { "_id": { "$in": refused }, "token": token })
                .projection(doc! { "_id": 1 })
                .await?
                .try_collect()
                .await?;
            for lock in ours {
                if let Some(index) = keys.iter().position(|key| lock.get_str("_id") == Ok(key)) {
                    taken[index] = true;
                }
            }
        }
        Ok(keys
            .iter()
            .zip(taken)
            .filter(|(_, taken)| *taken)
            .map(|(key, _)| key.clone())
            .collect())
    }

    /// Takes every one of `keys` under `token` or none: a round that gets only some gives them
    /// back, waits a jittered 1 to 24 ms and tries again, so two holders of overlapping key sets
    /// never wait on each other. Expired locks are broken on the first wait and every 16th.
    ///
    /// # Errors
    ///
    /// [`Error::RetriesExhausted`] after `max_waits` rounds; any server error.
    async fn acquire_all(&self, keys: &[String], token: ObjectId, max_waits: usize) -> Result<()> {
        let mut waits = 0;
        loop {
            let taken = self.try_acquire(keys, token).await?;
            if taken.len() == keys.len() {
                if waits > 0 {
                    observe::event!(debug, keys = keys.len(), waits, "locks taken after waiting");
                }
                return Ok(());
            }
            if !taken.is_empty() {
                self.release(&taken, token).await?;
            }
            waits += 1;
            if waits == 1 {
                observe::event!(
                    debug,
                    keys = keys.len(),
                    "waiting for locks another writer holds"
                );
            } else if waits == 17 {
                observe::event!(info, keys = keys.len(), waits, "still waiting for locks");
            }
            if waits > max_waits {
                return Err(Error::contention("lock", waits));
            }
            if waits % 16 == 1 {
                self.break_expired(keys).await?;
            }
            tokio::time::sleep(backoff(waits)).await;
        }
    }

    /// Releases the locks on `keys` held under `token`.
    pub(crate) async fn release(&self, keys: &[String], token: ObjectId) -> Result<()> {
        if keys.is_empty() {
            // No command: an empty `$in` on the shard key crashes DocumentDB over Citus.
            return Ok(());
        }
        retry(&self.retry, "unlock", || async {
            self.locks
                .delete_many(doc! { "_id": { "$in": keys }, "token": token })
                .await?;
            Ok(())
        })
        .await
    }

    /// Releases the locks on `keys` held under `token` when their holder is done with them (its
    /// work over, or its acquisition failed). If the server cannot be reached within the retry
    /// budget, a background task goes on trying for up to the lease (after which the locks
    /// expire anyway), so a holder cut off by an outage frees its keys moments after the server
    /// returns, not a lease later; the caller is not failed for it.
    pub(crate) async fn give_back(&self, keys: &[String], token: ObjectId) -> Result<()> {
        match self.release(keys, token).await {
            Err(error) if error.is_retryable() => {
                observe::event!(
                    warn,
                    keys = keys.len(),
                    error = error.kind(),
                    "lock release failed; retrying it in the background"
                );
                let patient = Self {
                    retry: RetryPolicy::default().budget(self.lease).through_outages(),
                    ..self.clone()
                };
                let keys = keys.to_vec();
                tokio::spawn(observe::current().follow(async move {
                    // Past the lease the locks are expired: nothing is left to do either way.
                    if patient.release(&keys, token).await.is_ok() {
                        observe::event!(info, keys = keys.len(), "locks released after the outage");
                    }
                }));
                Ok(())
            }
            released => released,
        }
    }

    /// Runs `work` while holding the locks on all of `keys` (taken together, waiting while
    /// another holder has any of them, see [`LeaseLocks::acquire_all`]), and releases them
    /// whatever `work` returns.
    pub(crate) async fn with_locks<T, F>(&self, keys: &[String], work: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        self.holding(keys, ObjectId::new(), work).await
    }

    /// [`LeaseLocks::with_locks`] for one key.
    pub(crate) async fn with_lock<T, F>(&self, key: &str, work: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        self.with_locks(&[key.to_owned()], work).await
    }

    /// Runs `work` while holding the lock on `key`, handing it the [`Lease`] so long work can
    /// renew it; releases the lock whatever `work` returns.
    pub(crate) async fn with_lease<T, F, Fut>(&self, key: &str, work: F) -> Result<T>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let lease = Lease {
            locks: self.clone(),
            key: key.to_owned(),
            token: ObjectId::new(),
        };
        let token = lease.token;
        self.holding(&[key.to_owned()], token, work(lease)).await
    }

    /// Takes `keys` under `token`, runs `work`, releases them; `work`'s error comes first.
    async fn holding<T, F>(&self, keys: &[String], token: ObjectId, work: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        self.acquire_all(keys, token, MAX_LOCK_WAITS).await?;
        let outcome = work.await;
        let released = self.give_back(keys, token).await;
        let value = outcome?;
        released?;
        Ok(value)
    }

    /// Runs `work` on every key of `keys`, each time holding the locks of the keys it gets.
    ///
    /// Each round locks as many of the remaining keys as are free, at most `batch` of them (one
    /// `insert`), runs `work` on those, and releases them (one `delete`), whatever `work`
    /// returned. Keys held by others wait for a later round. A caller never holds some locks
    /// while waiting for others, so two callers with overlapping keys cannot deadlock.
    ///
    /// # Errors
    ///
    /// The first error of `work`; [`Error::RetriesExhausted`] after [`MAX_LOCK_WAITS`] rounds that
    /// took nothing; server errors as they come.
    pub(crate) async fn in_rounds<F, Fut>(
        &self,
        keys: &[String],
        batch: usize,
        mut work: F,
    ) -> Result<()>
    where
        F: FnMut(Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let token = ObjectId::new();
        let mut pending = keys.to_vec();
        let mut idle_rounds = 0;
        while !pending.is_empty() {
            let round = &pending[..pending.len().min(batch.max(1))];
            let taken = self.try_acquire(round, token).await?;
            if taken.is_empty() {
                // Try the keys further on next time, so held keys at the front starve no one.
                let (width, len) = (round.len(), pending.len());
                pending.rotate_left(width % len);
                idle_rounds += 1;
                if idle_rounds == 1 {
                    observe::event!(
                        debug,
                        keys = width,
                        "waiting for locks another writer holds"
                    );
                } else if idle_rounds == 17 {
                    observe::event!(
                        info,
                        keys = width,
                        waits = idle_rounds,
                        "still waiting for locks"
                    );
                }
                if idle_rounds > MAX_LOCK_WAITS {
                    return Err(Error::contention("lock rounds", idle_rounds));
                }
                // Locks outlive a dead holder by their lease: looking for expired ones on the
                // first wait and every 16th after is enough, and spares a `delete` per wait.
                if idle_rounds % 16 == 1 {
                    self.break_expired(&pending[..pending.len().min(batch.max(1))])
                        .await?;
                }
                tokio::time::sleep(backoff(idle_rounds)).await;
                continue;
            }
            idle_rounds = 0;
            let outcome = work(taken.clone()).await;
            let released = self.give_back(&taken, token).await;
            outcome?;
            released?;
            pending.retain(|key| !taken.contains(key));
        }
        Ok(())
    }

    /// Removes locks on `keys` whose holder let the lease run out.
    pub(crate) async fn break_expired(&self, keys: &[String]) -> Result<()> {
        if keys.is_empty() {
            // No command: an empty `$in` on the shard key crashes DocumentDB over Citus.
            return Ok(());
        }
        let now = bson::DateTime::now();
        let broken = retry(&self.retry, "break expired locks", || async {
            Ok(self
                .locks
                .delete_many(doc! { "_id": { "$in": keys }, "expires": { "$lt": now } })
                .await?
                .deleted_count)
        })
        .await?;
        if broken > 0 {
            observe::event!(
                warn,
                keys = broken,
                "took over locks whose holder's lease ran out"
            );
        }
        Ok(())
    }
}

/// A held lock, for work that renews it as it goes.
#[derive(Clone, Debug)]
pub(crate) struct Lease {
    locks: LeaseLocks,
    key: String,
    token: ObjectId,
}

impl Lease {
    /// Extends the lease by its full length from now.
    ///
    /// # Errors
    ///
    /// [`Error::RetriesExhausted`] when the lock is no longer held under this lease (it expired and
    /// another writer took it over): the caller must stop, since someone else may be working.
    pub(crate) async fn renew(&self) -> Result<()> {
        let expires = bson::DateTime::from_millis(
            bson::DateTime::now().timestamp_millis() + self.locks.lease.as_millis() as i64,
        );
        // A `$set` of one value: a retry whose first attempt landed matches and sets it again.
        let renewed = retry(&self.locks.retry, "renew lease", || async {
            Ok(self
                .locks
                .locks
                .update_one(
                    doc! { "_id": &self.key, "token": self.token },
                    doc! { "$set": { "expires": expires } },
                )
                .await?)
        })
        .await?;
        if renewed.matched_count == 0 {
            // Another writer took the lock over: the work stops where it is, and the
            // operation, retried, completes it.
            return Err(Error::contention("lease renewal", 1));
        }
        Ok(())
    }
}
