//! Test support for applications built on [mongo-social](mongo_social): a fresh database per
//! test on a real MongoDB-wire server, the commands each operation sends, and a proxy that
//! injects network faults.
//!
//! # Which server
//!
//! The server `MONGODB_URI` names (MongoDB, a replica set, Atlas, FerretDB, any MongoDB-wire
//! server), or, when it is unset, [`DEFAULT_URI`]: a server on this machine's default MongoDB
//! port. This crate starts no server: run one (a `mongod`, a FerretDB, a container) before the
//! tests, as you would for `sqlx`'s `DATABASE_URL`. A test harness that starts its own
//! throwaway server hands it over with [`use_local_server`].
//!
//! # An application's test
//!
//! ```no_run
//! use mongo_social::inbox::{FanOutOnWrite, InboxStore, NewMessage};
//! use mongo_social::page::PageRequest;
//!
//! #[tokio::test]
//! async fn a_sent_message_reaches_the_inbox() {
//!     // A fresh, empty database named after the test, dropped when `t` goes (kept if the
//!     // test fails, for a look).
//!     let t = mongo_social_testing::test_db("a_sent_message_reaches_the_inbox").await;
//!     let inbox = FanOutOnWrite::<String>::builder(&t.db).build().unwrap();
//!     inbox.create_indexes().await.unwrap();
//!
//!     inbox.send(NewMessage::new("joe", ["bob"], "Hi!".to_owned())).await.unwrap();
//!
//!     t.commands.reset();
//!     let page = inbox.inbox_page("bob", PageRequest::first(20)).await.unwrap();
//!     assert_eq!(page.items[0].payload, "Hi!");
//!     assert_eq!(t.commands.names(), ["find"]); // one round trip
//! }
//! ```
//!
//! Each `#[tokio::test]` has its own runtime, and a [`mongodb::Client`] must not outlive the
//! runtime it was made in, so [`client`] and [`test_db`] make a new client on every call.
//!
//! # What else is here
//!
//! - [`CommandCounter`]: the commands a client sends, to assert round trips.
//! - [`fault_proxy::FaultProxy`]: a loopback proxy that cuts connections, refuses new ones,
//!   loses replies and delays traffic, to test what an application does through a failover.
//! - [`skip_unless`] and [`note`]: a test that needs what the server lacks (transactions, change
//!   streams) says so on the console and returns.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod commands;
pub mod fault_proxy;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bson::doc;
use mongo_social::server::ServerInfo;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, Database};

pub use commands::{CommandCounter, KeptCommand, IGNORED_COMMANDS};

/// The server the tests use when `MONGODB_URI` is unset (or empty): MongoDB's default port on
/// this machine.
pub const DEFAULT_URI: &str = "mongodb://127.0.0.1:27017/";

/// How long clients made here wait to find a server before an operation fails.
pub const SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the first [`client`] call of a process waits for the server to answer `ping`.
const FIRST_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Longest database name [`database_name`] returns, in bytes (MongoDB allows 63, FerretDB too).
const MAX_DATABASE_NAME: usize = 60;

/// The server this process's tests use, fixed on first use.
#[derive(Debug)]
struct Server {
    uri: String,
    /// A throwaway server that goes away with the process ([`use_local_server`]): its test
    /// databases are not dropped one by one afterwards.
    throwaway: bool,
}

static SERVER: OnceLock<Server> = OnceLock::new();
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

/// The connection string `MONGODB_URI` holds, if it is set and not empty.
///
/// # Panics
///
/// If it is not valid UTF-8.
pub fn uri_from_env() -> Option<String> {
    std::env::var_os("MONGODB_URI")
        .filter(|uri| !uri.is_empty())
        .map(|uri| {
            uri.into_string()
                .unwrap_or_else(|_| panic!("MONGODB_URI is not valid UTF-8"))
        })
}

/// Hands this process's tests a throwaway server that a harness started itself (one that goes
/// away with the process), where `MONGODB_URI` is unset: call it before the first connection.
/// Test databases on it are not dropped one by one afterwards. Returns `false`, and changes
/// nothing, if the server was already fixed (by `MONGODB_URI`, an earlier call, or a first
/// use).
pub fn use_local_server(uri: impl Into<String>) -> bool {
    let mut given = Some(uri.into());
    let server = SERVER.get_or_init(|| Server {
        uri: given.take().unwrap_or_default(),
        throwaway: true,
    });
    given.is_none() && server.throwaway
}

fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        let (uri, from) = match uri_from_env() {
            Some(uri) => (uri, "MONGODB_URI"),
            None => (DEFAULT_URI.to_owned(), "MONGODB_URI is unset: the default"),
        };
        say(&format!(
            "mongo-social-testing: using {} ({from})",
            redact(&uri)
        ));
        Server {
            uri,
            throwaway: false,
        }
    })
}

/// The connection string of the server the tests use: `MONGODB_URI`, a server given to
/// [`use_local_server`], or [`DEFAULT_URI`]. The first call fixes it for the process.
pub fn server_uri() -> &'static str {
    &server().uri
}

/// A connection string safe to print: no credentials, no options.
pub fn redact(uri: &str) -> String {
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
/// let counter = mongo_social_testing::CommandCounter::new();
/// let client = mongo_social_testing::client_with(|options| counter.attach(options)).await;
/// # }
/// ```
pub async fn client_with(options_fn: impl FnOnce(&mut ClientOptions)) -> Client {
    let uri = server_uri();
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
    /// Drops the database when the last clone of this `TestDb` goes (held for its `Drop`).
    #[allow(dead_code)]
    cleanup: Arc<DropAfterwards>,
}

/// Drops a test's database when dropped itself (after the test, when its last [`TestDb`] clone
/// goes), unless the test is failing (the database is kept for a look, and dropped when the
/// same test next starts) or the server is a throwaway one ([`use_local_server`]).
#[derive(Debug)]
struct DropAfterwards {
    database: Option<String>,
}

impl Drop for DropAfterwards {
    fn drop(&mut self) {
        let Some(name) = self.database.take() else {
            return;
        };
        if std::thread::panicking() {
            say(&format!(
                "mongo-social-testing: kept database {name} of a failed test"
            ));
            return;
        }
        // The test's runtime may be shutting down, and its client belongs to it: the drop runs
        // on a thread of its own with a client of its own, and the test waits for it.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| error.to_string())?;
            runtime.block_on(async {
                let options = parse_options(server_uri()).await;
                let client = Client::with_options(options).map_err(|error| error.to_string())?;
                try_drop_database(&client.database(&name)).await
            })
        })
        .join();
        if let Ok(Err(error)) = dropped {
            say(&format!(
                "mongo-social-testing: could not drop a test's database: {error}"
            ));
        }
    }
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
/// starts empty, and dropped again when the returned [`TestDb`] (its last clone) goes, unless
/// the test failed (then it is kept for a look) or the server is a throwaway one
/// ([`use_local_server`]). Use a name unique to the test (its function name, say): tests run
/// concurrently.
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
    let cleanup = Arc::new(DropAfterwards {
        database: (!server().throwaway).then(|| db.name().to_owned()),
    });
    TestDb {
        client,
        db,
        info,
        commands,
        cleanup,
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
    if let Err(error) = try_drop_database(db).await {
        panic!("{error}");
    }
}

async fn try_drop_database(db: &Database) -> Result<(), String> {
    const TRIES: u32 = 5;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match db.drop().await {
            Ok(()) => return Ok(()),
            Err(error) if attempt < TRIES => {
                say(&format!(
                    "dropping test database {} failed (try {attempt} of {TRIES}): {error}",
                    db.name()
                ));
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            Err(error) => return Err(format!("cannot drop test database {}: {error}", db.name())),
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
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether a test should skip because the server lacks what it needs: `true` (skip) when `cond`
/// is false, after writing `SKIPPED <test>: <reason>` to stderr and counting the skip.
///
/// ```no_run
/// # async fn example() {
/// use mongo_social_testing as testing;
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
pub fn impatient_retry() -> mongo_social::retry::RetryPolicy {
    mongo_social::retry::RetryPolicy::default().budget(std::time::Duration::from_secs(1))
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
