//! Resolving and starting the local mongo-java-server the tests use when
//! `MONGO_SOCIAL_SERVER=mongo-java-server` (and `MONGODB_URI` is unset).
//!
//! mongo-java-server is an in-memory MongoDB-wire server written in Java. The fixture carries
//! its own launcher (`mongo_java_server/Launcher.java`) and the Maven coordinates it resolves
//! (`mongo_java_server/pom.xml`, version 1.47.0), both compiled into this crate. The first run
//! on a machine resolves the jars with Maven (into the local Maven repository) and compiles the
//! launcher with `javac`; both results are cached under the cache directory (below), keyed by a
//! hash of the two files, so later runs only start `java` (about a second).
//!
//! Cache directory: `$MONGO_SOCIAL_CACHE_DIR`, else `$XDG_CACHE_HOME/mongo-social`, else
//! `~/.cache/mongo-social`.
//!
//! Blocking, standard library only. Errors are plain messages for the panic that fails the test.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::local_server::{self, cache_root, find_on_path, unique_suffix, RemoveOnDrop};
use super::say;

/// The mongo-java-server release the launcher runs (kept in step with `pom.xml`).
pub(super) const VERSION: &str = "1.47.0";
const LAUNCHER: &str = include_str!("mongo_java_server/Launcher.java");
const POM: &str = include_str!("mongo_java_server/pom.xml");
/// A JVM starts in about a second; a cold machine can take longer.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A mongo-java-server this process started.
#[derive(Debug)]
pub(super) struct Started {
    /// `mongodb://127.0.0.1:PORT/`.
    pub(super) uri: String,
    /// Where the compiled launcher and the resolved class path are cached.
    pub(super) cache: PathBuf,
}

/// Resolves (the first time) and starts one mongo-java-server for this process.
pub(super) fn start() -> Result<Started, String> {
    let java = tool("java")?;
    let prepared = prepare()?;
    let class_path = format!(
        "{}:{}",
        prepared.join("classes").display(),
        fs::read_to_string(prepared.join("classpath.txt"))
            .map_err(|error| format!("cannot read the cached class path: {error}"))?
            .trim()
    );
    let running = local_server::start("mongo-java-server", READY_TIMEOUT, |port, _dir| {
        vec![
            java.clone().into_os_string(),
            // A short-lived test server: start fast rather than peak fast.
            "-XX:+UseSerialGC".into(),
            "-XX:TieredStopAtLevel=1".into(),
            "-cp".into(),
            OsString::from(&class_path),
            "Launcher".into(),
            port.to_string().into(),
        ]
    })?;
    Ok(Started {
        uri: running.uri,
        cache: prepared,
    })
}

/// `name` on `PATH`, or a message saying what to install.
fn tool(name: &str) -> Result<PathBuf, String> {
    find_on_path(name).ok_or_else(|| {
        format!(
            "MONGO_SOCIAL_SERVER=mongo-java-server needs `{name}` on PATH: install a JDK 11 or \
             newer (java, javac) and Maven 3 (mvn), such as the `default-jdk` and `maven` Debian \
             packages, or unset MONGO_SOCIAL_SERVER to use FerretDB"
        )
    })
}

/// The cache directory holding `classes/Launcher.class` and `classpath.txt`, made if missing.
fn prepare() -> Result<PathBuf, String> {
    let root = cache_root();
    let prepared = root.join(format!(
        "mongo-java-server-{VERSION}-{:012x}",
        fnv1a64(format!("{POM}\n{LAUNCHER}").as_bytes()) & 0xffff_ffff_ffff
    ));
    if is_complete(&prepared) {
        return Ok(prepared);
    }
    let mvn = tool("mvn")?;
    let javac = tool("javac")?;
    say(&format!(
        "mongo-social: preparing mongo-java-server {VERSION} in {} (Maven resolves its \
         jars the first time)...",
        prepared.display()
    ));
    fs::create_dir_all(&root)
        .map_err(|error| format!("cannot create {}: {error}", root.display()))?;
    // Built beside the target and renamed into place, so no process sees half of it.
    let partial = root.join(format!("partial-{}", unique_suffix()));
    let _remove_partial = RemoveOnDrop(partial.clone());
    fs::create_dir_all(partial.join("classes"))
        .and_then(|()| fs::write(partial.join("pom.xml"), POM))
        .and_then(|()| fs::write(partial.join("Launcher.java"), LAUNCHER))
        .map_err(|error| format!("cannot write to {}: {error}", partial.display()))?;

    run(
        Command::new(mvn)
            .args(["-q", "-B", "-f"])
            .arg(partial.join("pom.xml"))
            .arg("dependency:build-classpath")
            .arg(format!(
                "-Dmdep.outputFile={}",
                partial.join("classpath.txt").display()
            )),
        "mvn dependency:build-classpath",
    )?;
    let class_path = fs::read_to_string(partial.join("classpath.txt"))
        .map_err(|error| format!("Maven wrote no class path: {error}"))?;
    run(
        Command::new(javac)
            .arg("-d")
            .arg(partial.join("classes"))
            .arg("-cp")
            .arg(class_path.trim())
            .arg(partial.join("Launcher.java")),
        "javac Launcher.java",
    )?;
    match fs::rename(&partial, &prepared) {
        Ok(()) => Ok(prepared),
        // Another process prepared it meanwhile.
        Err(_) if is_complete(&prepared) => Ok(prepared),
        Err(error) => Err(format!(
            "cannot move {} to {}: {error}",
            partial.display(),
            prepared.display()
        )),
    }
}

/// Whether `dir` holds a compiled launcher and a class path whose jars all exist.
fn is_complete(dir: &Path) -> bool {
    let Ok(class_path) = fs::read_to_string(dir.join("classpath.txt")) else {
        return false;
    };
    dir.join("classes").join("Launcher.class").is_file()
        && !class_path.trim().is_empty()
        && std::env::split_paths(class_path.trim()).all(|jar| jar.is_file())
}

/// Runs `command` to completion, or says what failed with its output.
fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run `{what}`: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "`{what}` failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// FNV-1a, 64 bits: stable across Rust versions and runs, unlike `DefaultHasher`.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
