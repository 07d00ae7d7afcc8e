//! Which shards the library's own commands would reach under its declared shard keys.
//!
//! A test runs a store's operations on a client whose [`CommandCounter`](super::CommandCounter) keeps commands
//! ([`CommandCounter::keeping_commands`](super::CommandCounter::keeping_commands)), then [`route_commands`] classifies each command on a
//! collection with a declared key by its filter ([`ShardKey::routing`]). This needs no sharded
//! cluster: `mongos` routes by the same rule, from the filter and the key.
//!
//! Where a sharded engine is at hand, [`engine_routing`] asks it instead: each routed command
//! (each statement of a write) is `explain`ed as the read that routes the same way, and the
//! engine's plan says how many shards it reached. `tests/shard_targeting.rs` asserts the two
//! agree on the sharded CI leg.

use std::fmt;

use bson::{doc, Bson, Document};
use mongodb::Database;

use mongo_social::sharding::{Routing, ShardKey};

/// One command on a collection with a declared shard key, and where it would go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutedCommand {
    /// The command's name (`find`, `update`, ...).
    pub command: String,
    /// The collection it reads or writes.
    pub collection: String,
    /// Where a `mongos` would send it. A multi-statement write (an `update` of 100 statements,
    /// an `insert` of 100 documents) each of whose statements is targeted is
    /// [`Routing::Shards`] of their number.
    pub routing: Routing,
}

impl fmt::Display for RoutedCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {:?}",
            self.command, self.collection, self.routing
        )
    }
}

/// The routing of every command in `commands` (as [`CommandCounter::commands`](super::CommandCounter::commands) returns them)
/// whose collection has a key in `keys`. Commands that are not routed by a filter (index
/// creation, `getMore`, which follows its `find`) are left out.
pub fn route_commands(commands: &[(String, Document)], keys: &[ShardKey]) -> Vec<RoutedCommand> {
    commands
        .iter()
        .filter_map(|(name, command)| route_command(name, command, keys))
        .collect()
}

/// The routing of one command, if its collection has a key in `keys` and it is routed by a
/// filter or by its documents' keys.
pub fn route_command(name: &str, command: &Document, keys: &[ShardKey]) -> Option<RoutedCommand> {
    let collection = command.get_str(name).ok()?;
    let key = keys.iter().find(|key| key.collection == collection)?;
    let routing = match name {
        "find" | "count" | "distinct" | "findAndModify" | "aggregate" => {
            filter_routing(key, read_filter(name, command))
        }
        "update" => statements_routing(key, command.get_array("updates").ok(), "q"),
        "delete" => statements_routing(key, command.get_array("deletes").ok(), "q"),
        "insert" => inserts_routing(command.get_array("documents").ok()),
        _ => return None,
    };
    Some(RoutedCommand {
        command: name.to_owned(),
        collection: collection.to_owned(),
        routing,
    })
}

fn filter_routing(key: &ShardKey, filter: Option<&Document>) -> Routing {
    filter.map_or(Routing::Broadcast, |filter| key.routing(filter))
}

/// Statements are routed one by one: the command reaches the union of their shards.
fn statements_routing(key: &ShardKey, statements: Option<&Vec<Bson>>, field: &str) -> Routing {
    let routings = statements.into_iter().flatten().map(|statement| {
        filter_routing(
            key,
            statement
                .as_document()
                .and_then(|statement| statement.get_document(field).ok()),
        )
    });
    union(routings)
}

/// Each inserted document goes to the one shard owning its key value (a missing field counts as
/// `null`, which one shard owns too).
fn inserts_routing(documents: Option<&Vec<Bson>>) -> Routing {
    let count = documents.map_or(0, Vec::len);
    union((0..count).map(|_| Routing::Targeted))
}

fn union(routings: impl Iterator<Item = Routing>) -> Routing {
    let mut shards = 0;
    for routing in routings {
        match routing {
            Routing::Targeted => shards += 1,
            Routing::Shards(n) => shards += n,
            _ => return Routing::Broadcast,
        }
    }
    match shards {
        0 | 1 => Routing::Targeted,
        n => Routing::Shards(n),
    }
}

/// One read the engine explained, with where the classifier and the engine send it.
#[derive(Clone, Debug)]
pub struct EngineRouting {
    /// The command the library sent (`find`, `update`, ...) and its collection.
    pub command: String,
    /// The collection.
    pub collection: String,
    /// The filter the engine routed.
    pub filter: Document,
    /// Where [`ShardKey::routing`] sends it.
    pub classified: Routing,
    /// How many shards the engine's plan reached.
    pub reached: usize,
    /// How many shards the engine's plan for the whole collection (an empty filter) reaches: 1
    /// for a collection the engine keeps whole.
    pub shards: usize,
}

impl fmt::Display for EngineRouting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}: classified {:?}, engine reached {} of {} shard(s)",
            self.command, self.collection, self.filter, self.classified, self.reached, self.shards
        )
    }
}

/// Every filter of `commands` on a collection with a key in `keys`, routed by the classifier
/// and by the engine behind `database`: a `find`, `count` or `aggregate` is `explain`ed as sent;
/// each statement of an `update` or `delete`, and a `findAndModify`, as the `find` of its filter
/// (DocumentDB's gateway explains reads only; a write's filter is routed as the same filter's
/// read is: Citus prunes shards by the distribution column in both). Inserts are left out: each
/// document goes to the shard of its own key, and there is no filter to explain.
///
/// # Errors
///
/// The server's refusal of an `explain`.
pub async fn engine_routing(
    database: &Database,
    commands: &[(String, Document)],
    keys: &[ShardKey],
) -> mongodb::error::Result<Vec<EngineRouting>> {
    let mut shards_of = std::collections::HashMap::new();
    let mut routed = Vec::new();
    for (name, command) in commands {
        let Ok(collection) = command.get_str(name) else {
            continue;
        };
        let Some(key) = keys.iter().find(|key| key.collection == collection) else {
            continue;
        };
        let reads: Vec<(Document, Document)> = match name.as_str() {
            "find" | "count" | "aggregate" | "findAndModify" => {
                let filter = read_filter(name, command).cloned().unwrap_or_default();
                let read = if name == "findAndModify" {
                    doc! { "find": collection, "filter": &filter }
                } else {
                    bare(command)
                };
                vec![(read, filter)]
            }
            "update" | "delete" => {
                let field = if name == "update" {
                    "updates"
                } else {
                    "deletes"
                };
                command
                    .get_array(field)
                    .into_iter()
                    .flatten()
                    .filter_map(Bson::as_document)
                    .map(|statement| {
                        let filter = statement.get_document("q").cloned().unwrap_or_default();
                        (doc! { "find": collection, "filter": &filter }, filter)
                    })
                    .collect()
            }
            _ => continue,
        };
        for (read, filter) in reads {
            let shards = match shards_of.get(collection) {
                Some(&shards) => shards,
                None => {
                    let whole = doc! { "find": collection, "filter": {} };
                    let shards = shards_reached(&explain(database, whole).await?);
                    shards_of.insert(collection.to_owned(), shards);
                    shards
                }
            };
            routed.push(EngineRouting {
                command: name.clone(),
                collection: collection.to_owned(),
                classified: key.routing(&filter),
                reached: shards_reached(&explain(database, read).await?),
                shards,
                filter,
            });
        }
    }
    Ok(routed)
}

/// The filter a read is routed by: a `find`'s filter, an `aggregate`'s first `$match`, the query
/// of a `count`, `distinct` or `findAndModify`.
fn read_filter<'a>(name: &str, command: &'a Document) -> Option<&'a Document> {
    match name {
        "find" => command.get_document("filter").ok(),
        "aggregate" => command
            .get_array("pipeline")
            .ok()
            .and_then(|pipeline| pipeline.first())
            .and_then(Bson::as_document)
            .and_then(|stage| stage.get_document("$match").ok()),
        _ => command.get_document("query").ok(),
    }
}

async fn explain(database: &Database, command: Document) -> mongodb::error::Result<Document> {
    database
        .run_command(doc! { "explain": command, "verbosity": "queryPlanner" })
        .await
}

/// `command` as a client sent it, without what the driver adds, for `explain`.
fn bare(command: &Document) -> Document {
    let mut bare = command.clone();
    for field in [
        "$db",
        "lsid",
        "$clusterTime",
        "txnNumber",
        "$readPreference",
        "cursor",
    ] {
        bare.remove(field);
    }
    if bare.contains_key("aggregate") {
        bare.insert("cursor", doc! {});
    }
    bare
}

/// How many shards a plan reaches: `shardCount` of DocumentDB's gateway (its `SHARD_MERGE`
/// stage), the `Task Count` of a Citus plan (FerretDB in front of DocumentDB), or the `shards` a
/// `mongos` lists; a plan with none of them ran on one shard.
pub fn shards_reached(plan: &Document) -> usize {
    fn search(value: &Bson) -> Option<usize> {
        match value {
            Bson::Document(document) => document.iter().find_map(|(key, inner)| {
                let count = match key.as_str() {
                    "shardCount" | "Task Count" => match inner {
                        Bson::Double(n) => Some(*n as usize),
                        Bson::Int32(n) => usize::try_from(*n).ok(),
                        Bson::Int64(n) => usize::try_from(*n).ok(),
                        _ => None,
                    },
                    "shards" => inner.as_array().map(Vec::len),
                    _ => None,
                };
                count.or_else(|| search(inner))
            }),
            Bson::Array(items) => items.iter().find_map(search),
            _ => None,
        }
    }
    search(&Bson::Document(plan.clone())).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn classifies_each_command_by_its_filter() {
        let keys = [
            ShardKey::declared("inbox", doc! { "owner": 1, "sequence": 1 }),
            ShardKey::declared("messages", doc! { "from": 1 }),
        ];
        let commands = vec![
            (
                "find".to_owned(),
                doc! { "find": "inbox", "filter": { "owner": "bob" } },
            ),
            (
                "find".to_owned(),
                doc! { "find": "messages", "filter": { "to": "bob" } },
            ),
            (
                "update".to_owned(),
                doc! { "update": "inbox", "updates": [
                    { "q": { "owner": "a", "count": { "$lt": 50 } }, "u": {} },
                    { "q": { "owner": "b" }, "u": {} },
                ] },
            ),
            (
                "findAndModify".to_owned(),
                doc! { "findAndModify": "inbox", "query": { "owner": "a" } },
            ),
            (
                "insert".to_owned(),
                doc! { "insert": "messages", "documents": [{ "from": "a" }] },
            ),
            (
                "aggregate".to_owned(),
                doc! { "aggregate": "messages", "pipeline": [{ "$match": { "from": "a" } }] },
            ),
            (
                "getMore".to_owned(),
                doc! { "getMore": 7_i64, "collection": "inbox" },
            ),
            ("find".to_owned(), doc! { "find": "other", "filter": {} }),
            (
                "createIndexes".to_owned(),
                doc! { "createIndexes": "inbox", "indexes": [] },
            ),
        ];
        let routed: Vec<String> = route_commands(&commands, &keys)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            routed,
            [
                "find inbox: Targeted",
                "find messages: Broadcast",
                "update inbox: Shards(2)",
                "findAndModify inbox: Targeted",
                "insert messages: Targeted",
                "aggregate messages: Targeted",
            ]
        );
    }
}
