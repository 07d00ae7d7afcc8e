//! Bounded sorted lists held in documents (a feed's items): an item merged into many lists at
//! once, each list kept sorted, capped and free of repeats.
//!
//! Where single-document updates are atomic: one unordered `insert` creating missing lists and
//! one `update` of all of them, a `$push` with `$each`, `$sort` and `$slice`, whose filter
//! excludes a list already holding the item (so a repeat changes nothing). Where they are not
//! (FerretDB 1.x, which also ignores `$sort` and `$slice` in `$push`): a group of lists at a
//! time under their locks, read, merged here and written back with `$set`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use bson::{doc, Bson, Document};
use mongodb::Collection;

use super::Backend;
use crate::error::{Error, Result};

/// Lists created and updated per command where updates are atomic.
const ATOMIC_GROUP: usize = 1000;
/// Lists merged per locked group elsewhere.
const LOCKED_GROUP: usize = 50;

/// Where the lists live and how they are ordered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SortedLists<'a> {
    /// One document per list, `{_id: key, <field>: [..]}`.
    pub(crate) collection: &'a Collection<Document>,
    /// The array holding the items.
    pub(crate) field: &'static str,
    /// The field that identifies an item: a list holds an item once.
    pub(crate) identity: &'static str,
    /// The order, as a `$sort` of the items (fields of numbers, ObjectIds, strings or dates).
    pub(crate) sort: &'a Document,
    /// The most items a list keeps.
    pub(crate) cap: usize,
    /// The lock key of a list, where writers take turns.
    pub(crate) lock_key: fn(&str) -> String,
}

impl Backend {
    /// Merges each `(list key, item)` of `entries` into its list (see the [module docs](self)).
    /// Idempotent: an item already in its list is not added again.
    pub(crate) async fn merge_into_sorted_lists(
        &self,
        lists: SortedLists<'_>,
        entries: &[(String, Document)],
    ) -> Result<()> {
        if self.locking().await? {
            for chunk in entries.chunks(LOCKED_GROUP) {
                let keys: Vec<String> = chunk.iter().map(|(key, _)| key.clone()).collect();
                let locks: Vec<String> = keys.iter().map(|key| (lists.lock_key)(key)).collect();
                self.exclusive(&locks, self.merge_read_write(lists, chunk, &keys))
                    .await?;
            }
            return Ok(());
        }
        // Lists that get the same item share one update.
        let mut groups: BTreeMap<Vec<u8>, (&Document, Vec<String>)> = BTreeMap::new();
        for (key, item) in entries {
            groups
                .entry(bson::to_vec(item)?)
                .or_insert_with(|| (item, Vec::new()))
                .1
                .push(key.clone());
        }
        for (item, keys) in groups.values() {
            for chunk in keys.chunks(ATOMIC_GROUP) {
                self.push_sorted(lists, chunk, item).await?;
            }
        }
        Ok(())
    }

    /// One `insert` creating the missing lists of `keys`, one `update` pushing `item` into all.
    async fn push_sorted(
        &self,
        lists: SortedLists<'_>,
        keys: &[String],
        item: &Document,
    ) -> Result<()> {
        let empty: Vec<Document> = keys
            .iter()
            .map(|key| doc! { "_id": key, lists.field: [] })
            .collect();
        self.insert_many_once(lists.collection, empty).await?;
        let identity = item.get(lists.identity).cloned().unwrap_or(Bson::Null);
        let filter = doc! {
            "_id": { "$in": keys },
            format!("{}.{}", lists.field, lists.identity): { "$ne": identity },
        };
        let update = doc! { "$push": { lists.field: {
            "$each": [item.clone()],
            "$sort": lists.sort.clone(),
            "$slice": lists.cap as i64,
        } } };
        self.command("merge into lists", || {
            lists.collection.update_many(filter.clone(), update.clone())
        })
        .await
        .map(drop)
    }

    /// Under the lists' locks: read, merge, write back.
    async fn merge_read_write(
        &self,
        lists: SortedLists<'_>,
        entries: &[(String, Document)],
        keys: &[String],
    ) -> Result<()> {
        let found: Vec<Document> = self
            .find_all("read lists", || {
                lists.collection.find(doc! { "_id": { "$in": keys } })
            })
            .await?;
        let mut held: HashMap<String, Vec<Document>> = HashMap::with_capacity(keys.len());
        for list in found {
            let key = list.get_str("_id").unwrap_or_default().to_owned();
            let items = list
                .get_array(lists.field)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|i| i.as_document().cloned())
                        .collect()
                })
                .unwrap_or_default();
            held.insert(key, items);
        }
        let mut batch = self.update_batch(lists.collection.name());
        for (key, item) in entries {
            let items = held.entry(key.clone()).or_default();
            items.retain(|existing| existing.get(lists.identity) != item.get(lists.identity));
            items.push(item.clone());
            items.sort_by(|a, b| compare(lists.sort, a, b));
            items.truncate(lists.cap);
            let array: Vec<Bson> = items.iter().cloned().map(Bson::Document).collect();
            batch.push(
                doc! { "_id": key },
                doc! { "$set": { lists.field: array } },
                true,
            )?;
        }
        let outcome = batch.run().await?;
        if outcome.suspects().next().is_some() {
            // Under the locks nobody else writes these lists: report it; the caller retries.
            return Err(Error::contention("merge into lists", 1));
        }
        Ok(())
    }
}

/// `a` against `b` in the order of `sort` (`{field: 1 | -1, ..}`).
fn compare(sort: &Document, a: &Document, b: &Document) -> Ordering {
    for (field, direction) in sort {
        let ordering = compare_values(a.get(field), b.get(field));
        let ordering = if matches!(direction, Bson::Int32(d) if *d < 0)
            || matches!(direction, Bson::Int64(d) if *d < 0)
            || matches!(direction, Bson::Double(d) if *d < 0.0)
        {
            ordering.reverse()
        } else {
            ordering
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

/// Two values of a sort field: numbers by value, ObjectIds, strings and dates in their order; a
/// missing value first.
fn compare_values(a: Option<&Bson>, b: Option<&Bson>) -> Ordering {
    fn number(value: &Bson) -> Option<f64> {
        match value {
            Bson::Double(v) => Some(*v),
            Bson::Int32(v) => Some(f64::from(*v)),
            Bson::Int64(v) => Some(*v as f64),
            _ => None,
        }
    }
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => match (number(a), number(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => match (a, b) {
                (Bson::ObjectId(x), Bson::ObjectId(y)) => x.cmp(y),
                (Bson::String(x), Bson::String(y)) => x.cmp(y),
                (Bson::DateTime(x), Bson::DateTime(y)) => x.cmp(y),
                _ => Ordering::Equal,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;

    #[test]
    fn sorts_by_score_then_newer_id() {
        let sort = doc! { "score": -1, "post": -1 };
        let (old, new) = (ObjectId::new(), ObjectId::new());
        let mut items = [
            doc! { "post": old, "score": 2.0 },
            doc! { "post": new, "score": 2.0 },
            doc! { "post": ObjectId::new(), "score": 5.0 },
        ];
        items.sort_by(|a, b| compare(&sort, a, b));
        let scores: Vec<f64> = items.iter().map(|i| i.get_f64("score").unwrap()).collect();
        assert_eq!(scores, [5.0, 2.0, 2.0]);
        assert_eq!(
            items[1].get_object_id("post").unwrap(),
            new,
            "ties to the newer post"
        );
    }
}
