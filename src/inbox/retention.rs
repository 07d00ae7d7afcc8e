//! How long a store keeps an owner's messages ([`Retention`]).

use std::time::Duration;

/// How long a store keeps an owner's messages, enforced by [`InboxLifecycle::prune`](super::InboxLifecycle::prune): the
/// newest `keep_newest` messages an owner received (deleted and retracted ones count), and
/// nothing older than `max_age`. Either, both, or neither (the default: prune removes nothing).
///
/// A bucketed store drops whole buckets: it keeps at least `keep_newest` messages (up to a
/// bucket's worth more), drops a bucket once its newest message is older than `max_age`, and
/// always keeps the newest bucket, where the next message goes.
///
/// ```
/// use std::time::Duration;
/// use mongo_social::inbox::Retention;
///
/// // Mastodon keeps 800 entries per home feed; keep a month as well.
/// let retention = Retention::keep_newest(800).max_age(Duration::from_secs(30 * 24 * 3600));
/// assert_eq!(retention.newest(), Some(800));
/// assert!(Retention::default().is_unbounded());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    keep_newest: Option<u64>,
    max_age: Option<Duration>,
}

impl Retention {
    /// Keep an owner's newest `messages` messages.
    pub fn keep_newest(messages: u64) -> Self {
        Self {
            keep_newest: Some(messages),
            max_age: None,
        }
    }

    /// Also (or only, on [`Retention::default`]) drop messages older than `age`.
    pub fn max_age(mut self, age: Duration) -> Self {
        self.max_age = Some(age);
        self
    }

    /// How many of an owner's newest messages are kept, if limited.
    pub fn newest(&self) -> Option<u64> {
        self.keep_newest
    }

    /// The oldest a kept message may be, if limited.
    pub fn age(&self) -> Option<Duration> {
        self.max_age
    }

    /// Whether this keeps everything.
    pub fn is_unbounded(&self) -> bool {
        self.keep_newest.is_none() && self.max_age.is_none()
    }

    /// Messages sent before this time are older than `max_age`.
    pub(crate) fn cutoff(&self) -> Option<bson::DateTime> {
        self.max_age.map(|age| {
            let age = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
            bson::DateTime::from_millis(
                bson::DateTime::now().timestamp_millis().saturating_sub(age),
            )
        })
    }
}
