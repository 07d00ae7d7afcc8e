//! Finding, building and starting the local FerretDB the tests use when `MONGODB_URI` is unset.
//!
//! Everything here is blocking and uses only the standard library (plus `go` and `sh`).
//! Errors are plain messages, meant to end up in the panic that fails the test.

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::say;

/// The FerretDB release the fixture builds.
const FERRETDB_VERSION: &str = "v1.24.2";
/// The releases the fixture accepts (`ferretdb --version` prints `version: v1.24.x`).
const ACCEPTED_PREFIX: &str = "v1.24.";
const FERRETDB_MODULE: &str = "github.com/FerretDB/FerretDB";
/// Env var naming the FerretDB binary to use (and to build, if missing or broken).
const BINARY_ENV: &str = "MONGO_SOCIAL_FERRETDB";
const START_ATTEMPTS: usize = 3;
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Watchdog run by `sh -c`: `$1` is the test process id, `$2` the data directory, the rest is the
/// FerretDB command line. It starts FerretDB in the background and stops it (then removes the data
/// directory) once the test process is gone. If FerretDB exits on its own, its log is copied to the
/// watchdog's stderr so the fixture can say why.
const WATCHDOG: &str = r#"parent="$1"; dir="$2"; shift 2
"$@" </dev/null >/dev/null 2>"$dir/ferretdb.log" &
child=$!
trap '' PIPE
trap 'kill "$child" 2>/dev/null' TERM INT HUP
while kill -0 "$parent" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 1; done
if kill -0 "$child" 2>/dev/null; then
  kill "$child" 2>/dev/null
else
  cat "$dir/ferretdb.log" >&2
fi
wait "$child" 2>/dev/null
rm -rf "$dir"
"#;

/// Watchdog processes of the instances this process started, kept so their pipes stay open.
static WATCHDOGS: Mutex<Vec<Child>> = Mutex::new(Vec::new());

/// A FerretDB this process started.
pub(super) struct Started {
    /// `mongodb://127.0.0.1:PORT/`.
    pub(super) uri: String,
    /// FerretDB's version, such as `v1.24.2`.
    pub(super) version: String,
    /// The binary that runs.
    pub(super) binary: PathBuf,
    /// Its data directory, removed when it stops.
    pub(super) data_dir: PathBuf,
}

/// Finds (or builds) FerretDB and starts one instance for this process.
pub(super) fn start() -> Result<Started, String> {
    let (binary, version) = find_or_build()?;
    let mut failures = Vec::new();
    for attempt in 1..=START_ATTEMPTS {
        match start_instance(&binary) {
            Ok((uri, data_dir)) => {
                return Ok(Started {
                    uri,
                    version,
                    binary,
                    data_dir,
                })
            }
            Err(why) => {
                say(&format!(
                    "mongo-social tests: FerretDB start attempt {attempt}/{START_ATTEMPTS} failed: {why}"
                ));
                failures.push(why);
            }
        }
    }
    Err(format!(
        "FerretDB ({}) did not start after {START_ATTEMPTS} attempts; last error: {}",
        binary.display(),
        failures.last().map_or("none", String::as_str)
    ))
}

/// What `ferretdb --version` said about a binary.
enum Probe {
    /// A FerretDB 1.24.x, with its version.
    Usable(String),
    /// A working FerretDB of another version, not to be overwritten.
    OtherVersion(String),
    /// Absent, or it does not run (such as a `go install` build, which panics at startup).
    Unusable(String),
}

fn probe(binary: &Path) -> Probe {
    if !binary.is_file() {
        return Probe::Unusable("no such file".to_owned());
    }
    let output = match Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
    {
        Ok(output) => output,
        Err(error) => return Probe::Unusable(format!("cannot run it: {error}")),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().find(|line| !line.trim().is_empty());
        return Probe::Unusable(format!(
            "`--version` failed ({}): {}",
            output.status,
            first.unwrap_or("no output")
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let version = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("version:"))
        .map(str::trim);
    match version {
        Some(version) if version.starts_with(ACCEPTED_PREFIX) => Probe::Usable(version.to_owned()),
        Some(version) => Probe::OtherVersion(version.to_owned()),
        None => Probe::Unusable("`--version` printed no `version:` line".to_owned()),
    }
}

/// The binary to run and its version, building it if needed:
///
/// 1. `$MONGO_SOCIAL_FERRETDB` if set (built there when missing or broken);
/// 2. else `ferretdb` on `PATH`;
/// 3. else `$GOBIN/ferretdb` or `$(go env GOPATH)/bin/ferretdb` (built there when missing or broken).
fn find_or_build() -> Result<(PathBuf, String), String> {
    if let Some(path) = std::env::var_os(BINARY_ENV).filter(|path| !path.is_empty()) {
        let path = PathBuf::from(path);
        return match probe(&path) {
            Probe::Usable(version) => Ok((path, version)),
            Probe::OtherVersion(version) => Err(format!(
                "{BINARY_ENV}={} is FerretDB {version}; the tests need {FERRETDB_VERSION}. Point \
                 {BINARY_ENV} at a path where no binary exists yet and the tests build \
                 {FERRETDB_VERSION} there",
                path.display()
            )),
            Probe::Unusable(why) => {
                say(&format!(
                    "mongo-social tests: {BINARY_ENV}={} is not usable ({why})",
                    path.display()
                ));
                build(&path)
            }
        };
    }

    if let Some(on_path) = find_on_path("ferretdb") {
        match probe(&on_path) {
            Probe::Usable(version) => return Ok((on_path, version)),
            Probe::OtherVersion(version) => say(&format!(
                "mongo-social tests: skipping {} (FerretDB {version}, need {ACCEPTED_PREFIX}x)",
                on_path.display()
            )),
            Probe::Unusable(why) => say(&format!(
                "mongo-social tests: skipping {} ({why})",
                on_path.display()
            )),
        }
    }

    let target = go_bin_dir().join("ferretdb");
    match probe(&target) {
        Probe::Usable(version) => Ok((target, version)),
        Probe::OtherVersion(version) => Err(format!(
            "{} is FerretDB {version}, the tests need {FERRETDB_VERSION} and will not overwrite \
             it. Set {BINARY_ENV} to another path (such as {}-{FERRETDB_VERSION}; the tests build \
             it there)",
            target.display(),
            target.display()
        )),
        Probe::Unusable(why) => {
            if target.exists() {
                say(&format!(
                    "mongo-social tests: {} is not usable ({why}), rebuilding it",
                    target.display()
                ));
            }
            build(&target)
        }
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Where `go install` puts binaries: `GOBIN`, else the first `GOPATH` entry's `bin`, else
/// `~/go/bin` (also when `go` is not installed).
fn go_bin_dir() -> PathBuf {
    if let Ok(output) = go_command().args(["env", "GOBIN", "GOPATH"]).output() {
        if output.status.success() {
            let text = String::from_utf8_lossy(&output.stdout);
            let mut lines = text.lines();
            let gobin = lines.next().unwrap_or("").trim();
            let gopath = lines.next().unwrap_or("").trim();
            if !gobin.is_empty() {
                return PathBuf::from(gobin);
            }
            if let Some(first) = std::env::split_paths(gopath).find(|p| !p.as_os_str().is_empty()) {
                return first.join("bin");
            }
        }
    }
    if let Some(gobin) = std::env::var_os("GOBIN").filter(|v| !v.is_empty()) {
        return PathBuf::from(gobin);
    }
    if let Some(gopath) = std::env::var_os("GOPATH") {
        if let Some(first) = std::env::split_paths(&gopath).find(|p| !p.as_os_str().is_empty()) {
            return first.join("bin");
        }
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| OsString::from("/"));
    PathBuf::from(home).join("go").join("bin")
}

/// `go`, in module mode, outside any workspace.
fn go_command() -> Command {
    let mut command = Command::new("go");
    command
        .env("GO111MODULE", "on")
        .env("GOWORK", "off")
        .stdin(Stdio::null());
    command
}

/// A unique name suffix: process id and current time in nanoseconds.
fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

/// Removes a directory tree when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Builds FerretDB [`FERRETDB_VERSION`] into `target`.
///
/// A plain `go install` build panics at startup ("Invalid build/version/version.txt"), because the
/// release's version file is generated by its own build scripts. So: download the module, copy it,
/// write the version file, `go build` the copy. The binary is built under a temporary name and
/// renamed, so another process never runs a half-written file.
fn build(target: &Path) -> Result<(PathBuf, String), String> {
    let go_works = go_command()
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !go_works {
        return Err(format!(
            "no FerretDB {FERRETDB_VERSION} binary was found and Go is not installed to build one. \
             Install Go 1.22 or newer (https://go.dev/doc/install) and rerun the tests (the first \
             run builds FerretDB into {}), or set {BINARY_ENV} to a FerretDB {FERRETDB_VERSION} \
             binary",
            target.display()
        ));
    }

    let started = Instant::now();
    say(&format!(
        "mongo-social tests: building FerretDB {FERRETDB_VERSION} into {} with Go; the first \
         build downloads and compiles it and takes a few minutes...",
        target.display()
    ));

    let module = format!("{FERRETDB_MODULE}@{FERRETDB_VERSION}");
    let download = go_command()
        .args(["mod", "download", "-json", &module])
        .current_dir(std::env::temp_dir())
        .output()
        .map_err(|error| format!("cannot run `go mod download`: {error}"))?;
    let json = String::from_utf8_lossy(&download.stdout);
    if !download.status.success() {
        return Err(format!(
            "`go mod download -json {module}` failed ({}): {}{}",
            download.status,
            json.trim(),
            String::from_utf8_lossy(&download.stderr).trim()
        ));
    }
    let module_dir = json_string_field(&json, "Dir")
        .ok_or_else(|| format!("`go mod download -json {module}` printed no Dir: {json}"))?;

    let copy = std::env::temp_dir().join(format!("mongo-social-ferretdb-src-{}", unique_suffix()));
    let _remove_copy = RemoveOnDrop(copy.clone());
    copy_tree(Path::new(&module_dir), &copy)
        .map_err(|error| format!("cannot copy {module_dir} to {}: {error}", copy.display()))?;
    let version_dir = copy.join("build").join("version");
    fs::create_dir_all(&version_dir)
        .and_then(|()| {
            fs::write(
                version_dir.join("version.txt"),
                format!("{FERRETDB_VERSION}\n"),
            )
        })
        .map_err(|error| format!("cannot write build/version/version.txt: {error}"))?;

    let bin_dir = target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(bin_dir)
        .map_err(|error| format!("cannot create {}: {error}", bin_dir.display()))?;
    let file_name = target
        .file_name()
        .map_or_else(|| OsString::from("ferretdb"), ToOwned::to_owned);
    let mut partial_name = file_name;
    partial_name.push(format!(".partial-{}", unique_suffix()));
    let partial = bin_dir.join(partial_name);

    let output = go_command()
        .arg("build")
        .arg("-o")
        .arg(&partial)
        .arg("./cmd/ferretdb")
        .current_dir(&copy)
        // FerretDB's SQLite handler is pure Go: no C compiler needed.
        .env("CGO_ENABLED", "0")
        .output()
        .map_err(|error| format!("cannot run `go build`: {error}"))?;
    if !output.status.success() {
        let _ = fs::remove_file(&partial);
        return Err(format!(
            "`go build ./cmd/ferretdb` of FerretDB {FERRETDB_VERSION} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    if let Err(error) = fs::rename(&partial, target) {
        let _ = fs::remove_file(&partial);
        return Err(format!(
            "cannot move the built FerretDB to {}: {error}",
            target.display()
        ));
    }

    match probe(target) {
        Probe::Usable(version) => {
            say(&format!(
                "mongo-social tests: built FerretDB {version} at {} in {} s",
                target.display(),
                started.elapsed().as_secs()
            ));
            Ok((target.to_path_buf(), version))
        }
        Probe::OtherVersion(version) => Err(format!(
            "the FerretDB built at {} reports version {version}, expected {FERRETDB_VERSION}",
            target.display()
        )),
        Probe::Unusable(why) => Err(format!(
            "the FerretDB built at {} does not run: {why}",
            target.display()
        )),
    }
}

/// The string value of `"field": "..."` in `go mod download -json` output (a flat JSON object).
fn json_string_field(json: &str, field: &str) -> Option<String> {
    let key = format!("\"{field}\"");
    let after_key = &json[json.find(&key)? + key.len()..];
    let after_colon = after_key.trim_start().strip_prefix(':')?.trim_start();
    let mut chars = after_colon.strip_prefix('"')?.chars();
    let mut value = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(value),
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'r' => value.push('\r'),
                'b' => value.push('\u{8}'),
                'f' => value.push('\u{c}'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => value.push(other),
            },
            other => value.push(other),
        }
    }
}

/// Copies a directory tree, leaving every copied file writable (the Go module cache is read-only).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let destination = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &destination)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &destination)?;
            let mut permissions = fs::metadata(&destination)?.permissions();
            permissions.set_mode(permissions.mode() | 0o200);
            fs::set_permissions(&destination, permissions)?;
        }
        // Module zips hold no symlinks or other special files.
    }
    Ok(())
}

/// A loopback port nobody listens on right now.
fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| format!("cannot find a free loopback port: {error}"))
}

/// Starts one FerretDB under the watchdog and waits until it accepts connections.
fn start_instance(binary: &Path) -> Result<(String, PathBuf), String> {
    let port = free_port()?;
    let data_dir = std::env::temp_dir().join(format!("mongo-social-ferretdb-{}", unique_suffix()));
    fs::create_dir_all(&data_dir)
        .map_err(|error| format!("cannot create {}: {error}", data_dir.display()))?;
    let dir = data_dir.display();

    let mut watchdog = Command::new("sh");
    watchdog
        .arg("-c")
        .arg(WATCHDOG)
        .arg("mongo-social-ferretdb-watchdog") // $0
        .arg(std::process::id().to_string()) // $1
        .arg(&data_dir) // $2
        .arg(binary)
        .arg("--handler=sqlite")
        .arg(format!("--sqlite-url=file:{dir}/"))
        .arg(format!("--state-dir={dir}"))
        .arg(format!("--listen-addr=127.0.0.1:{port}"))
        .arg("--telemetry=disable")
        // The default debug address is a fixed port: concurrent instances would collide on it.
        .arg("--debug-addr=-")
        .arg("--log-level=error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C on the tests does not kill the watchdog before it
        // cleans up (it notices the test process is gone within a second).
        .process_group(0);
    let mut child = watchdog.spawn().map_err(|error| {
        let _ = fs::remove_dir_all(&data_dir);
        format!("cannot run `sh` to start FerretDB: {error}")
    })?;

    match wait_until_ready(&mut child, port) {
        Ok(()) => {
            WATCHDOGS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(child);
            Ok((format!("mongodb://127.0.0.1:{port}/"), data_dir))
        }
        Err(why) => {
            stop(&mut child);
            let _ = fs::remove_dir_all(&data_dir);
            Err(why)
        }
    }
}

/// Waits until the port accepts connections while the watchdog (and so FerretDB) still runs.
fn wait_until_ready(child: &mut Child, port: u16) -> Result<(), String> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let started = Instant::now();
    loop {
        if exited(child) {
            return Err(format!(
                "FerretDB exited at startup: {}",
                child_stderr(child)
            ));
        }
        if TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok() {
            // If FerretDB failed to bind because another process took the port meanwhile, the
            // connection reached that process: make sure ours is still alive a moment later.
            thread::sleep(Duration::from_millis(200));
            if exited(child) {
                return Err(format!(
                    "FerretDB exited at startup: {}",
                    child_stderr(child)
                ));
            }
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(format!(
                "FerretDB did not accept connections on {address} within {} s",
                READY_TIMEOUT.as_secs()
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Whether the watchdog has exited (it does as soon as FerretDB does).
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

/// Asks the watchdog to stop FerretDB (it traps SIGTERM) and waits a little for it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_dir_field() {
        let json = "{\n\t\"Path\": \"github.com/FerretDB/FerretDB\",\n\t\"Version\": \"v1.24.2\",\n\t\"Dir\": \"/root/go/pkg/mod/github.com/!ferret!d!b/!ferret!d!b@v1.24.2\",\n\t\"Sum\": \"h1:x\"\n}\n";
        assert_eq!(
            json_string_field(json, "Dir").as_deref(),
            Some("/root/go/pkg/mod/github.com/!ferret!d!b/!ferret!d!b@v1.24.2")
        );
        assert_eq!(
            json_string_field(r#"{"Dir" : "a\\b\"c\u0041"}"#, "Dir").as_deref(),
            Some("a\\b\"cA")
        );
        assert_eq!(json_string_field(r#"{"Error": "x"}"#, "Dir"), None);
    }
}
