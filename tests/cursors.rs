//! Cursors of every store's paged reads against the real server (issue 32): each is made of
//! URL-unreserved characters only, comes back unchanged through a real URL decoder (a query
//! string, a path, a form), is accepted by the read that made it and continues its page; and a
//! cursor made for one scope (a discussion, an owner, a feed, a list, a recipient, a search, a
//! watch) is refused by a read of another with `Invalid::Cursor`.

use mongo_social_lab::SetUp;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use mongo_social::comments::{
    Author, CommentStore, Embedded, HybridPages, NewComment, Order, PerComment, Sort, Vote,
};
use mongo_social::delivery::Delivery;
use mongo_social::error::Invalid;
use mongo_social::feed::{FeedKind, FeedStore, NewPost, NewUser, SearchOrder};
use mongo_social::graph::{FollowGraph, FollowList};
use mongo_social::notifications::{Activity, Event, Kind, NotificationStore};
use mongo_social::realtime::{Mode, ResumeToken, WatchOptions};
use mongo_social::realtime::{Update, Updates};
use mongo_social::{
    BucketedFanOut, Cursor, DynInboxStore, Error, FanOutOnRead, FanOutOnWrite, NewMessage, Page,
    PageRequest, Result,
};
use mongo_social_lab::{self as testing, TestDb};
use url::Url;

/// Unreserved in a URL (RFC 3986): `A-Z a-z 0-9 - . _ ~`.
fn unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

/// Checks that `text` is made of unreserved characters only and comes back unchanged through
/// real URL decoders: a query string decoded as a form, a URL holding it in its path and its
/// query, and a form encoder's output decoded again. Returns what the decoders gave back.
fn through_urls(what: &str, text: &str) -> String {
    assert!(
        !text.is_empty() && text.bytes().all(unreserved),
        "{what}: {text:?} holds a character a URL reserves"
    );
    // Sent back verbatim in a query string, as the client did.
    let query = format!("after={text}");
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(pairs, [("after".to_owned(), text.to_owned())], "{what}");
    // In a URL's path and query, left as it is.
    let url = Url::parse(&format!("https://example.com/pages/{text}?after={text}")).unwrap();
    assert_eq!(
        url.as_str(),
        format!("https://example.com/pages/{text}?after={text}"),
        "{what}: the URL parser escaped the cursor"
    );
    assert_eq!(
        url.path_segments().unwrap().next_back(),
        Some(text),
        "{what}"
    );
    let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    assert_eq!(query, [("after".to_owned(), text.to_owned())], "{what}");
    // Through a form encoder (which may escape `~`) and its decoder.
    let mut built = Url::parse("https://example.com/pages").unwrap();
    built.query_pairs_mut().append_pair("after", text);
    let back: Vec<(String, String)> = built.query_pairs().into_owned().collect();
    assert_eq!(back, [("after".to_owned(), text.to_owned())], "{what}");
    pairs.into_iter().next().unwrap().1
}

/// [`through_urls`] for a cursor, parsed back from what the decoder gave.
fn cursor_through_urls(what: &str, cursor: &Cursor) -> Cursor {
    let parsed: Cursor = through_urls(what, cursor.as_str())
        .parse()
        .unwrap_or_else(|error| panic!("{what}: {cursor} refused after a URL: {error}"));
    assert_eq!(&parsed, cursor, "{what}");
    parsed
}

/// Reads the whole of a paged read (ids, in its order) in one page, then in pages of 2: the
/// first page, and the second after the first one's cursor once it has come back through URLs.
/// Both agree with the whole read. Returns the first page's cursor.
async fn pages<F, Fut, T>(what: &str, read: F) -> Cursor
where
    F: Fn(PageRequest) -> Fut,
    Fut: Future<Output = Result<Page<T>>>,
    T: PartialEq + Debug,
{
    let all = read(PageRequest::first(100))
        .await
        .unwrap_or_else(|error| panic!("{what}: {error}"))
        .items;
    assert!(
        all.len() >= 3,
        "{what}: {} items, want 3 or more",
        all.len()
    );
    let first = read(PageRequest::first(2)).await.unwrap();
    assert_eq!(first.items, all[..2], "{what}: the first page");
    let cursor = first.next.expect("a second page");
    let back = cursor_through_urls(what, &cursor);
    let second = read(PageRequest::after(2, back))
        .await
        .unwrap_or_else(|error| panic!("{what}: its own cursor after a URL: {error}"));
    assert_eq!(
        second.items,
        all[2..all.len().min(4)],
        "{what}: the page after the cursor"
    );
    assert_eq!(second.next.is_some(), all.len() > 4, "{what}");
    cursor
}

/// Checks that `result` is `Invalid::Cursor` with a reason holding `reason`.
fn refused<T: Debug>(what: &str, result: Result<T>, reason: &str) {
    match result {
        Err(Error::InvalidInput {
            reason: Invalid::Cursor { reason: given },
            ..
        }) => {
            assert!(given.contains(reason), "{what}: {given:?}, want {reason:?}")
        }
        other => panic!("{what}: expected Invalid::Cursor ({reason}), got {other:?}"),
    }
}

// Inboxes and timelines.

fn inboxes(db: &mongodb::Database) -> Vec<Arc<DynInboxStore<String>>> {
    vec![
        Arc::new(FanOutOnRead::new(db)),
        Arc::new(FanOutOnWrite::new(db)),
        Arc::new(BucketedFanOut::new(db)),
    ]
}

/// Five messages to `bob` and `ann.o'neil`, and two to `bob` alone.
async fn send_mail(inbox: &DynInboxStore<String>) {
    for i in 0..5 {
        let to = ["bob", "ann.o'neil"];
        let message = NewMessage::new("joe", to, format!("to both {i}"));
        inbox.send(message).await.unwrap();
    }
    for i in 0..2 {
        let message = NewMessage::new("joe", ["bob"], format!("to bob {i}"));
        inbox.send(message).await.unwrap();
    }
}

#[tokio::test]
async fn inbox_cursors_are_url_safe_and_bound_to_their_owner() {
    for strategy in 0..3 {
        let t = testing::test_db(&format!("cursors_inbox_{strategy}")).await;
        let inbox = inboxes(&t.db).swap_remove(strategy);
        inbox.set_up().await.unwrap();
        send_mail(&*inbox).await;
        let what = format!("{} inbox", inbox.strategy());
        let inbox = &*inbox;
        let read = |owner: &'static str| {
            move |request| async move {
                let page = inbox.inbox_page(owner, request).await?;
                Ok(page.map(|message| message.id))
            }
        };
        let bobs = pages(&what, read("bob")).await;
        pages(&what, read("ann.o'neil")).await;
        refused(
            &what,
            inbox
                .inbox_page("ann.o'neil", PageRequest::after(2, bobs))
                .await,
            "belongs to another owner's inbox",
        );
    }
}

#[tokio::test]
async fn timeline_cursors_are_url_safe_and_bound_to_their_owner() {
    for strategy in 0..3 {
        let t = testing::test_db(&format!("cursors_timeline_{strategy}")).await;
        let graph = Arc::new(FollowGraph::new(&t.db));
        graph.set_up().await.unwrap();
        let inbox = inboxes(&t.db).swap_remove(strategy);
        inbox.set_up().await.unwrap();
        let what = format!("timeline over a {} inbox", inbox.strategy());
        let delivery = Delivery::builder(&t.db, graph.clone(), inbox.clone())
            .build()
            .unwrap();
        delivery.set_up().await.unwrap();
        send_mail(&**delivery.inbox()).await;
        let delivery = &delivery;
        let read = |owner: &'static str| {
            move |request| async move {
                let page = delivery.timeline(owner, request).await?;
                Ok(page.map(|message| message.id))
            }
        };
        let bobs = pages(&what, read("bob")).await;
        refused(
            &what,
            delivery
                .timeline("ann.o'neil", PageRequest::after(2, bobs))
                .await,
            "belongs to another owner's inbox",
        );
    }
}

// Comments.

fn comment_stores(db: &mongodb::Database) -> Vec<Arc<dyn CommentStore>> {
    vec![
        Arc::new(PerComment::new(db)),
        Arc::new(Embedded::new(db)),
        Arc::new(HybridPages::builder(db).page_size(2).build().unwrap()),
    ]
}

fn comment(text: &str) -> NewComment {
    NewComment::new(Author::new("u1", "Rick"), text)
}

/// Discussions `p1` and `p2`, each of five top-level comments (the first two voted on, so the
/// sort keys are fractions) and, where the strategy threads, three replies to the first.
/// Returns each discussion's first comment's link.
async fn discussions(store: &dyn CommentStore) -> Vec<String> {
    let mut firsts = Vec::new();
    for discussion in ["p1", "p2"] {
        store.create_discussion(discussion).await.unwrap();
        let mut links = Vec::new();
        for i in 0..5 {
            let posted = store
                .post(discussion, comment(&format!("comment {i}")))
                .await
                .unwrap();
            links.push(posted.link);
        }
        store
            .vote(discussion, &links[0], "v1", Vote::Up)
            .await
            .unwrap();
        store
            .vote(discussion, &links[1], "v1", Vote::Down)
            .await
            .unwrap();
        if let Some(threaded) = store.threaded() {
            for i in 0..3 {
                threaded
                    .reply(discussion, &links[0], comment(&format!("reply {i}")))
                    .await
                    .unwrap();
            }
        }
        firsts.push(links[0].clone());
    }
    firsts
}

#[tokio::test]
async fn comment_cursors_are_url_safe_and_bound_to_their_discussion() {
    for strategy in 0..3 {
        let t = testing::test_db(&format!("cursors_comments_{strategy}")).await;
        let store = comment_stores(&t.db).swap_remove(strategy);
        store.set_up().await.unwrap();
        let firsts = discussions(&*store).await;
        let store = &*store;
        let strategy = store.strategy();
        let links = |page: Page<mongo_social::Comment>| page.map(|comment| comment.link);

        for order in [Order::OldestFirst, Order::NewestFirst] {
            let what = format!("{strategy} chronological {order:?}");
            let read = |discussion: &'static str| {
                move |request| async move {
                    Ok(links(
                        store.chronological(discussion, order, request).await?,
                    ))
                }
            };
            pages(&what, read("p1")).await;
            let p2 = pages(&what, read("p2")).await;
            refused(
                &what,
                store
                    .chronological("p1", order, PageRequest::after(2, p2))
                    .await,
                "belongs to another discussion",
            );
        }

        for sort in Sort::ALL {
            let what = format!("{strategy} ranked by {sort}");
            let read = |discussion: &'static str| {
                move |request| async move {
                    Ok(links(store.ranked(discussion, None, sort, request).await?))
                }
            };
            pages(&what, read("p1")).await;
            let p2 = pages(&what, read("p2")).await;
            refused(
                &what,
                store
                    .ranked("p1", None, sort, PageRequest::after(2, p2))
                    .await,
                "belongs to another discussion",
            );
        }

        let Some(threaded) = store.threaded() else {
            continue;
        };
        for order in [Order::OldestFirst, Order::NewestFirst] {
            let what = format!("{strategy} threaded {order:?}");
            let read = |discussion: &'static str| {
                move |request| async move {
                    Ok(links(
                        threaded.thread_page(discussion, order, request).await?,
                    ))
                }
            };
            pages(&what, read("p1")).await;
            let p2 = pages(&what, read("p2")).await;
            refused(
                &what,
                threaded
                    .thread_page("p1", order, PageRequest::after(2, p2))
                    .await,
                "belongs to another discussion",
            );
        }

        // Sub-threads, and ranked replies, of each discussion's first comment. (Embedded links
        // are positions, the same text in both discussions.)
        let (p1_first, p2_first) = (firsts[0].as_str(), firsts[1].as_str());
        let what = format!("{strategy} sub-thread");
        let p1s = pages(&what, move |request| async move {
            Ok(links(threaded.sub_thread("p1", p1_first, request).await?))
        })
        .await;
        let p2s = pages(&what, move |request| async move {
            Ok(links(threaded.sub_thread("p2", p2_first, request).await?))
        })
        .await;
        refused(
            &what,
            threaded
                .sub_thread("p1", p1_first, PageRequest::after(2, p2s))
                .await,
            "belongs to another sub-thread",
        );
        // Another sub-thread of the same discussion: the first reply's.
        let reply = threaded
            .sub_thread("p1", p1_first, PageRequest::first(2))
            .await
            .unwrap()
            .items[1]
            .link
            .clone();
        refused(
            &what,
            threaded
                .sub_thread("p1", &reply, PageRequest::after(2, p1s))
                .await,
            "belongs to another sub-thread",
        );

        let what = format!("{strategy} ranked replies");
        let best = Sort::Best;
        pages(&what, move |request| async move {
            Ok(links(
                store.ranked("p1", Some(p1_first), best, request).await?,
            ))
        })
        .await;
        let p2 = pages(&what, move |request| async move {
            Ok(links(
                store.ranked("p2", Some(p2_first), best, request).await?,
            ))
        })
        .await;
        refused(
            &what,
            store
                .ranked("p1", Some(p1_first), best, PageRequest::after(2, p2))
                .await,
            "belongs to another discussion",
        );
    }
}

// Feeds and search.

async fn feed_store(t: &TestDb) -> FeedStore<()> {
    let follows = Arc::new(FollowList::from_pairs([("bob", "ann"), ("ann", "cat")]));
    let store = FeedStore::builder(&t.db)
        .capabilities(t.info.capabilities())
        .follows(follows)
        .build()
        .unwrap();
    store.set_up().await.unwrap();
    for user in ["ann", "bob", "cat"] {
        store
            .users()
            .create(NewUser::new(user, user))
            .await
            .unwrap();
    }
    for i in 0..5 {
        let rust = NewPost::new("ann", format!("Rust {i}"), "rust notes", ());
        store.posts().create(rust).await.unwrap();
        let garden = NewPost::new("cat", format!("Garden {i}"), "tomatoes", ());
        store.posts().create(garden).await.unwrap();
    }
    store.run_pending().await.unwrap();
    store
}

#[tokio::test]
async fn feed_and_search_cursors_are_url_safe_and_bound_to_their_feed_or_terms() {
    let t = testing::test_db("cursors_feed").await;
    let store = &feed_store(&t).await;
    let ids = |page: Page<mongo_social::feed::Post<()>>| page.map(|post| post.id);

    let read = |feed: FeedKind| {
        move |request| {
            let feed = feed.clone();
            async move { Ok(ids(store.feeds().page(&feed, request).await?)) }
        }
    };
    let latest = pages("latest feed", read(FeedKind::Latest)).await;
    let bobs = pages("bob's feed", read(FeedKind::User("bob".into()))).await;
    pages("ann's feed", read(FeedKind::User("ann".into()))).await;
    for (cursor, feed) in [
        (&bobs, FeedKind::User("ann".into())),
        (&bobs, FeedKind::Latest),
        (&latest, FeedKind::Hot),
        (&latest, FeedKind::User("bob".into())),
    ] {
        refused(
            &format!("{feed:?}"),
            store
                .feeds()
                .page(&feed, PageRequest::after(2, cursor.clone()))
                .await,
            "belongs to another feed",
        );
    }

    for order in [SearchOrder::Newest, SearchOrder::BestMatch] {
        let what = format!("search {order:?}");
        let read = |terms: &'static str| {
            move |request| async move { Ok(ids(store.search().page(terms, order, request).await?)) }
        };
        let rust = pages(&what, read("rust")).await;
        pages(&what, read("tomatoes")).await;
        refused(
            &what,
            store
                .search()
                .page("tomatoes", order, PageRequest::after(2, rust.clone()))
                .await,
            "belongs to another search",
        );
        // The same terms, as they match: case aside.
        let same = store
            .search()
            .page("RUST", order, PageRequest::after(2, rust))
            .await
            .unwrap();
        assert_eq!(same.items.len(), 2, "{what}");
    }
}

// The follow graph.

/// User ids holding what a URL reserves or escapes.
const ODD: [&str; 5] = ["u.1", "u 2", "ü/3", "%2E4", "u~5+&=?#"];

#[tokio::test]
async fn graph_cursors_are_url_safe_and_bound_to_their_list() {
    let t = testing::test_db("cursors_graph").await;
    let graph = &FollowGraph::new(&t.db);
    graph.set_up().await.unwrap();
    for user in ODD
        .iter()
        .chain(&["ann", "bob", "cat", "x.1", "x.2", "x.3"])
    {
        graph.add_user(user).await.unwrap();
    }
    for owner in ["ann", "bob"] {
        for user in ODD {
            graph.follow(owner, user).await.unwrap();
        }
    }
    graph.follow("cat", "u.1").await.unwrap();
    for group in ["g.1", "g.2"] {
        graph.add_group(group).await.unwrap();
        for user in ODD {
            graph.add_member(group, user).await.unwrap();
        }
    }
    for owner in ["ann", "bob"] {
        for user in ["x.1", "x.2", "x.3"] {
            graph.block(owner, user).await.unwrap();
        }
    }
    let users = |page: Page<mongo_social::graph::Subscription>| {
        page.map(|s| format!("{} {}", s.owner, s.user))
    };

    let following = |owner: &'static str| {
        move |request| async move { Ok(users(graph.following(owner, request).await?)) }
    };
    let followers = |user: &'static str| {
        move |request| async move { Ok(users(graph.followers(user, request).await?)) }
    };
    let members =
        |group: &'static str| move |request| async move { graph.members(group, request).await };
    let blocked =
        |owner: &'static str| move |request| async move { graph.blocked(owner, request).await };
    let anns = pages("following", following("ann")).await;
    pages("following", following("bob")).await;
    let u1s = pages("followers", followers("u.1")).await;
    let g1s = pages("members", members("g.1")).await;
    pages("members", members("g.2")).await;
    let anns_blocks = pages("blocked", blocked("ann")).await;
    pages("blocked", blocked("bob")).await;

    let after = |cursor: &Cursor| PageRequest::after(2, cursor.clone());
    let list = "belongs to another user's following list";
    refused(
        "following",
        graph.following("bob", after(&anns)).await,
        list,
    );
    let list = "belongs to another user's followers list";
    refused(
        "followers",
        graph.followers("ann", after(&anns)).await,
        list,
    );
    refused("followers", graph.followers("u 2", after(&u1s)).await, list);
    let list = "belongs to another group's member list";
    refused("members", graph.members("g.2", after(&g1s)).await, list);
    refused("members", graph.members("ann", after(&anns)).await, list);
    let list = "belongs to another user's block list";
    refused(
        "blocked",
        graph.blocked("bob", after(&anns_blocks)).await,
        list,
    );
    refused("blocked", graph.blocked("ann", after(&anns)).await, list);
}

#[tokio::test]
async fn recommendation_cursors_are_url_safe_and_bound_to_their_reader() {
    let t = testing::test_db("cursors_recommend").await;
    let graph = &FollowGraph::new(&t.db);
    graph.set_up().await.unwrap();
    let people = ["ann", "bob", "b.1", "b 2", "c.1", "c/2", "c~3", "c%2E4"];
    for user in people {
        graph.add_user(user).await.unwrap();
    }
    for (owner, user) in [
        ("ann", "b.1"),
        ("ann", "b 2"),
        ("bob", "b.1"),
        ("b.1", "c.1"),
        ("b.1", "c/2"),
        ("b.1", "c~3"),
        ("b 2", "c~3"),
        ("b 2", "c%2E4"),
    ] {
        graph.follow(owner, user).await.unwrap();
    }
    let read = |user: &'static str| {
        move |request| async move {
            let page = graph.recommendations(user, request).await?;
            Ok(page.map(|r| r.user))
        }
    };
    let anns = pages("ann's recommendations", read("ann")).await;
    pages("bob's recommendations", read("bob")).await;
    refused(
        "recommendations",
        graph
            .recommendations("bob", PageRequest::after(2, anns))
            .await,
        "belongs to another user's recommendations",
    );
}

// Notifications, and a watch's resume tokens.

/// The next item of a watch, within 20 s.
async fn next<T>(updates: &mut Updates<T>) -> Result<Update<T>> {
    tokio::time::timeout(Duration::from_secs(20), updates.next())
        .await
        .expect("an update within 20 s")
        .expect("the stream goes on")
}

async fn notifications(t: &TestDb) -> NotificationStore<()> {
    let store = NotificationStore::new(&t.db);
    store.set_up().await.unwrap();
    for (recipient, posts) in [("ann", 5), ("bob", 3)] {
        for i in 0..posts {
            let activity = Activity::new(recipient, Kind::Like, format!("post.{i}"), "joe");
            store.notify(Event::new(activity)).await.unwrap();
        }
    }
    store
}

#[tokio::test]
async fn notification_cursors_are_url_safe_and_bound_to_their_recipient() {
    let t = testing::test_db("cursors_notifications").await;
    let store = &notifications(&t).await;
    let read = |recipient: &'static str| {
        move |request| async move {
            let page = store.page(recipient, request).await?;
            Ok(page.map(|group| group.id))
        }
    };
    let anns = pages("ann's notifications", read("ann")).await;
    pages("bob's notifications", read("bob")).await;
    refused(
        "notifications",
        store.page("bob", PageRequest::after(2, anns)).await,
        "belongs to another recipient's notifications",
    );
}

#[tokio::test]
async fn resume_tokens_are_url_safe_and_bound_to_their_watch() {
    let t = testing::test_db("cursors_tokens").await;
    let store = notifications(&t).await;
    let options = WatchOptions::default()
        .mode(Mode::Polling)
        .poll_interval(Duration::from_millis(20))
        .since(bson::DateTime::from_millis(0));
    let mut anns = store.watch("ann", None, options.clone());
    let first = next(&mut anns).await.unwrap();
    let second = next(&mut anns).await.unwrap();
    drop(anns);
    let text = through_urls("a resume token", &first.token.to_string());
    let token: ResumeToken = text.parse().unwrap();
    assert_eq!(token, first.token);
    // Resumed from the token after a URL: the next update is the one that came next.
    let mut resumed = store.watch("ann", Some(token.clone()), options.clone());
    assert_eq!(next(&mut resumed).await.unwrap().item.id, second.item.id);
    drop(resumed);
    // Another recipient's watch refuses it.
    let mut bobs = store.watch("bob", Some(token), options);
    refused(
        "bob's watch",
        next(&mut bobs).await,
        "belongs to another watch",
    );
}
