//! Routing read from a sharding engine's own plans: every inbox strategy's collections sharded
//! through the crate's API (`shard_collections`, one call per store), its hot reads sent, and
//! each read's `explain` asked how many shards it reaches. A read the simulated classifier
//! (`testing::routing`, the check `tests/shard_targeting.rs` runs on every server) calls
//! targeted must reach one shard, and a broadcast more than one: the classifier and the engine
//! agree.
//!
//! Runs where `MONGODB_URI` names a sharded deployment: a `mongos`, or DocumentDB behind its
//! gateway (`scripts/documentdb-cluster start DIR` prints such a URI); elsewhere every test says
//! it skipped.

use bson::{doc, Bson, Document};
use mongo_social::sharding::Routing;
use mongo_social::testing::routing::route_commands;
use mongo_social::testing::{self, CommandCounter};
use mongo_social::{
    BucketedFanOut, DynInboxLifecycle, FanOutOnRead, FanOutOnWrite, NewMessage, PageRequest,
};
use mongodb::Database;
use std::sync::Arc;

/// Whether `test` skips: the server is not sharded (the skip is printed).
async fn skips(test: &str) -> bool {
    let info = testing::server_info().await;
    testing::skip_unless(
        info.topology == mongo_social::server::Topology::Sharded,
        test,
        "needs a sharded deployment (a mongos, or DocumentDB's gateway over Citus: scripts/documentdb-cluster)",
    )
}

/// How many shards a plan reaches: `shardCount` of DocumentDB's gateway (`SHARD_MERGE`), the
/// `Task Count` of a Citus plan (FerretDB in front of DocumentDB), or the `shards` a `mongos`
/// lists; a plan with none of them ran on one shard.
fn shards_reached(plan: &Document) -> usize {
    fn search(value: &Bson) -> Option<usize> {
        match value {
            Bson::Document(document) => {
                for (key, inner) in document {
                    let count = match key.as_str() {
                        "shardCount" | "Task Count" => {
                            inner.as_f64().map(|n| n as usize).or_else(|| {
                                inner
                                    .as_i64()
                                    .map(|n| n as usize)
                                    .or(inner.as_i32().map(|n| n as usize))
                            })
                        }
                        "shards" => inner.as_array().map(Vec::len),
                        _ => None,
                    };
                    if let Some(count) = count.or_else(|| search(inner)) {
                        return Some(count);
                    }
                }
                None
            }
            Bson::Array(items) => items.iter().find_map(search),
            _ => None,
        }
    }
    search(&Bson::Document(plan.clone())).unwrap_or(1)
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
    ] {
        bare.remove(field);
    }
    bare
}

async fn database(name: &str) -> (Database, CommandCounter) {
    let commands = CommandCounter::keeping_commands();
    let client = testing::client_with(|options| commands.attach(options)).await;
    let db = client.database(&testing::database_name(name));
    db.drop().await.unwrap();
    (db, commands)
}

#[tokio::test]
async fn hot_inbox_reads_reach_the_shards_the_classifier_says() {
    if skips("hot_inbox_reads_reach_the_shards_the_classifier_says").await {
        return;
    }
    let (db, commands) = database("sharded_engine_inbox").await;
    let stores: Vec<(&str, Arc<DynInboxLifecycle<String>>)> = vec![
        (
            "fan-out-on-read",
            Arc::new(
                FanOutOnRead::<String>::builder(&db)
                    .collection_prefix("r_")
                    .build()
                    .unwrap(),
            ),
        ),
        (
            "fan-out-on-write",
            Arc::new(
                FanOutOnWrite::<String>::builder(&db)
                    .collection_prefix("w_")
                    .build()
                    .unwrap(),
            ),
        ),
        (
            "bucketed-fan-out",
            Arc::new(
                BucketedFanOut::<String>::builder(&db)
                    .collection_prefix("b_")
                    .build()
                    .unwrap(),
            ),
        ),
    ];
    for (name, store) in &stores {
        store.create_indexes().await.unwrap();
        store.shard_collections().await.unwrap();
        let users: Vec<String> = (0..12).map(|i| format!("user{i:02}")).collect();
        for i in 0..40 {
            let to: Vec<String> = (1..=3).map(|k| users[(i + k) % 12].clone()).collect();
            store
                .send(NewMessage::new(users[i % 12].as_str(), to, format!("m{i}")))
                .await
                .unwrap();
        }
        commands.reset();
        let page = store
            .inbox_page("user03", PageRequest::first(5))
            .await
            .unwrap();
        assert_eq!(page.items.len(), 5, "{name}");
        store
            .inbox_page("user03", PageRequest::after(5, page.next.unwrap()))
            .await
            .unwrap();
        store.unread_count("user03").await.unwrap();
        let keys = store.shard_keys();
        let mut checked = 0;
        for (command_name, command) in commands.commands() {
            if !matches!(command_name.as_str(), "find" | "aggregate" | "count") {
                continue;
            }
            let Some(routed) = route_commands(&[(command_name.clone(), command.clone())], &keys)
                .into_iter()
                .next()
            else {
                continue;
            };
            let plan = db
                .run_command(doc! { "explain": bare(&command), "verbosity": "queryPlanner" })
                .await
                .unwrap();
            let reached = shards_reached(&plan);
            println!("{name}: {routed}: {reached} shard(s)");
            match routed.routing {
                Routing::Targeted => assert_eq!(reached, 1, "{name}: {routed}: {plan}"),
                Routing::Broadcast => assert!(reached > 1, "{name}: {routed}: {plan}"),
                Routing::Shards(n) => assert!(reached <= n, "{name}: {routed}: {plan}"),
                _ => {}
            }
            checked += 1;
        }
        assert!(checked >= 2, "{name}: no read was explained");
    }
}
