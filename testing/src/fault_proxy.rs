//! A loopback TCP proxy that injects faults between the driver and the test server.
//!
//! It forwards bytes and knows nothing of the wire protocol, so it works with every server the
//! fixture uses. A test points a client at it ([`FaultProxy::client_with`]) and tells it to cut
//! every open connection ([`FaultProxy::cut`]), refuse new ones for a while
//! ([`FaultProxy::refuse_for`], [`FaultProxy::outage`]), lose the server's replies so that a
//! command runs but its caller never learns it did ([`FaultProxy::lose_replies_for`],
//! [`FaultProxy::lose_next_reply`]), or delay traffic ([`FaultProxy::delay`]).
//!
//! The proxy runs on its own thread with its own single-threaded runtime, so it outlives no test
//! runtime and needs none; dropping it closes every connection and stops the thread. It holds at
//! most [`FaultProxy::MAX_CONNECTIONS`] connections and a 64 KiB buffer per direction of each.
//!
//! ```no_run
//! # async fn demo() -> mongo_social::Result<()> {
//! use std::time::Duration;
//! use mongo_social_testing::{self as testing, fault_proxy::FaultProxy};
//!
//! let proxy = FaultProxy::to_test_server();
//! let client = proxy.client_with(|_| {}).await;
//! let db = client.database(&testing::database_name("outage_demo"));
//! // Every open connection dropped, new ones refused for 3 seconds:
//! proxy.outage(Duration::from_secs(3));
//! db.run_command(bson::doc! { "ping": 1 }).await?; // answered once the outage ends
//! assert!(proxy.connections_refused() > 0 || proxy.connections_accepted() > 1);
//! # Ok(()) }
//! ```

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mongodb::options::{ClientOptions, ServerAddress};
use mongodb::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy is told to do; shared between the test and the proxy's thread.
#[derive(Debug, Default)]
struct Faults {
    /// New connections are refused until then.
    refuse_until: Option<Instant>,
    /// Until then, a connection on which the server replies is closed instead: the command ran,
    /// its reply is lost.
    lose_replies_until: Option<Instant>,
    /// The next reply the server sends (on any connection) is lost, as above.
    lose_next_reply: bool,
    /// Every chunk of bytes is held this long before it is forwarded.
    delay: Duration,
}

#[derive(Debug, Default)]
struct Shared {
    faults: Mutex<Faults>,
    accepted: AtomicU64,
    refused: AtomicU64,
    replies_lost: AtomicU64,
    open: AtomicUsize,
}

impl Shared {
    fn faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A loopback TCP proxy to one server, with faults on demand. See the [module docs](self).
#[derive(Debug)]
pub struct FaultProxy {
    address: SocketAddr,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    /// Bumped to cut every open connection; `None` stops the proxy.
    generation: watch::Sender<Option<u64>>,
    thread: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// The most connections the proxy holds at once; more are refused.
    pub const MAX_CONNECTIONS: usize = 256;

    /// A proxy to `upstream` (`host:port`), listening on a free loopback port.
    ///
    /// # Errors
    ///
    /// If `upstream` does not resolve to a loopback address, or no port can be had.
    pub fn start(upstream: &str) -> io::Result<Self> {
        let upstream = upstream
            .to_socket_addrs()?
            .find(|address| address.ip().is_loopback())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the fault proxy only forwards to loopback addresses, not {upstream}"),
                )
            })?;
        let listener = StdListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let (generation, cuts) = watch::channel(Some(0));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{}", address.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    if let Ok(listener) = TcpListener::from_std(listener) {
                        serve(listener, upstream, thread_shared, cuts).await;
                    }
                });
            })?;
        Ok(Self {
            address,
            upstream,
            shared,
            generation,
            thread: Some(thread),
        })
    }

    /// A proxy to the fixture's server ([`super::server_uri`]), which must be a single loopback
    /// host.
    ///
    /// # Panics
    ///
    /// If the server's address is not one loopback host, or the proxy cannot start.
    pub fn to_test_server() -> Self {
        let uri = super::server_uri();
        let host = single_host(uri)
            .unwrap_or_else(|| panic!("the fault proxy needs a single-host server URI"));
        Self::start(&host).unwrap_or_else(|error| panic!("cannot start the fault proxy: {error}"))
    }

    /// The proxy's own address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The address the proxy forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// A client of the fixture's server that connects through the proxy (directly, to this one
    /// host), with `options_fn` applied last, like [`super::client_with`].
    pub async fn client_with(&self, options_fn: impl FnOnce(&mut ClientOptions)) -> Client {
        let uri = super::server_uri();
        super::client_with(|_| {}).await; // waits, once per process, for the server to answer
        let mut options = super::parse_options(uri).await;
        options.hosts = vec![ServerAddress::Tcp {
            host: self.address.ip().to_string(),
            port: Some(self.address.port()),
        }];
        options.direct_connection = Some(true);
        options.repl_set_name = None;
        // Notice the server's return quickly.
        options.heartbeat_freq = Some(Duration::from_millis(500));
        options_fn(&mut options);
        Client::with_options(options)
            .unwrap_or_else(|error| panic!("cannot create a client through the proxy: {error}"))
    }

    /// A client through the proxy that gives up quickly: server selection times out after
    /// 500 ms, so an operation started during an outage fails within about a second with a
    /// transient error instead of waiting for the server (30 s by default). With
    /// [`impatient_retry`](super::impatient_retry), the outage checks' "impatient" writers.
    pub async fn impatient_client(&self) -> Client {
        self.client_with(|options| {
            options.server_selection_timeout = Some(Duration::from_millis(500));
        })
        .await
    }

    /// Drops every open connection at once (new ones are accepted, unless refused).
    pub fn cut(&self) {
        self.generation
            .send_modify(|generation| *generation = generation.map(|g| g + 1));
    }

    /// Refuses new connections (accepts and closes them at once) for `duration` from now.
    pub fn refuse_for(&self, duration: Duration) {
        self.shared.faults().refuse_until = Some(Instant::now() + duration);
    }

    /// For `duration` from now, every reply the server sends is dropped with its connection: the
    /// command it answers has run on the server, and the driver sees a network error. The
    /// fault that tests whether a retried write is applied once.
    pub fn lose_replies_for(&self, duration: Duration) {
        self.shared.faults().lose_replies_until = Some(Instant::now() + duration);
    }

    /// Loses the next reply the server sends, on whichever connection it comes: the command it
    /// answers has run on the server, and the driver sees a network error. Called as a command
    /// starts (from a command event handler), it loses that command's reply unless another
    /// reply arrives first.
    pub fn lose_next_reply(&self) {
        self.shared.faults().lose_next_reply = true;
    }

    /// An outage: every open connection cut, new ones refused for `duration`.
    pub fn outage(&self, duration: Duration) {
        self.refuse_for(duration);
        self.cut();
    }

    /// Runs `writers` through the outage the conformance suites use: 200 ms of normal traffic,
    /// 700 ms in which every reply is lost ([`lose_replies_for`](Self::lose_replies_for): the
    /// writes of that time run on the server but fail at the caller), a 3-second
    /// [`outage`](Self::outage), then every open connection cut once more. Returns the writers'
    /// results once all have finished.
    ///
    /// # Panics
    ///
    /// If a writer panicked, if no reply was lost, or if no connection was refused (the outage
    /// was not felt).
    pub async fn outage_during<T>(&self, writers: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        self.lose_replies_for(Duration::from_millis(700));
        tokio::time::sleep(Duration::from_millis(700)).await;
        self.outage(Duration::from_secs(3));
        tokio::time::sleep(Duration::from_millis(3500)).await;
        self.cut();
        let mut results = Vec::with_capacity(writers.len());
        for writer in writers {
            results.push(writer.await.expect("a writer panicked"));
        }
        assert!(self.replies_lost() > 0, "replies were lost");
        assert!(self.connections_refused() > 0, "the outage was felt");
        results
    }

    /// Whether `call`, made right after every connection is cut and while new ones are refused
    /// for `duration`, fails; returns once the refusal is over. For the outage tests' last
    /// check, that their impatient client gives up: in the concurrent phase, whether one of its
    /// calls is in flight while the server is away depends on timing (on FerretDB 2 over
    /// DocumentDB it often is not), so a test that saw no impatient failure there checks it
    /// once more here, deterministically.
    pub async fn fails_during_outage<T, E>(
        &self,
        duration: Duration,
        call: impl std::future::Future<Output = Result<T, E>>,
    ) -> bool {
        let started = Instant::now();
        self.outage(duration);
        let failed = call.await.is_err();
        if let Some(left) = duration.checked_sub(started.elapsed()) {
            tokio::time::sleep(left).await;
        }
        failed
    }

    /// Whether new connections are being refused now.
    pub fn is_refusing(&self) -> bool {
        self.shared
            .faults()
            .refuse_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// Holds every chunk of bytes `delay` before forwarding it, both ways (zero to stop).
    pub fn delay(&self, delay: Duration) {
        self.shared.faults().delay = delay;
    }

    /// Connections forwarded so far.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// Connections refused so far.
    pub fn connections_refused(&self) -> u64 {
        self.shared.refused.load(Ordering::Relaxed)
    }

    /// Replies dropped so far by [`lose_replies_for`](Self::lose_replies_for).
    pub fn replies_lost(&self) -> u64 {
        self.shared.replies_lost.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.generation.send_replace(None);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `host:port` of a `mongodb://` URI naming one host.
fn single_host(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("mongodb://")?;
    let hosts = rest.split(['/', '?']).next()?;
    let hosts = hosts.rsplit('@').next()?;
    if hosts.contains(',') {
        return None;
    }
    Some(if hosts.contains(':') {
        hosts.to_owned()
    } else {
        format!("{hosts}:27017")
    })
}

async fn serve(
    listener: TcpListener,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    mut cuts: watch::Receiver<Option<u64>>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            changed = cuts.changed() => {
                if changed.is_err() || cuts.borrow().is_none() {
                    return;
                }
                continue;
            }
        };
        let Ok((client, _)) = accepted else {
            continue;
        };
        let refusing = shared
            .faults()
            .refuse_until
            .is_some_and(|until| Instant::now() < until);
        if refusing || shared.open.load(Ordering::Relaxed) >= FaultProxy::MAX_CONNECTIONS {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            drop(client);
            continue;
        }
        shared.accepted.fetch_add(1, Ordering::Relaxed);
        shared.open.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        let mut cuts = cuts.clone();
        let generation = *cuts.borrow_and_update();
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                let cut = async {
                    while cuts.changed().await.is_ok() {
                        if *cuts.borrow() != generation {
                            return;
                        }
                    }
                };
                tokio::select! {
                    _ = forward(client_read, server_write, &shared, Direction::Request) => {}
                    _ = forward(server_read, client_write, &shared, Direction::Reply) => {}
                    _ = cut => {}
                }
            }
            shared.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Which way bytes flow: client to server, or back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

/// Copies bytes one way until either side closes, holding each chunk for the current delay;
/// replies that are to be lost close the connection instead.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    shared: &Shared,
    direction: Direction,
) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if direction == Direction::Reply {
            let losing = {
                let mut faults = shared.faults();
                let lose_next = std::mem::take(&mut faults.lose_next_reply);
                lose_next
                    || faults
                        .lose_replies_until
                        .is_some_and(|until| Instant::now() < until)
            };
            if losing {
                shared.replies_lost.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let delay = shared.faults().delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::single_host;

    #[test]
    fn reads_the_single_host_of_a_uri() {
        assert_eq!(
            single_host("mongodb://127.0.0.1:28124/").as_deref(),
            Some("127.0.0.1:28124")
        );
        assert_eq!(
            single_host("mongodb://u:p@localhost/db?x=1").as_deref(),
            Some("localhost:27017")
        );
        assert_eq!(single_host("mongodb://a:1,b:2/"), None);
        assert_eq!(single_host("mongodb+srv://x.example/"), None);
    }
}
