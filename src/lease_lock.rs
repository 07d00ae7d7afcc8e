//! Leased per-key locks made of documents, for servers whose updates are not atomic.
//!
//! Taking a lock is inserting `{_id: key, token, expires}`: the unique `_id` makes the insert
//! atomic on every server, including FerretDB 1.x, whose updates are not. Many keys are locked in
//! one unordered `insert`; a key already held fails with a duplicate key error and is retried
//! later by the caller. A holder that dies leaves its lock until `expires`; the next contender
//! then removes it. Removal of an expired lock races with a third contender only if the holder
//! died, and at worst lets two writers in once.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};
use mongodb::error::ErrorKind;
use mongodb::Collection;

use crate::update_batch::DUPLICATE_KEY;
use crate::{Error, Result};

#[derive(Clone, Debug)]
pub(crate) struct LeaseLocks {
    locks: Collection<Document>,
    lease: Duration,
}

impl LeaseLocks {
    pub(crate) fn new(locks: Collection<Document>, lease: Duration) -> Self {
        Self { locks, lease }
    }

    /// The name of the collection holding the locks.
    pub(crate) fn collection_name(&self) -> &str {
        self.locks.name()
    }

    /// Locks as many of `keys` as are free, returning those taken under `token`.
    pub(crate) async fn try_acquire(
        &self,
        keys: &[String],
        token: ObjectId,
    ) -> Result<Vec<String>> {
        let expires = bson::DateTime::from_millis(
            bson::DateTime::now().timestamp_millis() + self.lease.as_millis() as i64,
        );
        let locks = keys
            .iter()
            .map(|key| doc! { "_id": key, "token": token, "expires": expires });
        let error = match self.locks.insert_many(locks).ordered(false).await {
            Ok(_) => return Ok(keys.to_vec()),
            Err(error) => error,
        };
        if let Some(taken) = taken_despite_duplicates(&error, keys) {
            return Ok(taken);
        }
        // Some locks may have been taken before the failure: give them back before reporting it.
        self.release(keys, token).await?;
        Err(error.into())
    }

    /// Takes every one of `keys` under `token` or none: a round that gets only some gives them
    /// back, waits a jittered 1 to 24 ms and tries again, so two holders of overlapping key sets
    /// never wait on each other. Expired locks are broken on the first wait and every 16th.
    ///
    /// # Errors
    ///
    /// [`Error::Contention`] after `max_waits` rounds; any server error.
    pub(crate) async fn acquire_all(
        &self,
        keys: &[String],
        token: ObjectId,
        max_waits: usize,
    ) -> Result<()> {
        let mut waits = 0;
        loop {
            let taken = self.try_acquire(keys, token).await?;
            if taken.len() == keys.len() {
                return Ok(());
            }
            if !taken.is_empty() {
                self.release(&taken, token).await?;
            }
            waits += 1;
            if waits > max_waits {
                return Err(Error::Contention { attempts: waits });
            }
            if waits % 16 == 1 {
                self.break_expired(keys).await?;
            }
            tokio::time::sleep(backoff(waits)).await;
        }
    }

    /// Releases the locks on `keys` held under `token`.
    pub(crate) async fn release(&self, keys: &[String], token: ObjectId) -> Result<()> {
        self.locks
            .delete_many(doc! { "_id": { "$in": keys }, "token": token })
            .await?;
        Ok(())
    }

    /// Removes locks on `keys` whose holder let the lease run out.
    pub(crate) async fn break_expired(&self, keys: &[String]) -> Result<()> {
        self.locks
            .delete_many(
                doc! { "_id": { "$in": keys }, "expires": { "$lt": bson::DateTime::now() } },
            )
            .await?;
        Ok(())
    }
}

/// 1 to 24 ms, growing with the number of waits, jittered by the clock so waiters spread out.
fn backoff(waits: usize) -> Duration {
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos() as u64 % 8)
        .unwrap_or(0);
    Duration::from_millis(1 + (waits.min(16) as u64) + jitter)
}

/// The keys locked by an `insert_many` whose only failures were keys already locked, or `None`
/// if anything else went wrong.
fn taken_despite_duplicates(error: &mongodb::error::Error, keys: &[String]) -> Option<Vec<String>> {
    let ErrorKind::InsertMany(failure) = &*error.kind else {
        return None;
    };
    if failure.write_concern_error.is_some() {
        return None;
    }
    let mut taken = vec![true; keys.len()];
    for write_error in failure.write_errors.iter().flatten() {
        if write_error.code != DUPLICATE_KEY || write_error.index >= keys.len() {
            return None;
        }
        taken[write_error.index] = false;
    }
    Some(
        keys.iter()
            .zip(taken)
            .filter(|(_, taken)| *taken)
            .map(|(key, _)| key.clone())
            .collect(),
    )
}
