//! A real server for tests, benches, examples and local development (feature `testing`).
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
//!     `vendor/documentdb/`, FerretDB's Go module); the fixture only starts it, and says to run
//!     the script where it is missing. [`restart_postgresql`] restarts its PostgreSQL, as a
//!     crash would, under a running FerretDB.
//!
//! One server per process is deliberate: test binaries (and `cargo nextest`'s per-test processes)
//! never share data or wait on each other, and there is no daemon to leave behind. The instance
//! runs under a small `sh` watchdog that stops it and removes its data directory within about a
//! second of the test process exiting, however it exits (Rust never drops statics). Starting one
//! costs about a second. Processes that find no FerretDB binary each build their own copy at the
//! same time (safe, just slower); build once first (`cargo test --test fixture`) to avoid that.
//!
//! The local servers need a Unix (`sh`, `kill`); elsewhere, set `MONGODB_URI`.
//!
//! One line on stderr says which server is used. Progress and skip notices are written to the
//! process's real stderr, which the test harness does not capture.
//!
//! # Writing a test
//!
//! ```no_run
//! use mongo_social::testing;
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
//! # What is stable
//!
//! For an application's tests: [`server_uri`], [`client`] and [`client_with`], [`test_db`] and
//! [`TestDb`], [`server_info`], [`CommandCounter`], [`fault_proxy`], [`skip_unless`], [`note`],
//! [`LocalServer`] and [`restart_postgresql`]. The crate's own conformance suites
//! (`inbox_suite`, `lifecycle_suite`, `comments_suite`, `comment_votes_suite`) and its routing
//! classifier (`routing`) are public so that its test files and benches can share them, and are
//! hidden from these docs: they assert this crate's own command counts and may change in any
//! release (as `object_store`'s `integration` module does).
//!
//! Every `#[tokio::test]` has its own runtime, and a [`mongodb::Client`] must not outlive the
//! runtime it was made in, so [`client`] and [`test_db`] make a new client on every call.

mod commands;
#[doc(hidden)]
pub mod comment_votes_suite;
#[doc(hidden)]
pub mod comments_suite;
#[cfg(unix)]
mod documentdb;
#[cfg(unix)]
mod documentdb_sharded;
pub mod fault_proxy;
#[cfg(unix)]
mod ferretdb;
#[doc(hidden)]
pub mod inbox_suite;
#[doc(hidden)]
pub mod lifecycle_suite;
#[cfg(unix)]
mod local_server;
#[cfg(unix)]
mod mongo_java_server;
#[doc(hidden)]
pub mod routing;
mod set_up;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bson::doc;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, Database};

use crate::server::ServerInfo;

pub use commands::{CommandCounter, KeptCommand, IGNORED_COMMANDS};
pub use set_up::SetUp;

/// The `_id` a [`BucketedFanOut`](crate::BucketedFanOut) gives `owner`'s bucket `sequence`, for
/// benches and tests that write or inspect buckets directly.
pub fn bucket_id(owner: &str, sequence: i64) -> String {
    crate::inbox::bucketed::bucket_id(owner, sequence)
}

/// How long clients made here wait to find a server before an operation fails.
pub const SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the first [`client`] call of a process waits for the server to answer `ping`.
const FIRST_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Longest database name [`database_name`] returns, in bytes (MongoDB allows 63, FerretDB too).
const MAX_DATABASE_NAME: usize = 60;

static URI: OnceLock<Result<String, String>> = OnceLock::new();
static SERVER_ANSWERED: AtomicBool = AtomicBool::new(false);
static SERVER_INFO: tokio::sync::OnceCell<ServerInfo> = tokio::sync::OnceCell::const_new();
static SKIPPED: AtomicUsize = AtomicUsize::new(0);

/// Writes one line to the process's real stderr (the test harness captures `eprintln!`, not
/// this).
fn say(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(format!("{line}\n").as_bytes());
    let _ = stderr.flush();
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
    match URI.get_or_init(resolve_uri) {
        Ok(uri) => uri,
        Err(message) => panic!("{message}"),
    }
}

fn resolve_uri() -> Result<String, String> {
    if let Some(uri) = std::env::var_os("MONGODB_URI").filter(|uri| !uri.is_empty()) {
        let uri = uri
            .into_string()
            .map_err(|_| "MONGODB_URI is not valid UTF-8".to_owned())?;
        say(&format!(
            "mongo-social: using MONGODB_URI ({})",
            redact(&uri)
        ));
        return Ok(uri);
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

/// A connection string safe to print: no credentials, no options.
fn redact(uri: &str) -> String {
    let without_options = uri.split('?').next().unwrap_or(uri);
    let Some(scheme_end) = without_options.find("://") else {
        return "(unparsable URI)".to_owned();
    };
    let (scheme, rest) = without_options.split_at(scheme_end + 3);
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let hosts = match authority.rfind('@') {
        Some(at) => format!("***@{}", &authority[at + 1..]),
        None => authority.to_owned(),
    };
    let options = if uri.contains('?') { "?..." } else { "" };
    format!("{scheme}{hosts}{path}{options}")
}

/// [`server_uri`], without blocking the async runtime while the server starts.
async fn server_uri_async() -> &'static str {
    if let Some(Ok(uri)) = URI.get() {
        return uri;
    }
    match tokio::task::spawn_blocking(server_uri).await {
        Ok(uri) => uri,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("starting the test server was cancelled: {error}"),
        },
    }
}

/// A new client for the test server, with a [`SERVER_SELECTION_TIMEOUT`] server selection
/// timeout.
///
/// # Panics
///
/// Like [`server_uri`]; also if the first client of the process cannot `ping` the server within
/// 20 seconds.
pub async fn client() -> Client {
    client_with(|_| {}).await
}

/// Like [`client`], with `options_fn` adjusting the options (parsed from [`server_uri`], with the
/// server selection timeout already set) before the client is built.
///
/// ```no_run
/// # async fn example() {
/// let counter = mongo_social::testing::CommandCounter::new();
/// let client = mongo_social::testing::client_with(|options| counter.attach(options)).await;
/// # }
/// ```
pub async fn client_with(options_fn: impl FnOnce(&mut ClientOptions)) -> Client {
    let uri = server_uri_async().await;
    if !SERVER_ANSWERED.load(Ordering::Acquire) {
        wait_for_ping(uri).await;
        SERVER_ANSWERED.store(true, Ordering::Release);
    }
    let mut options = parse_options(uri).await;
    options_fn(&mut options);
    Client::with_options(options)
        .unwrap_or_else(|error| panic!("cannot create a client for {}: {error}", redact(uri)))
}

async fn parse_options(uri: &str) -> ClientOptions {
    let mut options = ClientOptions::parse(uri)
        .await
        .unwrap_or_else(|error| panic!("cannot parse the server URI {}: {error}", redact(uri)));
    options.server_selection_timeout = Some(SERVER_SELECTION_TIMEOUT);
    options
}

/// Retries `ping` until the server answers, so a server that accepts connections but is still
/// starting does not fail the first test.
async fn wait_for_ping(uri: &str) {
    let mut options = parse_options(uri).await;
    options.server_selection_timeout = Some(Duration::from_secs(5));
    let client = Client::with_options(options)
        .unwrap_or_else(|error| panic!("cannot create a client for {}: {error}", redact(uri)));
    let admin = client.database("admin");
    let started = Instant::now();
    loop {
        match admin.run_command(doc! { "ping": 1 }).await {
            Ok(_) => return,
            Err(error) if started.elapsed() >= FIRST_PING_TIMEOUT => panic!(
                "the test server at {} did not answer `ping` within {} s: {error}",
                redact(uri),
                FIRST_PING_TIMEOUT.as_secs()
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// What the test server is and can do, detected once per process.
///
/// # Panics
///
/// Like [`client`]; also if detection fails.
pub async fn server_info() -> &'static ServerInfo {
    SERVER_INFO
        .get_or_init(|| async {
            let client = client().await;
            ServerInfo::detect(&client).await.unwrap_or_else(|error| {
                panic!(
                    "cannot detect the test server at {}: {error}",
                    redact(server_uri())
                )
            })
        })
        .await
}

/// A fresh, empty database for one test, on a client whose commands are counted.
#[derive(Clone, Debug)]
pub struct TestDb {
    /// A client made for this test, with [`TestDb::commands`] attached.
    pub client: Client,
    /// The database, dropped just before it was handed out. Its name comes from
    /// [`database_name`].
    pub db: Database,
    /// What the server is and can do.
    pub info: ServerInfo,
    /// Every command [`TestDb::client`] has sent since the database was dropped (or since the
    /// last reset).
    pub commands: CommandCounter,
}

impl TestDb {
    /// A collection of [`TestDb::db`].
    pub fn collection<T: Send + Sync>(&self, name: &str) -> Collection<T> {
        self.db.collection(name)
    }

    /// How many documents the database holds, over every collection but those in `except`
    /// (lock collections, say): to check that a refused operation wrote nothing.
    ///
    /// # Panics
    ///
    /// If the server cannot list or count.
    pub async fn documents(&self, except: &[&str]) -> u64 {
        let mut total = 0;
        for name in self
            .db
            .list_collection_names()
            .await
            .expect("list collections")
        {
            if !except.contains(&name.as_str()) {
                total += self
                    .db
                    .collection::<bson::Document>(&name)
                    .count_documents(doc! {})
                    .await
                    .expect("count documents");
            }
        }
        total
    }

    /// Every document of every collection but those in `except`, by collection name, each
    /// collection's documents in `_id` order: compare two snapshots to check that a refused
    /// operation changed nothing (not even a field).
    ///
    /// # Panics
    ///
    /// If the server cannot list or read.
    pub async fn snapshot(&self, except: &[&str]) -> Vec<(String, Vec<bson::Document>)> {
        use futures::TryStreamExt;
        let mut names = self
            .db
            .list_collection_names()
            .await
            .expect("list collections");
        names.retain(|name| !except.contains(&name.as_str()));
        names.sort();
        let mut snapshot = Vec::with_capacity(names.len());
        for name in names {
            let documents: Vec<bson::Document> = self
                .db
                .collection::<bson::Document>(&name)
                .find(doc! {})
                .sort(doc! { "_id": 1 })
                .await
                .expect("find")
                .try_collect()
                .await
                .expect("read documents");
            snapshot.push((name, documents));
        }
        snapshot
    }
}

/// A new client and the database [`database_name(name)`](database_name), dropped first so it
/// starts empty. Use a name unique to the test (its function name, say): tests run concurrently.
///
/// # Panics
///
/// Like [`client`]; also if the database cannot be dropped.
pub async fn test_db(name: &str) -> TestDb {
    let commands = CommandCounter::new();
    let client = client_with(|options| commands.attach(options)).await;
    let info = server_info().await.clone();
    let db = client.database(&database_name(name));
    drop_database(&db).await;
    commands.reset();
    TestDb {
        client,
        db,
        info,
        commands,
    }
}

/// Drops `db`, tried up to five times: DocumentDB over Citus fails a `dropDatabase` now and then
/// with a deadlock between its nodes (code 112) or a reset connection, and a second try passes.
/// [`test_db`] drops its database this way; a test with a client of its own uses it directly.
///
/// # Panics
///
/// If the fifth try fails too.
pub async fn drop_database(db: &Database) {
    const TRIES: u32 = 5;
    for attempt in 1..=TRIES {
        match db.drop().await {
            Ok(()) => return,
            Err(error) if attempt < TRIES => {
                say(&format!(
                    "dropping test database {} failed (try {attempt} of {TRIES}): {error}",
                    db.name()
                ));
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            Err(error) => panic!("cannot drop test database {}: {error}", db.name()),
        }
    }
}

/// The database name [`test_db`] uses for a test name: `ms_` and the name, lowercased, with
/// anything but ASCII letters, digits and `_` replaced by `_`.
///
/// If that changed the name, or made it longer than 60 bytes, it is cut short and ends in a hash
/// of the original name instead, so distinct names give distinct databases (and names differing
/// only in case, which MongoDB refuses side by side, do not clash). The same name always gives
/// the same database.
pub fn database_name(name: &str) -> String {
    let body: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let plain = format!("ms_{body}");
    if body == name && plain.len() <= MAX_DATABASE_NAME {
        return plain;
    }
    let hash = format!("{:012x}", fnv1a64(name.as_bytes()) & 0xffff_ffff_ffff);
    let mut prefix = plain;
    // ASCII only, so any byte length is a char boundary.
    prefix.truncate(MAX_DATABASE_NAME - 1 - hash.len());
    format!("{prefix}_{hash}")
}

/// FNV-1a, 64 bits: stable across Rust versions and runs, unlike `DefaultHasher`.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether a test should skip because the server lacks what it needs: `true` (skip) when `cond`
/// is false, after writing `SKIPPED <test>: <reason>` to stderr and counting the skip.
///
/// ```no_run
/// # async fn example() {
/// use mongo_social::testing;
///
/// let info = testing::server_info().await;
/// if testing::skip_unless(info.capabilities().transactions, "moves_atomically",
///     "needs transactions (a replica set)") {
///     return;
/// }
/// # }
/// ```
pub fn skip_unless(cond: bool, test: &str, reason: &str) -> bool {
    if cond {
        return false;
    }
    SKIPPED.fetch_add(1, Ordering::Relaxed);
    say(&format!("SKIPPED {test}: {reason}"));
    true
}

/// The retry policy of the "impatient" writers in the outage checks
/// ([`fault_proxy::FaultProxy::outage_during`], on a
/// [`fault_proxy::FaultProxy::impatient_client`]): a 1-second budget, shorter than the outage,
/// so some of their writes fail, including writes that ran on the server but whose replies were
/// lost, and the checks see what a caller is left with after an error.
pub fn impatient_retry() -> crate::RetryPolicy {
    crate::RetryPolicy::default().budget(std::time::Duration::from_secs(1))
}

/// Prints a note on the real stderr (not captured by the test harness), for what a reader of
/// the test log must know, such as a check run at reduced volume on this server.
pub fn note(text: &str) {
    say(&format!("NOTE {text}"));
}

/// How many times [`skip_unless`] said to skip in this process.
pub fn skipped_count() -> usize {
    SKIPPED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names() {
        assert_eq!(database_name("inbox_page"), "ms_inbox_page");
        let dashed = database_name("inbox-page");
        let underscored = database_name("inbox_page");
        assert_ne!(dashed, underscored);
        assert!(dashed.starts_with("ms_inbox_page_"));
        assert_ne!(database_name("Page"), database_name("page"));
        assert_eq!(database_name("a::b"), database_name("a::b"));
        let long = "x".repeat(200);
        assert!(database_name(&long).len() <= MAX_DATABASE_NAME);
        assert_ne!(database_name(&long), database_name(&format!("{long}y")));
        assert!(database_name("héllo wörld")
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    }

    #[test]
    fn redacts_credentials_and_options() {
        assert_eq!(
            redact("mongodb://user:secret@h1:27017,h2/db?authSource=admin"),
            "mongodb://***@h1:27017,h2/db?..."
        );
        assert_eq!(
            redact("mongodb://127.0.0.1:1234/"),
            "mongodb://127.0.0.1:1234/"
        );
        assert_eq!(
            redact("mongodb+srv://u:p@cluster.example.net"),
            "mongodb+srv://***@cluster.example.net"
        );
    }
}
