//! The example web service (`examples/web_service`), its very router, served on a free loopback
//! port against the test server and driven with real HTTP requests: a session covering every
//! route, with cursors sent back through real URLs; a retried create (the same idempotency key
//! twice, once with the first reply lost); a database killed under the service (503,
//! `unreachable`); and every `Error` mapped to its status.

#[path = "../examples/web_service/app.rs"]
#[allow(dead_code)]
mod app;

use std::collections::HashSet;
use std::time::Duration;

use app::{App, ErrorBody, Marked, Unread, Voted};
use mongo_social::comments::{Author, Comment, Order, Sort, Thread, Vote};
use mongo_social::error::{Forbidden, Invalid};
use mongo_social::notifications::{Counts, Group, Kind};
use mongo_social::prelude::*;
use mongo_social::{retry::RetryPolicy, Error, Message, Page, PageRequest};
use mongo_social_lab as testing;
use reqwest::{Client, Response, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde_json::json;

/// The service on a free loopback port: its base URL.
async fn serve(app: App) -> Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(app::serve(listener, app));
    Url::parse(&format!("http://{address}/")).unwrap()
}

/// `base` with the path `segments`, each one percent-encoded as one segment (a comment link's
/// `/` as `%2F`), and the query `pairs` (form-encoded by the `url` crate's serializer).
fn url(base: &Url, segments: &[&str], pairs: &[(&str, &str)]) -> Url {
    let mut url = base.clone();
    url.path_segments_mut().unwrap().clear().extend(segments);
    if !pairs.is_empty() {
        url.query_pairs_mut().extend_pairs(pairs);
    }
    url
}

fn http() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// The body of a response of `status`, as `T`.
async fn expect<T: DeserializeOwned>(response: Response, status: StatusCode) -> T {
    let got = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(got, status, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A failed response of `status`, whose body names `kind`; its message.
async fn expect_error(response: Response, status: StatusCode, kind: &str) -> String {
    let retry_after = response.headers().get("retry-after").cloned();
    let body: ErrorBody = expect(response, status).await;
    assert_eq!(body.error.kind, kind, "{}", body.error.message);
    assert_eq!(
        retry_after.is_some(),
        status == StatusCode::SERVICE_UNAVAILABLE,
        "Retry-After on 503s only"
    );
    body.error.message
}

/// Every page of the paged route `segments` (with `pairs`), `limit` at a time, each next page
/// asked for with `?after=` set to the cursor the previous one returned.
async fn every_page<T: DeserializeOwned>(
    http: &Client,
    base: &Url,
    segments: &[&str],
    pairs: &[(&str, &str)],
    limit: usize,
) -> Vec<T> {
    let limit = limit.to_string();
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1_000 {
        let mut query: Vec<(&str, &str)> = pairs.to_vec();
        query.push(("limit", &limit));
        if let Some(cursor) = &after {
            query.push(("after", cursor));
        }
        let url = url(base, segments, &query);
        if let Some(cursor) = &after {
            // Whatever the form serializer escapes (`~` as `%7E`), a decoder takes off again.
            let sent = url
                .query_pairs()
                .find(|(name, _)| name == "after")
                .unwrap()
                .1;
            assert_eq!(sent, cursor.as_str(), "{url}");
        }
        let page: Page<T> = expect(http.get(url).send().await.unwrap(), StatusCode::OK).await;
        all.extend(page.items);
        match page.next {
            Some(next) => after = Some(next.to_string()),
            None => return all,
        }
    }
    panic!("paging did not end");
}

/// A direct message from `from` to `to`, with an idempotency key if given.
async fn send(
    http: &Client,
    base: &Url,
    from: &str,
    to: &[&str],
    text: &str,
    key: Option<&str>,
) -> Response {
    let mut request = http
        .post(url(base, &["users", from, "messages"], &[]))
        .json(&json!({ "to": to, "text": text }));
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    request.send().await.unwrap()
}

async fn post_comment(
    http: &Client,
    base: &Url,
    parent: Option<&str>,
    author: &str,
    text: &str,
    key: Option<&str>,
) -> Response {
    let url = match parent {
        None => url(base, &["discussions", "article-1", "comments"], &[]),
        Some(link) => url(
            base,
            &["discussions", "article-1", "comments", link, "replies"],
            &[],
        ),
    };
    let mut request = http.post(url).json(&json!({
        "author": { "id": author, "name": author.to_uppercase() },
        "text": text,
    }));
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    request.send().await.unwrap()
}

async fn vote(http: &Client, base: &Url, link: &str, user: &str, vote: Option<&str>) -> Voted {
    let url = url(
        base,
        &["discussions", "article-1", "comments", link, "votes", user],
        &[],
    );
    let response = match vote {
        Some(vote) => http.put(url).json(&json!({ "vote": vote })).send().await,
        None => http.delete(url).send().await,
    };
    expect(response.unwrap(), StatusCode::OK).await
}

async fn unread(http: &Client, base: &Url, user: &str) -> u64 {
    let url = url(base, &["users", user, "inbox", "unread"], &[]);
    let unread: Unread = expect(http.get(url).send().await.unwrap(), StatusCode::OK).await;
    unread.unread
}

/// One session of requests over every route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_covers_every_route() {
    let t = testing::test_db("web_service_session").await;
    let app = App::new(&t.db, RetryPolicy::default()).unwrap();
    app.create_indexes().await.unwrap();
    let base = serve(app.clone()).await;
    let http = http();

    // --- Inbox: send (once per key), pages through real URLs, unread, mark read.
    let first: Message<app::Chat> = expect(
        send(&http, &base, "joe", &["bob", "ann"], "hi 0", Some("k-0")).await,
        StatusCode::CREATED,
    )
    .await;
    let again: Message<app::Chat> = expect(
        send(&http, &base, "joe", &["bob", "ann"], "hi 0", Some("k-0")).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!((again.id, again.sent), (first.id, first.sent));
    expect_error(
        send(&http, &base, "joe", &["bob"], "other", Some("k-0")).await,
        StatusCode::CONFLICT,
        "conflict",
    )
    .await;
    for i in 1..7 {
        let text = format!("hi {i}");
        let _: Message<app::Chat> = expect(
            send(&http, &base, "joe", &["bob"], &text, None).await,
            StatusCode::CREATED,
        )
        .await;
    }
    expect_error(
        send(&http, &base, "joe", &[], "to nobody", None).await,
        StatusCode::BAD_REQUEST,
        "invalid_input",
    )
    .await;
    let inbox: Vec<Message<app::Chat>> =
        every_page(&http, &base, &["users", "bob", "inbox"], &[], 2).await;
    let texts: Vec<&str> = inbox.iter().map(|m| m.payload.text.as_str()).collect();
    assert_eq!(
        texts,
        ["hi 6", "hi 5", "hi 4", "hi 3", "hi 2", "hi 1", "hi 0"]
    );
    // A cursor refused: altered (as the query string is decoded), or of another inbox.
    let page: Page<Message<app::Chat>> = expect(
        http.get(url(&base, &["users", "bob", "inbox"], &[("limit", "2")]))
            .send()
            .await
            .unwrap(),
        StatusCode::OK,
    )
    .await;
    let cursor = page.next.unwrap().to_string();
    let altered = cursor.replacen("v2.", "v2.x", 1);
    let message = expect_error(
        http.get(url(
            &base,
            &["users", "bob", "inbox"],
            &[("after", &altered)],
        ))
        .send()
        .await
        .unwrap(),
        StatusCode::BAD_REQUEST,
        "invalid_input",
    )
    .await;
    assert!(message.contains("cursor"), "{message}");
    let message = expect_error(
        http.get(url(
            &base,
            &["users", "ann", "inbox"],
            &[("after", &cursor)],
        ))
        .send()
        .await
        .unwrap(),
        StatusCode::BAD_REQUEST,
        "invalid_input",
    )
    .await;
    assert!(message.contains("belongs to another"), "{message}");

    assert_eq!(unread(&http, &base, "bob").await, 7);
    let up_to = inbox[4].id.to_string(); // "hi 2": it and the two older ones
    let marked = http
        .post(url(
            &base,
            &["users", "bob", "inbox", "read"],
            &[("up_to", &up_to)],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(marked.status(), StatusCode::NO_CONTENT);
    assert_eq!(unread(&http, &base, "bob").await, 4);
    let marked = http
        .post(url(&base, &["users", "bob", "inbox", "read"], &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(marked.status(), StatusCode::NO_CONTENT);
    assert_eq!(unread(&http, &base, "bob").await, 0);
    assert_eq!(unread(&http, &base, "ann").await, 1);

    // --- Comments: the discussion is created by its first post; replies, votes, pages.
    let mut top = Vec::new();
    for (author, text) in [("ann", "a"), ("bob", "b"), ("cat", "c"), ("dan", "d")] {
        let comment: Comment = expect(
            post_comment(&http, &base, None, author, text, Some(&format!("c-{text}"))).await,
            StatusCode::CREATED,
        )
        .await;
        top.push(comment);
    }
    let repeat: Comment = expect(
        post_comment(&http, &base, None, "ann", "a", Some("c-a")).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(repeat, top[0], "a repeated post returns the comment");
    let reply: Comment = expect(
        post_comment(&http, &base, Some(&top[0].link), "bob", "a1", None).await,
        StatusCode::CREATED,
    )
    .await;
    assert!(reply.link.contains('/'), "a slug path: {}", reply.link);
    // A link with a `/` travels as one path segment (`%2F`).
    let deeper: Comment = expect(
        post_comment(&http, &base, Some(&reply.link), "cat", "a1a", None).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(deeper.parent.as_deref(), Some(reply.link.as_str()));
    let second: Comment = expect(
        post_comment(&http, &base, Some(&top[0].link), "dan", "a2", None).await,
        StatusCode::CREATED,
    )
    .await;
    expect_error(
        post_comment(&http, &base, Some("0a1b2c3d/ffffffff"), "dan", "x", None).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;

    // Votes: b 3 up; c 2 up 1 down; a 1 up; d 1 down. a2 above a1 below a.
    for (link, ups, downs) in [
        (&top[1].link, 3, 0),
        (&top[2].link, 2, 1),
        (&top[0].link, 1, 0),
        (&top[3].link, 0, 1),
        (&second.link, 2, 0),
        (&deeper.link, 1, 0),
    ] {
        for i in 0..ups + downs {
            let direction = if i < ups { "up" } else { "down" };
            let voted = vote(&http, &base, link, &format!("v{i}"), Some(direction)).await;
            assert_eq!(voted.previous, None);
        }
    }
    // A changed vote, and one taken back.
    let voted = vote(&http, &base, &top[3].link, "v0", Some("up")).await;
    assert_eq!(voted.previous, Some(Vote::Down));
    let voted = vote(&http, &base, &top[3].link, "v0", None).await;
    assert_eq!(voted.previous, Some(Vote::Up));
    let message = expect_error(
        http.put(url(
            &base,
            &[
                "discussions",
                "article-1",
                "comments",
                &top[0].link,
                "votes",
                "v9",
            ],
            &[],
        ))
        .json(&json!({ "vote": "sideways" }))
        .send()
        .await
        .unwrap(),
        StatusCode::BAD_REQUEST,
        "invalid_input",
    )
    .await;
    assert!(message.contains("unknown vote `sideways`"), "{message}");
    let read: Comment = expect(
        http.get(url(
            &base,
            &["discussions", "article-1", "comments", &deeper.link],
            &[],
        ))
        .send()
        .await
        .unwrap(),
        StatusCode::OK,
    )
    .await;
    assert_eq!((read.text.as_str(), read.votes.ups), ("a1a", 1));

    // Pages sorted by best, through cursors; by time; the replies of one comment.
    let segments = ["discussions", "article-1", "comments"];
    let best: Vec<Comment> = every_page(&http, &base, &segments, &[("sort", "best")], 1).await;
    let texts: Vec<&str> = best.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["b", "c", "a", "d"]);
    let ranked = app
        .comments
        .ranked("article-1", None, Sort::Best, PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(best, ranked.items);
    let default: Vec<Comment> = every_page(&http, &base, &segments, &[], 3).await;
    assert_eq!(default, best, "best is the default sort");
    let newest: Vec<Comment> = every_page(&http, &base, &segments, &[("order", "newest")], 2).await;
    let texts: Vec<&str> = newest.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["a2", "a1a", "a1", "d", "c", "b", "a"]);
    let replies_of_a = [
        "discussions",
        "article-1",
        "comments",
        top[0].link.as_str(),
        "replies",
    ];
    let replies: Vec<Comment> =
        every_page(&http, &base, &replies_of_a, &[("sort", "top")], 1).await;
    let texts: Vec<&str> = replies.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["a2", "a1"]);
    for bad in [
        vec![("sort", "new")],
        vec![("order", "sideways")],
        vec![("sort", "best"), ("order", "newest")],
        vec![("limit", "0")],
    ] {
        expect_error(
            http.get(url(&base, &segments, &bad)).send().await.unwrap(),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        )
        .await;
    }
    expect_error(
        http.get(url(&base, &["discussions", "none", "comments"], &[]))
            .send()
            .await
            .unwrap(),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;

    // The ranked thread: what the store reads, over HTTP; its top level continued by cursor.
    let thread_segments = ["discussions", "article-1", "thread"];
    let page = [("sort", "best"), ("depth", "2"), ("limit", "2")];
    let thread: Page<Thread> = expect(
        http.get(url(&base, &thread_segments, &page))
            .send()
            .await
            .unwrap(),
        StatusCode::OK,
    )
    .await;
    let direct = app
        .comments
        .ranked_thread("article-1", Sort::Best, PageRequest::first(2), 2)
        .await
        .unwrap();
    assert_eq!(thread, direct);
    let rest: Page<Thread> = expect(
        http.get(url(
            &base,
            &thread_segments,
            &[
                ("sort", "best"),
                ("depth", "2"),
                ("limit", "2"),
                ("after", thread.next.as_ref().unwrap().as_str()),
            ],
        ))
        .send()
        .await
        .unwrap(),
        StatusCode::OK,
    )
    .await;
    let texts: Vec<&str> = thread
        .items
        .iter()
        .chain(&rest.items)
        .map(|t| t.comment.text.as_str())
        .collect();
    assert_eq!(texts, ["b", "c", "a", "d"]);
    let a = &rest.items[0];
    let replies: Vec<&str> = a
        .replies
        .as_ref()
        .unwrap()
        .items
        .iter()
        .map(|t| t.comment.text.as_str())
        .collect();
    assert_eq!(replies, ["a2", "a1"]);
    let a1 = &a.replies.as_ref().unwrap().items[1];
    assert_eq!(a1.replies.as_ref().unwrap().items[0].comment.text, "a1a");

    // --- Notifications: ann's comment got replies from bob and dan; cat replied to bob's.
    let groups: Vec<Group<()>> =
        every_page(&http, &base, &["users", "ann", "notifications"], &[], 1).await;
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0].kind, Kind::Reply);
    let actors: HashSet<&str> = groups[0].actors.iter().map(String::as_str).collect();
    assert_eq!(actors, HashSet::from(["bob", "dan"]));
    let groups: Vec<Group<()>> =
        every_page(&http, &base, &["users", "bob", "notifications"], &[], 1).await;
    assert_eq!(groups.len(), 1, "{groups:?}");
    let counts_url = url(&base, &["users", "ann", "notifications", "counts"], &[]);
    let counts: Counts = expect(
        http.get(counts_url.clone()).send().await.unwrap(),
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        counts,
        Counts {
            unseen: 1,
            unread: 1
        }
    );
    let marked: Marked = expect(
        http.post(url(&base, &["users", "ann", "notifications", "read"], &[]))
            .send()
            .await
            .unwrap(),
        StatusCode::OK,
    )
    .await;
    assert_eq!(marked.marked, 1);
    let counts: Counts = expect(http.get(counts_url).send().await.unwrap(), StatusCode::OK).await;
    assert_eq!(counts, Counts::default());
    // A notification page's cursor of another recipient is refused.
    let page: Page<Group<()>> = expect(
        http.get(url(&base, &["users", "ann", "notifications"], &[]))
            .send()
            .await
            .unwrap(),
        StatusCode::OK,
    )
    .await;
    assert_eq!(page.items.len(), 1);
    assert!(page.next.is_none());
    expect_error(
        http.get(url(
            &base,
            &["users", "ann", "notifications"],
            &[("after", &cursor)],
        ))
        .send()
        .await
        .unwrap(),
        StatusCode::BAD_REQUEST,
        "invalid_input",
    )
    .await;
    // A body that is not the route's.
    expect_error(
        http.post(url(&base, &["users", "joe", "messages"], &[]))
            .json(&json!({ "text": "no recipients field" }))
            .send()
            .await
            .unwrap(),
        StatusCode::BAD_REQUEST,
        "invalid_input",
    )
    .await;
}

/// The same idempotency key sent twice, and again after a reply the database sent was lost
/// (the service's client is behind a fault proxy): one message, the same each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_create_returns_the_same_message_once() {
    let t = testing::test_db("web_service_retried").await;
    let proxy = testing::fault_proxy();
    let retry = RetryPolicy::default();
    let client = proxy.client_with(|options| retry.apply_to(options)).await;
    let app = App::new(&client.database(t.db.name()), retry).unwrap();
    app.create_indexes().await.unwrap();
    let base = serve(app).await;
    let http = http();

    let first: Message<app::Chat> = expect(
        send(&http, &base, "joe", &["bob"], "once", Some("k-1")).await,
        StatusCode::CREATED,
    )
    .await;
    let again: Message<app::Chat> = expect(
        send(&http, &base, "joe", &["bob"], "once", Some("k-1")).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(again, first);

    // The first attempt's reply is lost on its way back from the database: the service retries
    // it itself (or answers 503); the client sends it again either way.
    proxy.lose_replies_for(Duration::from_millis(400));
    let lost = send(&http, &base, "joe", &["bob"], "lost", Some("k-2")).await;
    let lost_status = lost.status();
    let lost = lost.text().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(proxy.replies_lost() > 0, "a reply was lost");
    let retried: Message<app::Chat> = expect(
        send(&http, &base, "joe", &["bob"], "lost", Some("k-2")).await,
        StatusCode::CREATED,
    )
    .await;
    match lost_status {
        StatusCode::CREATED => {
            let lost: Message<app::Chat> = serde_json::from_str(&lost).unwrap();
            assert_eq!(lost, retried);
        }
        status => {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{lost}");
            let body: ErrorBody = serde_json::from_str(&lost).unwrap();
            assert!(body.error.retryable, "{lost}");
        }
    }

    // One message per key in bob's inbox, read without the proxy.
    let direct = App::new(&t.db, RetryPolicy::default()).unwrap();
    let page = direct
        .inbox
        .inbox_page("bob", PageRequest::first(10))
        .await
        .unwrap();
    let ids: Vec<_> = page.items.iter().map(|m| m.id).collect();
    assert_eq!(ids, [retried.id, first.id]);
}

/// The service's database killed under it (its client behind a fault proxy that refuses every
/// connection): every route that reads or writes answers 503 with the `unreachable` kind and a
/// `Retry-After`, once the client's server selection timeout has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_database_answers_503_unreachable() {
    let t = testing::test_db("web_service_killed").await;
    let proxy = testing::fault_proxy();
    let retry = RetryPolicy::default().budget(Duration::from_secs(2));
    let client = proxy.client_with(|options| retry.apply_to(options)).await;
    let app = App::new(&client.database(t.db.name()), retry).unwrap();
    app.create_indexes().await.unwrap();
    let base = serve(app).await;
    let http = http();
    let _: Message<app::Chat> = expect(
        send(&http, &base, "joe", &["bob"], "before", None).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(unread(&http, &base, "bob").await, 1);

    proxy.outage(Duration::from_secs(3600));
    let comments = ["discussions", "article-1", "comments"];
    let requests = [
        http.get(url(&base, &["users", "bob", "inbox", "unread"], &[])),
        http.get(url(&base, &["users", "bob", "inbox"], &[])),
        http.post(url(&base, &["users", "joe", "messages"], &[]))
            .json(&json!({ "to": ["bob"], "text": "during" })),
        http.post(url(&base, &comments, &[]))
            .json(&json!({ "author": { "id": "ann", "name": "Ann" }, "text": "during" })),
        http.get(url(&base, &comments, &[("sort", "best")])),
        http.get(url(
            &base,
            &["users", "ann", "notifications", "counts"],
            &[],
        )),
    ];
    for request in requests {
        let response = request.send().await.unwrap();
        let retry_after = response.headers().get("retry-after").cloned();
        let message = expect_error(response, StatusCode::SERVICE_UNAVAILABLE, "unreachable").await;
        assert!(message.contains("unreachable"), "{message}");
        assert_eq!(
            retry_after.unwrap(),
            app::RETRY_AFTER_SECONDS.to_string().as_str()
        );
    }
    assert!(proxy.connections_refused() > 0);
}

/// The one mapping from `Error` to HTTP: every kind of failure, its status, its kind in the
/// body, and `Retry-After` on what may pass.
#[tokio::test]
async fn every_error_maps_to_its_status() {
    use axum::response::IntoResponse;
    // Errors an application cannot build itself (their variants are non-exhaustive), made by the
    // library's test support.
    let mut samples: std::collections::HashMap<_, _> =
        mongo_social::test_support::errors_of_each_kind()
            .into_iter()
            .collect();
    let mut sample = |name: &str| samples.remove(name).expect("a sample of every kind");
    let cases: Vec<(Error, StatusCode, &str)> = vec![
        (
            Invalid::NoRecipients.into(),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
        (
            "sideways".parse::<Vote>().unwrap_err(),
            StatusCode::BAD_REQUEST,
            "invalid_input",
        ),
        (sample("NotFound"), StatusCode::NOT_FOUND, "not_found"),
        (
            sample("AlreadyExists"),
            StatusCode::CONFLICT,
            "already_exists",
        ),
        (sample("Conflict"), StatusCode::CONFLICT, "conflict"),
        (
            Forbidden::NotSender {
                user: "bob".into(),
                id: "m".into(),
            }
            .into(),
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            sample("Unsupported"),
            StatusCode::NOT_IMPLEMENTED,
            "unsupported",
        ),
        (
            sample("Unreachable"),
            StatusCode::SERVICE_UNAVAILABLE,
            "unreachable",
        ),
        (
            sample("RetriesExhausted"),
            StatusCode::SERVICE_UNAVAILABLE,
            "retries_exhausted",
        ),
        (
            sample("Timeout"),
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
        ),
        (
            sample("Database"),
            StatusCode::INTERNAL_SERVER_ERROR,
            "database",
        ),
        (
            sample("InvalidConfig"),
            StatusCode::INTERNAL_SERVER_ERROR,
            "invalid_config",
        ),
        (sample("Precondition"), StatusCode::CONFLICT, "precondition"),
    ];
    for (error, status, kind) in cases {
        assert_eq!(app::status_of(&error), status, "{error}");
        let retryable = error.is_retryable();
        let response = app::ApiError::from(error).into_response();
        assert_eq!(response.status(), status);
        assert_eq!(
            response.headers().get("retry-after").is_some(),
            status == StatusCode::SERVICE_UNAVAILABLE
        );
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: ErrorBody = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            (body.error.kind.as_str(), body.error.retryable),
            (kind, retryable)
        );
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            assert_eq!(
                body.error.message, "internal error",
                "details stay in the log"
            );
        }
    }
}

/// What the service returns round-trips through JSON: comments, threads, groups, counts,
/// pages and their cursors.
#[test]
fn json_round_trips() {
    let comment = Comment {
        link: "0a1b/2c3d".into(),
        parent: Some("0a1b".into()),
        depth: 1,
        author: Author::new("u1", "Ann"),
        text: "hi".into(),
        posted: mongo_social::bson::DateTime::from_millis(1_700_000_000_000),
        edited: None,
        deleted: false,
        votes: mongo_social::comments::Votes { ups: 3, downs: 1 },
    };
    let json = serde_json::to_value(&comment).unwrap();
    assert_eq!(json["votes"], json!({ "ups": 3, "downs": 1 }));
    assert_eq!(serde_json::from_value::<Comment>(json).unwrap(), comment);
    let thread = Page {
        items: vec![Thread {
            comment: comment.clone(),
            replies: Some(Page {
                items: vec![],
                next: None,
            }),
        }],
        next: None,
    };
    let json = serde_json::to_string(&thread).unwrap();
    assert_eq!(serde_json::from_str::<Page<Thread>>(&json).unwrap(), thread);
    let group = Group {
        id: "g1".into(),
        recipient: "ann".into(),
        kind: Kind::Custom("badge".into()),
        target: "post-1".into(),
        window: mongo_social::bson::DateTime::from_millis(0),
        actors: vec!["bob".into()],
        actor_count: 1,
        updated: mongo_social::bson::DateTime::from_millis(5),
        seen: false,
        read: false,
        data: Some(7_u32),
    };
    let json = serde_json::to_value(&group).unwrap();
    assert_eq!(json["kind"], "badge");
    assert_eq!(serde_json::from_value::<Group<u32>>(json).unwrap(), group);
    for (sort, name) in [
        (Sort::Best, "\"best\""),
        (Sort::Controversial, "\"controversial\""),
    ] {
        assert_eq!(serde_json::to_string(&sort).unwrap(), name);
        assert_eq!(serde_json::from_str::<Sort>(name).unwrap(), sort);
    }
    assert!(serde_json::from_str::<Sort>("\"newest\"").is_err());
    let names = json!([
        Vote::Down,
        Order::NewestFirst,
        Kind::Reply,
        Kind::Custom("badge".into())
    ]);
    assert_eq!(names, json!(["down", "newest", "reply", "badge"]));
    let (vote, order, kind): (Vote, Order, Kind) =
        serde_json::from_value(json!(["up", "oldest", "like"])).unwrap();
    assert_eq!(
        (vote, order, kind),
        (Vote::Up, Order::OldestFirst, Kind::Like)
    );
    let error = serde_json::from_value::<Order>(json!("sideways")).unwrap_err();
    assert!(
        error.to_string().contains("unknown order `sideways`"),
        "{error}"
    );
    assert!(serde_json::from_value::<Kind>(json!(" ")).is_err());
}
