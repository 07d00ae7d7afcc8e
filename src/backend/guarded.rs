//! Guarded updates: many single-document updates, each applied only if its document passes its
//! guards, and reported when it was not (or when its fate is unknown).
//!
//! What a data model says: "push this into document `_id` if its `count` is below 50 and its
//! `last_sent` is not after this message". How that is made safe is the server family's:
//!
//! - where single-document updates are atomic, the guards go into each update's filter, and the
//!   server checks them in the same atomic step as the update: one `update` command of many
//!   statements ([`super::update_batch`]);
//! - where they are not (FerretDB 1.x), the caller holds the documents' locks
//!   ([`Backend::exclusive_in_rounds`](super::Backend::exclusive_in_rounds)), the documents are
//!   read by `_id` and the guards checked here, and each update that passes is sent addressed by
//!   `_id` alone (the one filter FerretDB 1.x evaluates without decoding the whole collection).
//!
//! Either way the caller gets the same [`GuardedOutcome`], and a statement whose command failed
//! transiently is reported as unknown, never sent again blindly: the caller checks what landed.
//!
//! One guard is kept in time order rather than checked: [`Guard::InOrder`], "the entry this
//! update pushes is stamped no earlier than the document's newest". Where the server runs update
//! pipelines ([`Capabilities::pipeline_updates`](crate::server::Capabilities::pipeline_updates)) the
//! update is sent as a pipeline that raises the entry's stamp to the document's newest in the
//! same atomic step, so concurrent pushes into one document never refuse each other; elsewhere
//! a document holding a later stamp refuses the update, and the caller tries again later. Under
//! 16 concurrent senders on DocumentDB, refusals made a bucketed send's slowest 1% take 9 to 23
//! commands (docs/BENCHMARKS.md, "Sustained load").

use bson::{doc, Bson, Document};

use super::Backend;
use crate::error::{Error, Result};

/// A condition a document must meet for its update to apply. A document that does not exist
/// meets every guard (its update, an upsert, creates it).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Guard {
    /// The integer field is below the value (a missing field counts as 0).
    Below(&'static str, i64),
    /// The date field is not after the value (a missing field passes).
    NotAfter(&'static str, bson::DateTime),
    /// No element of the array field has `field` equal to the value (a missing array passes):
    /// an entry is never pushed twice into one document.
    Lacks {
        array: &'static str,
        field: &'static str,
        value: Bson,
    },
    /// The entry the update `$push`es onto `array` has its date field `stamp` at or after the
    /// document's date field `newest`, and `newest` follows it (the update's `$max`): entries
    /// stay in time order. `at` is the stamp the update carries. See the [module docs](self):
    /// raised where the server runs update pipelines, a [`Guard::NotAfter`] on `newest`
    /// elsewhere.
    InOrder {
        array: &'static str,
        stamp: &'static str,
        newest: &'static str,
        at: bson::DateTime,
    },
}

impl Guard {
    /// The guard as a filter condition.
    fn condition(&self) -> (String, Bson) {
        match self {
            Guard::InOrder { newest, at, .. } => Guard::NotAfter(newest, *at).condition(),
            Guard::Below(field, value) => {
                (field.to_string(), Bson::Document(doc! { "$lt": *value }))
            }
            Guard::NotAfter(field, value) => (
                field.to_string(),
                Bson::Document(doc! { "$not": { "$gt": *value } }),
            ),
            Guard::Lacks {
                array,
                field,
                value,
            } => (
                format!("{array}.{field}"),
                Bson::Document(doc! { "$ne": value.clone() }),
            ),
        }
    }

    /// The field a document must be read with to check the guard.
    fn projected(&self) -> String {
        self.condition().0
    }

    /// Whether `document` (as read) passes the guard.
    fn passes(&self, document: &Document) -> bool {
        match self {
            Guard::InOrder { newest, at, .. } => Guard::NotAfter(newest, *at).passes(document),
            Guard::Below(field, value) => {
                crate::bson_ext::integer(document, field).unwrap_or(0) < *value
            }
            Guard::NotAfter(field, value) => {
                crate::bson_ext::date(document, field).is_none_or(|stored| stored <= *value)
            }
            Guard::Lacks {
                array,
                field,
                value,
            } => document.get_array(array).map_or(true, |elements| {
                !elements.iter().any(|element| {
                    matches!(element, Bson::Document(element) if element.get(field) == Some(value))
                })
            }),
        }
    }
}

/// One guarded update of the document with `_id` `id`, whose shard key fields hold `shard_key`
/// (added to the filter where the server evaluates them in its engine, so a `mongos` routes the
/// update to one shard; set on insert otherwise).
#[derive(Clone, Debug)]
pub(crate) struct GuardedUpdate {
    pub(crate) id: Bson,
    pub(crate) shard_key: Document,
    pub(crate) guards: Vec<Guard>,
    pub(crate) update: Document,
    /// Whether a missing document is created (an upsert).
    pub(crate) upsert: bool,
}

/// What became of a run of guarded updates.
#[derive(Debug, Default)]
pub(crate) struct GuardedOutcome {
    /// Updates to check before trying again, by position: their document failed a guard (or, for
    /// an upsert, existed already and failed it), or their command failed transiently and
    /// whether they landed is unknown.
    pub(crate) suspects: Vec<usize>,
    /// The transient failure that left some updates unknown, to back off on before checking.
    pub(crate) transient: Option<Error>,
}

impl Backend {
    /// Applies each of `updates` to its document in `collection` if the document passes the
    /// update's guards (see the [module docs](self)). The updates must be idempotent or be
    /// checked by the caller when reported: one reported as a suspect may have landed.
    pub(crate) async fn guarded_updates(
        &self,
        collection: &mongodb::Collection<Document>,
        updates: &[GuardedUpdate],
    ) -> Result<GuardedOutcome> {
        if updates.is_empty() {
            return Ok(GuardedOutcome::default());
        }
        if self.locking().await? {
            self.guarded_by_reading(collection, updates).await
        } else {
            let pipelines = self.capabilities().await?.pipeline_updates;
            self.guarded_in_filters(collection.name(), updates, pipelines)
                .await
        }
    }

    /// Atomic updates: the guards in each update's filter, or, for [`Guard::InOrder`] where the
    /// server runs update `pipelines`, in the update itself.
    async fn guarded_in_filters(
        &self,
        collection: &str,
        updates: &[GuardedUpdate],
        pipelines: bool,
    ) -> Result<GuardedOutcome> {
        let mut batch = self.update_batch(collection).report_unknown();
        for update in updates {
            let mut filter = doc! { "_id": update.id.clone() };
            filter.extend(update.shard_key.clone());
            let pipeline = pipelines.then(|| as_pipeline(update)).flatten();
            for guard in &update.guards {
                if pipeline.is_some() && matches!(guard, Guard::InOrder { .. }) {
                    continue;
                }
                let (field, condition) = guard.condition();
                filter.insert(field, condition);
            }
            match pipeline {
                Some(pipeline) => batch.push_pipeline(filter, pipeline, update.upsert)?,
                None => batch.push(filter, update.update.clone(), update.upsert)?,
            }
        }
        let outcome = batch.run().await?;
        Ok(GuardedOutcome {
            suspects: outcome.suspects().collect(),
            transient: outcome.transient,
        })
    }

    /// Where writers take turns (the caller holds the documents' locks): read the documents by
    /// `_id`, check the guards here, send the updates that pass addressed by `_id`.
    async fn guarded_by_reading(
        &self,
        collection: &mongodb::Collection<Document>,
        updates: &[GuardedUpdate],
    ) -> Result<GuardedOutcome> {
        let keys: Vec<(Bson, Document)> = updates
            .iter()
            .map(|update| (update.id.clone(), update.shard_key.clone()))
            .collect();
        let mut projection = doc! { "_id": 1 };
        for update in updates {
            for guard in &update.guards {
                projection.insert(guard.projected(), 1);
            }
        }
        let found = self
            .retry("read guarded documents", || {
                self.find_by_ids(collection, &keys, projection.clone())
            })
            .await?;
        let mut outcome = GuardedOutcome::default();
        let mut batch = self.update_batch(collection.name()).report_unknown();
        let mut sent = Vec::new();
        for (position, update) in updates.iter().enumerate() {
            let stored = found
                .iter()
                .find(|document| document.get("_id") == Some(&update.id));
            let passes = match stored {
                Some(document) => update.guards.iter().all(|guard| guard.passes(document)),
                None => update.upsert,
            };
            if !passes {
                outcome.suspects.push(position);
                continue;
            }
            let filter = self.by_id(update.id.clone(), &update.shard_key).await?;
            let mut change = update.update.clone();
            if update.upsert {
                // A new document takes its shard key from the filter where the filter names it.
                let on_insert: Document = update
                    .shard_key
                    .iter()
                    .filter(|(field, _)| !filter.contains_key(*field))
                    .map(|(field, value)| (field.clone(), value.clone()))
                    .collect();
                if !on_insert.is_empty() {
                    let mut set = change
                        .get_document("$setOnInsert")
                        .cloned()
                        .unwrap_or_default();
                    set.extend(on_insert);
                    change.insert("$setOnInsert", set);
                }
            }
            batch.push(filter, change, update.upsert)?;
            sent.push(position);
        }
        let run = batch.run().await?;
        outcome
            .suspects
            .extend(run.suspects().map(|index| sent[index]));
        outcome.suspects.sort_unstable();
        outcome.transient = run.transient;
        Ok(outcome)
    }
}

/// The update of `guarded` as a one-stage update pipeline whose pushed entry is stamped no
/// earlier than the document's newest, per its [`Guard::InOrder`]: the stamp is
/// `max(document's newest, the guard's at)`, given to the entry pushed onto the guard's array
/// and to the document's newest. Values are `$literal`, so application data that looks like a
/// field path (`"$5 off"`) stays data. `None` without such a guard, or for an update of other
/// operators than top-level `$push`, `$inc`, `$max` and `$set` (then the guard is a filter).
fn as_pipeline(guarded: &GuardedUpdate) -> Option<Vec<Document>> {
    let &Guard::InOrder {
        array,
        stamp,
        newest,
        at,
    } = guarded
        .guards
        .iter()
        .find(|guard| matches!(guard, Guard::InOrder { .. }))?
    else {
        return None;
    };
    let raised = doc! { "$max": [{ "$ifNull": [format!("${newest}"), at] }, at] };
    let mut set = Document::new();
    for (operator, fields) in &guarded.update {
        let Bson::Document(fields) = fields else {
            return None;
        };
        for (field, value) in fields {
            let path = format!("${field}");
            let computed = match operator.as_str() {
                "$push" => {
                    let mut entry = doc! { "$literal": value.clone() };
                    if field == array {
                        entry = doc! { "$mergeObjects": [entry, { stamp: raised.clone() }] };
                    }
                    doc! { "$concatArrays": [{ "$ifNull": [path, []] }, [entry]] }
                }
                "$inc" => doc! { "$add": [{ "$ifNull": [path, 0] }, value.clone()] },
                "$max" if field == newest => raised.clone(),
                "$max" => doc! { "$max": [path, { "$literal": value.clone() }] },
                "$set" => doc! { "$literal": value.clone() },
                _ => return None,
            };
            if field.contains('.') {
                return None;
            }
            set.insert(field.clone(), computed);
        }
    }
    Some(vec![doc! { "$set": set }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_read_as_filters_and_in_memory() {
        let at = bson::DateTime::from_millis(1_000);
        let below = Guard::Below("count", 50);
        let not_after = Guard::NotAfter("last_sent", at);
        assert_eq!(
            below.condition(),
            ("count".to_owned(), Bson::Document(doc! { "$lt": 50_i64 }))
        );
        assert_eq!(
            not_after.condition(),
            (
                "last_sent".to_owned(),
                Bson::Document(doc! { "$not": { "$gt": at } })
            )
        );
        let lacks = Guard::Lacks {
            array: "messages",
            field: "id",
            value: Bson::Int32(7),
        };
        assert_eq!(
            lacks.condition(),
            ("messages.id".to_owned(), Bson::Document(doc! { "$ne": 7 }))
        );
        assert!(lacks.passes(&doc! {}) && lacks.passes(&doc! { "messages": [{ "id": 6 }] }));
        assert!(!lacks.passes(&doc! { "messages": [{ "id": 6 }, { "id": 7 }] }));
        assert!(below.passes(&doc! { "count": 49_i64 }) && !below.passes(&doc! { "count": 50 }));
        assert!(below.passes(&doc! {}), "a missing count is 0");
        assert!(not_after.passes(&doc! {}) && not_after.passes(&doc! { "last_sent": at }));
        assert!(!not_after.passes(&doc! { "last_sent": bson::DateTime::from_millis(1_001) }));
    }

    #[test]
    fn an_in_order_push_is_a_pipeline_that_raises_its_stamp() {
        let at = bson::DateTime::from_millis(1_000);
        let push = GuardedUpdate {
            id: Bson::String("b".to_owned()),
            shard_key: doc! {},
            guards: vec![
                Guard::Below("count", 50),
                Guard::InOrder {
                    array: "messages",
                    stamp: "sent",
                    newest: "last_sent",
                    at,
                },
            ],
            update: doc! {
                "$push": { "messages": { "id": 7, "text": "$5 off", "sent": at } },
                "$inc": { "count": 1_i64 },
                "$max": { "last_sent": at },
            },
            upsert: true,
        };
        let raised = doc! { "$max": [{ "$ifNull": ["$last_sent", at] }, at] };
        let entry = doc! { "id": 7, "text": "$5 off", "sent": at };
        assert_eq!(
            as_pipeline(&push),
            Some(vec![doc! { "$set": {
                "messages": { "$concatArrays": [
                    { "$ifNull": ["$messages", []] },
                    [{ "$mergeObjects": [{ "$literal": entry }, { "sent": raised.clone() }] }],
                ] },
                "count": { "$add": [{ "$ifNull": ["$count", 0] }, 1_i64] },
                "last_sent": raised,
            } }])
        );
        // Another operator, a dotted path or no in-order guard: the guard stays a filter.
        let mut other = push.clone();
        other.update.insert("$unset", doc! { "x": "" });
        assert_eq!(as_pipeline(&other), None);
        let mut dotted = push.clone();
        dotted.update.insert("$set", doc! { "a.b": 1 });
        assert_eq!(as_pipeline(&dotted), None);
        let mut unordered = push;
        unordered.guards.pop();
        assert_eq!(as_pipeline(&unordered), None);
    }
}
