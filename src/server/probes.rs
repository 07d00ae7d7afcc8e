//! The probes that try, on a scratch collection, what a server that is neither MongoDB nor
//! FerretDB 1.x can do.

use bson::{doc, Bson, Document};
use mongodb::Database;

use super::reply::{as_i64, bson_to_usize, first_batch};
use crate::error::{Error, Result};

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
    /// Tries each operation on a scratch collection of `database`, then drops it. What the
    /// server refuses counts as missing.
    ///
    /// # Errors
    ///
    /// A probe that could not tell, because the connection failed or the server failed
    /// transiently (see [`ask`]): the scratch collection is dropped (if the server lets it) and
    /// the failure returned, so that the caller tries again rather than remember a capability
    /// as missing.
    pub(super) async fn run(database: &Database) -> Result<Self> {
        let name = format!("{PROBE_COLLECTION_PREFIX}{}", random_suffix());
        let probes = Self::run_in(database, &name).await;
        let _ = database.collection::<Document>(&name).drop().await;
        probes
    }

    async fn run_in(database: &Database, name: &str) -> Result<Self> {
        let seeded = ask(
            database,
            doc! { "insert": name, "documents": [
                { "_id": 1, "a": [1, 2, 3], "s": "x", "n": 0, "t": "hello world" },
            ] },
        )
        .await?
        .is_some_and(|reply| reply.get("n").and_then(as_i64) == Some(1));
        if !seeded {
            return Ok(Self::default());
        }
        let (text_search, text_all_phrases) = probe_text_search(database, name).await?;
        Ok(Self {
            slice_projection: probe_slice_projection(database, name).await?,
            slice_past_end: probe_slice(database, name, Bson::from(vec![5, 1]), &[]).await?,
            find_and_modify_projection: probe_find_and_modify_projection(database, name).await?,
            unordered_update_batches: probe_unordered_update(database, name).await?,
            group_first_accumulator: probe_group_first(database, name).await?,
            graph_lookup: probe_graph_lookup(database, name).await?,
            text_search,
            text_all_phrases,
            partial_indexes: probe_partial_index(database, name).await?,
            change_streams: probe_change_streams(database, name).await?,
            pipeline_updates: probe_pipeline_update(database, name).await?,
        })
    }
}

/// Runs one probe's command: its reply, or `None` when the server refused it (the capability
/// is missing).
///
/// # Errors
///
/// A failure that says nothing about the capability: the server unreachable or the connection
/// lost (as DocumentDB's gateway does to some new connections), or a transient server failure
/// such as a deadlock.
async fn ask(database: &Database, command: Document) -> Result<Option<Document>> {
    match database.run_command(command).await {
        Ok(reply) => Ok(Some(reply)),
        Err(error) => {
            let error = Error::from(error);
            if error.is_unreachable() || error.is_transient() {
                Err(error)
            } else {
                Ok(None)
            }
        }
    }
}

/// `$slice: -2` and `$slice: [1, 1]` on `[1, 2, 3]`.
async fn probe_slice_projection(database: &Database, collection: &str) -> Result<bool> {
    Ok(
        probe_slice(database, collection, Bson::Int32(-2), &[2, 3]).await?
            && probe_slice(database, collection, Bson::from(vec![1, 1]), &[2]).await?,
    )
}

/// Whether `{a: {$slice: slice}}` projects `[1, 2, 3]` to `expected`.
async fn probe_slice(
    database: &Database,
    collection: &str,
    slice: Bson,
    expected: &[i32],
) -> Result<bool> {
    let reply = ask(
        database,
        doc! {
            "find": collection,
            "filter": { "_id": 1 },
            "projection": { "a": { "$slice": slice } },
        },
    )
    .await?;
    let Some(found) = reply.and_then(|reply| first_batch(&reply).into_iter().next()) else {
        return Ok(false);
    };
    let expected: Vec<Bson> = expected.iter().map(|n| Bson::Int32(*n)).collect();
    Ok(found
        .get_array("a")
        .is_ok_and(|a| a.iter().map(as_i64).eq(expected.iter().map(as_i64))))
}

/// Whether `findAndModify` with `fields` returns only the projected fields.
async fn probe_find_and_modify_projection(database: &Database, collection: &str) -> Result<bool> {
    let reply = ask(
        database,
        doc! {
            "findAndModify": collection,
            "query": { "_id": 1 },
            "update": { "$inc": { "n": 1 } },
            "fields": { "n": 1 },
            "new": true,
        },
    )
    .await?;
    Ok(reply
        .and_then(|reply| reply.get_document("value").ok().cloned())
        .is_some_and(|value| value.contains_key("n") && !value.contains_key("a")))
}

/// Whether an unordered `update` whose first statement fails still runs the second and reports
/// the failure at index 0.
async fn probe_unordered_update(database: &Database, collection: &str) -> Result<bool> {
    let reply = ask(
        database,
        doc! {
            "update": collection,
            "updates": [
                { "q": { "_id": 1 }, "u": { "$inc": { "s": 1 } } },
                { "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } },
            ],
            "ordered": false,
        },
    )
    .await?;
    let Some(reply) = reply else {
        return Ok(false);
    };
    let ran_second = reply.get("nModified").and_then(bson_to_usize) == Some(1);
    let first_failed = reply.get_array("writeErrors").is_ok_and(|errors| {
        errors.len() == 1
            && matches!(&errors[0], Bson::Document(error)
                if error.get("index").and_then(bson_to_usize) == Some(0))
    });
    Ok(ran_second && first_failed)
}

/// Whether an `update` whose `u` is an aggregation pipeline runs it with the expressions a
/// stamped push needs (`$concatArrays`, `$ifNull`, `$mergeObjects`, `$literal`, `$max`, `$add`),
/// a `$literal` string that looks like a field path kept as it is.
async fn probe_pipeline_update(database: &Database, collection: &str) -> Result<bool> {
    let pushed = doc! {
        "$mergeObjects": [{ "$literal": { "v": "$s" } }, { "w": { "$max": ["$n", 5] } }],
    };
    let updated = ask(
        database,
        doc! {
            "update": collection,
            "updates": [{
                "q": { "_id": 1 },
                "u": [{ "$set": {
                    "pa": { "$concatArrays": [{ "$ifNull": ["$pa", []] }, [pushed]] },
                    "pn": { "$add": [{ "$ifNull": ["$pn", 0] }, 1] },
                } }],
            }],
        },
    )
    .await?;
    if updated.is_none() {
        return Ok(false);
    }
    let found = ask(
        database,
        doc! { "find": collection, "filter": { "_id": 1 } },
    )
    .await?;
    let Some(found) = found.and_then(|reply| first_batch(&reply).into_iter().next()) else {
        return Ok(false);
    };
    Ok(
        found.get_array("pa").ok() == Some(&vec![Bson::Document(doc! { "v": "$s", "w": 5 })])
            && found.get("pn").and_then(as_i64) == Some(1),
    )
}

/// Whether `$group` with `$first` works.
async fn probe_group_first(database: &Database, collection: &str) -> Result<bool> {
    let reply = ask(
        database,
        doc! {
            "aggregate": collection,
            "pipeline": [{ "$group": { "_id": Bson::Null, "first": { "$first": "$_id" } } }],
            "cursor": {},
        },
    )
    .await?;
    Ok(reply
        .and_then(|reply| first_batch(&reply).into_iter().next())
        .is_some_and(|group| group.get("first").map(as_i64) == Some(Some(1))))
}

/// Whether the recommendation read's joins work as on MongoDB: `$lookup` by `_id`, a field
/// computed from the joined array (`$max`), `$graphLookup` from a computed start (one that
/// finds the seeded document, one that is an empty array and finds nothing), and `$unwind`
/// keeping documents whose array is empty. On the seeded `{_id: 1, s: .., n: ..}`, joined with
/// itself, the pipeline yields one document whose `x` is 1 and that has no `y`.
async fn probe_graph_lookup(database: &Database, collection: &str) -> Result<bool> {
    let start = |condition: Document| doc! { "$cond": [condition, 1, Bson::Array(Vec::new())] };
    let look_up = |into: &str| {
        doc! { "$graphLookup": {
            "from": collection, "startWith": "$s", "connectFromField": "s",
            "connectToField": "_id", "as": into, "maxDepth": 0,
        } }
    };
    let reply = ask(
        database,
        doc! {
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
        },
    )
    .await?;
    let Some(reply) = reply else {
        return Ok(false);
    };
    let batch = first_batch(&reply);
    Ok(batch.len() == 1
        && batch[0].get("x").and_then(as_i64) == Some(1)
        && !batch[0].contains_key("y"))
}

/// Whether a `text` index can be built and `$text` finds through it; and whether a search of two
/// quoted phrases, one of them absent from the seeded `"hello world"`, finds nothing (every
/// phrase required, as on MongoDB) rather than the document (any phrase, as on DocumentDB).
async fn probe_text_search(database: &Database, collection: &str) -> Result<(bool, bool)> {
    let indexed = ask(
        database,
        doc! {
            "createIndexes": collection,
            "indexes": [{ "key": { "t": "text" }, "name": "t_text" }],
        },
    )
    .await?
    .is_some();
    if !indexed {
        return Ok((false, false));
    }
    let found = |search: &'static str| async move {
        let reply = ask(
            database,
            doc! {
                "find": collection,
                "filter": { "$text": { "$search": search } },
            },
        )
        .await?;
        Ok::<_, Error>(reply.map(|reply| first_batch(&reply).len()))
    };
    if found("hello").await? != Some(1) {
        return Ok((false, false));
    }
    Ok((true, found("\"hello\" \"absent\"").await? == Some(0)))
}

/// Whether an index with a `partialFilterExpression` can be built.
async fn probe_partial_index(database: &Database, collection: &str) -> Result<bool> {
    let reply = ask(
        database,
        doc! {
            "createIndexes": collection,
            "indexes": [{
                "key": { "s": 1 }, "name": "s_partial",
                "partialFilterExpression": { "n": { "$gte": 0 } },
            }],
        },
    )
    .await?;
    Ok(reply.is_some())
}

/// Whether a change stream opens on the collection (its cursor is closed again at once).
async fn probe_change_streams(database: &Database, collection: &str) -> Result<bool> {
    let reply = ask(
        database,
        doc! {
            "aggregate": collection,
            "pipeline": [{ "$changeStream": {} }],
            "cursor": {},
        },
    )
    .await?;
    let Some(reply) = reply else {
        return Ok(false);
    };
    if let Ok(id) = reply.get_document("cursor").and_then(|c| c.get_i64("id")) {
        let _ = database
            .run_command(doc! { "killCursors": collection, "cursors": [id] })
            .await;
    }
    Ok(reply.get_document("cursor").is_ok())
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
