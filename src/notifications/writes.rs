//! Events into groups, and withdrawals out of them.

use bson::{doc, Bson, Document};

use super::{Activity, Groups, CHANGED, CHANGES};
use crate::backend::update_batch::is_duplicate_key;
use crate::bson_ext::integer;
use crate::error::{Entity, Error, Result};
use crate::validate;

/// Parts of one window's group tried before an event gives up with [`Error::RetriesExhausted`].
const MAX_PART_ATTEMPTS: usize = 64;

/// The input checks of an activity.
pub(super) fn check(activity: &Activity) -> Result<()> {
    validate::user_id("recipient", &activity.recipient)?;
    validate::user_id("actor", &activity.actor)?;
    validate::id("target", &activity.target)?;
    validate::id("kind", activity.kind.as_str())
}

/// The `_id` of a group: each text field length-prefixed, so no id can be read two ways.
fn group_id(activity: &Activity, window: bson::DateTime, part: i64) -> String {
    let mut id = String::new();
    for field in [
        activity.recipient.as_str(),
        activity.kind.as_str(),
        activity.target.as_str(),
    ] {
        id.push_str(&format!("{}:{field}", field.len()));
    }
    id.push_str(&format!("{}.{part}", window.timestamp_millis()));
    id
}

/// The filter of every group of `activity`'s recipient, kind and target.
fn by_target(activity: &Activity) -> Document {
    doc! {
        "recipient": &activity.recipient,
        "kind": activity.kind.as_str(),
        "target": &activity.target,
    }
}

impl Groups {
    /// The start of the window holding `at`.
    fn window_of(&self, at: bson::DateTime) -> bson::DateTime {
        let length = self.window.as_millis().min(i64::MAX as u128) as i64;
        let millis = at.timestamp_millis();
        bson::DateTime::from_millis(millis - millis.rem_euclid(length))
    }

    /// The lock of a recipient's groups of one kind and target, where updates are not atomic.
    fn lock_key(activity: &Activity) -> String {
        format!(
            "notify:{}",
            group_id(activity, bson::DateTime::from_millis(0), 0)
        )
    }

    pub(super) async fn notify(
        &self,
        activity: &Activity,
        at: bson::DateTime,
        data: Option<Bson>,
    ) -> Result<()> {
        let window = self.window_of(at);
        self.backend
            .exclusive_one(&Self::lock_key(activity), async {
                let mut part = 0;
                for _ in 0..MAX_PART_ATTEMPTS {
                    if self.add(activity, window, part, at, &data).await? {
                        return Ok(());
                    }
                    // The actor is in the window's group already (a repeat, a retry), or the
                    // part tried is full.
                    let mut holding = by_target(activity);
                    holding.insert("window", window);
                    holding.insert("members", &activity.actor);
                    let held = self
                        .backend
                        .command("find notification group", || {
                            self.groups.find_one(holding.clone())
                        })
                        .await?;
                    if held.is_some() {
                        return Ok(());
                    }
                    let mut parts = by_target(activity);
                    parts.insert("window", window);
                    let last = self
                        .backend
                        .command("find notification group", || {
                            self.groups
                                .find_one(parts.clone())
                                .sort(doc! { "part": -1 })
                                .projection(doc! { "part": 1, "count": 1 })
                        })
                        .await?;
                    part = match last {
                        Some(last) => {
                            let full =
                                integer(&last, "count").unwrap_or(0) >= self.max_actors as i64;
                            integer(&last, "part").unwrap_or(0) + i64::from(full)
                        }
                        None => 0,
                    };
                }
                Err(Error::contention("notify", MAX_PART_ATTEMPTS))
            })
            .await
    }

    /// [`Groups::notify`] of an event keyed `key` (whose digest is `content`): a record
    /// `{_id: "key/<hash of recipient and key>", recipient, idempotency_key, content_digest,
    /// at, done}` in the groups' collection first (an `insert`, which its unique `_id` lets one
    /// attempt of concurrent ones make), the event, then the record marked done. A repeat finds
    /// the record (one `find`) and, done, writes nothing; not done, it applies the event again
    /// (idempotent) and marks it. Records hold no `count`, `seen` or `changed`, so no page,
    /// count, mark, watch or trim meets them.
    pub(super) async fn notify_keyed(
        &self,
        activity: &Activity,
        key: &str,
        content: &str,
        at: Option<bson::DateTime>,
        data: Option<Bson>,
    ) -> Result<()> {
        use crate::idempotency::{CONTENT, KEY};
        let id = format!(
            "key/{}",
            crate::idempotency::id(&activity.recipient, key).to_hex()
        );
        let filter = doc! { "_id": &id, "recipient": &activity.recipient };
        let find = || async {
            self.backend
                .command("find notification key", || {
                    self.groups.find_one(filter.clone())
                })
                .await
        };
        let record = match find().await? {
            Some(record) => record,
            None => {
                let record = doc! {
                    "_id": &id,
                    "recipient": &activity.recipient,
                    KEY: key,
                    CONTENT: content,
                    // The event's time, fixed by the first attempt for every later one.
                    "at": at.unwrap_or_else(bson::DateTime::now),
                    "done": false,
                };
                if self
                    .backend
                    .insert_once(&self.groups, record.clone())
                    .await?
                {
                    record
                } else {
                    find()
                        .await?
                        .ok_or_else(|| Error::contention("record notification key", 1))?
                }
            }
        };
        crate::idempotency::same(&record, Entity::Notification, key, content)?;
        if record.get_bool("done") == Ok(true) {
            return Ok(());
        }
        let at = record
            .get_datetime("at")
            .copied()
            .unwrap_or_else(|_| bson::DateTime::now());
        self.notify(activity, at, data).await?;
        let done = doc! { "_id": &id, "recipient": &activity.recipient, "done": false };
        self.backend
            .command("finish notification key", || {
                self.groups
                    .update_one(done.clone(), doc! { "$set": { "done": true } })
            })
            .await
            .map(drop)
    }

    /// The one conditional upsert of an event: whether the actor joined group `part`.
    ///
    /// Idempotent: the filter excludes a group holding the actor, so a retry after a lost reply
    /// matches nothing, and its upsert meets the `_id` as a duplicate key: `false`, and the
    /// caller finds the actor there.
    async fn add(
        &self,
        activity: &Activity,
        window: bson::DateTime,
        part: i64,
        at: bson::DateTime,
        data: &Option<Bson>,
    ) -> Result<bool> {
        let mut filter = by_target(activity);
        filter.insert("_id", group_id(activity, window, part));
        filter.insert("window", window);
        filter.insert("part", part);
        filter.insert("members", doc! { "$ne": &activity.actor });
        filter.insert("count", doc! { "$lt": self.max_actors as i64 });
        let mut set = doc! { "seen": false, "read": false };
        if let Some(data) = data {
            set.insert("data", data.clone());
        }
        let update = doc! {
            "$setOnInsert": { "created": at },
            "$push": { "members": &activity.actor },
            "$inc": { "count": 1_i64, CHANGES: 1_i64 },
            "$max": { "updated": at },
            "$set": set,
            // The server's time of the change: what a watch polls by (`updated` is the event's
            // own time, which may be older).
            "$currentDate": { CHANGED: true },
        };
        self.backend
            .retry("notify", || async {
                match self
                    .groups
                    .update_one(filter.clone(), update.clone())
                    .upsert(true)
                    .await
                {
                    Ok(result) => Ok(result.matched_count > 0 || result.upserted_id.is_some()),
                    Err(error) if is_duplicate_key(&error) => Ok(false),
                    Err(error) => Err(error.into()),
                }
            })
            .await
    }

    /// Pulls the actor from every group of the kind and target holding it, then deletes the
    /// groups left empty. Both are idempotent: the first matches only groups holding the actor,
    /// the second only empty ones.
    pub(super) async fn withdraw(&self, activity: &Activity) -> Result<()> {
        self.backend
            .exclusive_one(&Self::lock_key(activity), async {
                let mut holding = by_target(activity);
                holding.insert("members", &activity.actor);
                let pull = doc! {
                    "$pull": { "members": &activity.actor },
                    "$inc": { "count": -1_i64 },
                };
                self.update_all("withdraw notification", &holding, &pull)
                    .await?;
                let mut empty = by_target(activity);
                empty.insert("count", doc! { "$lte": 0_i64 });
                self.backend
                    .command("delete empty notification groups", || {
                        self.groups.delete_many(empty.clone())
                    })
                    .await?;
                Ok(())
            })
            .await
    }
}
