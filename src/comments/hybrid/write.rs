//! Writes: the push that posts a comment, and the guarded change that edits and deletes.

use bson::{doc, Document};

use super::{
    check_slug, number, page_id, Entry, HybridPages, ATTEMPTS, FLOOR, LAST_POSTED, STRATEGY,
};
use crate::backend::update_batch::is_duplicate_key;
use crate::bson_ext::{self, now_or_after};
use crate::comments::{discussion_lock, validate, CommentStore};
use crate::error::{Error, Result};

impl HybridPages {
    /// Pushes `entry` onto the last page, opening the next page when that one is full, and
    /// stamps its `posted` for the place it takes: never before the newest comment of that page
    /// (its `last_posted`, checked in the push's filter) or of the page before (the `floor`
    /// recorded with the page counter).
    pub(super) async fn push(&self, discussion: &str, entry: &mut Entry) -> Result<()> {
        let registered = self.registered(discussion).await?;
        let mut page = number(&registered, "last_page");
        let mut floor = bson_ext::date(&registered, FLOOR);
        // Whether an attempt failed after it may have landed.
        let mut uncertain = false;
        for _ in 0..ATTEMPTS {
            entry.body.posted = now_or_after(floor);
            let (pushed, tries) = self.push_onto_page(discussion, entry, page).await?;
            if let Some(posted) = pushed {
                entry.body.posted = posted;
                return Ok(());
            }
            uncertain |= tries > 1;
            if uncertain {
                if let Some(stored) = self.find_slug(discussion, &entry.slug).await? {
                    entry.body.posted = stored.body.posted;
                    return Ok(());
                }
            }
            (page, floor) = self.page_after_refusal(discussion, page, floor).await?;
        }
        Err(Error::contention("post comment", ATTEMPTS))
    }

    /// The discussion's registry document (one `find`), created first (one `insert` of the
    /// `_id`, which takes no lock) where this store creates discussions on first use.
    async fn registered(&self, discussion: &str) -> Result<Document> {
        let read = || {
            self.backend
                .retry("read discussion", || self.registry.find(discussion))
        };
        match read().await? {
            Some(registered) => Ok(registered),
            None if self.create_discussions => {
                self.create_discussion(discussion).await?;
                read()
                    .await?
                    .ok_or_else(|| validate::no_discussion(discussion))
            }
            None => Err(validate::no_discussion(discussion)),
        }
    }

    /// One push of `entry` onto `page` (an upsert, retried): the `posted` it landed with, `None`
    /// when the page refused it; and how many tries it took.
    async fn push_onto_page(
        &self,
        discussion: &str,
        entry: &Entry,
        page: i64,
    ) -> Result<(Option<bson::DateTime>, u32)> {
        let filter = doc! {
            "_id": page_id(discussion, page),
            "discussion_id": discussion,
            "page": page,
            "count": { "$lt": self.page_size as i64 },
            LAST_POSTED: { "$not": { "$gt": entry.body.posted } },
            // Never pushed twice: a retry after a lost reply matches nothing (and its
            // upsert meets the page's unique key).
            "comments.slug": { "$ne": &entry.slug },
        };
        let update = doc! {
            "$push": { "comments": bson::to_bson(entry)? },
            "$inc": { "count": 1_i64, "visible": 1_i64 },
            "$max": { LAST_POSTED: entry.body.posted },
        };
        let mut tries = 0;
        let (slug, posted) = (entry.slug.clone(), entry.body.posted);
        let pushed = self
            .backend
            .retry("post comment", || {
                tries += 1;
                let again = tries > 1;
                let slug = slug.clone();
                let action = self
                    .pages
                    .update_one(filter.clone(), update.clone())
                    .upsert(true);
                async move {
                    // Where the server matches `$ne` on an array path when any element
                    // differs, the filter cannot stop a second push: a retry looks for the
                    // comment itself first.
                    if again {
                        if let Some(stored) = self.find_slug(discussion, &slug).await? {
                            return Ok(Some(stored.body.posted));
                        }
                    }
                    match action.await {
                        Ok(_) => Ok(Some(posted)),
                        Err(error) if is_duplicate_key(&error) => Ok(None),
                        Err(error) => Err(error.into()),
                    }
                }
            })
            .await?;
        Ok((pushed, tries))
    }

    /// After `page` refused a push (full, just created by another writer, or holding a later
    /// comment): the page and floor to try next, advancing the discussion past a full page.
    async fn page_after_refusal(
        &self,
        discussion: &str,
        page: i64,
        floor: Option<bson::DateTime>,
    ) -> Result<(i64, Option<bson::DateTime>)> {
        let existing = self
            .backend
            .command("read page", || {
                self.pages
                    .find_one(doc! { "discussion_id": discussion, "page": page })
                    .projection(doc! { "count": 1, LAST_POSTED: 1 })
            })
            .await?;
        let last_posted = existing
            .as_ref()
            .and_then(|p| bson_ext::date(p, LAST_POSTED));
        let floor = bson_ext::later(floor, last_posted);
        let full = existing.is_some_and(|p| number(&p, "count") >= self.page_size as i64);
        if !full {
            return Ok((page, floor));
        }
        // The seed's guard: only a writer that saw `page` as the last advances it. The
        // next page starts after this one's newest comment.
        let mut advance = doc! { "$set": { "last_page": page + 1 } };
        if let Some(last_posted) = last_posted {
            advance.insert("$max", doc! { FLOOR: last_posted });
        }
        // Filtered by the page it names: applying it twice advances once.
        self.backend
            .command("open comment page", || {
                self.registry.discussions.update_one(
                    doc! { "_id": discussion, "last_page": page },
                    advance.clone(),
                )
            })
            .await?;
        Ok((page + 1, floor))
    }

    /// Sets fields of the comment `slug` if it is not deleted and passes `check`; returns the
    /// comment as it was (`Err` if it was deleted).
    pub(super) async fn change(
        &self,
        discussion: &str,
        slug: &str,
        check: impl Fn(&Entry) -> Result<()>,
        set: impl Fn(&str) -> Document,
        visible: i64,
    ) -> Result<std::result::Result<Entry, Entry>> {
        // Before the lock, which is a write where updates are not atomic.
        validate::check_discussion(discussion)?;
        check_slug(slug)?;
        self.backend
            .exclusive_one(&discussion_lock(STRATEGY, discussion), async {
                let (page, index) = self
                    .backend
                    .retry("read page", || self.locate(discussion, slug))
                    .await?;
                let entry = page.comments[index].clone();
                if entry.body.deleted {
                    return Ok(Err(entry));
                }
                check(&entry)?;
                let field = format!("comments.{index}");
                let mut update = doc! { "$set": set(&field) };
                if visible != 0 {
                    update.insert("$inc", doc! { "visible": visible });
                }
                let filter = doc! {
                    "_id": page.id.clone(),
                    // The shard key's prefix, so a sharded cluster routes it to one shard.
                    "discussion_id": discussion,
                    format!("{field}.slug"): slug,
                    format!("{field}.deleted"): false,
                };
                // A `$set` (an edit's retry sets the same values again), whose `visible` change
                // comes with `deleted: false` in the filter: a tombstone's retry matches nothing.
                let result = self
                    .backend
                    .command("change comment", || {
                        self.pages.update_one(filter.clone(), update.clone())
                    })
                    .await?;
                if result.matched_count == 0 {
                    // Deleted between the read and the update.
                    return Ok(Err(entry));
                }
                Ok(Ok(entry))
            })
            .await
    }
}
