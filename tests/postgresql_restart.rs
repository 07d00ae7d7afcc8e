//! A PostgreSQL restarting under the fixture's own FerretDB 2. In a test binary of its own: the
//! restart takes the server away from every test running beside it in the same process (they
//! share the fixture's one server), so no other test may run while it happens.

use mongo_social_lab::SetUp;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mongo_social::PageRequest;
use mongo_social_lab as testing;

/// A PostgreSQL restarting under FerretDB 2 (as after a backend crash) is an outage like any
/// other: FerretDB answers `InternalError` ("unexpected EOF", "the database system is not yet
/// accepting connections", "connection refused") while it is away, and writers wait it out
/// within their retry budget instead of failing at once. Every send returns `Ok`, and every
/// message is in its recipient's inbox once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_ride_out_a_postgresql_restart() {
    use mongo_social::{FanOutOnWrite, InboxStore, NewMessage};
    let local_documentdb = std::env::var_os("MONGODB_URI").is_none_or(|uri| uri.is_empty())
        && testing::LocalServer::from_env() == Ok(testing::LocalServer::DocumentDb);
    if testing::skip_unless(
        local_documentdb,
        "writers_ride_out_a_postgresql_restart",
        "restarts the PostgreSQL of the fixture's own FerretDB 2 (MONGO_SOCIAL_SERVER=documentdb)",
    ) {
        return;
    }
    const WRITERS: usize = 4;
    const EACH: usize = 30;
    let t = testing::test_db("postgresql_restart").await;
    let inbox = Arc::new(FanOutOnWrite::<String>::new(&t.db));
    inbox.set_up().await.expect("indexes");
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let inbox = inbox.clone();
            tokio::spawn(async move {
                for n in 0..EACH {
                    let started = std::time::Instant::now();
                    inbox
                        .send(NewMessage::new(
                            format!("w{writer}"),
                            ["ann"],
                            format!("{writer}-{n}"),
                        ))
                        .await
                        .unwrap_or_else(|error| {
                            panic!("send {writer}-{n} after {:?}: {error}", started.elapsed())
                        });
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::task::spawn_blocking(|| testing::restart_postgresql(Duration::from_secs(2)))
        .await
        .expect("restart task")
        .expect("restart PostgreSQL");
    for writer in writers {
        writer.await.expect("a writer failed");
    }
    let mut texts = HashSet::new();
    let mut request = PageRequest::first(100);
    loop {
        let page = inbox.inbox_page("ann", request).await.expect("page");
        for message in page.items {
            assert!(
                texts.insert(message.payload.clone()),
                "{} twice",
                message.payload
            );
        }
        match page.next {
            Some(next) => request = PageRequest::after(100, next),
            None => break,
        }
    }
    assert_eq!(texts.len(), WRITERS * EACH, "every message once");
}
