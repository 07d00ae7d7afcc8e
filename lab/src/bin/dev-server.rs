//! Starts the development server `MONGO_SOCIAL_SERVER` picks (FerretDB 1.24 by default; see the
//! lab's docs), prints its connection string on stdout, and keeps it up until this process is
//! stopped: for an application's tests with `mongo-social-testing`
//! (`MONGODB_URI=$(scripts/dev-server) cargo test` in another shell, or as `.ci/run` does).

use std::io::Write;

fn main() {
    let uri = mongo_social_lab::server_uri();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{uri}");
    let _ = stdout.flush();
    drop(stdout);
    // The server's watchdog stops it when this process exits, however it exits.
    loop {
        std::thread::park();
    }
}
