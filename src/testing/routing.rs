//! Which shards the library's own commands would reach under its declared shard keys.
//!
//! A test runs a store's operations on a client whose [`CommandCounter`](super::CommandCounter) keeps commands
//! ([`CommandCounter::keeping_commands`](super::CommandCounter::keeping_commands)), then [`route_commands`] classifies each command on a
//! collection with a declared key by its filter ([`ShardKey::routing`]). This needs no sharded
//! cluster: `mongos` routes by the same rule, from the filter and the key.

use std::fmt;

use bson::{Bson, Document};

use crate::sharding::{Routing, ShardKey};

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
        "find" => filter_routing(key, command.get_document("filter").ok()),
        "count" | "distinct" | "findAndModify" => {
            filter_routing(key, command.get_document("query").ok())
        }
        "aggregate" => {
            let first_match = command
                .get_array("pipeline")
                .ok()
                .and_then(|pipeline| pipeline.first())
                .and_then(Bson::as_document)
                .and_then(|stage| stage.get_document("$match").ok());
            filter_routing(key, first_match)
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
