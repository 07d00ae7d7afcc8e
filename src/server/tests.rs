//! Detection from replies recorded from each server, so servers this machine cannot run
//! (MongoDB 4.4 to 8, replica sets, `mongos`, FerretDB 2.x) are covered too.

use bson::{doc, Document};

use super::family::ferretdb1::FERRETDB_1_MAX_UPDATE_STATEMENTS;
use super::family::mongodb::version_at_least;
use super::family::ServerFamily;
use super::flavor::flavor_of;
use super::probes::Probes;
use super::{ServerFlavor, ServerInfo, Topology};

fn info(build: Document, hello: Document, has_hello: bool, probes: Option<Probes>) -> ServerInfo {
    ServerInfo::from_replies(&build, &hello, has_hello, probes.as_ref())
}

fn mongodb_build(version: &str, git: &str) -> Document {
    let parts: Vec<i32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
    doc! {
        "version": version, "gitVersion": git, "modules": [], "allocator": "tcmalloc",
        "javascriptEngine": "mozjs", "sysInfo": "deprecated",
        "versionArray": [parts[0], parts[1], parts[2], 0], "bits": 64, "debug": false,
        "maxBsonObjectSize": 16_777_216, "storageEngines": ["devnull", "wiredTiger"], "ok": 1.0,
    }
}

#[test]
fn versions_compare_by_major_and_minor() {
    assert!(version_at_least("5.1.0", 5, 1) && version_at_least("8.0.4", 5, 1));
    assert!(version_at_least("10.0.0", 5, 1), "numerically, not as text");
    assert!(!version_at_least("5.0.30", 5, 1) && !version_at_least("4.4.29", 5, 1));
    assert!(!version_at_least("unknown", 5, 1));
}

#[test]
fn mongodb_4_4_0_without_hello() {
    let build = mongodb_build("4.4.0", "563487e100c4215e2dce98d0af2a6a5a2d67c5cf");
    let is_master = doc! {
        "ismaster": true, "maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000,
        "maxWriteBatchSize": 100_000, "localTime": bson::DateTime::now(),
        "logicalSessionTimeoutMinutes": 30, "connectionId": 3, "minWireVersion": 0,
        "maxWireVersion": 9, "readOnly": false, "ok": 1.0,
    };
    let server = info(build, is_master, false, None);
    assert_eq!(server.flavor, ServerFlavor::MongoDb);
    assert_eq!(server.version, "4.4.0");
    assert_eq!(server.topology, Topology::Standalone);
    assert!(!server.has_hello);
    let capabilities = server.capabilities();
    assert!(capabilities.atomic_updates && capabilities.text_search);
    assert!(capabilities.slice_projection && capabilities.slice_past_end);
    assert!(!capabilities.transactions, "standalone");
    assert_eq!(capabilities.max_update_statements, 100_000);
    assert!(
        capabilities.missing() == ["transactions", "change streams"],
        "{:?}",
        capabilities.missing()
    );
    assert_eq!(
        server.describe(),
        "MongoDB 4.4.0, standalone, no `hello`, 100000 statements per write; lacks: \
         transactions, change streams"
    );
}

#[test]
fn mongodb_7_standalone() {
    let build = mongodb_build("7.0.14", "ce59cfc6a3c5e5c067dca0d30697edd68d4f5188");
    let hello = doc! {
        "isWritablePrimary": true,
        "topologyVersion": { "processId": bson::oid::ObjectId::new(), "counter": 0_i64 },
        "maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000,
        "maxWriteBatchSize": 100_000, "localTime": bson::DateTime::now(),
        "logicalSessionTimeoutMinutes": 30, "connectionId": 12, "minWireVersion": 0,
        "maxWireVersion": 21, "readOnly": false, "ok": 1.0,
    };
    let server = info(build, hello, true, None);
    assert_eq!(server.flavor, ServerFlavor::MongoDb);
    assert_eq!(server.topology, Topology::Standalone);
    assert_eq!(server.max_write_batch_size, 100_000);
    assert!(server.has_hello);
    assert_eq!(
        server.capabilities().missing(),
        ["transactions", "change streams"]
    );
}

#[test]
fn mongodb_8_replica_set_and_mongos() {
    let build = mongodb_build("8.0.4", "bc35ab4305d9920d9d0491c1c9ef9b72383d31f9");
    let member = doc! {
        "topologyVersion": { "processId": bson::oid::ObjectId::new(), "counter": 6_i64 },
        "hosts": ["db0:27017", "db1:27017", "db2:27017"], "setName": "rs0", "setVersion": 1,
        "isWritablePrimary": true, "secondary": false, "primary": "db0:27017",
        "me": "db0:27017", "electionId": bson::oid::ObjectId::new(),
        "maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000,
        "maxWriteBatchSize": 100_000, "localTime": bson::DateTime::now(),
        "logicalSessionTimeoutMinutes": 30, "connectionId": 40, "minWireVersion": 0,
        "maxWireVersion": 25, "readOnly": false, "ok": 1.0,
    };
    let server = info(build.clone(), member, true, None);
    assert_eq!(server.topology, Topology::ReplicaSet);
    assert!(server.capabilities().transactions);
    assert!(server.capabilities().change_streams);
    assert!(!server.capabilities().sharding);
    assert!(server.capabilities().missing().is_empty());

    let mongos = doc! {
        "isWritablePrimary": true, "msg": "isdbgrid", "maxBsonObjectSize": 16_777_216,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
        "localTime": bson::DateTime::now(), "logicalSessionTimeoutMinutes": 30,
        "connectionId": 7, "maxWireVersion": 25, "minWireVersion": 0, "ok": 1.0,
    };
    let server = info(build, mongos.clone(), true, None);
    assert_eq!(server.topology, Topology::Sharded);
    assert!(server.capabilities().sharding && server.capabilities().transactions);
    assert!(server.capabilities().graph_lookup);

    // Before 5.1, `mongos` runs no `$graphLookup` or `$lookup` from a sharded collection.
    for (version, git, joins) in [
        ("4.4.29", "f4dda329a99811c707eb06d05ad023599f9be263", false),
        ("5.0.30", "a79f6ab5d2d0c2a0f0e1e9d1de6bcbd6d5d5e3c2", false),
        ("5.1.0", "0ff6f6b2a5e4e9b2c9cbd04a56ad88cf6a2f5c51", true),
        ("10.0.0", "0000000000000000000000000000000000000000", true),
    ] {
        let server = info(mongodb_build(version, git), mongos.clone(), true, None);
        assert_eq!(
            server.capabilities().graph_lookup,
            joins,
            "mongos {version}"
        );
        assert_eq!(
            server.capabilities().missing().contains(&"$graphLookup"),
            !joins
        );
    }
    let member = info(
        mongodb_build("4.4.29", "f4dda329a99811c707eb06d05ad023599f9be263"),
        doc! { "isWritablePrimary": true, "setName": "rs0", "ok": 1.0 },
        true,
        None,
    );
    assert!(
        member.capabilities().graph_lookup,
        "unsharded: every version"
    );
}

#[test]
fn ferretdb_1_24() {
    // Recorded from FerretDB v1.24.2 (SQLite) as the fixture starts it.
    let build = doc! {
        "version": "7.0.42", "gitVersion": "unknown", "modules": [], "sysInfo": "deprecated",
        "versionArray": [7, 0, 42, 0], "bits": 64, "debug": false,
        "maxBsonObjectSize": 16_777_216,
        "buildEnvironment": { "CGO_ENABLED": "0", "GOARCH": "amd64", "GOOS": "linux" },
        "ferretdbVersion": "v1.24.2",
        "ferretdbFeatures": { "aggregationStages": ["$project", "$group", "$match"] },
        "ok": 1.0,
    };
    let hello = doc! {
        "isWritablePrimary": true, "maxBsonObjectSize": 16_777_216,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
        "localTime": bson::DateTime::now(), "logicalSessionTimeoutMinutes": 30,
        "connectionId": 42, "minWireVersion": 0, "maxWireVersion": 21, "readOnly": false,
        "ok": 1.0,
    };
    let server = info(build, hello, true, None);
    assert_eq!(
        server.flavor,
        ServerFlavor::FerretDb {
            version: "v1.24.2".to_owned()
        }
    );
    assert!(server.is_ferretdb());
    let capabilities = server.capabilities();
    assert!(!capabilities.atomic_updates);
    assert!(!capabilities.unordered_update_batches);
    assert!(!capabilities.slice_projection && !capabilities.text_search);
    assert!(!capabilities.change_streams);
    assert!(!capabilities.filters_beyond_id);
    assert!(!capabilities.graph_lookup, "no $graphLookup, no $lookup");
    assert_eq!(
        capabilities.max_update_statements, FERRETDB_1_MAX_UPDATE_STATEMENTS,
        "capped well below its pool"
    );
    assert!(server
        .describe()
        .starts_with("FerretDB v1.24.2 (MongoDB 7.0.42 wire), standalone, 3 statements"));
}

#[test]
fn ferretdb_2_is_not_taken_for_mongodb() {
    // FerretDB 2.x (DocumentDB on PostgreSQL) reports its version under `ferretdb`.
    let build = doc! {
        "version": "7.0.77", "gitVersion": "dcd4d6cc2b2c4a7ab4ea16e4f0ba2fa1bd7ab9b2",
        "modules": [], "sysInfo": "deprecated", "versionArray": [7, 0, 77, 0], "bits": 64,
        "debug": false, "maxBsonObjectSize": 16_777_216,
        "ferretdb": {
            "version": "v2.5.0", "gitVersion": "b4bd2a6", "package": "deb",
            "postgresql": "PostgreSQL 17.5", "documentdb": "0.106.0",
        },
        "ok": 1.0,
    };
    let hello = doc! {
        "isWritablePrimary": true, "maxBsonObjectSize": 16_777_216,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
        "localTime": bson::DateTime::now(), "logicalSessionTimeoutMinutes": 30,
        "minWireVersion": 0, "maxWireVersion": 21, "readOnly": false, "ok": 1.0,
    };
    // What its probes find (FerretDB 2.5.0 over DocumentDB 0.106, the fixture's
    // `documentdb`): everything but change streams, and a `$text` of two quoted phrases
    // matches documents holding either.
    let probes = Probes {
        slice_projection: true,
        slice_past_end: true,
        find_and_modify_projection: true,
        unordered_update_batches: true,
        group_first_accumulator: true,
        text_search: true,
        text_all_phrases: false,
        partial_indexes: true,
        change_streams: false,
        graph_lookup: true,
        pipeline_updates: true,
    };
    assert!(ServerFamily::of(&flavor_of(&build, &hello), true).is_probed());
    let server = info(build, hello, true, Some(probes));
    assert_eq!(
        server.flavor,
        ServerFlavor::FerretDb {
            version: "v2.5.0".to_owned()
        }
    );
    let capabilities = server.capabilities();
    assert!(capabilities.atomic_updates && capabilities.unordered_update_batches);
    assert!(capabilities.slice_projection && capabilities.text_search);
    assert!(!capabilities.text_all_phrases, "any phrase, not every one");
    assert!(capabilities.filters_beyond_id);
    assert_eq!(
        capabilities.missing(),
        [
            "transactions",
            "$text requiring every phrase",
            "change streams"
        ]
    );
    assert!(!capabilities.transactions && !capabilities.change_streams);
    assert!(
        capabilities.graph_lookup,
        "DocumentDB has $graphLookup and $lookup"
    );
    assert!(!capabilities.transactions && capabilities.pipeline_updates);
    // A command is one transaction there: small commands, several at once.
    assert_eq!(capabilities.max_update_statements, 16);
    assert_eq!(capabilities.update_commands_in_flight, 4);
    assert!(capabilities.write_commands_are_transactions);
}

#[test]
fn mongo_java_server_is_probed() {
    // Recorded from mongo-java-server 1.47.0 as the fixture launches it (reporting 5.0 on
    // wire version 13): no `gitVersion`, no `hello`, batches of 1,000.
    let build = doc! {
        "version": "5.0.0", "versionArray": [5, 0, 0], "maxBsonObjectSize": 16_777_216,
        "ok": 1.0,
    };
    let is_master = doc! {
        "ismaster": true, "maxBsonObjectSize": 16_777_216, "maxWriteBatchSize": 1000,
        "maxMessageSizeBytes": 48_000_000, "maxWireVersion": 13, "minWireVersion": 0,
        "localTime": bson::DateTime::now(), "ok": 1.0,
    };
    // What its probes find: `$slice` works but not past the end, `$text` does not.
    let probes = Probes {
        slice_projection: true,
        slice_past_end: false,
        find_and_modify_projection: true,
        unordered_update_batches: true,
        group_first_accumulator: true,
        text_search: false,
        text_all_phrases: false,
        partial_indexes: true,
        change_streams: true,
        graph_lookup: true,
        pipeline_updates: false,
    };
    let server = info(build.clone(), is_master.clone(), false, Some(probes));
    assert_eq!(server.flavor, ServerFlavor::Other);
    assert_eq!(server.max_write_batch_size, 1000);
    let capabilities = server.capabilities();
    assert!(
        capabilities.atomic_updates,
        "assumed where it cannot be probed"
    );
    assert!(capabilities.slice_projection && !capabilities.slice_past_end);
    assert!(!capabilities.text_search && !capabilities.transactions);
    assert!(capabilities.change_streams, "its oplog is on");
    assert!(
        capabilities.graph_lookup,
        "probed: it has $graphLookup and $lookup"
    );
    assert_eq!(capabilities.max_update_statements, 1000);
    assert_eq!(capabilities.update_commands_in_flight, 1);
    assert!(!capabilities.write_commands_are_transactions);
    assert_eq!(
        server.describe(),
        "a MongoDB-wire server reporting 5.0.0 (not MongoDB: no gitVersion in buildInfo), \
         standalone, no `hello`, 1000 statements per write; lacks: $slice past the end, \
         transactions, $text search, update pipelines"
    );

    // Unprobed (for example, no write privilege): nothing optional is assumed.
    let unprobed = info(build, is_master, false, None).capabilities();
    assert!(!unprobed.slice_projection && !unprobed.text_search);
    assert!(!unprobed.unordered_update_batches && !unprobed.find_and_modify_projection);
    assert!(!unprobed.change_streams);
    assert!(!unprobed.graph_lookup);
}

#[test]
fn documentdb_gateway_is_recognised() {
    // Recorded from DocumentDB 0.106's gateway in front of Citus (scripts/documentdb-cluster):
    // no `gitVersion`, no FerretDB fields, `msg: isdbgrid` and an `internal` document.
    let build = doc! {
        "version": "7.0.0", "versionArray": [7, 0, 0, 0], "bits": 64,
        "maxBsonObjectSize": 16_777_216, "ok": 1.0,
    };
    let hello = doc! {
        "isWritablePrimary": true, "msg": "isdbgrid", "maxBsonObjectSize": 16_777_216,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 25_000,
        "localTime": bson::DateTime::now(), "logicalSessionTimeoutMinutes": 30,
        "minWireVersion": 0, "maxWireVersion": 21, "readOnly": false, "connectionId": 3,
        "saslSupportedMechs": ["SCRAM-SHA-256"], "internal": {}, "ok": 1.0,
    };
    assert!(ServerFamily::of(&flavor_of(&build, &hello), true).is_probed());
    let probes = Probes {
        graph_lookup: true,
        ..Probes::default()
    };
    let server = info(build.clone(), hello.clone(), true, Some(probes));
    assert_eq!(server.flavor, ServerFlavor::DocumentDb);
    assert_eq!(server.topology, Topology::Sharded);
    let capabilities = server.capabilities();
    // The DocumentDB engine's tunings, as under FerretDB 2.x.
    assert_eq!(capabilities.max_update_statements, 16);
    assert_eq!(capabilities.update_commands_in_flight, 4);
    assert!(capabilities.write_commands_are_transactions);
    assert!(
        !capabilities.graph_lookup,
        "its probe joined an unsharded collection; it refuses $graphLookup from a sharded one"
    );
    assert!(server
        .describe()
        .starts_with("DocumentDB's gateway (MongoDB 7.0.0 wire), sharded"));

    // Without the `internal` field the same `buildInfo` is an unknown server.
    let mut plain = hello;
    plain.remove("internal");
    assert_eq!(flavor_of(&build, &plain), ServerFlavor::Other);
}

#[test]
fn every_family_is_named() {
    let named = |flavor: ServerFlavor, has_hello| ServerFamily::of(&flavor, has_hello).name();
    assert_eq!(named(ServerFlavor::MongoDb, true), "mongodb");
    let ferretdb = |version: &str| ServerFlavor::FerretDb {
        version: version.to_owned(),
    };
    assert_eq!(named(ferretdb("v1.24.2"), true), "ferretdb");
    assert_eq!(named(ferretdb("v2.5.0"), true), "documentdb");
    assert_eq!(named(ServerFlavor::DocumentDb, true), "documentdb");
    assert_eq!(named(ServerFlavor::Other, false), "mongo-java-server");
    assert_eq!(named(ServerFlavor::Other, true), "other");
}
