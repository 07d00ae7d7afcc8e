//! The jobs workers run: a page of a post's fan-out, and the rebuild of a returning user's inbox.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bson::{doc, Document};
use futures::TryStreamExt;

use super::{DeliveryState, FAN_OUT, REBUILD};
use crate::bson_ext;
use crate::bson_ext::derived_id;
use crate::error::{Error, Result};
use crate::graph::FollowSource;
use crate::inbox::Message;
use crate::jobs::{Job, JobHandler};
use crate::observe;
use crate::page;
use crate::page::{Cursor, PageRequest};
use crate::payload::Payload;

impl<P: Payload> DeliveryState<P> {
    /// The ones of `users` seen within the dormancy period.
    pub(super) async fn active(&self, users: &[String]) -> Result<Vec<String>> {
        // An empty `$in` matches nothing, and on a shard key it crashes a sharded engine (see
        // `src/server/family/`): no command.
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let since = bson::DateTime::from_millis(
            bson::DateTime::now().timestamp_millis() - self.dormant_after.as_millis() as i64,
        );
        let seen: Vec<Document> = self
            .activity
            .find(doc! { "_id": { "$in": users }, "last_seen": { "$gte": since } })
            .projection(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        let seen: std::collections::HashSet<&str> =
            seen.iter().filter_map(|d| d.get_str("_id").ok()).collect();
        Ok(users
            .iter()
            .filter(|user| seen.contains(user.as_str()))
            .cloned()
            .collect())
    }

    /// The newest `limit` posts of `authors` (sent at or after `since`, if given) from the
    /// outbox, newest first.
    pub(super) async fn newest_posts(
        &self,
        authors: &[String],
        since: Option<bson::DateTime>,
        limit: usize,
    ) -> Result<Vec<Message<P>>> {
        if authors.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut filter = doc! {};
        if let Some(since) = since {
            filter.insert("sent", doc! { "$gte": since });
        }
        let found = self
            .backend
            .newest_of_keys(&self.outbox, "from", authors, filter, limit)
            .await?;
        let outbox = self.outbox.name();
        found
            .into_iter()
            .map(|found| decode_post(outbox, found))
            .collect()
    }

    /// Delivers `posts` (newest first) to `owner`, oldest first, so that even an inbox kept in
    /// arrival order receives them in time order.
    pub(super) async fn backfill(&self, owner: &str, posts: &[Message<P>]) -> Result<()> {
        let owner = [owner.to_owned()];
        for post in posts.iter().rev() {
            self.inbox.deliver(post, &owner).await?;
        }
        Ok(())
    }

    /// Takes `author`'s delivered posts back out of the inboxes of those `recipients` who no
    /// longer follow `author` (they unfollowed while a delivery to them was under way). One
    /// `find`, plus a removal per such recipient; a bucketed inbox keeps what it received.
    pub(super) async fn take_back_unless_following(
        &self,
        author: &str,
        recipients: &[String],
    ) -> Result<()> {
        let still = self.graph.followers_among(author, recipients).await?;
        for gone in recipients
            .iter()
            .filter(|r| !still.contains(r) && r.as_str() != author)
        {
            match self.inbox.remove_from(gone, author).await {
                Ok(_) | Err(Error::Unsupported { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// [`Error::Decode`] for a job of this delivery that it cannot run (`reason`).
    fn corrupt_job(&self, job: &Job, reason: impl fmt::Display) -> Error {
        bson_ext::corrupt(self.jobs.collection_name(), Some(job.id.into()), reason)
    }

    /// One page of a post's fan-out, and the job for the next page.
    async fn fan_out(&self, job: &Job) -> Result<()> {
        let document = job
            .payload
            .get_document("message")
            .map_err(|_| self.corrupt_job(job, "a fan-out job without message"))?;
        let message: Message<P> = bson_ext::decode_with_id(
            self.jobs.collection_name(),
            Some(job.id.into()),
            document.clone(),
        )?;
        let after_text = job.payload.get_str("after").ok();
        let after = after_text
            .map(|text| followers_cursor(text, &message.from))
            .transpose()?;
        if after.is_none() {
            // The post's own outbox entry, in case the process that queued this job died
            // before writing it.
            let mut outbox = document.clone();
            outbox.remove("id");
            outbox.insert("_id", message.id.0);
            self.backend.insert_once(&self.outbox, outbox).await?;
        }
        let page = PageRequest {
            limit: self.batch,
            after,
        };
        let page = self.graph.followers(&message.from, page).await?;
        let followers: Vec<String> = page.items.into_iter().map(|s| s.owner).collect();
        let active = self.active(&followers).await?;
        if !active.is_empty() {
            self.inbox.deliver(&message, &active).await?;
            // A follower who unfollowed after the page was read gets the post taken back.
            self.take_back_unless_following(&message.from, &active)
                .await?;
        }
        observe::event!(
            debug,
            post = %message.id,
            followers = followers.len(),
            delivered = active.len(),
            first_page = after_text.is_none(),
            last_page = page.next.is_none(),
            "delivery page fanned out"
        );
        if let Some(next) = page.next {
            // Queued under an id derived from this job's own input (message and cursor), so a
            // re-run queues the same successor, once, whatever the followers are now.
            let key = format!("after:{}", after_text.unwrap_or(""));
            self.jobs
                .enqueue_once(
                    derived_id(message.id.0, &key),
                    FAN_OUT,
                    doc! { "message": document.clone(), "after": next.as_str() },
                )
                .await?;
        }
        Ok(())
    }

    /// Refills a returning user's inbox with the newest posts of whom they follow, then marks
    /// the inbox complete again.
    async fn rebuild(&self, job: &Job) -> Result<()> {
        let user = job
            .payload
            .get_str("user")
            .map_err(|_| self.corrupt_job(job, "a rebuild job without user"))?;
        let since = job.payload.get_datetime("since").ok().copied();
        let followees = self.graph.followees_of(user).await?;
        let posts = self
            .newest_posts(&followees, since, self.rebuild_limit)
            .await?;
        self.backfill(user, &posts).await?;
        // An `$unset`: unsetting twice unsets once.
        self.backend
            .command("end rebuild", || {
                self.activity.update_one(
                    doc! { "_id": user },
                    doc! { "$unset": { "rebuilding": "" } },
                )
            })
            .await
            .map(drop)
    }
}

/// A post as stored in the outbox, the collection `outbox`.
pub(super) fn decode_post<P: Payload>(outbox: &str, mut document: Document) -> Result<Message<P>> {
    let id = document.remove("_id");
    if let Some(id) = &id {
        document.insert("id", id.clone());
    }
    bson_ext::decode_with_id(outbox, id, document)
}

/// The cursor a fan-out job of `author`'s post continues after: the text of a page of
/// `author`'s followers' cursor. A job queued by an older version holds a cursor of an older
/// format, read as the same position, so a fan-out under way across an upgrade still reaches
/// every follower: `g.<user id>` (before cursors took their one format, 0.1.0), or a `v1` cursor
/// of tag `g` (before cursors were bound to their list).
fn followers_cursor(text: &str, author: &str) -> Result<Cursor> {
    let list = crate::graph::List::Followers(author);
    let legacy = match page::v1_fields(text) {
        Some(("g", fields)) => fields.into_iter().next(),
        Some(_) => None,
        None => text.strip_prefix("g.").map(str::to_owned),
    };
    match (text.parse(), legacy) {
        (Ok(cursor), _) => Ok(cursor),
        (Err(_), Some(user)) if !user.is_empty() => Ok(crate::graph::cursor_after(list, &user)),
        (Err(error), _) => Err(error),
    }
}

/// The job handler of a [`super::Delivery`].
pub(super) struct Handler<P: Payload>(pub(super) Arc<DeliveryState<P>>);

impl<P: Payload> fmt::Debug for Handler<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Handler").field(&self.0).finish()
    }
}

#[async_trait]
impl<P: Payload> JobHandler for Handler<P> {
    async fn handle(&self, job: &Job) -> Result<()> {
        match job.kind.as_str() {
            FAN_OUT => self.0.fan_out(job).await,
            REBUILD => self.0.rebuild(job).await,
            other => Err(self
                .0
                .corrupt_job(job, format!("a delivery job of unknown kind `{other}`"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Invalid;

    #[test]
    fn fan_out_jobs_of_any_format_continue_after_the_same_follower() {
        let list = crate::graph::List::Followers("ann");
        let cursor = crate::graph::cursor_after(list, "bob.smith");
        assert_eq!(followers_cursor(cursor.as_str(), "ann").unwrap(), cursor);
        assert_eq!(followers_cursor("g.bob.smith", "ann").unwrap(), cursor);
        // The `v1` text of the same position (before cursors were scoped).
        let v1 = "v1.g.bob%2Esmith";
        let check = v1.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
            (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
        });
        let v1 = format!("{v1}.{check:08x}");
        assert_eq!(followers_cursor(&v1, "ann").unwrap(), cursor);
        for bad in ["", "g.", "bob", "v1.g.bob.00000000"] {
            assert!(
                matches!(
                    followers_cursor(bad, "ann"),
                    Err(Error::InvalidInput {
                        reason: Invalid::Cursor { .. }
                    })
                ),
                "{bad:?}"
            );
        }
    }
}
