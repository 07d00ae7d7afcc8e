//! Running a local server process for one test process: a free loopback port, a watchdog that
//! stops the server when the test process exits, and a wait until it accepts connections.
//!
//! Shared by every server the fixture can start ([`super::ferretdb`],
//! [`super::mongo_java_server`], [`super::documentdb`]). Blocking, standard library only (plus
//! `sh` and `kill`).

use std::collections::hash_map::RandomState;
use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::say;

/// Attempts at starting a server, each on a new port (another process may take a free port
/// between our check and the server's bind).
const START_ATTEMPTS: usize = 3;

/// Watchdog run by `sh -c`: `$1` is the test process id, `$2` the server's scratch directory, the
/// rest is the server's command line. It starts the server in the background and stops it (then
/// removes the directory) once the test process is gone. If the server exits on its own, its log
/// is copied to the watchdog's stderr so the fixture can say why.
const WATCHDOG: &str = r#"parent="$1"; dir="$2"; shift 2
"$@" </dev/null >/dev/null 2>"$dir/server.log" &
child=$!
trap '' PIPE
trap 'kill "$child" 2>/dev/null' TERM INT HUP
while kill -0 "$parent" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 1; done
if kill -0 "$child" 2>/dev/null; then
  kill "$child" 2>/dev/null
else
  cat "$dir/server.log" >&2
fi
wait "$child" 2>/dev/null
rm -rf "$dir"
"#;

/// Watchdog processes of the servers this process started, kept so their pipes stay open.
static WATCHDOGS: Mutex<Vec<Child>> = Mutex::new(Vec::new());

/// A server this process started.
#[derive(Debug)]
pub(super) struct Running {
    /// `mongodb://127.0.0.1:PORT/`.
    pub(super) uri: String,
    /// Its scratch (data) directory, removed when it stops.
    pub(super) dir: PathBuf,
}

/// Starts `name` (for messages) on a free loopback port under the watchdog, retrying on a new
/// port if it does not come up. `command` gets the port and the scratch directory and returns
/// the server's command line (program first).
pub(super) fn start(
    name: &str,
    ready_timeout: Duration,
    command: impl Fn(u16, &Path) -> Vec<std::ffi::OsString>,
) -> Result<Running, String> {
    let mut last = String::new();
    for attempt in 1..=START_ATTEMPTS {
        match start_once(name, ready_timeout, &command) {
            Ok(running) => return Ok(running),
            Err(why) => {
                say(&format!(
                    "mongo-social: {name} start attempt {attempt}/{START_ATTEMPTS} failed: \
                     {why}"
                ));
                last = why;
            }
        }
    }
    Err(format!(
        "{name} did not start after {START_ATTEMPTS} attempts; last error: {last}"
    ))
}

fn start_once(
    name: &str,
    ready_timeout: Duration,
    command: &impl Fn(u16, &Path) -> Vec<std::ffi::OsString>,
) -> Result<Running, String> {
    let port = free_port()?;
    let slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("mongo-social-{slug}-{}", unique_suffix()));
    fs::create_dir_all(&dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;

    let mut watchdog = Command::new("sh");
    watchdog
        .arg("-c")
        .arg(WATCHDOG)
        .arg(format!("mongo-social-{slug}-watchdog")) // $0
        .arg(std::process::id().to_string()) // $1
        .arg(&dir) // $2
        .args(command(port, &dir))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C on the tests does not kill the watchdog before it
        // cleans up (it notices the test process is gone within a second).
        .process_group(0);
    let mut child = watchdog.spawn().map_err(|error| {
        let _ = fs::remove_dir_all(&dir);
        format!("cannot run `sh` to start {name}: {error}")
    })?;

    match wait_until_ready(name, &mut child, port, ready_timeout) {
        Ok(()) => {
            WATCHDOGS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(child);
            Ok(Running {
                uri: format!("mongodb://127.0.0.1:{port}/"),
                dir,
            })
        }
        Err(why) => {
            stop(&mut child);
            let _ = fs::remove_dir_all(&dir);
            Err(why)
        }
    }
}

/// Where [`free_port`] looks: below the ports the kernel gives outgoing connections (32768 and
/// up on Linux, 49152 and up on macOS).
const PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A loopback port nobody listens on right now, drawn at random from [`PORTS`]. Not one the
/// kernel hands out itself (bind to port 0): those are the ports of outgoing connections, and
/// DocumentDB's gateway binds its listening socket anew after each connection it accepts, and
/// an outgoing connection that takes its port between two binds leaves it listening nowhere.
/// That is the likeliest reading of one CI run in which, beside the other legs' thousands of
/// connections, the sharded leg's gateway came up and then refused every connection for 20 s
/// (all 7 tests of that process failed their first `ping`; the binary passed alone and under
/// load afterwards).
fn free_port() -> Result<u16, String> {
    let width = u64::from(PORTS.end - PORTS.start);
    let seed = RandomState::new().build_hasher().finish();
    let mut last_error = None;
    for attempt in 0..64_u64 {
        let offset = seed.wrapping_add(attempt.wrapping_mul(7_919)) % width;
        let port = PORTS.start + offset as u16;
        match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(_) => return Ok(port),
            Err(error) => last_error = Some(error),
        }
    }
    Err(format!(
        "cannot find a free loopback port in {}..{}: {}",
        PORTS.start,
        PORTS.end,
        last_error.map_or_else(String::new, |error| error.to_string())
    ))
}

/// Waits until the port accepts connections while the watchdog (and so the server) still runs.
fn wait_until_ready(
    name: &str,
    child: &mut Child,
    port: u16,
    timeout: Duration,
) -> Result<(), String> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let started = Instant::now();
    loop {
        if exited(child) {
            return Err(format!("{name} exited at startup: {}", child_stderr(child)));
        }
        if TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok() {
            // If the server failed to bind because another process took the port meanwhile, the
            // connection reached that process: make sure ours is still alive a moment later.
            thread::sleep(Duration::from_millis(200));
            if exited(child) {
                return Err(format!("{name} exited at startup: {}", child_stderr(child)));
            }
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "{name} did not accept connections on {address} within {} s",
                timeout.as_secs()
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Whether the watchdog has exited (it does as soon as the server does).
fn exited(child: &mut Child) -> bool {
    !matches!(child.try_wait(), Ok(None))
}

fn child_stderr(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(stderr) = child.stderr.as_mut() {
        let _ = stderr.read_to_string(&mut text);
    }
    let text = text.trim();
    if text.is_empty() {
        "no output".to_owned()
    } else {
        text.to_owned()
    }
}

/// Asks the watchdog to stop the server (it traps SIGTERM) and waits a little for it.
fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .arg(child.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if exited(child) {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// A unique name suffix: process id and current time in nanoseconds.
pub(super) fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

/// The directory the local servers cache what they build: `$MONGO_SOCIAL_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/mongo-social`, else `~/.cache/mongo-social` (as `scripts/install-documentdb`
/// has it).
pub(super) fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("MONGO_SOCIAL_CACHE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("mongo-social");
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".cache").join("mongo-social"),
        None => std::env::temp_dir().join("mongo-social-cache"),
    }
}

/// The first `name` on `PATH`.
pub(super) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Removes a directory tree when dropped.
pub(super) struct RemoveOnDrop(pub(super) PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
