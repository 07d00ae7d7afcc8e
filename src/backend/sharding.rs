//! Sharding a store's collections through a `mongos`, and what each server answers to it: the
//! commands behind [`crate::sharding::shard_collections`] (whose docs say what they do), and the
//! refusals that tell which key forms and unique indexes a server's sharding takes.

use bson::{doc, Document};
use mongodb::Database;

use crate::error::{Error, Limit, Result};
use crate::retry::{retry, RetryPolicy};
use crate::server::{ServerInfo, Topology};

/// One collection to shard: its name, its key as declared, and the key's hashed form (sent where
/// the server takes hashed keys only).
pub(crate) struct Sharded<'a> {
    pub(crate) collection: &'a str,
    pub(crate) declared: Document,
    pub(crate) hashed: Document,
}

/// Shards each of `keys`' collections (see [`crate::sharding::shard_collections`]).
pub(crate) async fn shard_collections(database: &Database, keys: &[Sharded<'_>]) -> Result<()> {
    let policy = RetryPolicy::default();
    let topology = retry(&policy, "detect topology", || {
        Topology::detect(database.client())
    })
    .await?;
    if topology != Topology::Sharded {
        let info = ServerInfo::detect_for(database).await?;
        return Err(Error::Unsupported {
            limit: Limit::Server,
            feature: "sharding",
            reason: format!("the server is not a mongos ({})", info.describe()),
        });
    }
    let admin = database.client().database("admin");
    retry(&policy, "enable sharding", || async {
        match admin
            .run_command(doc! { "enableSharding": database.name() })
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if is_unknown_command(&error) => Ok(()),
            Err(error) => Err(error.into()),
        }
    })
    .await?;
    let mut refused = Vec::new();
    for key in keys {
        let namespace = format!("{}.{}", database.name(), key.collection);
        let shard = |key: Document| {
            admin.run_command(doc! { "shardCollection": namespace.as_str(), "key": key })
        };
        // Whether the collection is sharded (`false`: refused for its unique indexes).
        let sharded = retry(&policy, "shard collection", || async {
            let sharded = match shard(key.declared.clone()).await {
                Err(error) if refuses_ranged_keys(&error) => shard(key.hashed.clone()).await,
                other => other,
            };
            match sharded {
                Ok(_) => Ok(true),
                Err(error) if refuses_unique_indexes(&error) => Ok(false),
                Err(error) => Err(error.into()),
            }
        })
        .await?;
        if !sharded {
            refused.push(namespace);
        }
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(Error::Unsupported {
        limit: Limit::Server,
        feature: "sharding a collection with a unique index",
        reason: format!(
            "the engine refused to shard {} (\"cannot create constraint\": DocumentDB over Citus \
             needs citus.allow_unsafe_constraints, as its distributed configuration sets it); \
             they are left unsharded, their unique indexes kept",
            refused.join(", ")
        ),
    })
}

/// `CommandNotFound` or `CommandNotSupported`: the server has no such command.
fn is_unknown_command(error: &mongodb::error::Error) -> bool {
    matches!(command_error(error), Some((59 | 115, _)))
}

/// DocumentDB's refusal of a key that is not a single hashed field (`BadValue`, "only shard keys
/// that use hashed are supported").
fn refuses_ranged_keys(error: &mongodb::error::Error) -> bool {
    matches!(command_error(error), Some((2, message)) if message.contains("hashed"))
}

/// DocumentDB over Citus, without `citus.allow_unsafe_constraints`, refusing to shard a
/// collection with a unique index other than `_id` (`CommandNotSupported`, "cannot create
/// constraint on ...").
fn refuses_unique_indexes(error: &mongodb::error::Error) -> bool {
    matches!(command_error(error), Some((115, message)) if message.contains("cannot create constraint"))
}

fn command_error(error: &mongodb::error::Error) -> Option<(i32, &str)> {
    match error.kind.as_ref() {
        mongodb::error::ErrorKind::Command(command) => Some((command.code, &command.message)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error reply as the server sent it.
    fn reply(code: i32, message: &str) -> mongodb::error::Error {
        let command: mongodb::error::CommandError =
            bson::from_document(doc! { "code": code, "codeName": "", "errmsg": message }).unwrap();
        mongodb::error::ErrorKind::Command(command).into()
    }

    /// The refusals `shard_collections` acts on, as DocumentDB 0.106's gateway sent them.
    #[test]
    fn recorded_refusals_are_recognised() {
        let unique = reply(115, "cannot create constraint on \"documents_254\"");
        assert!(refuses_unique_indexes(&unique));
        assert!(!refuses_ranged_keys(&unique));
        let ranged = reply(2, "only shard keys that use hashed are supported");
        assert!(refuses_ranged_keys(&ranged));
        assert!(!refuses_unique_indexes(&ranged));
        assert!(is_unknown_command(&reply(
            59,
            "no such command: 'enableSharding'"
        )));
        assert!(!refuses_unique_indexes(&reply(
            115,
            "something else unsupported"
        )));
    }
}
