//! Starting the local sharded DocumentDB (`MONGO_SOCIAL_SERVER=documentdb-sharded`): a Citus
//! coordinator and two workers, each its own PostgreSQL 15 cluster on a free loopback port, with
//! DocumentDB's gateway in front, which answers as a `mongos` and takes `shardCollection`
//! (hashed keys only).
//!
//! `scripts/install-documentdb --sharded` builds the engine once per machine;
//! `scripts/documentdb-cluster run` (in the repository) starts it under the watchdog of
//! [`super::local_server`] and stops it when the test process exits. The gateway authenticates,
//! so the URI carries the user the script makes (a private test cluster's, on loopback only).
//!
//! Blocking, standard library only (plus `bash`). Errors are plain messages for the panic that
//! fails the test.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::local_server::{self, cache_root};

/// The install script's subdirectory of the cache directory (its `KEY`).
const INSTALL_KEY: &str = "documentdb-0.106.0-ferretdb-2.5.0-pg15-r3";
/// Three clusters made with `initdb`, the distributed extension set up, the gateway started.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// The user and password `scripts/documentdb-cluster` makes for the gateway's clients.
const USER: &str = "mongo_social:mongo_social_test";

/// A sharded DocumentDB this process started.
#[derive(Debug)]
pub(super) struct Started {
    /// The gateway's URI, with the test user.
    pub(super) uri: String,
    /// The scratch directory: the clusters and their logs.
    pub(super) dir: PathBuf,
}

/// The cluster script, from the repository's `scripts/`.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("documentdb-cluster")
}

/// Starts a coordinator, two workers and the gateway for this process.
pub(super) fn start() -> Result<Started, String> {
    let install = cache_root().join(INSTALL_KEY);
    let installed = install.join("installed-sharded").is_file()
        && install.join("bin").join("documentdb_gateway").is_file();
    if !installed {
        return Err(format!(
            "the sharded DocumentDB engine is not installed (looked in {}). Run \
             `scripts/install-documentdb --sharded` from the repository once (it builds Citus, \
             DocumentDB's distributed extension and its gateway beside the plain engine)",
            install.display()
        ));
    }
    let script = script();
    if !script.is_file() {
        return Err(format!("{} is missing", script.display()));
    }
    let running = local_server::start("sharded DocumentDB", READY_TIMEOUT, |port, dir| {
        vec![
            OsString::from("bash"),
            script.clone().into_os_string(),
            OsString::from("run"),
            dir.join("cluster").into_os_string(),
            OsString::from(port.to_string()),
        ]
    })?;
    let uri = running
        .uri
        .replacen("mongodb://", &format!("mongodb://{USER}@"), 1)
        // Without the driver's own write retries, which the gateway applies twice (see
        // `Capabilities::retried_writes_applied_once`): as Azure's Cosmos DB vCore strings say.
        // One new connection at a time: the gateway binds its listening socket anew after each
        // accepted connection and resets connections that arrive in between.
        + "?authMechanism=SCRAM-SHA-256&directConnection=true&retryWrites=false&maxConnecting=1";
    Ok(Started {
        uri,
        dir: running.dir,
    })
}
