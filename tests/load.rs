//! The sustained-load benchmark's core (`examples/load`), small: 4 clients for a few seconds on
//! 20 users against the test server, then the benchmark's own check that nothing was lost or
//! duplicated (every acknowledged send, comment and vote once, failed ones at most once, every
//! count what the pages hold); once directly, and twice through the fault proxy with an outage
//! in the middle: with the default retry policy, which rides it out, and with a budget shorter
//! than the outage, so that calls fail (some after their write landed) and the check's rules
//! for failed writes are exercised too.

#[path = "../examples/load/check.rs"]
#[allow(dead_code)]
mod check;
#[path = "../examples/load/run.rs"]
#[allow(dead_code)]
mod run;

use std::time::Duration;

use mongo_social::retry::RetryPolicy;
use mongo_social_lab as testing;
use run::{Config, Op, Outcome};

/// The benchmark, small enough for a test on FerretDB 1.x: pages of 10 over inboxes seeded with
/// 20 messages, so next pages and marks by cursor have something to read.
fn small(name: &str) -> Config {
    Config {
        clients: 4,
        duration: Duration::from_secs(3),
        users: 20,
        page: 10,
        seed_messages: 20,
        discussions: 3,
        seed_comments: 5,
        database: testing::database_name(name),
        progress: Duration::from_secs(1),
        ..Config::default()
    }
}

fn assert_every_operation_ran(outcome: &Outcome) {
    for op in Op::ALL {
        let made = outcome.samples.iter().filter(|s| s.op == op).count();
        assert!(made > 0, "no {} was made", op.name());
    }
}

fn errors(outcome: &Outcome) -> Vec<String> {
    outcome
        .error_examples
        .iter()
        .map(|(op, kind, message)| format!("{} ({kind}): {message}", op.name()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_run_loses_and_duplicates_nothing() {
    let config = small("load_direct");
    let outcome = run::run(&config).await.expect("the run");
    assert_every_operation_ran(&outcome);
    let failed = outcome.samples.iter().filter(|s| s.error.is_some()).count();
    assert_eq!(
        failed,
        0,
        "no call fails without faults: {:?}",
        errors(&outcome)
    );
    let verdict = check::check(&config, &outcome.ledger)
        .await
        .expect("the check");
    testing::note(&format!(
        "load, direct: {} calls in {:?}\n{verdict}",
        outcome.samples.len(),
        config.duration
    ));
    assert!(verdict.ok(), "{verdict}");
    assert!(verdict.sends_acknowledged > verdict.seed_sends, "{verdict}");
    assert!(verdict.posts_acknowledged > verdict.seed_posts, "{verdict}");
    assert!(verdict.votes_acknowledged > 0, "{verdict}");
    assert_eq!(verdict.lost + verdict.duplicated, 0);
    assert!(verdict.deliveries_checked > 0 && verdict.tallies_checked > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_run_through_an_outage_loses_and_duplicates_nothing() {
    let config = Config {
        duration: Duration::from_secs(4),
        fault: Some(Duration::from_millis(1500)),
        ..small("load_outage")
    };
    let outcome = run::run(&config).await.expect("the run");
    assert_every_operation_ran(&outcome);
    let outage = outcome.outage.expect("the outage happened");
    assert!(
        outage.refused > 0,
        "the proxy refused connections during the outage: {outage:?}"
    );
    assert!(
        outage.accepted > outage.accepted_before,
        "the client connected again after the cut: {outage:?}"
    );
    let caught = outcome
        .samples
        .iter()
        .filter(|s| s.start < outage.end && s.start + s.latency > outage.start)
        .count();
    assert!(caught > 0, "some calls were in flight during the outage");
    let verdict = check::check(&config, &outcome.ledger)
        .await
        .expect("the check");
    testing::note(&format!(
        "load, outage: {} calls, {caught} of them in flight during the outage ({outage:?}); \
         errors: {:?}\n{verdict}",
        outcome.samples.len(),
        errors(&outcome)
    ));
    assert!(verdict.ok(), "{verdict}");
    assert_eq!(verdict.lost + verdict.duplicated, 0);
    assert!(verdict.deliveries_checked > 0 && verdict.tallies_checked > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impatient_load_run_through_an_outage_loses_and_duplicates_nothing() {
    let config = Config {
        duration: Duration::from_secs(4),
        fault: Some(Duration::from_millis(2000)),
        retry: RetryPolicy::default().budget(Duration::from_millis(500)),
        ..small("load_outage_impatient")
    };
    let outcome = run::run(&config).await.expect("the run");
    assert_every_operation_ran(&outcome);
    let outage = outcome.outage.expect("the outage happened");
    assert!(outage.refused > 0, "the outage was felt: {outage:?}");
    let failed: Vec<&'static str> = outcome.samples.iter().filter_map(|s| s.error).collect();
    assert!(
        !failed.is_empty(),
        "calls fail when the retry budget is shorter than the outage"
    );
    let verdict = check::check(&config, &outcome.ledger)
        .await
        .expect("the check");
    testing::note(&format!(
        "load, impatient outage: {} calls, {} failed ({outage:?}); errors: {:?}\n{verdict}",
        outcome.samples.len(),
        failed.len(),
        errors(&outcome)
    ));
    for kind in failed {
        assert!(
            ["unreachable", "retries_exhausted"].contains(&kind),
            "only the outage fails calls: {:?}",
            errors(&outcome)
        );
    }
    assert!(verdict.ok(), "{verdict}");
    assert_eq!(verdict.lost + verdict.duplicated, 0);
}
