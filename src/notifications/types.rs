//! What goes into a notification feed ([`Event`], [`Activity`]) and what comes out ([`Group`],
//! [`Counts`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// What happened: the verb of a notification, which groups it with others of the same kind on
/// the same target.
///
/// Named as stored (`"like"`, `"comment"`, `"reply"`, `"follow"`, `"mention"`, or a custom
/// kind's name): `FromStr` parses a request's name, refusing a blank one or one longer than
/// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) with [`Invalid::Name`](crate::error::Invalid::Name);
/// `Display` prints it, and serde uses the same text.
///
/// ```
/// use mongo_social::notifications::Kind;
/// assert_eq!("like".parse::<Kind>().unwrap(), Kind::Like);
/// assert_eq!("badge".parse::<Kind>().unwrap(), Kind::Custom("badge".into()));
/// assert_eq!(Kind::Reply.to_string(), "reply");
/// assert!(" ".parse::<Kind>().unwrap_err().is_invalid_input());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// Someone liked the recipient's post (the target).
    Like,
    /// Someone commented on the recipient's post (the target).
    Comment,
    /// Someone replied to the recipient's comment (the target).
    Reply,
    /// Someone followed the recipient (the target is the recipient).
    Follow,
    /// Someone mentioned the recipient in a post or comment (the target).
    Mention,
    /// An application's own kind, by name (not one of the names above).
    Custom(String),
}

impl Kind {
    /// The kind as stored: `"like"`, `"comment"`, `"reply"`, `"follow"`, `"mention"`, or a custom
    /// kind's name.
    pub fn as_str(&self) -> &str {
        match self {
            Kind::Like => "like",
            Kind::Comment => "comment",
            Kind::Reply => "reply",
            Kind::Follow => "follow",
            Kind::Mention => "mention",
            Kind::Custom(name) => name,
        }
    }

    /// The kind stored as `name`: a custom kind named like a built-in one is that one. For a
    /// name a request gave, parse it (`FromStr`), which refuses a blank or over-long one.
    ///
    /// ```
    /// use mongo_social::notifications::Kind;
    /// assert_eq!(Kind::from_name("like"), Kind::Like);
    /// assert_eq!(Kind::from_name("badge"), Kind::Custom("badge".into()));
    /// ```
    pub fn from_name(name: &str) -> Self {
        match name {
            "like" => Kind::Like,
            "comment" => Kind::Comment,
            "reply" => Kind::Reply,
            "follow" => Kind::Follow,
            "mention" => Kind::Mention,
            other => Kind::Custom(other.to_owned()),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = Error;

    /// As [`Kind::from_name`], refusing with [`Invalid::Name`](crate::error::Invalid::Name) a
    /// blank name or one longer than [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), which no event
    /// could have.
    fn from_str(name: &str) -> Result<Self, Error> {
        if crate::validate::id("kind", name).is_err() {
            return Err(crate::names::unknown(
                "notification kind",
                name,
                "like, comment, reply, follow, mention, or a custom kind's name (not blank, at \
                 most 512 bytes)",
            ));
        }
        Ok(Kind::from_name(name))
    }
}

crate::names::serde_by_name!(Kind);

/// One actor's action, as a store that knows it (a like, a follow, a reply) reports it to a
/// [`Notifier`](super::Notifier): who is told, what happened, on what, by whom. Each is an id
/// (a custom kind's name too): not blank, and at most [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activity {
    /// Who is notified.
    pub recipient: String,
    /// What happened.
    pub kind: Kind,
    /// What it happened to: a post id, a comment link, the recipient for a follow. Events of one
    /// kind on one target group together.
    pub target: String,
    /// Who did it.
    pub actor: String,
}

impl Activity {
    /// `actor` did `kind` to `target`, which `recipient` is told about.
    ///
    /// ```
    /// use mongo_social::notifications::{Activity, Kind};
    /// let liked = Activity::new("ann", Kind::Like, "post-1", "bob");
    /// assert_eq!((liked.recipient.as_str(), liked.actor.as_str()), ("ann", "bob"));
    /// ```
    pub fn new(
        recipient: impl Into<String>,
        kind: Kind,
        target: impl Into<String>,
        actor: impl Into<String>,
    ) -> Self {
        Self {
            recipient: recipient.into(),
            kind,
            target: target.into(),
            actor: actor.into(),
        }
    }
}

/// An [`Activity`] with the application's data and its time, for
/// [`NotificationStore::notify`](super::NotificationStore::notify).
#[derive(Clone, Debug, PartialEq)]
pub struct Event<D> {
    /// The action.
    pub activity: Activity,
    /// When it happened (default: when it is stored); it picks the group's window.
    pub at: Option<bson::DateTime>,
    /// The application's data; a group shows its newest event's.
    pub data: Option<D>,
    /// The caller's idempotency key, if any (see [`Event::with_key`]).
    pub key: Option<String>,
}

impl<D> Event<D> {
    /// An event of `activity` now, without data.
    pub fn new(activity: Activity) -> Self {
        Self {
            activity,
            at: None,
            data: None,
            key: None,
        }
    }

    /// The same event with an idempotency key: a caller-chosen id (blank or longer than
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) refused), unique per recipient, that makes a
    /// repeated [`NotificationStore::notify`](super::NotificationStore::notify) return `Ok` and
    /// write nothing, and the same key with another activity, time or data
    /// [`Error::Conflict`](crate::Error::Conflict). (An event without a key is idempotent per
    /// actor and group already; a key also refuses a repeat that differs.) Enforced in the
    /// database under concurrency: a record in the notifications collection whose `_id` is
    /// derived from the recipient and the key, written before the event is applied.
    ///
    /// ```no_run
    /// # async fn demo(notifications: mongo_social::NotificationStore<()>) -> mongo_social::Result<()> {
    /// use mongo_social::notifications::{Activity, Event, Kind};
    /// let event = Event::new(Activity::new("ann", Kind::Mention, "post-1", "bob")).with_key("m-77");
    /// notifications.notify(event.clone()).await?;
    /// notifications.notify(event).await?; // a retried request: nothing written
    /// # Ok(()) }
    /// ```
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The same event at `at`.
    pub fn at(mut self, at: bson::DateTime) -> Self {
        self.at = Some(at);
        self
    }

    /// The same event carrying `data`, of at most [`MAX_DATA_BYTES`](super::MAX_DATA_BYTES)
    /// encoded.
    pub fn with_data(mut self, data: D) -> Self {
        self.data = Some(data);
        self
    }
}

impl<D> From<Activity> for Event<D> {
    fn from(activity: Activity) -> Self {
        Self::new(activity)
    }
}

/// A group of notifications: the events of one kind on one target for one recipient within one
/// window ("Ann and 3 others liked your post").
///
/// It serializes (serde) with the field names below, `kind` as its name, the times as
/// `bson::DateTime` serializes (MongoDB Extended JSON in JSON), and deserializes back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Group<D> {
    /// The group's id, for [`NotificationStore::mark_read`](super::NotificationStore::mark_read).
    pub id: String,
    /// Who is notified.
    pub recipient: String,
    /// What happened.
    pub kind: Kind,
    /// What it happened to.
    pub target: String,
    /// The start of the group's window.
    pub window: bson::DateTime,
    /// The newest actors, newest first (at most the store's `recent_actors`).
    pub actors: Vec<String>,
    /// How many different actors the group holds.
    pub actor_count: u64,
    /// When its newest event happened.
    pub updated: bson::DateTime,
    /// Whether the recipient has seen it since its newest actor joined.
    pub seen: bool,
    /// Whether the recipient has read it since its newest actor joined.
    pub read: bool,
    /// The newest event's data.
    pub data: Option<D>,
}

/// How many groups a recipient has not seen, and not read (every unseen group is unread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Groups with an actor the recipient has not seen.
    pub unseen: u64,
    /// Groups with an actor the recipient has not read.
    pub unread: u64,
}
