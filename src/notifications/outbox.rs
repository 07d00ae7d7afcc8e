//! The notifications a store owes, queued in the store's own database: what keeps a notifier
//! that fails (its database unreachable, say) from failing the write that caused it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bson::doc;
use bson::oid::ObjectId;

use super::{Activity, DynNotifier, Kind};
use crate::jobs::{Job, JobHandler, JobQueue, Worker};
use crate::observe::spans::Op;
use crate::Result;

/// The kind of the outbox's jobs.
const JOB_KIND: &str = "notification";
/// How long a store waits for its notifier before leaving the notification to the outbox's
/// worker.
pub(crate) const INLINE_ATTEMPT: Duration = Duration::from_secs(2);
/// Runs of a queued notification before it is marked failed: with the queue's back-off capped at
/// five minutes, some three and a half days of retries.
const MAX_ATTEMPTS: u32 = 1_000;

/// The notifications a store built with a notifier owes (its builder's `notifier`), kept in a
/// [`JobQueue`] in the store's own database, collection `<store's main collection>_outbox`
/// (`comments_outbox`, `discussions_outbox`, `follows_outbox`, `post_likes_outbox`; claims in
/// `<that>_locks`).
///
/// # Delivery
///
/// When a write that notifies (a reply, a follow, a like, and the deletions that withdraw them)
/// has been stored, the store
///
/// 1. queues the notification (one `insert` in its own database, retried under its policy), then
/// 2. tells the notifier at once, waiting at most 2 seconds; if that succeeds, the job (and any
///    older job for the same activity) is deleted (one `delete`).
///
/// Whatever the notifier does, the call returns the write's outcome: a notifier that fails or
/// takes longer leaves the job queued, for [`Outbox::start_worker`] or [`Outbox::run_pending`]
/// to deliver when the notifier works again (retried with back-off doubling from a second up to
/// five minutes, for 1,000 runs, then marked failed: [`Outbox::failed`]).
///
/// The guarantee is **at least once** per write once a worker runs: a job can run after the
/// inline attempt delivered it (its deletion failed), or twice (see [`crate::jobs`]). That is
/// harmless because a [`Notifier`](super::Notifier)'s calls are idempotent (the
/// [`NotificationStore`](super::NotificationStore) adds an actor to a group once, and withdraws
/// once). Jobs of one activity (recipient, kind, target, actor) supersede each other: a job
/// finding a later one queued for the same activity completes without running, so a follow,
/// unfollow and follow again during an outage end as the last one says.
///
/// What can lose one: the process stopping between the write and the queueing `insert` (two
/// commands in a row), or the store's own database refusing that `insert` past the retry budget
/// right after it took the write, when the notifier fails too. A repeated keyed create (an
/// idempotency key met again) writes nothing, and so queues nothing: if the first call stopped
/// in that window, its notification is lost. Nothing is notified twice visibly, since notifying
/// is idempotent, except that a notification withdrawn in the meantime (the reply deleted) can be
/// put back by an older job of it that a worker was already running.
///
/// Without a running worker, notifications whose inline attempt failed wait in the outbox.
///
/// ```no_run
/// # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
/// use std::sync::Arc;
/// use mongo_social::comments::PerComment;
/// use mongo_social::NotificationStore;
///
/// let notifications: NotificationStore<()> = NotificationStore::new(&db);
/// let comments = PerComment::builder(&db).notifier(Arc::new(notifications)).build()?;
/// // One worker per process (or a few per deployment) delivers what could not be at once.
/// let worker = comments.outbox().expect("built with a notifier").start_worker();
/// # drop(worker);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Outbox {
    queue: JobQueue,
    notifier: Arc<DynNotifier>,
}

impl fmt::Debug for Outbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("queue", &self.queue.collection_name())
            .field("notifier", &self.notifier)
            .finish()
    }
}

/// What a queued notification does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The activity is notified ([`Outbox::notify`]).
    Notify,
    /// The activity's notification is withdrawn ([`Outbox::withdraw`]).
    Withdraw,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Notify => "notify",
            Change::Withdraw => "withdraw",
        }
    }
}

impl Outbox {
    /// The outbox of a store whose builder resolved `config`, in the collection `collection`,
    /// for `notifier`.
    pub(crate) fn build(
        config: &crate::config::StoreConfig,
        collection: &str,
        notifier: Arc<DynNotifier>,
    ) -> Result<Self> {
        let queue = crate::jobs::JobQueue::builder_for(config, collection)
            .max_attempts(MAX_ATTEMPTS)
            .build()?;
        Ok(Self { queue, notifier })
    }

    /// The outbox's collection name for a store whose main collection is `main`.
    pub(crate) fn collection_for(main: &str) -> String {
        format!("{main}_outbox")
    }

    /// Queues `activity`'s notification and tries it at once; never fails (see the type's docs).
    pub(crate) async fn notify(&self, activity: Activity) {
        self.send(Change::Notify, activity).await;
    }

    /// Queues the withdrawal of `activity`'s notification and tries it at once; never fails.
    pub(crate) async fn withdraw(&self, activity: Activity) {
        self.send(Change::Withdraw, activity).await;
    }

    /// Queues `activity`'s `change` and tries it at once; never fails ([`Outbox::notify`] or
    /// [`Outbox::withdraw`], for a caller that holds the change as a value).
    pub(crate) async fn send(&self, change: Change, activity: Activity) {
        let key = activity_key(&activity);
        let payload = doc! {
            "change": change.name(),
            "key": &key,
            "recipient": &activity.recipient,
            "kind": activity.kind.as_str(),
            "target": &activity.target,
            "actor": &activity.actor,
        };
        let id = ObjectId::new();
        let queued = self.queue.enqueue_once(id, JOB_KIND, payload).await.is_ok();
        let delivered = matches!(
            tokio::time::timeout(INLINE_ATTEMPT, apply(&*self.notifier, change, activity)).await,
            Ok(Ok(()))
        );
        if queued && delivered {
            // Best effort: a job left behind delivers again, idempotently.
            let _ = self
                .queue
                .complete_up_to(JOB_KIND, "payload.key", &key, id)
                .await;
        }
    }

    /// Delivers every queued notification that is due, in this task; returns how many jobs ran
    /// (superseded ones included). For tests, scripts and applications without a worker.
    ///
    /// # Errors
    ///
    /// Server errors of the outbox's own database; a notifier's failure is recorded on its job,
    /// which runs again later.
    pub async fn run_pending(&self) -> Result<usize> {
        Op::NotificationsOutboxRunPending
            .span()
            .run(async move { self.queue.run_pending(&self.handler()).await })
            .await
    }

    /// Starts a worker that delivers queued notifications as they fall due (see
    /// [`JobQueue::start_worker`]); it runs while the returned [`Worker`] lives.
    pub fn start_worker(&self) -> Worker {
        self.queue.start_worker(Arc::new(self.handler()))
    }

    /// Notifications waiting for delivery (one `count`).
    pub async fn pending(&self) -> Result<u64> {
        Op::NotificationsOutboxPending
            .span()
            .run(async move { self.queue.pending().await })
            .await
    }

    /// Notifications given up on after 1,000 failed runs (one `count`).
    pub async fn failed(&self) -> Result<u64> {
        Op::NotificationsOutboxFailed
            .span()
            .run(async move { self.queue.failed().await })
            .await
    }

    /// The job queue that holds the notifications.
    pub fn queue(&self) -> &JobQueue {
        &self.queue
    }

    fn handler(&self) -> OutboxHandler {
        OutboxHandler {
            queue: self.queue.clone(),
            notifier: self.notifier.clone(),
        }
    }
}

/// Runs the notifier for one queued notification.
async fn apply(notifier: &DynNotifier, change: Change, activity: Activity) -> Result<()> {
    match change {
        Change::Notify => notifier.notify(activity).await,
        Change::Withdraw => notifier.withdraw(activity).await,
    }
}

/// Names one activity (recipient, kind, target, actor): the jobs of one supersede each other.
fn activity_key(activity: &Activity) -> String {
    let scope = format!(
        "{}\0{}\0{}",
        activity.recipient,
        activity.kind.as_str(),
        activity.target
    );
    crate::idempotency::id(&scope, &activity.actor).to_hex()
}

/// The outbox's job handler.
#[derive(Debug)]
struct OutboxHandler {
    queue: JobQueue,
    notifier: Arc<DynNotifier>,
}

#[async_trait]
impl JobHandler for OutboxHandler {
    async fn handle(&self, job: &Job) -> Result<()> {
        let text = |field: &str| -> Result<String> {
            job.payload.get_str(field).map(str::to_owned).map_err(|_| {
                crate::bson_ext::corrupt(
                    self.queue.collection_name(),
                    Some(job.id.into()),
                    "a notification job without its activity",
                )
            })
        };
        let change = match text("change")?.as_str() {
            "withdraw" => Change::Withdraw,
            _ => Change::Notify,
        };
        let key = text("key")?;
        // A later notification of the same activity decides what the recipient sees.
        if self
            .queue
            .has_later(JOB_KIND, "payload.key", &key, job.id)
            .await?
        {
            return Ok(());
        }
        let activity = Activity::new(
            text("recipient")?,
            Kind::from_name(&text("kind")?),
            text("target")?,
            text("actor")?,
        );
        apply(&*self.notifier, change, activity).await
    }
}
