//! The user ladder ([`UserChunk`], [`User`], [`ExtendedUser`]) and chunk propagation.
//!
//! # Propagation
//!
//! A [`UserChunk`] is copied into every post (and every document of the collections added with
//! [`super::FeedStoreBuilder::chunk_target`]). When a chunk field changes, the user's `revision`
//! goes up by one, and a propagation document `{_id, user, target, last_id, done}` records the
//! work. Each batch then costs three commands:
//!
//! 1. `find` the next `propagation_batch` ids of documents embedding the user's chunk, after
//!    `last_id`, in `_id` order (index `{<field>.id: 1, _id: 1}`);
//! 2. `update` those with a lower `revision` to the current chunk (one `update` with `$in`);
//! 3. `update` the propagation document with the batch's last `_id`.
//!
//! A propagation interrupted anywhere resumes from the last recorded `_id`
//! ([`FeedStore::resume_propagations`]); redoing a batch changes nothing, since only copies with
//! a lower revision are written, and the chunk written is the user's current one, read when the
//! run starts, so two renames in a row end with the newest name whatever order their runs finish
//! in. Every copy is updated after `5 + 3 * ceil(copies / batch)` commands per target collection
//! (the 5: record, rename, read the record, read the chunk, mark done; one more empty batch when
//! the copies are an exact multiple of the batch). At 100 copies a batch and a few milliseconds a
//! command on MongoDB, that is about a second per 10,000 posts of the user; measured on FerretDB
//! 1.24 in `cargo run --example social_feed`: 8 commands for a user with 2 posts.
//!
//! A post created from a chunk read just before a rename, and inserted after that rename's
//! batches passed its `_id`, keeps the old chunk until the next propagation of that user (run
//! [`FeedStore::propagate_user`] again to repair; it is idempotent). On servers whose updates
//! are not atomic (FerretDB 1.x), the rename's `findAndModify` and each batch's `update` run under
//! a leased lock on the user (`user:<id>`, +2 commands each), so concurrent renames get distinct
//! revisions and two propagations of the same user cannot interleave within one copy.

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::ReturnDocument;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::FeedStore;
use crate::validate;
use crate::Payload;
use crate::{bson_ext, Entity, Error, Result};

/// The minimal identity copied into every post: what a post shows of its creator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserChunk {
    /// The user's id.
    pub id: String,
    /// The user's name as shown on posts.
    pub username: String,
    /// Goes up by one at each change of a chunk field; a copy is updated only by a newer one.
    pub revision: i64,
}

/// A user's profile as read on hot paths; holds the chunk's fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// The user's id, chosen by the application.
    #[serde(rename = "_id")]
    pub id: String,
    /// Unique user name (chunk field).
    pub username: String,
    /// Name shown on the profile.
    pub display_name: String,
    /// Avatar picture, if any.
    pub avatar_url: Option<String>,
    /// Revision of the chunk fields.
    pub revision: i64,
}

impl User {
    /// The part of the user that is copied into posts.
    pub fn chunk(&self) -> UserChunk {
        UserChunk {
            id: self.id.clone(),
            username: self.username.clone(),
            revision: self.revision,
        }
    }
}

/// A user to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewUser {
    /// The user's id.
    pub id: String,
    /// Unique user name.
    pub username: String,
    /// Name shown on the profile (defaults to the username).
    pub display_name: String,
    /// Avatar picture.
    pub avatar_url: Option<String>,
}

impl NewUser {
    /// A user with this id and username, displayed under the username.
    pub fn new(id: impl Into<String>, username: impl Into<String>) -> Self {
        let username = username.into();
        Self {
            id: id.into(),
            display_name: username.clone(),
            username,
            avatar_url: None,
        }
    }
}

/// The rest of a user, read rarely (login, settings, analytics): the application's type `E`,
/// stored apart so hot reads stay small.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtendedUser<E> {
    /// The user's id.
    #[serde(rename = "_id")]
    pub id: String,
    /// The application's fields.
    pub details: E,
}

/// How far a propagation got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PropagationStatus {
    /// The propagation's id (see [`FeedStore::run_propagation`]).
    pub id: ObjectId,
    /// Whether every copy is updated.
    pub done: bool,
    /// Batches run by this call.
    pub batches: usize,
    /// Copies rewritten by this call.
    pub updated: u64,
}

impl<X: Payload> FeedStore<X> {
    /// Creates a user (one `insert`).
    ///
    /// # Errors
    ///
    /// [`Error::Blank`] for a blank id or username,
    /// [`Error::AlreadyExists`] for an id or username taken, all before anything is written.
    pub async fn create_user(&self, user: NewUser) -> Result<User> {
        validate::user_id("user", &user.id)?;
        validate::non_blank("username", &user.username)?;
        // The unique username index is what refuses a username taken.
        self.backend.ensure_indexes().await?;
        let user = User {
            id: user.id,
            username: user.username,
            display_name: user.display_name,
            avatar_url: user.avatar_url,
            revision: 0,
        };
        match self
            .collections
            .users
            .insert_one(bson::to_document(&user)?)
            .await
        {
            Ok(_) => Ok(user),
            Err(error) if crate::update_batch::is_duplicate_key(&error) => {
                // Servers differ in naming the index in the message: ask which one clashed.
                let id_taken = self
                    .collections
                    .users
                    .find_one(doc! { "_id": &user.id })
                    .projection(doc! { "_id": 1 })
                    .await?
                    .is_some();
                Err(if id_taken {
                    Error::AlreadyExists {
                        what: Entity::User,
                        id: user.id,
                    }
                } else {
                    Error::AlreadyExists {
                        what: Entity::Username,
                        id: user.username,
                    }
                })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// A user's profile (one `find`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown user.
    pub async fn user(&self, id: &str) -> Result<User> {
        validate::user_id("user", id)?;
        let found = self.collections.users.find_one(doc! { "_id": id }).await?;
        let found = found.ok_or_else(|| not_found_user(id))?;
        bson_ext::decode(self.collections.users.name(), found)
    }

    /// Stores the rest of a user (one `update`, upserting). The user must exist.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown user (one more `find`).
    pub async fn put_extended_user<E: Serialize>(&self, id: &str, details: &E) -> Result<()> {
        self.user(id).await?;
        let details = bson::to_bson(details)?;
        self.collections
            .extended_users
            .update_one(doc! { "_id": id }, doc! { "$set": { "details": details } })
            .upsert(true)
            .await?;
        Ok(())
    }

    /// The rest of a user (one `find`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when none was stored for this user.
    pub async fn extended_user<E: DeserializeOwned>(&self, id: &str) -> Result<ExtendedUser<E>> {
        validate::user_id("user", id)?;
        let found = self
            .collections
            .extended_users
            .find_one(doc! { "_id": id })
            .await?
            .ok_or_else(|| Error::NotFound {
                what: Entity::ExtendedUser,
                id: id.to_owned(),
            })?;
        bson_ext::decode(self.collections.extended_users.name(), found)
    }

    /// Renames a user and updates every copy of their chunk before returning.
    ///
    /// # Errors
    ///
    /// [`Error::Blank`] (id or username), [`Error::NotFound`],
    /// [`Error::AlreadyExists`] (username taken),
    /// all before anything is written but the durable propagation record, which finds nothing
    /// to do.
    pub async fn rename_user(&self, id: &str, username: &str) -> Result<PropagationStatus> {
        let propagation = self.start_rename(id, username).await?;
        self.run_propagation(propagation, None).await
    }

    /// Renames a user and leaves the copies to a background worker (a `propagate` job). Returns
    /// the propagation's id.
    ///
    /// The job runs batches until its claim's [`crate::jobs::Job::deadline`] (at least one), then
    /// queues a new job that resumes from the recorded progress, so a long propagation never
    /// holds a claim past its lease.
    pub async fn rename_user_in_background(&self, id: &str, username: &str) -> Result<ObjectId> {
        let propagation = self.start_rename(id, username).await?;
        self.jobs
            .enqueue(
                super::feeds::JOB_PROPAGATE,
                doc! { "propagation": propagation },
            )
            .await?;
        Ok(propagation)
    }

    /// Records a propagation, then renames the user: if the rename fails, the record only
    /// re-propagates the current chunk, which changes nothing.
    pub(super) async fn start_rename(&self, id: &str, username: &str) -> Result<ObjectId> {
        validate::user_id("user", id)?;
        validate::non_blank("username", username)?;
        self.backend.ensure_indexes().await?;
        let propagation = self.record_propagation(id).await?;
        // FerretDB's findAndModify reads, modifies and writes back without isolation: two
        // renames at once would both write the same revision. There it runs under the user's
        // lock (+2 commands).
        let renamed = self
            .serialized(&[user_lock(id)], async {
                Ok(self
                    .collections
                    .users
                    .find_one_and_update(
                        doc! { "_id": id },
                        doc! { "$set": { "username": username }, "$inc": { "revision": 1 } },
                    )
                    .return_document(ReturnDocument::After)
                    .await)
            })
            .await;
        let outcome = match renamed {
            Ok(Ok(Some(_))) => return Ok(propagation),
            Ok(Ok(None)) => Err(not_found_user(id)),
            Err(error) => Err(error),
            // MongoDB reports a duplicate key; FerretDB 1.24 an internal error naming the index.
            Ok(Err(error)) => {
                let taken = self
                    .collections
                    .users
                    .find_one(doc! { "username": username, "_id": { "$ne": id } })
                    .projection(doc! { "_id": 1 })
                    .await?
                    .is_some();
                if taken {
                    Err(Error::AlreadyExists {
                        what: Entity::Username,
                        id: username.to_owned(),
                    })
                } else {
                    Err(error.into())
                }
            }
        };
        // Nothing to propagate: drop the record rather than leave it for a resume.
        self.collections
            .propagations
            .delete_one(doc! { "_id": propagation })
            .await?;
        outcome
    }

    async fn record_propagation(&self, user: &str) -> Result<ObjectId> {
        let id = ObjectId::new();
        self.collections
            .propagations
            .insert_one(doc! {
                "_id": id, "user": user, "target": 0, "last_id": Bson::Null, "done": false,
                "created": self.clock.now(),
            })
            .await?;
        Ok(id)
    }

    /// Copies a user's current chunk into every document that embeds it (idempotent; for
    /// repairs).
    pub async fn propagate_user(&self, id: &str) -> Result<PropagationStatus> {
        self.user(id).await?;
        let propagation = self.record_propagation(id).await?;
        self.run_propagation(propagation, None).await
    }

    /// Runs a recorded propagation from where it stopped, for at most `max_batches` batches
    /// (`None`: to the end).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown propagation or a user deleted meanwhile.
    pub async fn run_propagation(
        &self,
        propagation: ObjectId,
        max_batches: Option<usize>,
    ) -> Result<PropagationStatus> {
        self.propagate_within(propagation, max_batches, None).await
    }

    /// [`FeedStore::run_propagation`], starting no batch after `deadline` but the first.
    pub(super) async fn propagate_within(
        &self,
        propagation: ObjectId,
        max_batches: Option<usize>,
        deadline: Option<std::time::Instant>,
    ) -> Result<PropagationStatus> {
        let record = self
            .collections
            .propagations
            .find_one(doc! { "_id": propagation })
            .await?
            .ok_or_else(|| Error::NotFound {
                what: Entity::Propagation,
                id: propagation.to_hex(),
            })?;
        let mut status = PropagationStatus {
            id: propagation,
            done: record.get_bool("done").unwrap_or(false),
            batches: 0,
            updated: 0,
        };
        if status.done {
            return Ok(status);
        }
        let user_id = record.get_str("user").unwrap_or_default().to_owned();
        let chunk = self.user(&user_id).await?.chunk();
        let chunk_bson = bson::to_bson(&chunk)?;
        let mut target = record.get_i32("target").unwrap_or(0).max(0) as usize;
        let mut last_id = record.get("last_id").cloned().unwrap_or(Bson::Null);
        let batch = self.settings.propagation_batch;
        while let Some((collection, field)) = self.settings.chunk_targets.get(target) {
            if max_batches.is_some_and(|max| status.batches >= max) {
                return Ok(status);
            }
            let late = deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline);
            if status.batches > 0 && late {
                return Ok(status);
            }
            let copies = self.database().collection::<Document>(collection);
            let mut filter = doc! { format!("{field}.id"): &user_id };
            if last_id != Bson::Null {
                filter.insert("_id", doc! { "$gt": last_id.clone() });
            }
            let ids: Vec<Bson> = copies
                .find(filter)
                .sort(doc! { "_id": 1 })
                .projection(doc! { "_id": 1 })
                .limit(batch as i64)
                .await?
                .try_collect::<Vec<Document>>()
                .await?
                .into_iter()
                .filter_map(|mut copy| copy.remove("_id"))
                .collect();
            if let Some(last) = ids.last() {
                let revision = format!("{field}.revision");
                // Where updates are not atomic, under the user's lock, so that two runs cannot
                // interleave within one copy (an older chunk written over a newer one).
                let updated = self
                    .serialized(&[user_lock(&user_id)], async {
                        Ok(copies
                            .update_many(
                                doc! {
                                    "_id": { "$in": &ids },
                                    "$or": [
                                        { &revision: { "$lt": chunk.revision } },
                                        { &revision: { "$exists": false } },
                                    ],
                                },
                                doc! { "$set": { field.as_str(): chunk_bson.clone() } },
                            )
                            .await?)
                    })
                    .await?;
                status.updated += updated.modified_count;
                last_id = last.clone();
            }
            if ids.len() < batch {
                target += 1;
                last_id = Bson::Null;
            }
            status.batches += 1;
            self.collections
                .propagations
                .update_one(
                    doc! { "_id": propagation },
                    doc! { "$set": { "target": target as i32, "last_id": last_id.clone() } },
                )
                .await?;
        }
        self.collections
            .propagations
            .update_one(
                doc! { "_id": propagation },
                doc! { "$set": { "done": true, "finished": self.clock.now() } },
            )
            .await?;
        status.done = true;
        Ok(status)
    }

    /// Unfinished propagations (interrupted by a crash, a timeout or a batch limit), oldest
    /// first.
    pub async fn unfinished_propagations(&self) -> Result<Vec<ObjectId>> {
        let records: Vec<Document> = self
            .collections
            .propagations
            .find(doc! { "done": false })
            .sort(doc! { "_id": 1 })
            .projection(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        Ok(records
            .iter()
            .filter_map(|record| record.get_object_id("_id").ok())
            .collect())
    }

    /// Finishes every unfinished propagation; run at startup or on a timer. Returns how many
    /// were finished.
    pub async fn resume_propagations(&self) -> Result<usize> {
        let unfinished = self.unfinished_propagations().await?;
        for propagation in &unfinished {
            match self.run_propagation(*propagation, None).await {
                // A user deleted since: nothing left to copy.
                Err(Error::NotFound {
                    what: Entity::User, ..
                }) => {
                    self.collections
                        .propagations
                        .update_one(
                            doc! { "_id": propagation },
                            doc! { "$set": { "done": true } },
                        )
                        .await?;
                }
                other => {
                    other?;
                }
            }
        }
        Ok(unfinished.len())
    }

    /// The chunk of an existing user, for embedding (one `find`).
    pub(super) async fn chunk_of(&self, id: &str) -> Result<UserChunk> {
        let found = self
            .collections
            .users
            .find_one(doc! { "_id": id })
            .projection(doc! { "username": 1, "revision": 1 })
            .await?
            .ok_or_else(|| not_found_user(id))?;
        Ok(UserChunk {
            id: id.to_owned(),
            username: found.get_str("username").unwrap_or_default().to_owned(),
            revision: found
                .get_i64("revision")
                .or_else(|_| found.get_i32("revision").map(i64::from))
                .unwrap_or(0),
        })
    }
}

/// The lock serializing a user's renames and propagation batches where updates are not atomic.
fn user_lock(id: &str) -> String {
    format!("user:{id}")
}

pub(super) fn not_found_user(id: &str) -> Error {
    Error::NotFound {
        what: Entity::User,
        id: id.to_owned(),
    }
}
