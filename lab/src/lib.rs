//! This repository's test lab: the servers its tests, examples and benches run against, and the
//! checks every strategy must pass. Not published: an application's tests use
//! `mongo-social-testing` (re-exported here) with a server of their own.
//!
//! # Which server
//!
//! - If `MONGODB_URI` is set (and not empty), that server is used as is: MongoDB, FerretDB or
//!   another MongoDB-wire server; standalone, replica set or sharded.
//! - Otherwise each process starts its own local server on a free loopback port, chosen by
//!   `MONGO_SOCIAL_SERVER`:
//!   - `ferretdb` (the default): FerretDB 1.24 (SQLite backend), with a fresh data directory
//!     under the system temp directory. The binary is `$MONGO_SOCIAL_FERRETDB` if set, else
//!     `ferretdb` on `PATH`, else `$GOBIN/ferretdb` or `$(go env GOPATH)/bin/ferretdb`. When that
//!     binary is missing or does not run, it is built from the FerretDB v1.24.2 Go module (Go
//!     1.22 or newer needed; the first build takes a few minutes, later runs reuse the binary).
//!   - `mongo-java-server`: mongo-java-server 1.47.0 (in memory), through a launcher this crate
//!     carries. Needs a JDK (11 or newer) and Maven; the first run resolves its jars with Maven
//!     and compiles the launcher, and later runs reuse both (see [`server_uri`]).
//!   - `documentdb`: FerretDB 2.5.0 over PostgreSQL 15 with the DocumentDB 0.106 extension (the
//!     engine of FerretDB 2.x and Azure Cosmos DB for MongoDB vCore), each process on its own
//!     cluster in a temporary directory. Built and installed once per machine by
//!     `scripts/install-documentdb` (Debian's PostgreSQL packages, the C sources in
//!     `vendor/documentdb/`, FerretDB's Go module); the lab only starts it, and says to run
//!     the script where it is missing. [`restart_postgresql`] restarts its PostgreSQL, as a
//!     crash would, under a running FerretDB.
//!   - `documentdb-sharded`: DocumentDB over Citus (a coordinator and two workers) behind
//!     DocumentDB's gateway, installed by `scripts/install-documentdb --sharded`.
//!
//! One server per process is deliberate: test binaries (and `cargo nextest`'s per-test processes)
//! never share data or wait on each other, and there is no daemon to leave behind. The instance
//! runs under a small `sh` watchdog that stops it and removes its data directory within about a
//! second of the test process exiting, however it exits (Rust never drops statics). Starting one
//! costs about a second. Processes that find no FerretDB binary each build their own copy at the
//! same time (safe, just slower); build once first (`cargo test --test fixture`) to avoid that.
//! A local server is handed to `mongo-social-testing` as a throwaway one, so its test databases
//! are not dropped one by one afterwards: the whole server goes with the process.
//!
//! The local servers need a Unix (`sh`, `kill`); elsewhere, set `MONGODB_URI`.
//!
//! One line on stderr says which server is used. Progress and skip notices are written to the
//! process's real stderr, which the test harness does not capture.
//!
//! # Writing a test
//!
//! ```no_run
//! use mongo_social_lab as testing;
//!
//! #[tokio::test]
//! async fn one_page_is_one_find() {
//!     let t = testing::test_db("one_page_is_one_find").await; // fresh, empty database
//!     if testing::skip_unless(t.info.capabilities().slice_projection, "one_page_is_one_find",
//!         "needs $slice projections") {
//!         return;
//!     }
//!     // ... set up data, then:
//!     t.commands.reset();
//!     // ... run the operation ...
//!     assert_eq!(t.commands.names(), ["find"]);
//! }
//! ```
//!
//! The conformance suites (`inbox_suite`, `lifecycle_suite`, `comments_suite`,
//! `comment_votes_suite`) and the routing classifier (`routing`) assert this crate's own command
//! counts; they are shared by the test files and benches, and change with the library.

#![warn(missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]

pub mod comment_votes_suite;
pub mod comments_suite;
#[cfg(unix)]
mod documentdb;
#[cfg(unix)]
mod documentdb_sharded;
#[cfg(unix)]
mod ferretdb;
pub mod inbox_suite;
pub mod lifecycle_suite;
#[cfg(unix)]
mod local_server;
#[cfg(unix)]
mod mongo_java_server;
pub mod routing;
mod set_up;

use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use mongo_social::server::ServerInfo;
use mongodb::options::ClientOptions;
use mongodb::Client;

pub use mongo_social_testing::fault_proxy::{self, FaultProxy};
pub use mongo_social_testing::{
    database_name, drop_database, impatient_retry, note, redact, skip_unless, skipped_count,
    CommandCounter, KeptCommand, TestDb, IGNORED_COMMANDS, SERVER_SELECTION_TIMEOUT,
};
pub use set_up::SetUp;

static URI: OnceLock<Result<String, String>> = OnceLock::new();

/// Writes one line to the process's real stderr (the test harness captures `eprintln!`, not
/// this).
fn say(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(format!("{line}\n").as_bytes());
    let _ = stderr.flush();
}

/// The `_id` a [`BucketedFanOut`](mongo_social::BucketedFanOut) gives `owner`'s bucket
/// `sequence` (the owner's bytes in hex, a `.`, the sequence in 12 digits; see
/// `docs/INBOXES.md`), for benches and tests that write or inspect buckets directly.
pub fn bucket_id(owner: &str, sequence: i64) -> String {
    let hex: String = owner.bytes().map(|byte| format!("{byte:02x}")).collect();
    format!("{hex}.{sequence:012}")
}

/// The environment variable that picks the local server when `MONGODB_URI` is unset:
/// `ferretdb` (the default), `mongo-java-server`, `documentdb` or `documentdb-sharded`.
pub const SERVER_ENV: &str = "MONGO_SOCIAL_SERVER";

/// A server the fixture can start by itself, picked by [`SERVER_ENV`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocalServer {
    /// FerretDB 1.24 on SQLite, built from its Go module if missing (the default).
    FerretDb,
    /// mongo-java-server 1.47.0, in memory, resolved with Maven.
    MongoJavaServer,
    /// FerretDB 2.5.0 over PostgreSQL 15 with DocumentDB 0.106, installed by
    /// `scripts/install-documentdb`.
    DocumentDb,
    /// DocumentDB 0.106 sharded over Citus 12.1 (a coordinator and two workers) behind
    /// DocumentDB's gateway, installed by `scripts/install-documentdb --sharded`.
    DocumentDbSharded,
}

impl LocalServer {
    /// The server [`SERVER_ENV`] names (FerretDB when unset or empty).
    ///
    /// # Errors
    ///
    /// A message listing the accepted names, for any other value.
    pub fn from_env() -> Result<Self, String> {
        Self::from_name(std::env::var(SERVER_ENV).as_deref().unwrap_or(""))
    }

    /// The server a [`SERVER_ENV`] value names (FerretDB for `""`).
    ///
    /// # Errors
    ///
    /// A message listing the accepted names, for any other value.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "" | "ferretdb" => Ok(Self::FerretDb),
            "mongo-java-server" => Ok(Self::MongoJavaServer),
            "documentdb" => Ok(Self::DocumentDb),
            "documentdb-sharded" => Ok(Self::DocumentDbSharded),
            other => Err(format!(
                "{SERVER_ENV}={other:?} is not a server the tests can start; use `ferretdb` (the \
                 default), `mongo-java-server`, `documentdb` or `documentdb-sharded`, or set \
                 MONGODB_URI to a running server"
            )),
        }
    }
}

/// The connection string of the server the tests use: `MONGODB_URI`, or the local server
/// [`SERVER_ENV`] picks, which this process starts (once; later calls return the same string).
/// Blocks while it starts (and, the first time on a machine, while FerretDB is built or
/// mongo-java-server's jars are resolved).
///
/// # Panics
///
/// If no server can be had (for example, no FerretDB binary and no Go to build one, or no Java
/// for mongo-java-server), with a message saying what to install or set. The failure is
/// remembered: later calls panic at once with the same message.
pub fn server_uri() -> &'static str {
    match URI.get_or_init(|| {
        let uri = resolve_uri()?;
        mongo_social_testing::use_local_server(uri.clone());
        Ok(uri)
    }) {
        Ok(uri) => uri,
        Err(message) => panic!("{message}"),
    }
}

fn resolve_uri() -> Result<String, String> {
    if mongo_social_testing::uri_from_env().is_some() {
        return Ok(mongo_social_testing::server_uri().to_owned());
    }
    let use_uri = "To use a running server instead, set MONGODB_URI (such as \
                   MONGODB_URI=mongodb://127.0.0.1:27017/).";
    match LocalServer::from_env()? {
        LocalServer::FerretDb => {
            let started = ferretdb::start().map_err(|why| {
                format!(
                    "mongo-social needs a MongoDB-compatible server and could not start a \
                     local FerretDB: {why}\n{use_uri}"
                )
            })?;
            say(&format!(
                "mongo-social: FerretDB {} at {} (started from {}, data in {}; stopped when \
                 this process exits)",
                started.version,
                started.uri,
                started.binary.display(),
                started.data_dir.display()
            ));
            Ok(started.uri)
        }
        LocalServer::MongoJavaServer => {
            let started = mongo_java_server::start().map_err(|why| {
                format!("mongo-social could not start a local mongo-java-server: {why}\n{use_uri}")
            })?;
            say(&format!(
                "mongo-social: mongo-java-server {} at {} (launcher cached in {}; stopped \
                 when this process exits)",
                mongo_java_server::VERSION,
                started.uri,
                started.cache.display()
            ));
            Ok(started.uri)
        }
        LocalServer::DocumentDb => {
            let started = documentdb::start().map_err(|why| {
                format!(
                    "mongo-social could not start a local FerretDB 2 over DocumentDB: \
                     {why}\n{use_uri}"
                )
            })?;
            say(&format!(
                "mongo-social: FerretDB {} over PostgreSQL with DocumentDB {} at {} (installed in \
                 {}, data in {}; stopped when this process exits)",
                documentdb::FERRETDB_VERSION,
                documentdb::DOCUMENTDB_VERSION,
                started.uri,
                started.install.display(),
                started.dir.display()
            ));
            Ok(started.uri)
        }
        LocalServer::DocumentDbSharded => {
            let started = documentdb_sharded::start().map_err(|why| {
                format!("mongo-social could not start a local sharded DocumentDB: {why}\n{use_uri}")
            })?;
            say(&format!(
                "mongo-social: DocumentDB {} over Citus (a coordinator, two workers) behind its \
                 gateway at {} (data in {}; stopped when this process exits)",
                documentdb::DOCUMENTDB_VERSION,
                redact(&started.uri),
                started.dir.display()
            ));
            Ok(started.uri)
        }
    }
}

/// Restarts the PostgreSQL under this process's local FerretDB 2 (`MONGO_SOCIAL_SERVER=documentdb`)
/// as a crash would: every backend killed at once, then, `down_for` later, started again; the
/// FerretDB in front stays up and answers errors meanwhile. Blocking.
///
/// # Errors
///
/// A message if this process started no such server, or `pg_ctl` failed.
pub fn restart_postgresql(down_for: Duration) -> Result<(), String> {
    #[cfg(unix)]
    return documentdb::restart_postgresql(down_for);
    #[cfg(not(unix))]
    {
        let _ = down_for;
        Err("the local servers need a Unix".to_owned())
    }
}

#[cfg(not(unix))]
mod ferretdb {
    //! The local servers need a Unix shell; elsewhere only `MONGODB_URI` works.
    #![allow(dead_code)]

    pub(super) struct Started {
        pub(super) uri: String,
        pub(super) version: String,
        pub(super) binary: std::path::PathBuf,
        pub(super) data_dir: std::path::PathBuf,
    }

    pub(super) fn start() -> Result<Started, String> {
        Err("starting a local FerretDB is only supported on Unix".to_owned())
    }
}

#[cfg(not(unix))]
mod documentdb {
    //! The local servers need a Unix shell; elsewhere only `MONGODB_URI` works.
    #![allow(dead_code)]

    pub(super) const FERRETDB_VERSION: &str = "v2.5.0";
    pub(super) const DOCUMENTDB_VERSION: &str = "0.106.0";

    pub(super) struct Started {
        pub(super) uri: String,
        pub(super) install: std::path::PathBuf,
        pub(super) dir: std::path::PathBuf,
    }

    pub(super) fn start() -> Result<Started, String> {
        Err("starting a local FerretDB 2 is only supported on Unix".to_owned())
    }
}

#[cfg(not(unix))]
mod documentdb_sharded {
    //! The local servers need a Unix shell; elsewhere only `MONGODB_URI` works.
    #![allow(dead_code)]

    pub(super) struct Started {
        pub(super) uri: String,
        pub(super) dir: std::path::PathBuf,
    }

    pub(super) fn start() -> Result<Started, String> {
        Err("starting a local sharded DocumentDB is only supported on Unix".to_owned())
    }
}

#[cfg(not(unix))]
mod mongo_java_server {
    //! The local servers need a Unix shell; elsewhere only `MONGODB_URI` works.
    #![allow(dead_code)]

    pub(super) const VERSION: &str = "1.47.0";

    pub(super) struct Started {
        pub(super) uri: String,
        pub(super) cache: std::path::PathBuf,
    }

    pub(super) fn start() -> Result<Started, String> {
        Err("starting a local mongo-java-server is only supported on Unix".to_owned())
    }
}

/// [`server_uri`], without blocking the async runtime while the server starts.
async fn started() {
    if let Some(Ok(_)) = URI.get() {
        return;
    }
    if let Err(error) = tokio::task::spawn_blocking(server_uri).await {
        match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("starting the test server was cancelled: {error}"),
        }
    }
}

/// A new client for the test server ([`mongo_social_testing::client`]), once it has started.
pub async fn client() -> Client {
    started().await;
    mongo_social_testing::client().await
}

/// A new client for the test server with `options_fn` applied
/// ([`mongo_social_testing::client_with`]), once it has started.
pub async fn client_with(options_fn: impl FnOnce(&mut ClientOptions)) -> Client {
    started().await;
    mongo_social_testing::client_with(options_fn).await
}

/// What the test server is and can do, detected once per process.
pub async fn server_info() -> &'static ServerInfo {
    started().await;
    mongo_social_testing::server_info().await
}

/// A fresh, empty database for one test ([`mongo_social_testing::test_db`]) on the test server,
/// once it has started.
pub async fn test_db(name: &str) -> TestDb {
    started().await;
    mongo_social_testing::test_db(name).await
}

/// A fault proxy to the test server ([`FaultProxy::to_test_server`]), once it has started.
pub fn fault_proxy() -> FaultProxy {
    server_uri();
    FaultProxy::to_test_server()
}
