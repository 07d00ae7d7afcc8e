//! The follow graph against the real server: routes, incremental updates against rebuilds,
//! counts under concurrency, bad input, and command counts.

use mongo_social::error::Invalid;
use mongo_social_lab::SetUp;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use bson::{doc, Document};
use mongo_social::graph::{FollowGraph, Origin, RebuildReport, Subscription};
use mongo_social::{error::Entity, Error, PageRequest};
use mongo_social_lab as testing;

async fn graph(test: &str) -> (testing::TestDb, Arc<FollowGraph>) {
    let t = testing::test_db(&format!("graph_{test}")).await;
    let graph = FollowGraph::new(&t.db);
    graph.set_up().await.unwrap();
    (t, Arc::new(graph))
}

async fn users(graph: &FollowGraph, ids: &[&str]) {
    for id in ids {
        graph.add_user(id).await.unwrap();
    }
}

fn group(name: &str) -> Origin {
    Origin::Group(name.to_owned())
}

/// Every page of `owner`'s subscriptions, `limit` at a time.
async fn following(graph: &FollowGraph, owner: &str, limit: usize) -> Vec<Subscription> {
    let mut all = Vec::new();
    let mut query = PageRequest::first(limit);
    loop {
        let page = graph.following(owner, query).await.unwrap();
        assert!(page.items.len() <= limit);
        all.extend(page.items);
        match page.next {
            Some(next) => query = PageRequest::after(limit, next),
            None => return all,
        }
    }
}

async fn followers(graph: &FollowGraph, user: &str, limit: usize) -> Vec<String> {
    let mut all = Vec::new();
    let mut query = PageRequest::first(limit);
    loop {
        let page = graph.followers(user, query).await.unwrap();
        all.extend(page.items.into_iter().map(|s| s.owner));
        match page.next {
            Some(next) => query = PageRequest::after(limit, next),
            None => return all,
        }
    }
}

/// All subscriptions of `owners`, as `owner -> user -> origins`.
async fn snapshot(
    graph: &FollowGraph,
    owners: &[&str],
) -> BTreeMap<String, BTreeMap<String, Vec<Origin>>> {
    let mut all = BTreeMap::new();
    for owner in owners {
        let subscriptions = following(graph, owner, 1000).await;
        all.insert(
            owner.to_string(),
            subscriptions
                .into_iter()
                .map(|s| (s.user, s.origins))
                .collect(),
        );
    }
    all
}

/// Checks every user's stats against the subscriptions that exist.
async fn assert_counts_match(graph: &FollowGraph, ids: &[&str]) {
    let all = snapshot(graph, ids).await;
    for id in ids {
        let stats = graph.stats(id).await.unwrap();
        let following = all[*id].len() as u64;
        let followers = all.values().filter(|subs| subs.contains_key(*id)).count() as u64;
        assert_eq!(stats.following, following, "{id} following");
        assert_eq!(stats.followers, followers, "{id} followers");
    }
}

#[tokio::test]
async fn routes_through_users_and_groups() {
    let (_t, graph) = graph("routes").await;
    users(
        &graph,
        &["userA", "userB", "userC", "userD", "userE", "userF"],
    )
    .await;
    graph.add_group("groupX").await.unwrap();
    graph.add_group("groupY").await.unwrap();
    // The seed's example.
    for (g, members) in [
        ("groupX", ["userC", "userD"]),
        ("groupY", ["userD", "userE"]),
    ] {
        for member in members {
            assert!(graph.add_member(g, member).await.unwrap());
        }
    }
    assert!(graph.follow("userA", "userB").await.unwrap());
    assert!(graph.follow("userA", "userC").await.unwrap());
    assert!(graph.follow_group("userA", "groupX").await.unwrap());
    assert!(graph.follow_group("userA", "groupY").await.unwrap());
    graph.follow("userF", "userD").await.unwrap();

    let expected = vec![
        ("userB", vec![Origin::Direct]),
        ("userC", vec![Origin::Direct, group("groupX")]),
        ("userD", vec![group("groupX"), group("groupY")]),
        ("userE", vec![group("groupY")]),
    ];
    for limit in [1, 2, 3, 100] {
        let subscriptions = following(&graph, "userA", limit).await;
        let got: Vec<(&str, Vec<Origin>)> = subscriptions
            .iter()
            .map(|s| (s.user.as_str(), s.origins.clone()))
            .collect();
        assert_eq!(got, expected, "pages of {limit}");
    }
    assert_eq!(followers(&graph, "userD", 1).await, ["userA", "userF"]);
    assert_eq!(followers(&graph, "userB", 10).await, ["userA"]);
    assert!(followers(&graph, "userA", 10).await.is_empty());
    let stats = graph.stats("userA").await.unwrap();
    assert_eq!((stats.following, stats.followers), (4, 0));
    assert_eq!(graph.stats("userD").await.unwrap().followers, 2);

    // Removing one route keeps the subscription; removing the last removes it.
    graph.unfollow("userA", "userC").await.unwrap();
    let c = graph.subscription("userA", "userC").await.unwrap().unwrap();
    assert_eq!(c.origins, [group("groupX")]);
    graph.remove_member("groupX", "userC").await.unwrap();
    assert!(graph
        .subscription("userA", "userC")
        .await
        .unwrap()
        .is_none());
    graph.unfollow_group("userA", "groupY").await.unwrap();
    let d = graph.subscription("userA", "userD").await.unwrap().unwrap();
    assert_eq!(d.origins, [group("groupX")]);
    assert!(graph
        .subscription("userA", "userE")
        .await
        .unwrap()
        .is_none());
    assert_counts_match(
        &graph,
        &["userA", "userB", "userC", "userD", "userE", "userF"],
    )
    .await;
    let members = graph
        .members("groupX", PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(members.items, ["userD"]);
}

/// A deterministic sequence of operations; after it, rebuilding every user changes nothing.
#[tokio::test]
async fn incremental_updates_agree_with_rebuild() {
    let (_t, graph) = graph("incremental_vs_rebuild").await;
    let ids = ["u0", "u1", "u2", "u3", "u4", "u5", "u6"];
    users(&graph, &ids).await;
    for g in ["g0", "g1", "g2"] {
        graph.add_group(g).await.unwrap();
    }
    let mut state: u64 = 42;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    for step in 0..90 {
        let a = ids[next(7) as usize];
        let b = ids[next(7) as usize];
        let g = ["g0", "g1", "g2"][next(3) as usize];
        let outcome = match next(6) {
            0 | 1 if a != b => graph.follow(a, b).await.map(drop),
            2 if a != b => graph.unfollow(a, b).await.map(drop),
            3 => graph.follow_group(a, g).await.map(drop),
            4 => graph.add_member(g, b).await.map(drop),
            5 if step % 2 == 0 => graph.unfollow_group(a, g).await.map(drop),
            5 => graph.remove_member(g, b).await.map(drop),
            _ => Ok(()),
        };
        outcome.unwrap();
    }
    let before = snapshot(&graph, &ids).await;
    assert!(
        before.values().map(BTreeMap::len).sum::<usize>() > 5,
        "the sequence built a graph"
    );
    assert_counts_match(&graph, &ids).await;
    for id in ids {
        let report = graph.rebuild(id).await.unwrap();
        assert_eq!(
            (report.created, report.corrected, report.removed),
            (0, 0, 0),
            "{id}: {report:?}"
        );
    }
    assert_eq!(snapshot(&graph, &ids).await, before);
}

#[tokio::test]
async fn rebuild_repairs_subscriptions_and_counts() {
    let (t, graph) = graph("rebuild_repairs").await;
    users(&graph, &["a", "b", "c", "d"]).await;
    graph.add_group("g").await.unwrap();
    graph.add_member("g", "c").await.unwrap();
    graph.add_member("g", "a").await.unwrap();
    graph.follow("a", "b").await.unwrap();
    graph.follow_group("a", "g").await.unwrap();
    let good = snapshot(&graph, &["a"]).await;
    assert_eq!(
        good["a"].len(),
        2,
        "a member does not follow itself through its group"
    );

    // What a follow or unfollow that stopped half-way leaves behind: a relation without its
    // subscription, a subscription without its relation; and origins that went wrong.
    t.collection::<Document>("follows")
        .insert_one(doc! { "owner": "a", "kind": "user", "target": "d" })
        .await
        .unwrap();
    t.collection::<Document>("follows")
        .delete_one(doc! { "owner": "a", "kind": "user", "target": "b" })
        .await
        .unwrap();
    t.collection::<Document>("subscriptions")
        .update_one(
            doc! { "owner": "a", "user": "c" },
            doc! { "$set": { "origins": ["!"] } },
        )
        .await
        .unwrap();
    let report = graph.rebuild("a").await.unwrap();
    assert_eq!(
        report,
        RebuildReport {
            created: 1,
            corrected: 1,
            removed: 1,
            unchanged: 0
        }
    );
    let repaired = snapshot(&graph, &["a"]).await;
    assert_eq!(
        repaired["a"]
            .iter()
            .map(|(u, o)| (u.as_str(), o.clone()))
            .collect::<Vec<_>>(),
        [("c", vec![group("g")]), ("d", vec![Origin::Direct])]
    );
    // The counts moved with the repair.
    assert_eq!(graph.stats("b").await.unwrap().followers, 0);
    assert_eq!(graph.stats("d").await.unwrap().followers, 1);
    assert_eq!(graph.stats("a").await.unwrap().following, 2);
    assert_counts_match(&graph, &["a", "b", "c", "d"]).await;

    // A count left off by an operation interrupted before its count update: recount sets it.
    t.collection::<Document>("graph_users")
        .update_one(
            doc! { "_id": "c" },
            doc! { "$inc": { "followers": 5, "following": -2 } },
        )
        .await
        .unwrap();
    let stats = graph.recount("c").await.unwrap();
    assert_eq!((stats.followers, stats.following), (1, 0));
    assert_counts_match(&graph, &["a", "b", "c", "d"]).await;
    assert_eq!(graph.rebuild("a").await.unwrap().unchanged, 2);
}

/// Runs `operation` while `user`'s `followers` is not a number, so that every `$inc` of it fails:
/// the operation writes its subscriptions and fails at its count update, as an outage or a
/// crash between the two would leave it. Then gives `user` its count back.
async fn interrupted<T: std::fmt::Debug>(
    t: &testing::TestDb,
    user: &str,
    operation: impl Future<Output = mongo_social::Result<T>>,
) {
    let stats = t.collection::<Document>("graph_users");
    let before = stats.find_one(doc! { "_id": user }).await.unwrap().unwrap();
    let followers = before.get("followers").cloned().unwrap();
    stats
        .update_one(
            doc! { "_id": user },
            doc! { "$set": { "followers": "not a number" } },
        )
        .await
        .unwrap();
    let outcome = operation.await;
    stats
        .update_one(
            doc! { "_id": user },
            doc! { "$set": { "followers": followers } },
        )
        .await
        .unwrap();
    outcome.expect_err("the count update fails");
}

/// Each kind of operation stopped between its subscription writes and its count update, then
/// called again (the documented remedy): the repeat completes the counts, none missed and none
/// twice, and the half-done state lists nothing it should not. One is completed in part by
/// another operation that meets what it left before it is repeated.
#[tokio::test]
async fn a_repeat_completes_an_interrupted_operations_counts() {
    let (t, graph) = graph("interrupted_counts").await;
    let ids = ["a", "b", "c", "d", "e", "f"];
    users(&graph, &ids).await;
    graph.add_group("g").await.unwrap();
    for member in ["b", "c", "d"] {
        graph.add_member("g", member).await.unwrap();
    }

    // A direct follow, stopped after its subscription: listed already, counted by the repeat.
    interrupted(&t, "b", graph.follow("a", "b")).await;
    assert!(graph.subscription("a", "b").await.unwrap().is_some());
    assert!(
        !graph.follow("a", "b").await.unwrap(),
        "the relation was stored"
    );
    assert_counts_match(&graph, &ids).await;
    assert_eq!(graph.stats("b").await.unwrap().followers, 1);

    // A direct unfollow, stopped after its subscription's removal: listed nowhere any more.
    interrupted(&t, "b", graph.unfollow("a", "b")).await;
    assert!(graph.subscription("a", "b").await.unwrap().is_none());
    assert!(following(&graph, "a", 10).await.is_empty());
    assert!(followers(&graph, "b", 10).await.is_empty());
    let b = vec!["b".to_owned()];
    assert!(graph.follows_any("a", &b).await.unwrap().is_empty());
    assert!(
        !graph.unfollow("a", "b").await.unwrap(),
        "the relation was deleted"
    );
    assert_counts_match(&graph, &ids).await;
    assert_eq!(graph.stats("a").await.unwrap().following, 0);

    // A group follow (three subscriptions), stopped; a direct follow of one member meets one of
    // its subscriptions first, then the repeat finishes the other two.
    interrupted(&t, "c", graph.follow_group("a", "g")).await;
    assert_eq!(following(&graph, "a", 10).await.len(), 3);
    assert!(graph.follow("a", "b").await.unwrap());
    assert!(!graph.follow_group("a", "g").await.unwrap());
    assert_counts_match(&graph, &ids).await;
    assert_eq!(graph.stats("a").await.unwrap().following, 3);

    // A new member gains the group's two followers, stopped at the member's count.
    graph.follow_group("d", "g").await.unwrap();
    interrupted(&t, "e", graph.add_member("g", "e")).await;
    assert!(!graph.add_member("g", "e").await.unwrap());
    assert_counts_match(&graph, &ids).await;
    assert_eq!(graph.stats("e").await.unwrap().followers, 2);

    // A member leaves, stopped: both subscriptions to it are gone from every read at once.
    interrupted(&t, "e", graph.remove_member("g", "e")).await;
    assert!(followers(&graph, "e", 10).await.is_empty());
    let followers_of_e = ["a".to_owned(), "d".to_owned()];
    assert!(graph
        .followers_among("e", &followers_of_e)
        .await
        .unwrap()
        .is_empty());
    assert!(!graph.remove_member("g", "e").await.unwrap());
    assert_counts_match(&graph, &ids).await;
    assert_eq!(graph.stats("e").await.unwrap().followers, 0);

    // A group unfollow: "b" keeps its direct route, "c" and "d" go.
    interrupted(&t, "c", graph.unfollow_group("a", "g")).await;
    assert!(!graph.unfollow_group("a", "g").await.unwrap());
    assert_counts_match(&graph, &ids).await;
    assert_eq!(graph.stats("a").await.unwrap().following, 1);

    // A rebuild that creates a subscription (a relation stored without one), stopped.
    t.collection::<Document>("follows")
        .insert_one(doc! { "owner": "f", "kind": "user", "target": "e" })
        .await
        .unwrap();
    interrupted(&t, "e", graph.rebuild("f")).await;
    let report = graph.rebuild("f").await.unwrap();
    assert_eq!((report.created, report.unchanged), (0, 1), "{report:?}");
    assert_counts_match(&graph, &ids).await;
    assert_eq!(graph.stats("e").await.unwrap().followers, 1);

    for id in ids {
        let stats = graph.stats(id).await.unwrap();
        assert_eq!(
            graph.recount(id).await.unwrap(),
            stats,
            "{id}: counts exact"
        );
        let report = graph.rebuild(id).await.unwrap();
        assert_eq!(
            (report.created, report.corrected, report.removed),
            (0, 0, 0),
            "{id}: {report:?}"
        );
    }
}

#[tokio::test]
async fn counts_stay_exact_under_concurrent_follows_and_unfollows() {
    let (_t, graph) = graph("concurrent_counts").await;
    let fans: Vec<String> = (0..10).map(|i| format!("fan{i}")).collect();
    graph.add_user("star").await.unwrap();
    graph.add_group("club").await.unwrap();
    for fan in &fans {
        graph.add_user(fan).await.unwrap();
    }
    let mut tasks = Vec::new();
    for (i, fan) in fans.iter().enumerate() {
        let graph = graph.clone();
        let fan = fan.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..4 {
                graph.follow(&fan, "star").await.unwrap();
                if round % 2 == 1 || i % 3 == 0 {
                    graph.follow_group(&fan, "club").await.unwrap();
                }
                if round < 3 || i % 2 == 0 {
                    graph.unfollow(&fan, "star").await.unwrap();
                }
            }
        }));
    }
    let membership = {
        let graph = graph.clone();
        tokio::spawn(async move {
            for _ in 0..3 {
                graph.add_member("club", "star").await.unwrap();
                graph.remove_member("club", "star").await.unwrap();
            }
            graph.add_member("club", "star").await.unwrap();
        })
    };
    for task in tasks {
        task.await.unwrap();
    }
    membership.await.unwrap();
    let mut ids: Vec<&str> = fans.iter().map(String::as_str).collect();
    ids.push("star");
    assert_counts_match(&graph, &ids).await;
    let star = graph.stats("star").await.unwrap();
    assert_eq!(
        star.followers,
        followers(&graph, "star", 3).await.len() as u64
    );
    // Every fan follows the club in its last rounds, so every fan follows the star.
    assert_eq!(star.followers, 10);
    for id in &ids {
        assert_eq!(graph.rebuild(id).await.unwrap().created, 0);
    }
}

/// Follows and unfollows of the same pair racing each other leave relation, subscription and
/// counts in agreement.
#[tokio::test]
async fn racing_follow_and_unfollow_of_one_pair_agree() {
    let (_t, graph) = graph("racing_pair").await;
    users(&graph, &["fan", "idol"]).await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let graph = graph.clone();
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                graph.follow("fan", "idol").await.map(drop)
            } else {
                graph.unfollow("fan", "idol").await.map(drop)
            }
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let report = graph.rebuild("fan").await.unwrap();
    assert_eq!(
        (report.created, report.corrected, report.removed),
        (0, 0, 0),
        "{report:?}"
    );
    assert_counts_match(&graph, &["fan", "idol"]).await;
}

#[tokio::test]
async fn many_followers_grow_no_document() {
    let (t, graph) = graph("many_followers").await;
    graph.add_user("celebrity").await.unwrap();
    let fans: Vec<String> = (0..120).map(|i| format!("fan{i:03}")).collect();
    for fan in &fans {
        graph.add_user(fan).await.unwrap();
    }
    let stats_size = || async {
        let stats = t
            .collection::<Document>("graph_users")
            .find_one(doc! { "_id": "celebrity" })
            .await
            .unwrap()
            .unwrap();
        bson::to_vec(&stats).unwrap().len()
    };
    let before = stats_size().await;
    let mut tasks = Vec::new();
    for chunk in fans.chunks(15) {
        let graph = graph.clone();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            for fan in chunk {
                graph.follow(&fan, "celebrity").await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(graph.stats("celebrity").await.unwrap().followers, 120);
    assert_eq!(followers(&graph, "celebrity", 50).await, fans);
    // The stats document keeps the ids of its 100 most recent count changes (so a retried
    // `$inc` applies once), about 17 bytes each, and nothing that grows with followers.
    let after = stats_size().await;
    assert!(
        after <= before + 100 * 20,
        "the stats document does not grow with followers: {before} -> {after} bytes"
    );
    let largest = t
        .collection::<Document>("subscriptions")
        .find_one(doc! { "user": "celebrity" })
        .await
        .unwrap()
        .map(|d| bson::to_vec(&d).unwrap().len())
        .unwrap();
    assert!(
        largest < 200,
        "a subscription is a small document: {largest} bytes"
    );
}

#[tokio::test]
async fn bad_input_is_refused_and_repeats_change_nothing() {
    let (t, graph) = graph("bad_input").await;
    users(&graph, &["a", "b"]).await;
    graph.add_group("g").await.unwrap();
    graph.add_group("empty").await.unwrap();
    graph.follow("a", "b").await.unwrap();
    let before = t.documents(&["graph_locks"]).await;

    let error = graph.follow("a", "a").await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::SelfAction {
                    action: "follow",
                    ..
                },
                ..
            }
        ),
        "{error}"
    );
    let error = graph.follow("a", "nobody").await.unwrap_err();
    assert!(
        matches!(error, Error::NotFound { what: Entity::User, ref id, .. } if id == "nobody"),
        "{error}"
    );
    let error = graph.follow("nobody", "a").await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                what: Entity::User,
                ..
            }
        ),
        "{error}"
    );
    let error = graph.follow_group("a", "nogroup").await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                what: Entity::Group,
                ..
            }
        ),
        "{error}"
    );
    let error = graph.add_member("nogroup", "a").await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                what: Entity::Group,
                ..
            }
        ),
        "{error}"
    );
    let error = graph.add_member("g", "nobody").await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                what: Entity::User,
                ..
            }
        ),
        "{error}"
    );
    // Empty and whitespace-only are the same error, `Blank`, as in every module: naming the
    // role of a user id, or the group id.
    for blank in ["", " ", "\t "] {
        for error in [
            graph.follow(blank, "a").await.unwrap_err(),
            graph.follow("a", blank).await.unwrap_err(),
            graph.unfollow(blank, "a").await.unwrap_err(),
            graph.follow_group(blank, "g").await.unwrap_err(),
            graph.add_member("g", blank).await.unwrap_err(),
            graph.add_user(blank).await.unwrap_err(),
            graph.stats(blank).await.unwrap_err(),
            graph.rebuild(blank).await.unwrap_err(),
            graph
                .following(blank, PageRequest::first(5))
                .await
                .unwrap_err(),
        ] {
            assert!(
                matches!(
                    error,
                    Error::InvalidInput {
                        reason: Invalid::Blank {
                            what: "owner" | "user"
                        },
                        ..
                    }
                ),
                "{blank:?}: {error}"
            );
        }
        for error in [
            graph.follow_group("a", blank).await.unwrap_err(),
            graph.add_group(blank).await.unwrap_err(),
            graph
                .members(blank, PageRequest::first(5))
                .await
                .unwrap_err(),
        ] {
            assert!(
                matches!(
                    error,
                    Error::InvalidInput {
                        reason: Invalid::Blank { what: "group id" },
                        ..
                    }
                ),
                "{blank:?}: {error}"
            );
        }
    }
    let error = graph
        .following("a", PageRequest::first(0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::PageLimit { .. },
                ..
            }
        ),
        "{error}"
    );
    assert!("x.y".parse::<mongo_social::Cursor>().is_err());
    assert_eq!(
        t.documents(&["graph_locks"]).await,
        before,
        "nothing written"
    );

    // Repeats are idempotent.
    assert!(!graph.follow("a", "b").await.unwrap());
    assert_eq!(graph.stats("b").await.unwrap().followers, 1);
    assert!(graph.unfollow("a", "b").await.unwrap());
    assert!(!graph.unfollow("a", "b").await.unwrap());
    assert_eq!(graph.stats("b").await.unwrap().followers, 0);
    assert_eq!(graph.stats("a").await.unwrap().following, 0);
    graph.add_user("a").await.unwrap();
    assert_eq!(
        graph.stats("a").await.unwrap().following,
        0,
        "re-adding keeps counts"
    );

    // An empty group can be followed; it subscribes to nobody until it has members, and a
    // member never follows itself through its own group.
    assert!(graph.follow_group("a", "empty").await.unwrap());
    assert!(following(&graph, "a", 10).await.is_empty());
    assert!(graph.add_member("empty", "a").await.unwrap());
    assert!(!graph.add_member("empty", "a").await.unwrap());
    assert!(following(&graph, "a", 10).await.is_empty());
    assert!(graph.add_member("empty", "b").await.unwrap());
    assert_eq!(following(&graph, "a", 10).await[0].user, "b");
    assert!(!graph.follow_group("a", "empty").await.unwrap());
    assert_counts_match(&graph, &["a", "b"]).await;
}

#[tokio::test]
async fn a_direct_follow_costs_what_the_docs_say() {
    let (t, graph) = graph("command_counts").await;
    users(&graph, &["a", "b", "c"]).await;
    graph.follow("c", "b").await.unwrap(); // detects the server's capabilities
    t.commands.reset();
    graph.follow("a", "b").await.unwrap();
    // Users checked, owner lock, no block between them, relation, subscriptions read,
    // subscription inserted (marked), both counts in one `update`, mark cleared, lock released.
    let mut expected = vec!["find", "insert", "find", "insert", "find", "insert"];
    if t.info.capabilities().atomic_updates {
        expected.push("update");
    } else {
        expected.extend(["insert", "update", "delete"]);
    }
    expected.extend(["update", "delete"]);
    assert_eq!(t.commands.names(), expected);
    t.commands.reset();
    graph.unfollow("a", "b").await.unwrap();
    // Users checked, owner lock, relation deleted, subscriptions read, subscription emptied and
    // marked, both counts in one `update`, subscription deleted, lock released.
    let mut expected = vec!["find", "insert", "delete", "find", "update"];
    if t.info.capabilities().atomic_updates {
        expected.push("update");
    } else {
        expected.extend(["insert", "update", "delete"]);
    }
    expected.extend(["delete", "delete"]);
    assert_eq!(t.commands.names(), expected);
    t.commands.reset();
    graph.following("a", PageRequest::first(10)).await.unwrap();
    graph.followers("b", PageRequest::first(10)).await.unwrap();
    assert_eq!(t.commands.names(), ["find", "find"]);
}

/// The graph feeds the social feed: a post reaches followers by every route, once.
#[tokio::test]
async fn the_graph_is_the_feeds_follow_source() {
    use mongo_social::feed::{FeedKind, FeedStore, NewPost, NewUser};
    use mongo_social::PageRequest;

    let (t, graph) = graph("feed_source").await;
    users(&graph, &["ann", "bob", "cat", "dan"]).await;
    graph.add_group("writers").await.unwrap();
    graph.add_member("writers", "ann").await.unwrap();
    graph.follow("bob", "ann").await.unwrap();
    graph.follow_group("bob", "writers").await.unwrap(); // a second route to ann
    graph.follow_group("cat", "writers").await.unwrap();
    let store: FeedStore<()> = FeedStore::builder(&t.db)
        .follows(graph.clone())
        .build()
        .unwrap();
    store.set_up().await.unwrap();
    for id in ["ann", "bob", "cat", "dan"] {
        store.users().create(NewUser::new(id, id)).await.unwrap();
    }
    let post = store
        .posts()
        .create(NewPost::new("ann", "Hello", "from ann", ()))
        .await
        .unwrap();
    store.run_pending().await.unwrap();
    for (reader, expected) in [
        ("bob", vec![post.id]),
        ("cat", vec![post.id]),
        ("dan", vec![]),
    ] {
        let page = store
            .feeds()
            .page(&FeedKind::User(reader.into()), PageRequest::first(10))
            .await
            .unwrap();
        let got: Vec<_> = page.items.iter().map(|p| p.id).collect();
        assert_eq!(got, expected, "{reader}'s feed");
    }
}

/// Setup is idempotent: a second graph on the same database (the application's next start)
/// creates its indexes again and reads what the first wrote.
#[tokio::test]
async fn reopen_reads_what_was_written() {
    let (t, first) = graph("reopen").await;
    users(&first, &["a", "b", "c"]).await;
    first.add_group("g").await.unwrap();
    first.add_member("g", "c").await.unwrap();
    first.follow("a", "b").await.unwrap();
    first.follow_group("a", "g").await.unwrap();
    let second = FollowGraph::new(&t.db);
    second.set_up().await.expect("indexes on the next start");
    second.set_up().await.expect("indexes again");
    let read: Vec<String> = following(&second, "a", 1)
        .await
        .into_iter()
        .map(|s| s.user)
        .collect();
    assert_eq!(read, ["b", "c"]);
    assert!(
        !second.follow("a", "b").await.unwrap(),
        "known after a reopen"
    );
    assert_eq!(second.stats("a").await.unwrap().following, 2);
}

/// Used before `create_indexes`, the graph creates the unique indexes it depends on before its
/// first write: a repeated follow is still recognised, concurrent ones count once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graph_used_before_create_indexes_stays_exact() {
    let t = testing::test_db("graph_no_indexes").await;
    let graph = Arc::new(FollowGraph::new(&t.db));
    users(&graph, &["a", "b"]).await;
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let graph = graph.clone();
            tokio::spawn(async move { graph.follow("a", "b").await.unwrap() })
        })
        .collect();
    let mut new = 0;
    for task in tasks {
        new += usize::from(task.await.unwrap());
    }
    assert_eq!(new, 1, "one of the concurrent follows is new");
    assert!(!graph.follow("a", "b").await.unwrap());
    assert_eq!(
        t.collection::<Document>("follows")
            .count_documents(doc! {})
            .await
            .unwrap(),
        1
    );
    assert_eq!(graph.stats("b").await.unwrap().followers, 1);
    assert_eq!(graph.stats("a").await.unwrap().following, 1);
}
