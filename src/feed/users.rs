//! The [`Users`] handle: the user ladder ([`UserChunk`](super::UserChunk), [`User`],
//! [`ExtendedUser`]), renames and the chunk propagation they start (`super::propagation`).

use std::future::Future;

use bson::doc;
use bson::oid::ObjectId;
use futures::TryStreamExt;
use mongodb::options::ReturnDocument;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::jobs::FeedJob;
use super::propagation::{self, user_lock, PropagationStatus};
use super::state::{handle, not_found_user};
use super::types::User;
use crate::bson_ext;
use crate::error::{Entity, Error, Result};
use crate::observe::spans::Op;
use crate::validate;

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

handle! {
    /// Users: profiles, their rarely read rest, and renames that reach every copy of a user's
    /// chunk. From [`super::FeedStore::users`]; cheap to clone.
    ///
    /// A rename bumps the user's `revision`, records a propagation, and rewrites the copies of the
    /// user's [`UserChunk`](super::UserChunk) (in posts, and in the collections added with
    /// [`super::FeedStoreBuilder::chunk_target`]) in batches of
    /// [`propagation_batch`](super::FeedStoreBuilder::propagation_batch): `5 + 3 × ⌈copies /
    /// batch⌉` commands per collection. Progress is recorded after each batch, so an interrupted
    /// propagation resumes where it stopped ([`Users::resume_propagations`]), and a copy is only
    /// ever replaced by a newer revision, so reruns and out-of-order runs are harmless. Where
    /// updates are not atomic the rename and each batch take a lock on the user (+2 commands
    /// each).
    ///
    /// ```no_run
    /// # async fn demo(store: mongo_social::FeedStore<()>) -> mongo_social::Result<()> {
    /// use mongo_social::feed::NewUser;
    ///
    /// let users = store.users();
    /// users.create(NewUser::new("ann", "ann")).await?;
    /// let status = users.rename("ann", "ann_sea").await?; // every post shows the new name
    /// assert!(status.done);
    /// assert_eq!(users.get("ann").await?.username, "ann_sea");
    /// # Ok(()) }
    /// ```
    Users
}

impl Users {
    /// The largest user profile ([`User`]: id, username, display name, avatar url), encoded as
    /// stored, in bytes: 16 MiB less 1 KiB, which keeps room in its document for a rename to a
    /// username of up to [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES).
    pub const MAX_PROFILE_BYTES: usize = crate::validate::MAX_DOCUMENT_BYTES - 1024;

    /// The largest rest of a user ([`Users::put_extended`]'s details), encoded, in bytes: 16 MiB
    /// less 1 KiB, which its document keeps for the user's id.
    pub const MAX_EXTENDED_BYTES: usize = crate::validate::MAX_DOCUMENT_BYTES - 1024;

    /// Creates a user (one `insert`).
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank id or username,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"user"`, `"username"`) for one
    /// over [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES),
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"user"`) for a profile over
    /// [`Users::MAX_PROFILE_BYTES`], all before any command;
    /// [`Error::AlreadyExists`] for an id or username taken, before anything is written.
    pub async fn create(&self, user: NewUser) -> Result<User> {
        Op::FeedUsersCreate
            .span()
            .run(async move {
                validate::user_id("user", &user.id)?;
                validate::id("username", &user.username)?;
                let user = User {
                    id: user.id,
                    username: user.username,
                    display_name: user.display_name,
                    avatar_url: user.avatar_url,
                    revision: 0,
                };
                validate::encoded_size("user", &user, Self::MAX_PROFILE_BYTES)?;
                // The unique username index is what refuses a username taken.
                self.inner.backend.ensure_indexes().await?;
                let users = &self.inner.collections.users;
                match users.insert_one(bson::to_document(&user)?).await {
                    Ok(_) => Ok(user),
                    Err(error) if crate::backend::update_batch::is_duplicate_key(&error) => {
                        // Servers differ in naming the index in the message: ask which one clashed.
                        let id_taken = users
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
            })
            .await
    }

    /// A user's profile (one `find`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown user.
    pub async fn get(&self, id: &str) -> Result<User> {
        Op::FeedUsersGet
            .span()
            .run(async move { self.inner.user(id).await })
            .await
    }

    /// Stores the rest of a user (one `update`, upserting). The user must exist.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"user"`) for the id,
    /// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"extended user"`) for details
    /// over [`Users::MAX_EXTENDED_BYTES`], before any command; [`Error::NotFound`] for an
    /// unknown user (one more `find`).
    pub async fn put_extended<E: Serialize>(&self, id: &str, details: &E) -> Result<()> {
        Op::FeedUsersPutExtended
            .span()
            .run(async move {
                validate::user_id("user", id)?;
                let details = bson::to_bson(details)?;
                validate::encoded_size("extended user", &details, Self::MAX_EXTENDED_BYTES)?;
                self.inner.user(id).await?;
                self.inner
                    .collections
                    .extended_users
                    .update_one(doc! { "_id": id }, doc! { "$set": { "details": details } })
                    .upsert(true)
                    .await?;
                Ok(())
            })
            .await
    }

    /// The rest of a user (one `find`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when none was stored for this user.
    pub async fn get_extended<E: DeserializeOwned>(&self, id: &str) -> Result<ExtendedUser<E>> {
        Op::FeedUsersGetExtended
            .span()
            .run(async move {
                validate::user_id("user", id)?;
                let extended_users = &self.inner.collections.extended_users;
                let found = extended_users
                    .find_one(doc! { "_id": id })
                    .await?
                    .ok_or_else(|| Error::not_found(Entity::ExtendedUser, id))?;
                bson_ext::decode(extended_users.name(), found)
            })
            .await
    }

    /// Renames a user and updates every copy of their chunk before returning.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) or
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (id or username, over
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES)), before any command; [`Error::NotFound`],
    /// [`Error::AlreadyExists`] (username taken),
    /// all before anything is written but the durable propagation record, which finds nothing
    /// to do.
    pub async fn rename(&self, id: &str, username: &str) -> Result<PropagationStatus> {
        let propagate_now = |propagation| propagation::run(&self.inner, propagation, None, None);
        self.rename_then(Op::FeedUsersRename, id, username, propagate_now)
            .await
    }

    /// Renames a user and leaves the copies to a background worker (a `propagate` job). Returns
    /// the propagation's id.
    ///
    /// The job runs batches until its claim's [`crate::jobs::Job::deadline`] (at least one), then
    /// queues a new job that resumes from the recorded progress, so a long propagation never
    /// holds a claim past its lease.
    pub async fn rename_in_background(&self, id: &str, username: &str) -> Result<ObjectId> {
        let queue_propagation = |propagation| async move {
            FeedJob::Propagate { propagation }
                .enqueue(&self.inner.jobs)
                .await?;
            Ok(propagation)
        };
        self.rename_then(
            Op::FeedUsersRenameInBackground,
            id,
            username,
            queue_propagation,
        )
        .await
    }

    /// Renames the user in `op`'s span ([`Users::start_rename`]), then runs `propagate` on the
    /// recorded propagation's id: the copies updated at once or left to a job.
    async fn rename_then<T, Fut>(
        &self,
        op: Op,
        id: &str,
        username: &str,
        propagate: impl FnOnce(ObjectId) -> Fut,
    ) -> Result<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        op.span()
            .run(async move {
                let propagation = self.start_rename(id, username).await?;
                propagate(propagation).await
            })
            .await
    }

    /// Records a propagation, then renames the user: if the rename fails, the record only
    /// re-propagates the current chunk, which changes nothing.
    async fn start_rename(&self, id: &str, username: &str) -> Result<ObjectId> {
        validate::user_id("user", id)?;
        validate::id("username", username)?;
        let inner = &self.inner;
        inner.backend.ensure_indexes().await?;
        let propagation = propagation::record(inner, id).await?;
        // Where updates are not atomic, findAndModify reads, modifies and writes back without
        // isolation: two renames at once would both write the same revision. There it runs
        // under the user's lock (+2 commands).
        let renamed = inner
            .backend
            .exclusive(&[user_lock(id)], async {
                Ok(inner
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
            // MongoDB reports a duplicate key; other servers may report an internal error naming
            // the index.
            Ok(Err(error)) => {
                let taken = inner
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
        inner
            .collections
            .propagations
            .delete_one(doc! { "_id": propagation })
            .await?;
        outcome
    }

    /// Copies a user's current chunk into every document that embeds it (idempotent; for
    /// repairs).
    pub async fn propagate(&self, id: &str) -> Result<PropagationStatus> {
        Op::FeedUsersPropagate
            .span()
            .run(async move {
                self.inner.user(id).await?;
                let propagation = propagation::record(&self.inner, id).await?;
                propagation::run(&self.inner, propagation, None, None).await
            })
            .await
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
        Op::FeedUsersRunPropagation
            .span()
            .run(async move { propagation::run(&self.inner, propagation, max_batches, None).await })
            .await
    }

    /// Unfinished propagations (interrupted by a crash, a timeout or a batch limit), oldest
    /// first.
    pub async fn unfinished_propagations(&self) -> Result<Vec<ObjectId>> {
        Op::FeedUsersUnfinishedPropagations
            .span()
            .run(async move {
                let records: Vec<bson::Document> = self
                    .inner
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
            })
            .await
    }

    /// Finishes every unfinished propagation; run at startup or on a timer. Returns how many
    /// were finished.
    pub async fn resume_propagations(&self) -> Result<usize> {
        Op::FeedUsersResumePropagations
            .span()
            .run(async move {
                let unfinished = self.unfinished_propagations().await?;
                for propagation in &unfinished {
                    match self.run_propagation(*propagation, None).await {
                        // A user deleted since: nothing left to copy.
                        Err(Error::NotFound {
                            what: Entity::User, ..
                        }) => {
                            self.inner
                                .collections
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
            })
            .await
    }
}
