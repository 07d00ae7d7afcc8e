//! "People you may know" from the follow graph against the real server: ranking and reasons,
//! the group boost, dismissals and blocks, paging, bounded reads with a celebrity and a hub,
//! follows racing a recommendation, and bad input. Every check runs the read both ways where the
//! server has `$graphLookup` (one `aggregate`, or `find`s), and they must agree.

use mongo_social::error::{Forbidden, Invalid};
use mongo_social_lab::SetUp;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use mongo_social::graph::{FollowGraph, Origin, RecommendOptions};
use mongo_social::{error::Entity, graph::Recommendation, Error, PageRequest};
use mongo_social_lab as testing;

/// The ways a read can go on this server: with `$graphLookup` where it has it, and with `find`s.
fn paths(t: &testing::TestDb, test: &str) -> Vec<bool> {
    let mut paths = vec![false];
    if testing::skip_unless(
        t.info.capabilities().graph_lookup,
        &format!("{test} (the $graphLookup read)"),
        "the server has no $graphLookup; the find-based read is checked alone",
    ) {
        return paths;
    }
    paths.push(true);
    paths
}

fn graph_with(t: &testing::TestDb, options: RecommendOptions) -> Arc<FollowGraph> {
    Arc::new(
        FollowGraph::builder(&t.db)
            .recommendations(options)
            .build()
            .unwrap(),
    )
}

async fn setup(test: &str) -> (testing::TestDb, Arc<FollowGraph>) {
    let t = testing::test_db(&format!("recommend_{test}")).await;
    let graph = graph_with(&t, RecommendOptions::default());
    graph.set_up().await.unwrap();
    (t, graph)
}

async fn users(graph: &FollowGraph, ids: &[&str]) {
    for id in ids {
        graph.add_user(id).await.unwrap();
    }
}

async fn follows(graph: &FollowGraph, pairs: &[(&str, &str)]) {
    for (owner, user) in pairs {
        graph.follow(owner, user).await.unwrap();
    }
}

/// Every page of `user`'s recommendations, `limit` at a time.
async fn all_pages(graph: &FollowGraph, user: &str, limit: usize) -> Vec<Recommendation> {
    let mut all = Vec::new();
    let mut request = PageRequest::first(limit);
    loop {
        let page = graph.recommendations(user, request).await.unwrap();
        assert!(page.items.len() <= limit);
        all.extend(page.items);
        match page.next {
            Some(next) => request = PageRequest::after(limit, next),
            None => return all,
        }
    }
}

fn users_of(recommendations: &[Recommendation]) -> Vec<&str> {
    recommendations.iter().map(|r| r.user.as_str()).collect()
}

/// The hand-made graph: `me` follows ann, bob, cat and dee; dan is followed by all four, eve by
/// two, fay and gus by one. bob is followed by cat but `me` follows bob already; ann follows
/// `me`.
async fn small_graph(graph: &FollowGraph) {
    users(
        graph,
        &[
            "me", "ann", "bob", "cat", "dee", "dan", "eve", "fay", "gus", "hal",
        ],
    )
    .await;
    follows(
        graph,
        &[
            ("me", "ann"),
            ("me", "bob"),
            ("me", "cat"),
            ("me", "dee"),
            ("ann", "dan"),
            ("ann", "eve"),
            ("ann", "me"),
            ("bob", "dan"),
            ("bob", "eve"),
            ("bob", "fay"),
            ("cat", "dan"),
            ("cat", "gus"),
            ("cat", "bob"),
            ("dee", "dan"),
            ("hal", "me"), // hal follows me; nobody I follow follows hal
        ],
    )
    .await;
}

#[tokio::test]
async fn ranks_friends_of_friends_with_their_reasons() {
    let t = testing::test_db("recommend_ranks").await;
    for graph_lookup in paths(&t, "ranks_friends_of_friends_with_their_reasons") {
        t.db.drop().await.unwrap();
        let graph = graph_with(&t, RecommendOptions::default().graph_lookup(graph_lookup));
        graph.set_up().await.unwrap();
        small_graph(&graph).await;
        t.commands.reset();
        let page = graph
            .recommendations("me", PageRequest::first(10))
            .await
            .unwrap();
        let expected_commands: &[&str] = if graph_lookup {
            &["aggregate", "find", "find"]
        } else {
            &["find", "find", "find", "find", "find"]
        };
        assert_eq!(t.commands.names(), expected_commands, "{graph_lookup}");
        assert!(page.next.is_none());
        let got: Vec<(&str, u64, u64, Vec<&str>)> = page
            .items
            .iter()
            .map(|r| {
                (
                    r.user.as_str(),
                    r.score,
                    r.followed_by,
                    r.via.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("dan", 4, 4, vec!["ann", "bob", "cat"]),
                ("eve", 2, 2, vec!["ann", "bob"]),
                ("fay", 1, 1, vec!["bob"]),
                ("gus", 1, 1, vec!["cat"]),
            ],
            "{graph_lookup}: never me, bob (followed) or hal (no route)"
        );
        assert_eq!(
            page.items[0].reason(),
            "followed by ann, bob, cat and 1 other you follow"
        );
        assert_eq!(page.items[1].reason(), "followed by ann and bob you follow");
        assert_eq!(
            page.items[2].to_string(),
            "fay (followed by bob you follow)"
        );

        // Following a candidate, directly or through a group, takes them out.
        graph.follow("me", "dan").await.unwrap();
        graph.add_group("g").await.unwrap();
        graph.add_member("g", "eve").await.unwrap();
        graph.follow_group("me", "g").await.unwrap();
        let after = all_pages(&graph, "me", 10).await;
        assert_eq!(users_of(&after), ["fay", "gus"], "{graph_lookup}");
        // A user who follows nobody is recommended nobody, and it is cheap.
        t.commands.reset();
        let page = graph
            .recommendations("gus", PageRequest::first(10))
            .await
            .unwrap();
        assert!(page.items.is_empty() && page.next.is_none());
        let expected: &[&str] = if graph_lookup {
            &["aggregate", "find"]
        } else {
            &["find", "find"]
        };
        assert_eq!(t.commands.names(), expected);
    }
}

#[tokio::test]
async fn the_two_reads_agree() {
    let t = testing::test_db("recommend_agree").await;
    if testing::skip_unless(
        t.info.capabilities().graph_lookup,
        "the_two_reads_agree",
        "needs $graphLookup to compare it with the find-based read",
    ) {
        return;
    }
    let options = RecommendOptions::default()
        .followees(6)
        .per_followee(4)
        .hubs(2);
    let by_finds = graph_with(&t, options.graph_lookup(false));
    let by_aggregate = graph_with(&t, options);
    by_finds.set_up().await.unwrap();
    let mut ids: Vec<String> = (0..24).map(|i| format!("u{i:02}")).collect();
    ids.push("me".into());
    for id in &ids {
        by_finds.add_user(id).await.unwrap();
    }
    // me follows u00..u07 (only 6 are read); each u follows a spread of others, u03 and u05
    // follow more than 4 (hubs).
    for followee in ids.iter().take(8) {
        by_finds.follow("me", followee).await.unwrap();
    }
    let mut state = 7_u64;
    for (i, owner) in ids.iter().take(12).enumerate() {
        let many = if i == 3 || i == 5 { 12 } else { 3 };
        for _ in 0..many {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            let user = &ids[(state >> 33) as usize % 24];
            if user != owner {
                by_finds.follow(owner, user).await.unwrap();
            }
        }
    }
    for limit in [1, 3, 100] {
        let a = all_pages(&by_finds, "me", limit).await;
        let b = all_pages(&by_aggregate, "me", limit).await;
        assert!(!a.is_empty());
        assert_eq!(a, b, "pages of {limit}");
    }
}

#[tokio::test]
async fn shared_groups_boost_the_rank() {
    let t = testing::test_db("recommend_groups").await;
    for graph_lookup in paths(&t, "shared_groups_boost_the_rank") {
        t.db.drop().await.unwrap();
        let options = RecommendOptions::default()
            .group_boost(2)
            .reasons(1)
            .graph_lookup(graph_lookup);
        let graph = graph_with(&t, options);
        graph.set_up().await.unwrap();
        small_graph(&graph).await;
        for group in ["rust", "mongo"] {
            graph.add_group(group).await.unwrap();
        }
        // me and gus share both groups, me and fay one; hal shares one but nobody I follow
        // follows hal: a boost ranks candidates, it does not make them.
        for (group, member) in [
            ("rust", "me"),
            ("rust", "gus"),
            ("rust", "hal"),
            ("mongo", "me"),
            ("mongo", "gus"),
            ("mongo", "fay"),
        ] {
            graph.add_member(group, member).await.unwrap();
        }
        t.commands.reset();
        let page = graph
            .recommendations("me", PageRequest::first(10))
            .await
            .unwrap();
        let base = if graph_lookup { 3 } else { 5 };
        assert_eq!(t.commands.total(), base + 2, "the boost costs two finds");
        let got: Vec<(&str, u64, Vec<&str>)> = page
            .items
            .iter()
            .map(|r| {
                (
                    r.user.as_str(),
                    r.score,
                    r.shared_groups.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("gus", 5, vec!["mongo", "rust"]),
                ("dan", 4, vec![]),
                ("fay", 3, vec!["mongo"]),
                ("eve", 2, vec![]),
            ]
        );
        assert_eq!(
            page.items[0].reason(),
            "followed by cat you follow; also in mongo, rust"
        );
        assert_eq!(
            page.items[1].reason(),
            "followed by ann and 3 others you follow"
        );
    }
}

#[tokio::test]
async fn pages_follow_each_other_without_gaps_or_repeats() {
    let (_t, graph) = setup("paging").await;
    let mut ids: Vec<String> = (0..30).map(|i| format!("c{i:02}")).collect();
    let followees: Vec<String> = (0..6).map(|i| format!("f{i}")).collect();
    ids.extend(followees.iter().cloned());
    ids.push("me".into());
    for id in &ids {
        graph.add_user(id).await.unwrap();
    }
    for (i, followee) in followees.iter().enumerate() {
        graph.follow("me", followee).await.unwrap();
        // Followee i follows every candidate whose number is a multiple of i + 1 below 30,
        // and a few others: many ties, several scores.
        for c in (0..30).filter(|c| c % (i + 1) == 0 || (c + i) % 7 == 0) {
            graph.follow(followee, &format!("c{c:02}")).await.unwrap();
        }
    }
    let whole = graph
        .recommendations("me", PageRequest::first(1000))
        .await
        .unwrap()
        .items;
    assert_eq!(whole.len(), 30);
    for pair in whole.windows(2) {
        let order = (std::cmp::Reverse(pair[0].score), &pair[0].user)
            .cmp(&(std::cmp::Reverse(pair[1].score), &pair[1].user));
        assert!(order.is_lt(), "descending score, then user id: {pair:?}");
    }
    assert!(
        whole.iter().map(|r| r.score).collect::<BTreeSet<_>>().len() >= 4,
        "several scores"
    );
    for limit in [1, 2, 3, 7, 29, 30] {
        let paged = all_pages(&graph, "me", limit).await;
        assert_eq!(paged, whole, "pages of {limit}");
    }
    // A dismissal between pages removes the candidate from the later pages, and nothing else.
    let first = graph
        .recommendations("me", PageRequest::first(5))
        .await
        .unwrap();
    graph.dismiss("me", &whole[7].user).await.unwrap();
    let second = graph
        .recommendations("me", PageRequest::after(5, first.next.unwrap()))
        .await
        .unwrap();
    let expected: Vec<&str> = users_of(&whole[5..11])
        .into_iter()
        .filter(|u| *u != whole[7].user)
        .collect();
    assert_eq!(users_of(&second.items), expected);
}

#[tokio::test]
async fn dismissed_and_blocked_users_never_come_back() {
    let (_t, graph) = setup("exclusions").await;
    small_graph(&graph).await;
    assert!(graph.dismiss("me", "dan").await.unwrap());
    assert!(!graph.dismiss("me", "dan").await.unwrap(), "stored once");
    // fay blocks me, I block eve: neither is recommended to me.
    assert!(graph.block("fay", "me").await.unwrap());
    assert!(graph.block("me", "eve").await.unwrap());
    assert!(!graph.block("me", "eve").await.unwrap());
    for limit in [1, 10] {
        assert_eq!(users_of(&all_pages(&graph, "me", limit).await), ["gus"]);
    }
    // Nor am I recommended to either of them, through a friend we share.
    graph.follow("eve", "ann").await.unwrap();
    graph.follow("fay", "ann").await.unwrap();
    for user in ["eve", "fay"] {
        let theirs = all_pages(&graph, user, 10).await;
        assert!(users_of(&theirs).contains(&"dan"), "{user}: {theirs:?}");
        assert!(!users_of(&theirs).contains(&"me"), "{user}: {theirs:?}");
    }

    // A block removes the direct follows both ways, counts included, and refuses new ones.
    assert!(graph.subscription("ann", "me").await.unwrap().is_some());
    let before = (
        graph.stats("me").await.unwrap(),
        graph.stats("ann").await.unwrap(),
    );
    graph.block("me", "ann").await.unwrap();
    assert!(graph.subscription("me", "ann").await.unwrap().is_none());
    assert!(graph.subscription("ann", "me").await.unwrap().is_none());
    let (me, ann) = (
        graph.stats("me").await.unwrap(),
        graph.stats("ann").await.unwrap(),
    );
    assert_eq!(me.following, before.0.following - 1);
    assert_eq!(me.followers, before.0.followers - 1);
    assert_eq!(ann.followers, before.1.followers - 1);
    for (owner, user) in [("me", "ann"), ("ann", "me")] {
        let error = graph.follow(owner, user).await.unwrap_err();
        assert!(
            matches!(&error, Error::Forbidden { reason: Forbidden::Blocked { by, blocked }, .. } if by == "me" && blocked == "ann"),
            "{error}"
        );
    }
    // Groups are the group's: a block leaves a route through a group alone.
    graph.add_group("club").await.unwrap();
    graph.add_member("club", "ann").await.unwrap();
    graph.follow_group("me", "club").await.unwrap();
    let route = graph.subscription("me", "ann").await.unwrap().unwrap();
    assert_eq!(route.origins, [Origin::Group("club".into())]);

    let blocked = graph.blocked("me", PageRequest::first(1)).await.unwrap();
    assert_eq!(blocked.items, ["ann"]);
    let rest = graph
        .blocked("me", PageRequest::after(1, blocked.next.unwrap()))
        .await
        .unwrap();
    assert_eq!((rest.items, rest.next), (vec!["eve".to_owned()], None));

    // Unblocking allows a follow again; it restores none.
    assert!(graph.unblock("me", "ann").await.unwrap());
    assert!(!graph.unblock("me", "ann").await.unwrap());
    assert!(graph.follow("ann", "me").await.unwrap());
    assert_eq!(
        graph
            .blocked("me", PageRequest::first(5))
            .await
            .unwrap()
            .items,
        ["eve"]
    );
}

/// A celebrity followed by many and a hub following many: the read stays within its bound and
/// never lists the celebrity's followers.
#[tokio::test]
async fn a_celebrity_and_a_hub_cost_a_bounded_read() {
    let t = testing::test_db("recommend_bounded").await;
    let options = RecommendOptions::default()
        .followees(5)
        .per_followee(4)
        .hubs(1);
    let setup_graph = graph_with(&t, options);
    setup_graph.set_up().await.unwrap();
    let fans: Vec<String> = (0..120).map(|i| format!("fan{i:03}")).collect();
    let many: Vec<String> = (0..30).map(|i| format!("m{i:02}")).collect();
    let mut ids = vec!["me", "star", "hub", "a", "b", "c"];
    ids.extend(fans.iter().map(String::as_str));
    ids.extend(many.iter().map(String::as_str));
    users(&setup_graph, &ids).await;
    let mut tasks = Vec::new();
    for chunk in fans.chunks(30) {
        let graph = setup_graph.clone();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            for fan in chunk {
                graph.follow(&fan, "star").await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for user in &many {
        setup_graph.follow("hub", user).await.unwrap();
    }
    follows(
        &setup_graph,
        &[
            ("me", "star"),
            ("me", "hub"),
            ("me", "a"),
            ("me", "b"),
            ("me", "c"),
            ("star", "a"),
            ("star", "fan000"),
            ("a", "fan001"),
            ("b", "fan001"),
            ("c", "star"),
        ],
    )
    .await;
    assert_eq!(setup_graph.stats("star").await.unwrap().followers, 122);
    for graph_lookup in paths(&t, "a_celebrity_and_a_hub_cost_a_bounded_read") {
        let graph = graph_with(&t, options.graph_lookup(graph_lookup));
        t.commands.reset();
        let page = graph
            .recommendations("me", PageRequest::first(10))
            .await
            .unwrap();
        let commands = t.commands.names();
        let read = t.commands.documents_read();
        // The hub's window: 4 of its 30, from "me" on (m.. sorts before me: it wraps round).
        let from_hub: Vec<&str> = page
            .items
            .iter()
            .filter(|r| r.via == ["hub"])
            .map(|r| r.user.as_str())
            .collect();
        assert_eq!(from_hub, ["m00", "m01", "m02", "m03"], "{graph_lookup}");
        assert_eq!(users_of(&page.items)[..2], ["fan001", "fan000"]);
        // One hop (1 aggregate or 3 finds), the hub's window (2 finds: it wraps), the checks.
        let expected = if graph_lookup { 1 + 2 + 2 } else { 3 + 2 + 2 };
        assert_eq!(commands.len(), expected, "{graph_lookup}: {commands:?}");
        let checks = 2 * 6; // 6 candidates, checked against subscriptions and exclusions
        assert!(
            read <= options.bound() + checks,
            "{graph_lookup}: {read} documents, bound {}",
            options.bound()
        );
        assert!(
            read < 120,
            "{graph_lookup}: {read} documents: no follower list"
        );
    }
}

/// A reader who follows more than the read covers, and most of their ranking: the final checks
/// find the rest in a few rounds, each twice the one before.
#[tokio::test]
async fn a_reader_following_most_candidates_takes_few_rounds() {
    let t = testing::test_db("recommend_rounds").await;
    let graph = graph_with(
        &t,
        RecommendOptions::default().followees(2).graph_lookup(false),
    );
    graph.set_up().await.unwrap();
    let followed: Vec<String> = (0..40).map(|i| format!("c{i:02}")).collect();
    let others = ["d0", "d1"];
    let mut ids = vec!["me", "a", "b"];
    ids.extend(followed.iter().map(String::as_str));
    ids.extend(others);
    users(&graph, &ids).await;
    // me follows a and b (the 2 read) and c00..c39 (beyond the read); a and b follow all the
    // c's (score 2), and d0, d1 (score 1).
    for user in ids.iter().skip(1) {
        graph.follow("me", user).await.unwrap_or_default();
    }
    for user in &others {
        graph.unfollow("me", user).await.unwrap();
    }
    for owner in ["a", "b"] {
        for user in ids.iter().skip(3) {
            graph.follow(owner, user).await.unwrap();
        }
    }
    graph.unfollow("b", "d1").await.unwrap();
    t.commands.reset();
    let page = graph
        .recommendations("me", PageRequest::first(1))
        .await
        .unwrap();
    assert_eq!(users_of(&page.items), ["d0"]);
    // The hop (3), then rounds of 8, 16 and 32 candidates checked (2 finds each): d0 is the
    // 41st, d1 the 42nd.
    assert_eq!(t.commands.total(), 3 + 2 * 3, "{:?}", t.commands.names());
    let rest = graph
        .recommendations("me", PageRequest::after(1, page.next.unwrap()))
        .await
        .unwrap();
    assert_eq!((users_of(&rest.items), rest.next), (vec!["d1"], None));
}

/// Follows racing recommendation reads: no read returns anyone whose follow had completed
/// before the read began, while other follows and unfollows change the graph under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_racing_follow_never_yields_someone_followed() {
    let t = testing::test_db("recommend_racing").await;
    for graph_lookup in paths(&t, "a_racing_follow_never_yields_someone_followed") {
        t.db.drop().await.unwrap();
        let graph = graph_with(&t, RecommendOptions::default().graph_lookup(graph_lookup));
        graph.set_up().await.unwrap();
        let candidates: Vec<String> = (0..16).map(|i| format!("c{i:02}")).collect();
        let mut ids = vec!["me", "ann", "bob", "cat"];
        ids.extend(candidates.iter().map(String::as_str));
        users(&graph, &ids).await;
        for followee in ["ann", "bob"] {
            graph.follow("me", followee).await.unwrap();
        }
        for followee in ["ann", "bob", "cat"] {
            for candidate in &candidates {
                graph.follow(followee, candidate).await.unwrap();
            }
        }
        let followed: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let follower = {
            let (graph, followed, candidates) =
                (graph.clone(), followed.clone(), candidates.clone());
            tokio::spawn(async move {
                for candidate in candidates {
                    graph.follow("me", &candidate).await.unwrap();
                    followed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(candidate);
                }
            })
        };
        let churn = {
            let graph = graph.clone();
            tokio::spawn(async move {
                for _ in 0..4 {
                    graph.follow("me", "cat").await.unwrap();
                    graph.unfollow("me", "cat").await.unwrap();
                }
            })
        };
        let mut reads = 0;
        let mut seen_some = false;
        while !follower.is_finished() || reads < 3 {
            let before = followed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let page = graph
                .recommendations("me", PageRequest::first(100))
                .await
                .unwrap();
            for item in &page.items {
                assert!(
                    !before.contains(&item.user),
                    "{graph_lookup}: {} was followed before the read",
                    item.user
                );
                assert_ne!(
                    item.user, "cat",
                    "followed or not, cat is no friend's friend"
                );
            }
            seen_some |= !page.items.is_empty();
            reads += 1;
        }
        follower.await.unwrap();
        churn.await.unwrap();
        assert!(seen_some, "some read ran before every follow");
        let last = graph
            .recommendations("me", PageRequest::first(100))
            .await
            .unwrap();
        assert!(last.items.is_empty(), "{:?}", last.items);
    }
}

/// A block racing follows of the same pair: afterwards no direct follow is left either way, the
/// counts agree, and follows are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_racing_follows_leaves_no_follow() {
    let (_t, graph) = setup("block_race").await;
    users(&graph, &["a", "b"]).await;
    for round in 0..3 {
        let mut tasks = Vec::new();
        for i in 0..6 {
            let graph = graph.clone();
            tasks.push(tokio::spawn(async move {
                let (owner, user) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
                match graph.follow(owner, user).await {
                    Ok(_)
                    | Err(Error::Forbidden {
                        reason: Forbidden::Blocked { .. },
                        ..
                    }) => {}
                    Err(error) => panic!("{error}"),
                }
            }));
        }
        let blocker = {
            let graph = graph.clone();
            tokio::spawn(async move { graph.block("a", "b").await.unwrap() })
        };
        for task in tasks {
            task.await.unwrap();
        }
        assert!(blocker.await.unwrap(), "round {round}: a new block");
        assert!(graph.subscription("a", "b").await.unwrap().is_none());
        assert!(graph.subscription("b", "a").await.unwrap().is_none());
        for user in ["a", "b"] {
            let stats = graph.stats(user).await.unwrap();
            assert_eq!((stats.followers, stats.following), (0, 0), "round {round}");
            assert_eq!(graph.rebuild(user).await.unwrap().created, 0);
        }
        assert!(graph.unblock("a", "b").await.unwrap());
    }
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_written() {
    let (t, graph) = setup("bad_input").await;
    users(&graph, &["a", "b", "c"]).await;
    graph.follow("a", "b").await.unwrap();
    graph.follow("a", "c").await.unwrap();
    let before = t.documents(&["graph_locks"]).await;

    for blank in ["", " ", "\t"] {
        for error in [
            graph
                .recommendations(blank, PageRequest::first(5))
                .await
                .unwrap_err(),
            graph.dismiss("a", blank).await.unwrap_err(),
            graph.dismiss(blank, "a").await.unwrap_err(),
            graph.block(blank, "a").await.unwrap_err(),
            graph.unblock("a", blank).await.unwrap_err(),
            graph
                .blocked(blank, PageRequest::first(5))
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
    }
    for error in [
        graph
            .recommendations("nobody", PageRequest::first(5))
            .await
            .unwrap_err(),
        graph.dismiss("a", "nobody").await.unwrap_err(),
        graph.dismiss("nobody", "a").await.unwrap_err(),
        graph.block("a", "nobody").await.unwrap_err(),
        graph.unblock("nobody", "a").await.unwrap_err(),
    ] {
        assert!(
            matches!(&error, Error::NotFound { what: Entity::User, id, .. } if id == "nobody"),
            "{error}"
        );
    }
    for (error, action) in [
        (graph.dismiss("a", "a").await.unwrap_err(), "dismiss"),
        (graph.block("a", "a").await.unwrap_err(), "block"),
    ] {
        assert!(
            matches!(&error, Error::InvalidInput { reason: Invalid::SelfAction { user, action: a }, .. } if user == "a" && *a == action),
            "{error}"
        );
        assert!(error.is_invalid_input());
    }
    for limit in [0, PageRequest::MAX_LIMIT + 1] {
        let error = graph
            .recommendations("a", PageRequest::first(limit))
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
    }
    // A cursor of another read of the graph is refused.
    let following = graph.following("a", PageRequest::first(1)).await.unwrap();
    let error = graph
        .recommendations("a", PageRequest::after(5, following.next.unwrap()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::Cursor { .. },
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        t.documents(&["graph_locks"]).await,
        before,
        "nothing written"
    );

    // Options out of range are refused when the graph is built.
    for options in [
        RecommendOptions::default().followees(0),
        RecommendOptions::default().per_followee(10_001),
        RecommendOptions::default().hubs(101),
        RecommendOptions::default().groups(0),
        RecommendOptions::default().reasons(101),
        RecommendOptions::default().group_boost(1_000_001),
    ] {
        let error = FollowGraph::builder(&t.db)
            .recommendations(options)
            .build()
            .unwrap_err();
        assert!(matches!(error, Error::InvalidConfig { .. }), "{error}");
    }
}
