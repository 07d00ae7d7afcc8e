//! Shard keys, and a helper that applies them when connected to a sharded cluster.

use bson::{doc, Document};
use mongodb::Database;

use crate::server::{ServerInfo, Topology};
use crate::{Error, Result};

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
}

/// Shards each collection on its key, when `database` is reached through a `mongos`.
///
/// Runs `enableSharding` for the database, then `shardCollection` for each key. Collections that
/// are already sharded with the same key are left as they are (the server accepts the repeat).
///
/// Create the strategy's indexes first: `shardCollection` needs an index that starts with the key
/// (it creates one on an empty collection).
///
/// # Errors
///
/// [`Error::NotSupported`] when the server is not a `mongos` (a standalone server, a replica set,
/// or FerretDB): sharding is a deployment decision, so this never pretends to succeed.
pub async fn shard_collections(database: &Database, keys: &[ShardKey]) -> Result<()> {
    let info = ServerInfo::detect_for(database).await?;
    if info.topology != Topology::Sharded {
        return Err(Error::NotSupported {
            feature: "sharding",
            reason: format!("the server is not a mongos ({})", info.describe()),
        });
    }
    let admin = database.client().database("admin");
    admin
        .run_command(doc! { "enableSharding": database.name() })
        .await?;
    for key in keys {
        let namespace = format!("{}.{}", database.name(), key.collection);
        admin
            .run_command(doc! { "shardCollection": namespace, "key": key.key.clone() })
            .await?;
    }
    Ok(())
}
