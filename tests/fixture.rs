//! The real-server test fixture itself, against the server it provides (`MONGODB_URI`, or a local
//! FerretDB it starts).

use bson::{doc, Document};
use futures::TryStreamExt;
use mongo_social::server::{ServerFlavor, ServerInfo, Topology, PROBE_COLLECTION_PREFIX};
use mongo_social_lab::{self as testing, CommandCounter, LocalServer};

#[tokio::test]
async fn uri_resolves_and_ping_works() {
    let uri = testing::server_uri();
    assert!(
        uri.starts_with("mongodb://") || uri.starts_with("mongodb+srv://"),
        "{uri}"
    );
    assert_eq!(testing::server_uri(), uri, "resolved once per process");

    let client = testing::client().await;
    let reply = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .unwrap();
    assert_eq!(
        reply
            .get_f64("ok")
            .ok()
            .or_else(|| reply.get_i32("ok").ok().map(f64::from)),
        Some(1.0)
    );

    let info = testing::server_info().await;
    assert!(!info.describe().is_empty());
    assert!(std::ptr::eq(info, testing::server_info().await));
}

#[tokio::test]
async fn test_db_starts_empty() {
    let first = testing::test_db("fixture_starts_empty").await;
    let items = first.collection::<Document>("items");
    items.insert_one(doc! { "n": 1 }).await.unwrap();
    assert_eq!(items.count_documents(doc! {}).await.unwrap(), 1);

    let second = testing::test_db("fixture_starts_empty").await;
    assert_eq!(second.db.name(), first.db.name());
    let items = second.collection::<Document>("items");
    assert_eq!(items.count_documents(doc! {}).await.unwrap(), 0);
    assert!(second.db.list_collection_names().await.unwrap().is_empty());
}

#[tokio::test]
async fn command_counter_counts_round_trips() {
    let t = testing::test_db("fixture_command_counter").await;
    assert_eq!(t.commands.total(), 0, "{:?}", t.commands.names());
    let items = t.collection::<Document>("items");

    let docs: Vec<Document> = (0..10).map(|n| doc! { "n": n }).collect();
    let (inserted, commands) = t.commands.measure(items.insert_many(docs)).await;
    assert_eq!(inserted.unwrap().inserted_ids.len(), 10);
    assert_eq!(commands, ["insert"]);

    let (found, commands) = t
        .commands
        .measure(async {
            items
                .find(doc! {})
                .sort(doc! { "n": 1 })
                .limit(5)
                .batch_size(5)
                .await?
                .try_collect::<Vec<_>>()
                .await
        })
        .await;
    assert_eq!(found.unwrap().len(), 5);
    assert_eq!(commands, ["find"]);
    assert_eq!(t.commands.count("find"), 1);
    assert_eq!(t.commands.snapshot().get("find"), Some(&1));

    // Handshake and monitoring commands are not counted, even when sent explicitly.
    let admin = t.client.database("admin");
    let handshake = if t.info.has_hello {
        "hello"
    } else {
        "isMaster"
    };
    let (_, commands) = t
        .commands
        .measure(async {
            admin.run_command(doc! { handshake: 1 }).await.unwrap();
            admin.run_command(doc! { "ping": 1 }).await.unwrap();
            admin.run_command(doc! { "buildInfo": 1 }).await.unwrap();
        })
        .await;
    assert!(commands.is_empty(), "{commands:?}");
    assert_eq!(t.commands.total(), 0);
}

#[tokio::test]
async fn counter_attaches_to_any_client() {
    let counter = CommandCounter::new();
    let client = testing::client_with(|options| counter.attach(options)).await;
    let db = client.database(&testing::database_name("fixture_counter_attach"));
    testing::drop_database(&db).await;
    counter.reset();
    db.collection::<Document>("items")
        .find_one(doc! {})
        .await
        .unwrap();
    assert_eq!(counter.names(), ["find"]);
}

#[tokio::test]
async fn long_test_names_give_valid_distinct_databases() {
    let base = "a_rather_long_test_name_that_describes_the_scenario_in_detail_and_then_some";
    let names = [
        format!("{base}_one"),
        format!("{base}_two"),
        format!("{base}::with-punctuation and spaces"),
        "Short".to_owned(),
        "short".to_owned(),
    ];
    let databases: Vec<String> = names.iter().map(|n| testing::database_name(n)).collect();
    for database in &databases {
        assert!(
            database.len() <= 63,
            "{database} is {} bytes",
            database.len()
        );
        assert!(database.starts_with("ms_"), "{database}");
        assert!(
            database
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{database}"
        );
    }
    let mut distinct = databases.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), databases.len(), "{databases:?}");

    // The server accepts them.
    let t = testing::test_db(&names[2]).await;
    assert_eq!(t.db.name(), databases[2]);
    t.collection::<Document>("items")
        .insert_one(doc! { "ok": true })
        .await
        .unwrap();
    testing::drop_database(&t.db).await;
}

#[tokio::test]
async fn skip_unless_skips_only_when_the_condition_fails() {
    let before = testing::skipped_count();
    assert!(!testing::skip_unless(true, "fixture_skip", "never printed"));
    assert!(testing::skip_unless(
        false,
        "fixture_skip",
        "the fixture's own check of skip_unless (expected)"
    ));
    assert!(testing::skipped_count() > before);
}

#[tokio::test]
async fn detects_what_the_local_server_is_and_can_do() {
    let info = testing::server_info().await;
    let capabilities = info.capabilities();
    let uri_set = std::env::var_os("MONGODB_URI").is_some_and(|uri| !uri.is_empty());
    if testing::skip_unless(
        !uri_set,
        "detects_what_the_local_server_is_and_can_do",
        &format!(
            "MONGODB_URI names the server, so what it is cannot be known in advance (detected: {})",
            info.describe()
        ),
    ) {
        return;
    }
    match LocalServer::from_env().unwrap() {
        LocalServer::FerretDb => {
            assert!(
                matches!(&info.flavor, ServerFlavor::FerretDb { version } if version.starts_with("v1.24.")),
                "{info:?}"
            );
            assert!(info.has_hello);
            assert!(!capabilities.atomic_updates && !capabilities.unordered_update_batches);
            assert!(!capabilities.slice_projection && !capabilities.text_search);
            assert_eq!(capabilities.max_update_statements, 3, "well below its pool");
        }
        LocalServer::MongoJavaServer => {
            assert_eq!(info.flavor, ServerFlavor::Other, "{info:?}");
            assert!(!info.has_hello, "mongo-java-server answers only isMaster");
            assert_eq!(info.version, "5.0.0");
            assert_eq!(info.max_write_batch_size, 1000);
            // What its probes found.
            assert!(capabilities.atomic_updates);
            assert!(capabilities.slice_projection, "$slice -N and [skip, limit]");
            assert!(!capabilities.slice_past_end, "fails a $slice past the end");
            assert!(capabilities.find_and_modify_projection);
            assert!(capabilities.group_first_accumulator);
            assert!(!capabilities.text_search, "no $text");
            assert_eq!(capabilities.max_update_statements, 1000);
        }
        LocalServer::DocumentDb => {
            // Recognized by `buildInfo.ferretdb.version` (no top-level `ferretdbVersion`).
            assert!(
                matches!(&info.flavor, ServerFlavor::FerretDb { version } if version.starts_with("v2.5.")),
                "{info:?}"
            );
            assert!(
                info.describe().starts_with("FerretDB v2.5."),
                "{}",
                info.describe()
            );
            assert!(capabilities.atomic_updates && capabilities.unordered_update_batches);
            assert!(capabilities.slice_projection && capabilities.slice_past_end);
            assert!(
                capabilities.find_and_modify_projection && capabilities.group_first_accumulator
            );
            assert!(capabilities.text_search && capabilities.graph_lookup);
            assert!(capabilities.filters_beyond_id);
            assert!(!capabilities.change_streams && !capabilities.transactions);
        }
        LocalServer::DocumentDbSharded => {
            // DocumentDB's gateway answers as a `mongos`, recognised by its `hello`.
            assert_eq!(info.flavor, ServerFlavor::DocumentDb, "{info:?}");
            assert_eq!(
                capabilities.max_update_statements, 16,
                "the engine's tuning"
            );
            assert!(capabilities.write_commands_are_transactions);
            assert_eq!(info.topology, Topology::Sharded, "{}", info.describe());
            assert!(capabilities.sharding && capabilities.atomic_updates);
            assert!(capabilities.slice_projection && capabilities.find_and_modify_projection);
            assert!(
                !capabilities.graph_lookup,
                "no $graphLookup from a sharded collection: {}",
                info.describe()
            );
            assert!(!capabilities.change_streams, "{}", info.describe());
        }
        other => panic!("no expectations for {other:?}"),
    }
}

#[tokio::test]
async fn detection_leaves_nothing_behind_and_is_not_counted() {
    let t = testing::test_db("fixture_detection_probes").await;
    let detected = ServerInfo::detect_for(&t.db).await.unwrap();
    assert_eq!(detected.flavor, t.info.flavor);
    assert_eq!(detected.capabilities(), t.info.capabilities());
    assert_eq!(
        t.commands.names(),
        Vec::<String>::new(),
        "probes are not counted"
    );
    let left: Vec<String> =
        t.db.list_collection_names()
            .await
            .unwrap()
            .into_iter()
            .filter(|name| name.starts_with(PROBE_COLLECTION_PREFIX))
            .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn local_server_names() {
    assert_eq!(
        LocalServer::from_name("mongo-java-server"),
        Ok(LocalServer::MongoJavaServer)
    );
    assert_eq!(
        LocalServer::from_name("ferretdb"),
        Ok(LocalServer::FerretDb)
    );
    assert_eq!(LocalServer::from_name(""), Ok(LocalServer::FerretDb));
    assert_eq!(
        LocalServer::from_name("documentdb"),
        Ok(LocalServer::DocumentDb)
    );
    let error = LocalServer::from_name("postgres").unwrap_err();
    assert!(error.contains("mongo-java-server"), "{error}");
}
