//! Starting the local FerretDB 2 over PostgreSQL with the DocumentDB extension (the engine of
//! FerretDB 2.x and of Azure Cosmos DB for MongoDB vCore) that the tests use when
//! `MONGO_SOCIAL_SERVER=documentdb` (and `MONGODB_URI` is unset).
//!
//! The engine is built once per machine by `scripts/install-documentdb` (C extensions into
//! PostgreSQL 15's directories, FerretDB and a template cluster into the cache directory); this
//! module only finds what it installed and starts it. Each process gets its own cluster, copied
//! from the template into a temporary directory (a copy costs a fraction of a second where
//! `initdb` and `CREATE EXTENSION` cost seconds), with PostgreSQL listening on a Unix socket in
//! that directory only and FerretDB on a free loopback port. One launcher script, run by the
//! watchdog of [`super::local_server`], starts both and stops both.
//!
//! Blocking, standard library only (plus `sh`, `cp` and, as root, `runuser`). Errors are plain
//! messages for the panic that fails the test.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::local_server::{self, cache_root};

/// FerretDB's version, as the install script builds it.
pub(super) const FERRETDB_VERSION: &str = "v2.5.0";
/// DocumentDB's version.
pub(super) const DOCUMENTDB_VERSION: &str = "0.106.0";
/// PostgreSQL's major version (Debian's package).
const PG_MAJOR: u32 = 15;
/// The install script's subdirectory of the cache directory (its `KEY`).
const INSTALL_KEY: &str = "documentdb-0.106.0-ferretdb-2.5.0-pg15-r3";
/// PostgreSQL starts from a copied template in well under a second; a cold machine is slower.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The launcher the watchdog runs: `$1` the scratch directory, `$2` PostgreSQL's `bin`, `$3` the
/// template cluster, `$4` FerretDB, `$5` FerretDB's port, `$6` `root` when PostgreSQL must run as
/// the `postgres` user. It copies the template, starts PostgreSQL, then FerretDB, and stops both
/// when it is told to stop or when FerretDB exits.
const LAUNCHER: &str = r#"dir="$1"; bin="$2"; template="$3"; ferretdb="$4"; port="$5"; as="$6"
pg() { if [ "$as" = root ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cp -a "$template" "$dir/data" || exit 1
mkdir -p "$dir/run" "$dir/state" || exit 1
if [ "$as" = root ]; then chmod 711 "$dir"; chown -R postgres: "$dir/data" "$dir/run" || exit 1; fi
pg tee -a "$dir/data/postgresql.conf" >/dev/null <<EOF
unix_socket_directories = '$dir/run'
documentdb.localhost_connection_string = 'host=$dir/run'
synchronous_commit = on
EOF
stop() { [ -n "$ferret" ] && kill "$ferret" 2>/dev/null; pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1; }
trap 'stop; exit 0' TERM INT HUP
pg "$bin/pg_ctl" -D "$dir/data" -w -t 60 -l "$dir/run/postgresql.log" start >/dev/null ||
  { cat "$dir/run/postgresql.log" >&2; stop; exit 1; }
"$ferretdb" --postgresql-url="postgres://postgres@/postgres?host=$dir/run" \
  --listen-addr="127.0.0.1:$port" --state-dir="$dir/state" --telemetry=disable --no-auth \
  --debug-addr=- --log-level=error >&2 &
ferret=$!
wait "$ferret"
status=$?
ferret=
stop
exit "$status"
"#;

/// A FerretDB 2 this process started, over its own PostgreSQL cluster.
#[derive(Debug)]
pub(super) struct Started {
    /// `mongodb://127.0.0.1:PORT/`.
    pub(super) uri: String,
    /// Where the engine is installed (the cache directory's part).
    pub(super) install: PathBuf,
    /// The scratch directory: the cluster in `data`, its socket and log in `run`.
    pub(super) dir: PathBuf,
}

/// The cluster this process started, for [`restart_postgresql`].
static CLUSTER: OnceLock<(PathBuf, bool)> = OnceLock::new();

/// Where `scripts/install-documentdb` installs, and whether it finished.
fn installation() -> Result<PathBuf, String> {
    let install = cache_root().join(INSTALL_KEY);
    let complete = install.join("installed").is_file()
        && install.join("bin").join("ferretdb").is_file()
        && install.join("template").join("PG_VERSION").is_file()
        && pg_bin().join("postgres").is_file();
    if complete {
        Ok(install)
    } else {
        Err(format!(
            "the DocumentDB engine is not installed (looked in {}). Run \
             `scripts/install-documentdb` from the repository once (it installs Debian packages, \
             builds PostgreSQL {PG_MAJOR}'s DocumentDB extensions and FerretDB {FERRETDB_VERSION}: \
             a few minutes the first time), or set MONGODB_URI to a running server",
            install.display()
        ))
    }
}

fn pg_bin() -> PathBuf {
    PathBuf::from(format!("/usr/lib/postgresql/{PG_MAJOR}/bin"))
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// Starts PostgreSQL (from the installed template) and FerretDB 2 for this process.
pub(super) fn start() -> Result<Started, String> {
    let install = installation()?;
    let as_root = running_as_root();
    let running = local_server::start("FerretDB 2 over DocumentDB", READY_TIMEOUT, |port, dir| {
        vec![
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from(LAUNCHER),
            OsString::from("mongo-social-documentdb"), // $0
            dir.as_os_str().to_owned(),
            pg_bin().into_os_string(),
            install.join("template").into_os_string(),
            install.join("bin").join("ferretdb").into_os_string(),
            OsString::from(port.to_string()),
            OsString::from(if as_root { "root" } else { "user" }),
        ]
    })?;
    let _ = CLUSTER.set((running.dir.join("data"), as_root));
    Ok(Started {
        uri: running.uri,
        install,
        dir: running.dir,
    })
}

/// Restarts the PostgreSQL cluster under this process's FerretDB 2 as a crash would: an
/// immediate stop (every backend killed, no checkpoint), then a start, `down_for` apart.
/// FerretDB stays up and answers with errors while PostgreSQL is away.
pub(super) fn restart_postgresql(down_for: Duration) -> Result<(), String> {
    let (data, as_root) = CLUSTER
        .get()
        .ok_or("this process started no FerretDB 2 over DocumentDB")?;
    pg_ctl(data, *as_root, &["-m", "immediate", "stop"])?;
    std::thread::sleep(down_for);
    let log = data.parent().map_or_else(
        || data.join("restart.log"),
        |dir| dir.join("run").join("restart.log"),
    );
    let log = log.display().to_string();
    pg_ctl(data, *as_root, &["-w", "-t", "60", "-l", &log, "start"])
}

fn pg_ctl(data: &Path, as_root: bool, args: &[&str]) -> Result<(), String> {
    let pg_ctl = pg_bin().join("pg_ctl");
    let mut command = if as_root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(pg_ctl);
        command
    } else {
        Command::new(pg_ctl)
    };
    let output = command
        .arg("-D")
        .arg(data)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run pg_ctl: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "pg_ctl {} failed ({}): {}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
