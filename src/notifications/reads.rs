//! Pages, counts, marks and trimming of a recipient's groups.

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::results::UpdateResult;

use super::{Counts, Group, Groups, Kind};
use crate::bson_ext;
use crate::error::{Entity, Error, Result};
use crate::page::{self, invalid, Cursor};
use crate::page::{Page, PageRequest};
use crate::payload::Payload;

/// The tag of the store's cursors.
const CURSOR_TAG: &str = "ng";

/// The scope of the cursors of `recipient`'s notifications.
fn cursor_scope(recipient: &str) -> page::Scope {
    page::Scope::new("recipient's notifications", &[recipient])
}

impl Groups {
    pub(super) async fn page<D: Payload>(
        &self,
        recipient: &str,
        page: PageRequest,
    ) -> Result<Page<Group<D>>> {
        let mut filter = doc! { "recipient": recipient, "count": { "$gt": 0_i64 } };
        if let Some(after) = &page.after {
            let [updated, id] = after.fields(CURSOR_TAG, cursor_scope(recipient))?;
            let updated = page::parse_time(&updated)?;
            if id.is_empty() {
                return Err(invalid("no group id"));
            }
            filter.insert(
                "$or",
                vec![
                    doc! { "updated": { "$lt": updated } },
                    doc! { "updated": updated, "_id": { "$lt": id } },
                ],
            );
        }
        let mut find = self
            .groups
            .find(filter)
            .sort(doc! { "updated": -1, "_id": -1 })
            .limit(page.fetch() as i64)
            .batch_size(page.fetch() as u32);
        if let Some(members) = self
            .backend
            .dialect()
            .await?
            .last_of_array(self.recent_actors)
        {
            // Every field named: servers differ on whether a lone `$slice` keeps the others.
            find = find.projection(doc! {
                "members": members,
                "recipient": 1, "kind": 1, "target": 1, "window": 1, "count": 1,
                "updated": 1, "seen": 1, "read": 1, "data": 1,
            });
        }
        let documents: Vec<Document> = find.await?.try_collect().await?;
        let groups = documents
            .into_iter()
            .map(|document| self.decode(document))
            .collect::<Result<Vec<Group<D>>>>()?;
        Ok(Page::from_overfetch(groups, page.limit, |last| {
            let fields = [&page::time_field(last.updated), &last.id];
            Cursor::new(
                CURSOR_TAG,
                cursor_scope(recipient),
                &fields.map(String::as_str),
            )
        }))
    }

    pub(super) fn decode<D: Payload>(&self, mut document: Document) -> Result<Group<D>> {
        let name = self.groups.name();
        let id = document.get("_id").cloned();
        let corrupt = |what: &str| bson_ext::corrupt(name, id.clone(), what);
        let text = |document: &Document, key: &str| -> Result<String> {
            document
                .get_str(key)
                .map(str::to_owned)
                .map_err(|_| corrupt(key))
        };
        let members: Vec<String> = match document.remove("members") {
            Some(Bson::Array(members)) => members
                .into_iter()
                .rev()
                .take(self.recent_actors)
                .filter_map(|actor| actor.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        let data = match document.remove("data") {
            Some(Bson::Null) | None => None,
            Some(data) => Some(bson_ext::decode_with_id(name, id.clone(), data)?),
        };
        Ok(Group {
            id: text(&document, "_id")?,
            recipient: text(&document, "recipient")?,
            kind: Kind::from_name(&text(&document, "kind")?),
            target: text(&document, "target")?,
            window: document
                .get_datetime("window")
                .map_err(|_| corrupt("window"))
                .copied()?,
            actors: members,
            actor_count: bson_ext::count(&document, "count"),
            updated: document
                .get_datetime("updated")
                .map_err(|_| corrupt("updated"))
                .copied()?,
            seen: document.get_bool("seen").unwrap_or(false),
            read: document.get_bool("read").unwrap_or(false),
            data,
        })
    }

    /// One `aggregate` over the recipient's unread groups, grouped by whether they were seen
    /// (an unseen group is unread too).
    pub(super) async fn counts(&self, recipient: &str) -> Result<Counts> {
        let rows: Vec<Document> = self
            .groups
            .aggregate(vec![
                doc! { "$match": {
                    "recipient": recipient, "read": false, "count": { "$gt": 0_i64 },
                } },
                doc! { "$group": { "_id": "$seen", "groups": { "$sum": 1 } } },
            ])
            .await?
            .try_collect()
            .await?;
        let mut counts = Counts::default();
        for row in rows {
            let groups = bson_ext::count(&row, "groups");
            counts.unread += groups;
            if row.get_bool("_id") != Ok(true) {
                counts.unseen += groups;
            }
        }
        Ok(counts)
    }

    /// Sets `marks` on the recipient's groups updated no later than `until` (all for `None`)
    /// that lack them. A `$set`: a retry sets the same values.
    pub(super) async fn mark(
        &self,
        recipient: &str,
        until: Option<bson::DateTime>,
        marks: Document,
    ) -> Result<u64> {
        let missing: Vec<Document> = marks
            .keys()
            .map(|mark| doc! { mark.as_str(): false })
            .collect();
        let mut filter = doc! { "recipient": recipient, "$or": missing };
        if let Some(until) = until {
            filter.insert("updated", doc! { "$lte": until });
        }
        let update = doc! { "$set": marks };
        let result = self
            .update_all("mark notifications", &filter, &update)
            .await?;
        Ok(result.modified_count)
    }

    /// Applies `update` to every group `filter` selects (one `update_many`), retried on
    /// transient failures as `operation`: for an update whose repeat changes nothing (a `$set`,
    /// or one that the groups it changed no longer match).
    pub(super) async fn update_all(
        &self,
        operation: &'static str,
        filter: &Document,
        update: &Document,
    ) -> Result<UpdateResult> {
        self.backend
            .command(operation, || {
                self.groups.update_many(filter.clone(), update.clone())
            })
            .await
    }

    pub(super) async fn mark_read(&self, recipient: &str, group: &str) -> Result<()> {
        let filter = doc! { "_id": group, "recipient": recipient, "count": { "$gt": 0_i64 } };
        let update = doc! { "$set": { "seen": true, "read": true } };
        let result = self
            .backend
            .command("mark notification read", || {
                self.groups.update_one(filter.clone(), update.clone())
            })
            .await?;
        if result.matched_count == 0 {
            return Err(Error::not_found(Entity::Notification, group));
        }
        Ok(())
    }

    pub(super) async fn trim(&self, recipient: &str, keep: usize) -> Result<u64> {
        // Keyed events' records (see `notify_keyed`) are not groups: they stay.
        let groups_only = doc! { "$exists": false };
        let first_gone = self
            .groups
            .find_one(doc! { "recipient": recipient, crate::idempotency::KEY: groups_only.clone() })
            .sort(doc! { "updated": -1, "_id": -1 })
            .skip(keep as u64)
            .projection(doc! { "updated": 1 })
            .await?;
        let Some(first_gone) = first_gone else {
            return Ok(0);
        };
        let (Ok(updated), Some(id)) = (first_gone.get_datetime("updated"), first_gone.get("_id"))
        else {
            return Err(bson_ext::corrupt(
                self.groups.name(),
                first_gone.get("_id").cloned(),
                "updated",
            ));
        };
        let older = doc! {
            "recipient": recipient,
            crate::idempotency::KEY: groups_only,
            "$or": [
                { "updated": { "$lt": updated } },
                { "updated": updated, "_id": { "$lte": id.clone() } },
            ],
        };
        // A filtered delete: a retry deletes what is left of the same range.
        let deleted = self
            .backend
            .command("trim notifications", || {
                self.groups.delete_many(older.clone())
            })
            .await?;
        Ok(deleted.deleted_count)
    }
}
