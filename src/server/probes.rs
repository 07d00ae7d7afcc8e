//! The probes that try, on a scratch collection, what a server that is neither MongoDB nor
//! FerretDB 1.x can do.

use bson::{doc, Bson, Document};
use mongodb::Database;

use super::reply::{as_i64, bson_to_usize, first_batch};

/// Collections whose names start with this are the scratch collections of capability probes,
/// created and dropped by [`ServerInfo::detect_for`]. Command counters leave them out.
///
/// [`ServerInfo::detect_for`]: super::ServerInfo::detect_for
pub const PROBE_COLLECTION_PREFIX: &str = "mongo_social_probe_";

/// What the probes of [`ServerInfo::detect_for`] found the server can do.
///
/// [`ServerInfo::detect_for`]: super::ServerInfo::detect_for
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Probes {
    pub(super) slice_projection: bool,
    pub(super) slice_past_end: bool,
    pub(super) find_and_modify_projection: bool,
    pub(super) unordered_update_batches: bool,
    pub(super) group_first_accumulator: bool,
    pub(super) text_search: bool,
    pub(super) text_all_phrases: bool,
    pub(super) partial_indexes: bool,
    pub(super) change_streams: bool,
    pub(super) graph_lookup: bool,
    pub(super) pipeline_updates: bool,
}

impl Probes {
    /// Tries each operation on a scratch collection of `database`, then drops it. Never fails:
    /// what cannot be tried counts as missing.
    pub(super) async fn run(database: &Database) -> Self {
        let name = format!("{PROBE_COLLECTION_PREFIX}{}", random_suffix());
        let collection = database.collection::<Document>(&name);
        let seeded = collection
            .insert_one(doc! { "_id": 1, "a": [1, 2, 3], "s": "x", "n": 0, "t": "hello world" })
            .await
            .is_ok();
        let probes = if seeded {
            let (text_search, text_all_phrases) = probe_text_search(database, &name).await;
            Self {
                slice_projection: probe_slice_projection(database, &name).await,
                slice_past_end: probe_slice(database, &name, Bson::from(vec![5, 1]), &[]).await,
                find_and_modify_projection: probe_find_and_modify_projection(database, &name).await,
                unordered_update_batches: probe_unordered_update(database, &name).await,
                group_first_accumulator: probe_group_first(database, &name).await,
                graph_lookup: probe_graph_lookup(database, &name).await,
                text_search,
                text_all_phrases,
                partial_indexes: probe_partial_index(database, &name).await,
                change_streams: probe_change_streams(database, &name).await,
                pipeline_updates: probe_pipeline_update(database, &name).await,
            }
        } else {
            Self::default()
        };
        let _ = collection.drop().await;
        probes
    }
}

/// `$slice: -2` and `$slice: [1, 1]` on `[1, 2, 3]`.
async fn probe_slice_projection(database: &Database, collection: &str) -> bool {
    probe_slice(database, collection, Bson::Int32(-2), &[2, 3]).await
        && probe_slice(database, collection, Bson::from(vec![1, 1]), &[2]).await
}

/// Whether `{a: {$slice: slice}}` projects `[1, 2, 3]` to `expected`.
async fn probe_slice(database: &Database, collection: &str, slice: Bson, expected: &[i32]) -> bool {
    let reply = database
        .run_command(doc! {
            "find": collection,
            "filter": { "_id": 1 },
            "projection": { "a": { "$slice": slice } },
        })
        .await;
    let Some(found) = reply
        .ok()
        .and_then(|reply| first_batch(&reply).into_iter().next())
    else {
        return false;
    };
    let expected: Vec<Bson> = expected.iter().map(|n| Bson::Int32(*n)).collect();
    found
        .get_array("a")
        .is_ok_and(|a| a.iter().map(as_i64).eq(expected.iter().map(as_i64)))
}

/// Whether `findAndModify` with `fields` returns only the projected fields.
async fn probe_find_and_modify_projection(database: &Database, collection: &str) -> bool {
    let reply = database
        .run_command(doc! {
            "findAndModify": collection,
            "query": { "_id": 1 },
            "update": { "$inc": { "n": 1 } },
            "fields": { "n": 1 },
            "new": true,
        })
        .await;
    reply
        .ok()
        .and_then(|reply| reply.get_document("value").ok().cloned())
        .is_some_and(|value| value.contains_key("n") && !value.contains_key("a"))
}

/// Whether an unordered `update` whose first statement fails still runs the second and reports
/// the failure at index 0.
async fn probe_unordered_update(database: &Database, collection: &str) -> bool {
    let reply = database
        .run_command(doc! {
            "update": collection,
            "updates": [
                { "q": { "_id": 1 }, "u": { "$inc": { "s": 1 } } },
                { "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } },
            ],
            "ordered": false,
        })
        .await;
    let Ok(reply) = reply else {
        return false;
    };
    let ran_second = reply.get("nModified").and_then(bson_to_usize) == Some(1);
    let first_failed = reply.get_array("writeErrors").is_ok_and(|errors| {
        errors.len() == 1
            && matches!(&errors[0], Bson::Document(error)
                if error.get("index").and_then(bson_to_usize) == Some(0))
    });
    ran_second && first_failed
}

/// Whether an `update` whose `u` is an aggregation pipeline runs it with the expressions a
/// stamped push needs (`$concatArrays`, `$ifNull`, `$mergeObjects`, `$literal`, `$max`, `$add`),
/// a `$literal` string that looks like a field path kept as it is.
async fn probe_pipeline_update(database: &Database, collection: &str) -> bool {
    let pushed = doc! {
        "$mergeObjects": [{ "$literal": { "v": "$s" } }, { "w": { "$max": ["$n", 5] } }],
    };
    let reply = database
        .run_command(doc! {
            "update": collection,
            "updates": [{
                "q": { "_id": 1 },
                "u": [{ "$set": {
                    "pa": { "$concatArrays": [{ "$ifNull": ["$pa", []] }, [pushed]] },
                    "pn": { "$add": [{ "$ifNull": ["$pn", 0] }, 1] },
                } }],
            }],
        })
        .await;
    if reply.is_err() {
        return false;
    }
    let Ok(Some(found)) = database
        .collection::<Document>(collection)
        .find_one(doc! { "_id": 1 })
        .await
    else {
        return false;
    };
    found.get_array("pa").ok() == Some(&vec![Bson::Document(doc! { "v": "$s", "w": 5 })])
        && found.get("pn").and_then(as_i64) == Some(1)
}

/// Whether `$group` with `$first` works.
async fn probe_group_first(database: &Database, collection: &str) -> bool {
    let reply = database
        .run_command(doc! {
            "aggregate": collection,
            "pipeline": [{ "$group": { "_id": Bson::Null, "first": { "$first": "$_id" } } }],
            "cursor": {},
        })
        .await;
    reply
        .ok()
        .and_then(|reply| first_batch(&reply).into_iter().next())
        .is_some_and(|group| group.get("first").map(as_i64) == Some(Some(1)))
}

/// Whether the recommendation read's joins work as on MongoDB: `$lookup` by `_id`, a field
/// computed from the joined array (`$max`), `$graphLookup` from a computed start (one that
/// finds the seeded document, one that is an empty array and finds nothing), and `$unwind`
/// keeping documents whose array is empty. On the seeded `{_id: 1, s: .., n: ..}`, joined with
/// itself, the pipeline yields one document whose `x` is 1 and that has no `y`.
async fn probe_graph_lookup(database: &Database, collection: &str) -> bool {
    let start = |condition: Document| doc! { "$cond": [condition, 1, Bson::Array(Vec::new())] };
    let look_up = |into: &str| {
        doc! { "$graphLookup": {
            "from": collection, "startWith": "$s", "connectFromField": "s",
            "connectToField": "_id", "as": into, "maxDepth": 0,
        } }
    };
    let reply = database
        .run_command(doc! {
            "aggregate": collection,
            "pipeline": [
                { "$match": { "_id": 1 } },
                { "$lookup": {
                    "from": collection, "localField": "_id", "foreignField": "_id", "as": "j",
                } },
                { "$project": { "n": { "$max": "$j.n" } } },
                { "$project": { "n": 1, "s": start(doc! { "$lte": ["$n", 1_000_000] }) } },
                look_up("g"),
                { "$project": { "g": 1, "s": start(doc! { "$gt": ["$n", 1_000_000] }) } },
                look_up("h"),
                { "$unwind": { "path": "$h", "preserveNullAndEmptyArrays": true } },
                { "$unwind": { "path": "$g", "preserveNullAndEmptyArrays": true } },
                { "$project": { "x": "$g._id", "y": "$h._id" } },
            ],
            "cursor": {},
        })
        .await;
    let Ok(reply) = reply else {
        return false;
    };
    let batch = first_batch(&reply);
    batch.len() == 1 && batch[0].get("x").and_then(as_i64) == Some(1) && !batch[0].contains_key("y")
}

/// Whether a `text` index can be built and `$text` finds through it; and whether a search of two
/// quoted phrases, one of them absent from the seeded `"hello world"`, finds nothing (every
/// phrase required, as on MongoDB) rather than the document (any phrase, as on DocumentDB).
async fn probe_text_search(database: &Database, collection: &str) -> (bool, bool) {
    let indexed = database
        .run_command(doc! {
            "createIndexes": collection,
            "indexes": [{ "key": { "t": "text" }, "name": "t_text" }],
        })
        .await
        .is_ok();
    if !indexed {
        return (false, false);
    }
    let found = |search: &'static str| async move {
        database
            .run_command(doc! {
                "find": collection,
                "filter": { "$text": { "$search": search } },
            })
            .await
            .ok()
            .map(|reply| first_batch(&reply).len())
    };
    if found("hello").await != Some(1) {
        return (false, false);
    }
    (true, found("\"hello\" \"absent\"").await == Some(0))
}

/// Whether an index with a `partialFilterExpression` can be built.
async fn probe_partial_index(database: &Database, collection: &str) -> bool {
    database
        .run_command(doc! {
            "createIndexes": collection,
            "indexes": [{
                "key": { "s": 1 }, "name": "s_partial",
                "partialFilterExpression": { "n": { "$gte": 0 } },
            }],
        })
        .await
        .is_ok()
}

/// Whether a change stream opens on the collection (its cursor is closed again at once).
async fn probe_change_streams(database: &Database, collection: &str) -> bool {
    let reply = database
        .run_command(doc! {
            "aggregate": collection,
            "pipeline": [{ "$changeStream": {} }],
            "cursor": {},
        })
        .await;
    let Ok(reply) = reply else {
        return false;
    };
    if let Ok(id) = reply.get_document("cursor").and_then(|c| c.get_i64("id")) {
        let _ = database
            .run_command(doc! { "killCursors": collection, "cursors": [id] })
            .await;
    }
    reply.get_document("cursor").is_ok()
}

/// A suffix unlikely to clash between concurrent probes: process id, time and a counter.
fn random_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    format!(
        "{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}
