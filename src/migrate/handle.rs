//! The methods every migration's builder and handle have alike, written once: a kind's builder
//! takes [`migration_builder_methods!`] and its handle [`migration_handle_methods!`], each
//! naming what the kind moves one at a time (`"owner"`, `"discussion"`) for the docs.

/// A migration builder's settings of its `config` ([`Config`](super::engine::Config)): when
/// reads move, the retry policy of its own writes, its copy jobs' lease.
macro_rules! migration_builder_methods {
    ($unit:literal) => {
        #[doc = concat!(
            "When reads move (default [`Reads::PerOwner`](crate::migrate::Reads::PerOwner): each ",
            $unit,
            "'s as soon as its copy is verified)."
        )]
        pub fn reads(mut self, reads: crate::migrate::Reads) -> Self {
            self.config.reads = reads;
            self
        }

        /// The retry policy of the migration's own writes (default
        /// [`RetryPolicy::default`](crate::retry::RetryPolicy::default)).
        pub fn retry_policy(mut self, retry: crate::retry::RetryPolicy) -> Self {
            self.config.retry = retry;
            self
        }

        #[doc = concat!(
            "How long a copy job is its worker's before another may take it over, if that worker \
             stops answering (default 60 s; see [`crate::jobs::JobQueueBuilder::lease`]). Each ",
            $unit,
            "'s copy must fit in it."
        )]
        pub fn job_lease(mut self, lease: std::time::Duration) -> Self {
            self.config.job_lease = lease;
            self
        }
    };
}

/// A migration handle's methods that hand on to its engine (`inner`) as they are: its phases
/// (start, cut-over, finish, abort), running the copy's jobs, and whether it is done. The docs
/// of `start`, `finish` and `abort`, which say what each kind does, are the caller's.
macro_rules! migration_handle_methods {
    (
        $unit:literal;
        $(#[$start:meta])* start;
        $(#[$finish:meta])* finish;
        $(#[$abort:meta])* abort;
    ) => {
        $(#[$start])*
        pub async fn start(&self) -> crate::error::Result<()> {
            self.inner.start().await
        }

        /// Runs the copy's due jobs in this task until none is left; returns how many ran (see
        /// [`crate::JobQueue::run_pending`]).
        pub async fn run_pending(&self) -> crate::error::Result<usize> {
            crate::migrate::engine::run_pending(&self.inner).await
        }

        /// Runs the copy in the background until the returned worker is stopped or dropped.
        pub fn start_worker(&self) -> crate::jobs::Worker {
            crate::migrate::engine::start_worker(&self.inner)
        }

        #[doc = concat!(
            "Whether every ",
            $unit,
            " is listed and copied, and no copy is waiting."
        )]
        pub async fn is_copied(&self) -> crate::error::Result<bool> {
            self.inner.is_copied().await
        }

        #[doc = concat!(
            "Moves every ",
            $unit,
            "'s reads to the target at once \
             ([`Reads::AllAtOnce`](crate::migrate::Reads::AllAtOnce)); writes still reach both \
             stores.\n\n# Errors\n\n[`Error::Precondition`](crate::Error::Precondition) before \
             every ",
            $unit,
            " is copied, or after an abort."
        )]
        pub async fn cut_over(&self) -> crate::error::Result<()> {
            self.inner.cut_over().await
        }

        $(#[$finish])*
        pub async fn finish(&self) -> crate::error::Result<()> {
            self.inner.finish().await
        }

        $(#[$abort])*
        pub async fn abort(&self) -> crate::error::Result<()> {
            self.inner.abort().await
        }
    };
}

pub(super) use {migration_builder_methods, migration_handle_methods};
