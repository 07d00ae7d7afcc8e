//! Shard keys, and a helper that applies them when connected to a sharded cluster.

use bson::{doc, Document};
use mongodb::Database;

use crate::backend::sharding::Sharded;
use crate::error::Result;
use crate::observe::Operation;

/// The shard key one collection should have, with the reason it was chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardKey {
    /// The collection's name.
    pub collection: String,
    /// The key pattern, as `shardCollection` takes it (for example `{ owner: 1, sequence: 1 }`).
    pub key: Document,
    /// Why this key: which reads it routes to one shard and how it spreads writes.
    pub rationale: &'static str,
}

impl ShardKey {
    pub(crate) fn new(collection: &str, key: Document, rationale: &'static str) -> Self {
        Self {
            collection: collection.to_owned(),
            key,
            rationale,
        }
    }

    /// `collection` sharded on its hashed `_id`: a read or write by id reaches one shard, and
    /// writes spread evenly.
    pub(crate) fn hashed_id(collection: &str, rationale: &'static str) -> Self {
        Self::new(collection, doc! { "_id": "hashed" }, rationale)
    }

    /// `collection` sharded on ranges of `_id`: for small collections, and keys read in order.
    pub(crate) fn ranged_id(collection: &str, rationale: &'static str) -> Self {
        Self::new(collection, doc! { "_id": 1 }, rationale)
    }
}

/// Shards each collection on its key, when `database` is reached through a `mongos` (or a
/// front end that answers as one, such as DocumentDB's gateway).
///
/// Runs `enableSharding` for the database (where the server has the command: MongoDB before 6.0
/// needs it, DocumentDB has none), then `shardCollection` for each key. Collections that are
/// already sharded with the same key are left as they are (the server accepts the repeat).
///
/// Each key is sent as declared (ranged, as MongoDB takes it). A server that takes hashed keys
/// only (DocumentDB, so Azure Cosmos DB for MongoDB vCore and FerretDB 2 over DocumentDB)
/// refuses it, and the key's [hashed form](ShardKey::hashed) is sent instead: reads and writes
/// by the key's first field still reach one shard; a range over that field does not.
///
/// On a new deployment call it before the store's indexes exist (before `create_indexes` and
/// before the first write, which creates them): each collection is then created sharded
/// (MongoDB also creates the index on its key), and its indexes are built on the sharded
/// collection. On a deployment that already holds documents, MongoDB needs an index that
/// starts with the key before it shards a collection: create the indexes first there.
///
/// Unique indexes other than `_id` (a follow edge, a comment's slug) each start with their
/// collection's key field, as MongoDB requires on a sharded collection. DocumentDB over Citus
/// keeps them on sharded collections when Citus runs as DocumentDB's distributed configuration
/// sets it (`citus.allow_unsafe_constraints`: the engine's unique indexes carry the shard-key
/// value inside their expression, where Citus cannot see it). Without that setting the engine
/// refuses to shard a collection that has one (`cannot create constraint`); the other
/// collections are sharded, and the refusal is reported (below), the refused ones left whole
/// and unique.
///
/// Each command is retried on a transient failure under the default [`RetryPolicy`](crate::retry::RetryPolicy): a repeat
/// of `enableSharding` or of a `shardCollection` with the same key is accepted as done.
///
/// # Errors
///
/// [`Error::Unsupported`](crate::Error::Unsupported) when the server is not a `mongos` (a standalone server, a replica set,
/// or FerretDB): sharding is a deployment decision, so this never pretends to succeed. The
/// same error, after every other collection is sharded, when the engine refused collections
/// for their unique indexes (`feature` `"sharding a collection with a unique index"`; the
/// `reason` names them). Calling again after the deployment is fixed shards what is left.
pub async fn shard_collections(database: &Database, keys: &[ShardKey]) -> Result<()> {
    let keys: Vec<Sharded<'_>> = keys
        .iter()
        .map(|key| Sharded {
            collection: &key.collection,
            declared: key.key.clone(),
            hashed: key.hashed().key,
        })
        .collect();
    crate::backend::sharding::shard_collections(database, &keys).await
}

/// [`shard_collections`] in `operation`'s span (a store's public `shard_collections`).
pub(crate) async fn shard_collections_in(
    operation: Operation,
    database: &Database,
    keys: &[ShardKey],
) -> Result<()> {
    operation.run(shard_collections(database, keys)).await
}

/// Where a `mongos` would send a command, judged from its filter and the collection's shard key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Routing {
    /// The filter fixes the shard key, or a prefix of a ranged key, by equality: one shard (a
    /// prefix can span a few neighbouring chunks, as an inbox spans its owner's).
    Targeted,
    /// The filter lists `n` values of the key (`$in`, `$or`): at most `n` shards.
    Shards(usize),
    /// Nothing in the filter fixes the key: every shard is asked.
    Broadcast,
}

impl ShardKey {
    /// Where a `mongos` sends a query with this `filter` on a collection sharded on this key.
    ///
    /// A ranged key (`{owner: 1, sequence: 1}`) is fixed by equality on its first field; a
    /// hashed key (`{_id: "hashed"}`) by equality on the hashed field. `$and` takes the most
    /// precise of its clauses; `$or` the sum of its branches (a broadcast branch makes all a
    /// broadcast); `$in` with `n` values is `n` shards at most.
    ///
    /// ```
    /// use bson::doc;
    /// use mongo_social::sharding::{Routing, ShardKey};
    ///
    /// let key = ShardKey::declared("inbox", doc! { "owner": 1, "sequence": 1 });
    /// assert_eq!(key.routing(&doc! { "owner": "bob", "sequence": { "$lt": 9 } }), Routing::Targeted);
    /// assert_eq!(key.routing(&doc! { "owner": { "$in": ["bob", "ann"] } }), Routing::Shards(2));
    /// assert_eq!(key.routing(&doc! { "sequence": 3 }), Routing::Broadcast);
    /// ```
    pub fn routing(&self, filter: &Document) -> Routing {
        let Some((field, _)) = self.key.iter().next() else {
            return Routing::Broadcast;
        };
        routing_on(field, filter)
    }

    /// This key's hashed form, for servers that take hashed keys only: its first field hashed
    /// (`{owner: 1, sequence: 1}` becomes `{owner: "hashed"}`; a hashed key stays as it is).
    ///
    /// Equality on that field (one owner's inbox, one discussion) still reaches one shard, and
    /// writes spread evenly, with no hot shard for the newest values; a range over the field
    /// across its values, or an order by it, reaches every shard. The other fields of a ranged
    /// key no longer split one value's documents across shards: one owner's documents live on
    /// one shard, however many there are.
    ///
    /// ```
    /// use bson::doc;
    /// use mongo_social::sharding::ShardKey;
    ///
    /// let key = ShardKey::declared("inbox", doc! { "owner": 1, "sequence": 1 });
    /// assert_eq!(key.hashed().key, doc! { "owner": "hashed" });
    /// ```
    pub fn hashed(&self) -> Self {
        let key = match self.key.iter().next() {
            Some((field, _)) => doc! { field: "hashed" },
            None => self.key.clone(),
        };
        Self {
            collection: self.collection.clone(),
            key,
            rationale: self.rationale,
        }
    }

    /// A key declared by hand (an application's own collection), with no rationale.
    pub fn declared(collection: &str, key: Document) -> Self {
        Self::new(collection, key, "declared by the application")
    }
}

/// How precisely `filter` fixes the value of `field` (the shard key's first field).
fn routing_on(field: &str, filter: &Document) -> Routing {
    let mut best = Routing::Broadcast;
    for (name, condition) in filter {
        let routing = match name.as_str() {
            "$and" => all_of(field, condition),
            "$or" => any_of(field, condition),
            name if name == field => value_routing(condition),
            _ => Routing::Broadcast,
        };
        best = most_precise(best, routing);
    }
    best
}

/// `$and`: the most precise clause decides.
fn all_of(field: &str, clauses: &bson::Bson) -> Routing {
    let Some(clauses) = clauses.as_array() else {
        return Routing::Broadcast;
    };
    clauses
        .iter()
        .filter_map(bson::Bson::as_document)
        .map(|clause| routing_on(field, clause))
        .fold(Routing::Broadcast, most_precise)
}

/// `$or`: every branch must be routed; the shards add up.
fn any_of(field: &str, branches: &bson::Bson) -> Routing {
    let Some(branches) = branches.as_array() else {
        return Routing::Broadcast;
    };
    let mut shards = 0;
    for branch in branches {
        match branch.as_document().map(|branch| routing_on(field, branch)) {
            Some(Routing::Targeted) => shards += 1,
            Some(Routing::Shards(n)) => shards += n,
            _ => return Routing::Broadcast,
        }
    }
    match shards {
        0 => Routing::Broadcast,
        1 => Routing::Targeted,
        n => Routing::Shards(n),
    }
}

/// The routing of one field's condition: a plain value or `$eq` is one shard, `$in` one per
/// value, anything else (ranges, `$ne`, `$exists`) every shard.
fn value_routing(condition: &bson::Bson) -> Routing {
    let bson::Bson::Document(operators) = condition else {
        return Routing::Targeted;
    };
    if !operators.keys().any(|key| key.starts_with('$')) {
        return Routing::Targeted; // equality with an embedded document
    }
    let mut best = Routing::Broadcast;
    for (operator, value) in operators {
        let routing = match operator.as_str() {
            "$eq" => Routing::Targeted,
            "$in" => match value.as_array().map(Vec::len) {
                Some(1) => Routing::Targeted,
                Some(n) if n > 1 => Routing::Shards(n),
                _ => Routing::Broadcast,
            },
            _ => Routing::Broadcast,
        };
        best = most_precise(best, routing);
    }
    best
}

fn most_precise(a: Routing, b: Routing) -> Routing {
    match (a, b) {
        (Routing::Targeted, _) | (_, Routing::Targeted) => Routing::Targeted,
        (Routing::Shards(x), Routing::Shards(y)) => Routing::Shards(x.min(y)),
        (Routing::Shards(n), _) | (_, Routing::Shards(n)) => Routing::Shards(n),
        _ => Routing::Broadcast,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pattern: Document) -> ShardKey {
        ShardKey::declared("c", pattern)
    }

    #[test]
    fn ranged_keys_are_fixed_by_their_first_field() {
        let inbox = key(doc! { "owner": 1, "sequence": 1 });
        assert_eq!(inbox.routing(&doc! { "owner": "bob" }), Routing::Targeted);
        assert_eq!(
            inbox.routing(&doc! { "owner": { "$eq": "bob" }, "count": { "$lt": 50 } }),
            Routing::Targeted
        );
        assert_eq!(inbox.routing(&doc! { "sequence": 4 }), Routing::Broadcast);
        assert_eq!(
            inbox.routing(&doc! { "owner": { "$gt": "a" } }),
            Routing::Broadcast
        );
        assert_eq!(inbox.routing(&doc! {}), Routing::Broadcast);
    }

    #[test]
    fn hashed_keys_and_dotted_fields() {
        let posts = key(doc! { "_id": "hashed" });
        assert_eq!(posts.routing(&doc! { "_id": 7 }), Routing::Targeted);
        assert_eq!(
            posts.routing(&doc! { "_id": { "post": 1, "user": "u" } }),
            Routing::Targeted,
            "equality with a document"
        );
        assert_eq!(
            posts.routing(&doc! { "_id": { "$in": [1, 2, 3] } }),
            Routing::Shards(3)
        );
        let by_author = key(doc! { "created_by.id": 1 });
        assert_eq!(
            by_author.routing(&doc! { "created_by.id": "ann" }),
            Routing::Targeted
        );
    }

    #[test]
    fn and_takes_the_best_clause_or_adds_its_branches() {
        let k = key(doc! { "to": 1 });
        assert_eq!(
            k.routing(&doc! { "$and": [{ "sent": { "$lt": 5 } }, { "to": "bob" }] }),
            Routing::Targeted
        );
        assert_eq!(
            k.routing(&doc! { "$or": [{ "to": "bob" }, { "to": { "$in": ["a", "b"] } }] }),
            Routing::Shards(3)
        );
        assert_eq!(
            k.routing(&doc! { "$or": [{ "to": "bob" }, { "sent": 1 }] }),
            Routing::Broadcast
        );
        assert_eq!(
            k.routing(&doc! { "$or": [{ "to": "bob" }], "to": { "$in": ["bob", "x"] } }),
            Routing::Targeted
        );
    }
}
