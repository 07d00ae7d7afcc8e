//! Finding, building and starting the local FerretDB the tests use when `MONGODB_URI` is unset.
//!
//! Everything here is blocking and uses only the standard library (plus `go` and `sh`).
//! Errors are plain messages, meant to end up in the panic that fails the test.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::local_server::{self, find_on_path, unique_suffix, RemoveOnDrop};
use super::say;

/// The FerretDB release the fixture builds.
const FERRETDB_VERSION: &str = "v1.24.2";
/// The releases the fixture accepts (`ferretdb --version` prints `version: v1.24.x`).
const ACCEPTED_PREFIX: &str = "v1.24.";
const FERRETDB_MODULE: &str = "github.com/FerretDB/FerretDB";
/// Env var naming the FerretDB binary to use (and to build, if missing or broken).
const BINARY_ENV: &str = "MONGO_SOCIAL_FERRETDB";
const READY_TIMEOUT: Duration = Duration::from_secs(30);

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
    let running = local_server::start("FerretDB", READY_TIMEOUT, |port, dir| {
        let dir = dir.display();
        vec![
            binary.clone().into_os_string(),
            "--handler=sqlite".into(),
            // WAL (FerretDB's default) with `synchronous=normal`: a commit is not flushed to
            // disk, which a private instance whose data is deleted at exit never needs, and
            // writes stop waiting on the disk (50 updates: 122 ms to 19 ms on this machine).
            format!("--sqlite-url=file:{dir}/?_pragma=synchronous(normal)").into(),
            format!("--state-dir={dir}").into(),
            format!("--listen-addr=127.0.0.1:{port}").into(),
            "--telemetry=disable".into(),
            // The default debug address is a fixed port: concurrent instances would collide.
            "--debug-addr=-".into(),
            "--log-level=error".into(),
        ]
    })?;
    Ok(Started {
        uri: running.uri,
        version,
        binary,
        data_dir: running.dir,
    })
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
                    "mongo-social: {BINARY_ENV}={} is not usable ({why})",
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
                "mongo-social: skipping {} (FerretDB {version}, need {ACCEPTED_PREFIX}x)",
                on_path.display()
            )),
            Probe::Unusable(why) => say(&format!(
                "mongo-social: skipping {} ({why})",
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
                    "mongo-social: {} is not usable ({why}), rebuilding it",
                    target.display()
                ));
            }
            build(&target)
        }
    }
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
        "mongo-social: building FerretDB {FERRETDB_VERSION} into {} with Go; the first \
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
                "mongo-social: built FerretDB {version} at {} in {} s",
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
