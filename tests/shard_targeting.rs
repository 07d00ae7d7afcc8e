//! Every command the library sends, classified by where a `mongos` would route it under the
//! shard keys the stores declare (`shard_keys()`): targeted to one shard, to a few, or broadcast
//! to all. Runs on any server (no cluster needed: routing follows from the filter and the key).
//! A broadcast is allowed only where the routing table of docs/INBOXES.md says it is by design.
//!
//! On a sharded deployment (the `documentdb-sharded` CI leg: DocumentDB over Citus behind its
//! gateway) the stores' collections are sharded by their own `shard_collections` (`set_up`),
//! and every filter is also `explain`ed: the engine's plan must reach one shard where the
//! classifier says targeted, every shard where it says broadcast, and at most `n` where it
//! says `n`. The classifier stays the fast check every server runs; the engine proves it.

use mongo_social_lab::SetUp;
use std::sync::Arc;
use std::time::Duration;

use mongo_social::comments::{
    Author, DynCommentStore, Embedded, HybridPages, NewComment, Order, PerComment, Sort, Vote,
};
use mongo_social::delivery::Delivery;
use mongo_social::feed::{FeedKind, FeedStore, NewPost, NewUser, SearchOrder};
use mongo_social::graph::{FollowGraph, FollowList};
use mongo_social::server::Topology;
use mongo_social::sharding::{Routing, ShardKey};
use mongo_social::{
    inbox::DynInboxLifecycle, BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite,
    NewMessage, PageRequest,
};
use mongo_social_lab::routing::{engine_routing, route_commands, EngineRouting, RoutedCommand};
use mongo_social_lab::{self as testing, CommandCounter};
use mongodb::Database;

/// A fresh database on a client whose counter keeps every command.
async fn database(name: &str) -> (Database, CommandCounter) {
    let commands = CommandCounter::keeping_commands();
    let client = testing::client_with(|options| commands.attach(options)).await;
    let db = client.database(&testing::database_name(name));
    testing::drop_database(&db).await;
    (db, commands)
}

/// The routing of what `commands` recorded, printed as a table; panics on a broadcast that is
/// not in `by_design` (`(command, collection)` pairs), and on a `by_design` entry that did not
/// happen, so the list cannot go stale. On a sharded deployment, then asks the engine (see the
/// module docs).
async fn check(
    db: &Database,
    store: &str,
    commands: &CommandCounter,
    keys: &[ShardKey],
    by_design: &[(&str, &str)],
) -> Vec<RoutedCommand> {
    let routed = route_commands(&commands.commands(), keys);
    assert!(
        !routed.is_empty(),
        "{store}: no command was on a sharded collection"
    );
    let mut table: Vec<String> = routed.iter().map(ToString::to_string).collect();
    table.sort();
    table.dedup();
    println!("{store}:\n  {}", table.join("\n  "));
    let broadcasts: Vec<&RoutedCommand> = routed
        .iter()
        .filter(|command| command.routing == Routing::Broadcast)
        .collect();
    for broadcast in &broadcasts {
        assert!(
            by_design.contains(&(broadcast.command.as_str(), broadcast.collection.as_str())),
            "{store}: {broadcast} is broadcast to every shard"
        );
    }
    for (command, collection) in by_design {
        assert!(
            broadcasts
                .iter()
                .any(|b| b.command == *command && b.collection == *collection),
            "{store}: {command} {collection} is listed as broadcast by design but was targeted"
        );
    }
    if testing::server_info().await.topology == Topology::Sharded {
        agrees_with_engine(db, store, commands, keys).await;
    }
    routed
}

/// Each filter's routing as the engine plans it, against the classifier's: one shard for a
/// targeted filter, every shard of its collection for a broadcast, at most `n` for `n` values.
/// Every collection with a declared key is sharded (`set_up` shards before it creates the
/// indexes, so unique indexes do not keep a collection whole): a plan on one shard of one is a
/// collection the engine left unsharded, and fails.
async fn agrees_with_engine(
    db: &Database,
    store: &str,
    commands: &CommandCounter,
    keys: &[ShardKey],
) {
    let routed = engine_routing(db, &commands.commands(), keys)
        .await
        .expect("explain");
    assert!(!routed.is_empty(), "{store}: nothing was explained");
    for read in &routed {
        println!("  engine: {read}");
        assert!(
            read.shards > 1,
            "{store}: {} is not sharded ({read})",
            read.collection
        );
        if or_branch_lists_keys(read, keys) {
            // DocumentDB routes an `$or` by its branches when each fixes the key by equality,
            // and asks every shard when a branch lists several values (`$in`), where `mongos`
            // asks the union of the branches' shards (docs/SHARDING.md).
            assert_eq!(read.reached, read.shards, "{store}: {read}");
            continue;
        }
        match read.classified {
            Routing::Targeted => assert_eq!(read.reached, 1, "{store}: {read}"),
            Routing::Broadcast => assert_eq!(read.reached, read.shards, "{store}: {read}"),
            Routing::Shards(n) => assert!(read.reached <= n, "{store}: {read}"),
            _ => {}
        }
    }
}

/// Whether the classifier routes `read` by the branches of its `$or` alone (without the `$or`
/// the filter would reach every shard), one of them listing several values of the key.
fn or_branch_lists_keys(read: &EngineRouting, keys: &[ShardKey]) -> bool {
    let Some(key) = keys.iter().find(|key| key.collection == read.collection) else {
        return false;
    };
    let mut rest = read.filter.clone();
    let Some(bson::Bson::Array(branches)) = rest.remove("$or") else {
        return false;
    };
    read.classified != Routing::Broadcast
        && key.routing(&rest) == Routing::Broadcast
        && branches
            .iter()
            .filter_map(bson::Bson::as_document)
            .any(|branch| matches!(key.routing(branch), Routing::Shards(_)))
}

async fn inbox_operations(inbox: &DynInboxLifecycle<String>) {
    inbox.set_up().await.unwrap();
    let many: Vec<String> = (0..120).map(|i| format!("u{i:03}")).collect();
    let mut sent = Vec::new();
    for round in 0..3 {
        sent.push(
            inbox
                .send(NewMessage::new(
                    "ann",
                    ["bob", "cat"],
                    format!("hi {round}"),
                ))
                .await
                .unwrap()
                .message,
        );
    }
    let group = inbox
        .send(NewMessage::new("ann", many.clone(), "to many".to_owned()))
        .await
        .unwrap()
        .message;
    inbox.deliver(&sent[0], &["dan".to_owned()]).await.unwrap();
    let first = inbox
        .inbox_page("bob", PageRequest::first(2))
        .await
        .unwrap();
    inbox
        .inbox_page("bob", PageRequest::after(2, first.next.unwrap()))
        .await
        .unwrap();
    inbox
        .inbox_page("u007", PageRequest::first(10))
        .await
        .unwrap();
    inbox.count("bob").await.unwrap();
    inbox.unread_count("bob").await.unwrap();
    inbox.mark_read("bob", sent[1].id).await.unwrap();
    assert_eq!(group.to.len(), 120);
}

#[tokio::test]
async fn inbox_commands_are_targeted() {
    // FerretDB 1.x evaluates no filter but `{_id}` without decoding the whole collection, and
    // cannot be sharded: there the bucketed store addresses buckets by `_id` alone
    // (`Backend::by_id`). Its filters on the other servers, MongoDB's, are the ones checked.
    let by_id_only = !testing::server_info()
        .await
        .capabilities()
        .filters_beyond_id;
    let bucketed: &[(&str, &str)] = if by_id_only {
        &[("find", "inbox_buckets"), ("update", "inbox_buckets")]
    } else {
        &[]
    };
    for (name, by_design) in [
        // Fan-out on read is sharded by sender: an inbox is everyone's messages *to* the
        // owner, on every shard. The README's table of strategies says so (all shards); so is
        // a mark of the owner's state on a message, which names it by id, not by sender.
        (
            "fan_out_on_read",
            &[
                ("find", "inbox"),
                ("aggregate", "inbox"),
                ("update", "inbox"),
            ][..],
        ),
        ("fan_out_on_write", &[][..]),
        ("bucketed", bucketed),
    ] {
        let (db, commands) = database(&format!("routing_inbox_{name}")).await;
        let inbox: Arc<DynInboxLifecycle<String>> = match name {
            "fan_out_on_read" => Arc::new(FanOutOnRead::new(&db)),
            "fan_out_on_write" => Arc::new(
                FanOutOnWrite::builder(&db)
                    .max_inline_recipients(100)
                    .build()
                    .unwrap(),
            ),
            _ => Arc::new(
                BucketedFanOut::builder(&db)
                    .bucket_size(2)
                    .max_inline_recipients(100)
                    .build()
                    .unwrap(),
            ),
        };
        inbox_operations(&*inbox).await;
        check(&db, name, &commands, &inbox.shard_keys(), by_design).await;
    }
}

#[tokio::test]
async fn comment_commands_are_targeted() {
    type MakeStore = fn(&Database) -> Box<DynCommentStore>;
    let stores: Vec<(&str, MakeStore)> = vec![
        ("per_comment", |db| Box::new(PerComment::new(db))),
        ("embedded", |db| Box::new(Embedded::new(db))),
        ("hybrid", |db| {
            Box::new(HybridPages::builder(db).page_size(3).build().unwrap())
        }),
    ];
    for (name, make) in stores {
        let (db, commands) = database(&format!("routing_comments_{name}")).await;
        let store = make(&db);
        store.set_up().await.unwrap();
        store.create_discussion("d1").await.unwrap();
        let author = Author::new("u1", "Ann");
        let mut links = Vec::new();
        for n in 0..7 {
            let comment = store
                .post("d1", NewComment::new(author.clone(), format!("c{n}")))
                .await
                .unwrap();
            links.push(comment.link);
        }
        if let Some(threads) = store.threaded() {
            let reply = threads
                .reply("d1", &links[0], NewComment::new(author.clone(), "re"))
                .await
                .unwrap();
            threads
                .thread_page("d1", Order::NewestFirst, PageRequest::first(3))
                .await
                .unwrap();
            threads
                .sub_thread("d1", &links[0], PageRequest::first(3))
                .await
                .unwrap();
            store.get("d1", &reply.link).await.unwrap();
        }
        let page = store
            .chronological("d1", Order::OldestFirst, PageRequest::first(3))
            .await
            .unwrap();
        store
            .chronological(
                "d1",
                Order::OldestFirst,
                PageRequest::after(3, page.next.unwrap()),
            )
            .await
            .unwrap();
        store.get("d1", &links[4]).await.unwrap();
        store.edit("d1", &links[1], "edited").await.unwrap();
        store.delete("d1", &links[2]).await.unwrap();
        store.count("d1").await.unwrap();
        // Votes (a first vote, a change, a retraction) and ranked pages.
        store.vote("d1", &links[3], "u2", Vote::Up).await.unwrap();
        store.vote("d1", &links[3], "u2", Vote::Down).await.unwrap();
        store.retract_vote("d1", &links[3], "u2").await.unwrap();
        store.vote_of("d1", &links[3], "u2").await.unwrap();
        for sort in Sort::ALL {
            let page = store
                .ranked("d1", None, sort, PageRequest::first(3))
                .await
                .unwrap();
            store
                .ranked("d1", None, sort, PageRequest::after(3, page.next.unwrap()))
                .await
                .unwrap();
        }
        if store.threaded().is_some() {
            store
                .ranked("d1", Some(&links[0]), Sort::Best, PageRequest::first(3))
                .await
                .unwrap();
        }
        store.settle_votes("d1").await.unwrap();
        check(&db, name, &commands, &store.shard_keys(), &[]).await;
    }
}

#[tokio::test]
async fn graph_commands_are_targeted() {
    let (db, commands) = database("routing_graph").await;
    let graph = FollowGraph::new(&db);
    graph.set_up().await.unwrap();
    for user in ["a", "b", "c", "d"] {
        graph.add_user(user).await.unwrap();
    }
    graph.add_group("g").await.unwrap();
    graph.add_member("g", "c").await.unwrap();
    graph.follow("a", "b").await.unwrap();
    graph.follow_group("a", "g").await.unwrap();
    graph.add_member("g", "d").await.unwrap();
    graph.following("a", PageRequest::first(10)).await.unwrap();
    graph.followers("c", PageRequest::first(10)).await.unwrap();
    graph.members("g", PageRequest::first(10)).await.unwrap();
    graph.stats("c").await.unwrap();
    graph.unfollow("a", "b").await.unwrap();
    graph.remove_member("g", "c").await.unwrap();
    graph.rebuild("a").await.unwrap();
    check(
        &db,
        "graph",
        &commands,
        &graph.shard_keys(),
        &[
            // "Who follows B" and "who follows group G" scatter (see `FollowGraph::shard_keys`):
            // the rarer questions, asked by followers pages and by group changes.
            ("find", "subscriptions"),
            ("find", "follows"),
        ],
    )
    .await;
}

#[tokio::test]
async fn recommendation_commands_are_targeted() {
    let (db, commands) = database("routing_recommend").await;
    let options = mongo_social::graph::RecommendOptions::default()
        .per_followee(2)
        .group_boost(1);
    let graph = FollowGraph::builder(&db)
        .recommendations(options)
        .build()
        .unwrap();
    graph.set_up().await.unwrap();
    for user in ["a", "b", "c", "d", "e", "f", "g"] {
        graph.add_user(user).await.unwrap();
    }
    graph.add_group("club").await.unwrap();
    graph.add_member("club", "a").await.unwrap();
    graph.add_member("club", "d").await.unwrap();
    // a follows b (who follows d, e, f: a hub at 2 per followee) and c (who follows d).
    for (owner, user) in [
        ("a", "b"),
        ("a", "c"),
        ("b", "d"),
        ("b", "e"),
        ("b", "f"),
        ("c", "d"),
    ] {
        graph.follow(owner, user).await.unwrap();
    }
    graph.dismiss("a", "e").await.unwrap();
    graph.block("g", "a").await.unwrap();
    commands.reset();
    let page = graph
        .recommendations("a", PageRequest::first(10))
        .await
        .unwrap();
    assert!(!page.items.is_empty());
    graph.dismiss("a", "f").await.unwrap();
    graph.block("a", "d").await.unwrap();
    graph.unblock("a", "d").await.unwrap();
    graph.blocked("g", PageRequest::first(10)).await.unwrap();
    graph.follow("a", "d").await.unwrap();
    check(
        &db,
        "recommendations",
        &commands,
        &graph.shard_keys(),
        // The group boost asks which groups the reader is in: memberships are sharded by group.
        &[("find", "group_members")],
    )
    .await;
}

#[tokio::test]
async fn delivery_commands_are_targeted() {
    let (db, commands) = database("routing_delivery").await;
    let graph = Arc::new(FollowGraph::new(&db));
    graph.set_up().await.unwrap();
    let inbox: Arc<DynInboxStore<String>> = Arc::new(FanOutOnWrite::new(&db));
    let delivery = Delivery::builder(&db, graph.clone(), inbox.clone())
        .build()
        .unwrap();
    delivery.set_up().await.unwrap();
    for user in ["ann", "bob", "cat"] {
        graph.add_user(user).await.unwrap();
        delivery.touch(user).await.unwrap();
    }
    delivery.follow("bob", "ann").await.unwrap();
    delivery.follow("cat", "ann").await.unwrap();
    delivery.post("ann", "hello".to_owned()).await.unwrap();
    delivery.run_pending().await.unwrap();
    delivery
        .timeline("bob", PageRequest::first(10))
        .await
        .unwrap();
    delivery.unfollow("cat", "ann").await.unwrap();
    let mut keys = delivery.shard_keys();
    keys.extend(graph.shard_keys());
    keys.extend(inbox.shard_keys());
    keys.extend(delivery.jobs().shard_keys());
    check(
        &db,
        "delivery",
        &commands,
        &keys,
        &[
            // A fan-out job pages through the author's followers: "who follows B" is the
            // graph's scatter query (see `FollowGraph::shard_keys`), paid in the background.
            ("find", "subscriptions"),
            // Claiming due jobs asks every shard of the queue (see `JobQueue::shard_keys`).
            ("find", "delivery_jobs"),
        ],
    )
    .await;
}

#[tokio::test]
async fn feed_commands_are_targeted() {
    let (db, commands) = database("routing_feed").await;
    let follows = Arc::new(FollowList::from_pairs([("bob", "ann")]));
    let store: FeedStore<()> = FeedStore::builder(&db).follows(follows).build().unwrap();
    store.set_up().await.unwrap();
    store
        .users()
        .create(NewUser::new("ann", "ann"))
        .await
        .unwrap();
    store
        .users()
        .create(NewUser::new("bob", "bob"))
        .await
        .unwrap();
    let post = store
        .posts()
        .create(NewPost::new("ann", "Hello", "First post", ()))
        .await
        .unwrap();
    store.run_pending().await.unwrap();
    store.likes().like(post.id, "bob").await.unwrap();
    store.likes().unlike(post.id, "bob").await.unwrap();
    store.posts().get(post.id).await.unwrap();
    store
        .feeds()
        .page(&FeedKind::User("bob".into()), PageRequest::first(10))
        .await
        .unwrap();
    store
        .feeds()
        .page(&FeedKind::Latest, PageRequest::first(10))
        .await
        .unwrap();
    store.users().rename("ann", "ann2").await.unwrap();
    store
        .search()
        .page("first", SearchOrder::Newest, PageRequest::first(10))
        .await
        .unwrap();
    store
        .wait_until_drained(Duration::from_secs(30))
        .await
        .unwrap();
    let mut by_design = vec![
        // A rename's propagation finds the author's posts, and search matches text: both
        // scatter under the hashed `_id` that targets every read by id and every feed page.
        ("find", "posts"),
        // Claiming due jobs and counting pending ones ask every shard of the queue.
        ("find", "feed_jobs"),
        ("aggregate", "feed_jobs"),
    ];
    if testing::server_info().await.capabilities().text_search {
        // Search through the text index is an `aggregate` (MongoDB, DocumentDB): no shard key
        // can name a word.
        by_design.push(("aggregate", "posts"));
    }
    check(&db, "feed", &commands, &store.shard_keys(), &by_design).await;
}

/// How many shards the engine's plan for the whole of `collection` reaches: 1 for a collection
/// it keeps whole.
async fn shards_of(db: &Database, collection: &str, keys: &[ShardKey]) -> usize {
    let find = (
        "find".to_owned(),
        bson::doc! { "find": collection, "filter": {} },
    );
    let routed = engine_routing(db, &[find], keys).await.expect("explain");
    routed[0].shards
}

/// Unique indexes on sharded collections, in both orders: sharded before its indexes exist (a
/// new deployment, as `set_up` does) or indexed first (a deployment that grew), the graph's
/// subscriptions are sharded and refuse a second document for one pair, while one user
/// followed by many owners spreads over their shards.
#[tokio::test]
async fn unique_indexes_hold_on_sharded_collections() {
    if testing::skip_unless(
        testing::server_info().await.topology == Topology::Sharded,
        "unique_indexes_hold_on_sharded_collections",
        "needs a sharded deployment (the documentdb-sharded leg)",
    ) {
        return;
    }
    for (name, shard_first) in [("shard_first", true), ("indexes_first", false)] {
        let (db, _) = database(&format!("routing_unique_{name}")).await;
        let graph = FollowGraph::new(&db);
        if shard_first {
            graph.shard_collections().await.unwrap();
            graph.create_indexes().await.unwrap();
        } else {
            graph.create_indexes().await.unwrap();
            graph.shard_collections().await.unwrap();
        }
        let keys = graph.shard_keys();
        let subscriptions = keys
            .iter()
            .find(|key| key.key == bson::doc! { "owner": 1, "user": 1 })
            .expect("the subscriptions' key")
            .collection
            .clone();
        let shards = shards_of(&db, &subscriptions, &keys).await;
        assert!(shards > 1, "{name}: sharded, {shards} shard(s)");
        let raw = db.collection::<bson::Document>(&subscriptions);
        raw.insert_one(bson::doc! { "owner": "ann", "user": "bob", "origins": [] })
            .await
            .unwrap();
        let again = raw
            .insert_one(bson::doc! { "owner": "ann", "user": "bob", "origins": [] })
            .await
            .expect_err("a second document for one pair");
        assert!(
            matches!(
                &*again.kind,
                mongodb::error::ErrorKind::Write(mongodb::error::WriteFailure::WriteError(error))
                    if error.code == 11000
            ),
            "{name}: a duplicate key error, not {again}"
        );
        // The same user followed by other owners: other shard-key values, other shards.
        for owner in ["cat", "dan", "eve", "fay"] {
            raw.insert_one(bson::doc! { "owner": owner, "user": "bob", "origins": [] })
                .await
                .unwrap();
        }
        assert_eq!(
            raw.count_documents(bson::doc! { "user": "bob" })
                .await
                .unwrap(),
            5,
            "{name}"
        );
    }
}
