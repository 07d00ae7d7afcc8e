//! The alternative to reading recommendations at read time, measured against it: a candidates
//! collection `{owner, candidate, score, via: [..]}` kept up to date by the follow path (or a
//! job of the crate's `JobQueue`), written here with plain driver calls on the graph's
//! collections, as the crate would do it.
//!
//! - A follow `a -> b` gives every follower `x` of `a` the candidate `b` via `a`, and `a` every
//!   followee `c` of `b` via `b` (never anyone as their own candidate). Each is one upserting
//!   statement `{q: {owner, candidate, via: {$ne: via}}, u: {$push: {via}, $inc: {score: 1}}}`,
//!   sent in `update` commands of as many statements as the server takes: a statement applied
//!   already matches nothing and its upsert meets the unique `{owner, candidate}` index
//!   (duplicate key: done), so a retry applies nothing twice. An unfollow pulls the same.
//! - A rebuild of one user reads their followees and the followees' subscriptions, all of them,
//!   and replaces the user's candidates.
//! - A page is one `find` on `{owner, score: -1, candidate: 1}`, then the read-time checks
//!   (subscriptions and exclusions), as the crate's read does.
//!
//! Candidates already followed stay stored (a later unfollow brings them back) and are filtered
//! at read time; the score is exact, not sampled: a follow by a user with 5,000 followers writes
//! 5,000 statements.

use std::collections::{BTreeMap, BTreeSet};

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};

/// What one maintenance step did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Work {
    pub statements: usize,
}

#[derive(Clone, Debug)]
pub struct Maintained {
    db: Database,
    subscriptions: Collection<Document>,
    candidates: Collection<Document>,
    exclusions: Collection<Document>,
    max_statements: usize,
}

impl Maintained {
    pub fn new(db: &Database, max_statements: usize) -> Self {
        Self {
            db: db.clone(),
            subscriptions: db.collection("subscriptions"),
            candidates: db.collection("candidates"),
            exclusions: db.collection("graph_exclusions"),
            max_statements,
        }
    }

    pub async fn create_indexes(&self) -> mongodb::error::Result<()> {
        let unique = IndexOptions::builder().unique(true).build();
        self.candidates
            .create_index(
                IndexModel::builder()
                    .keys(doc! { "owner": 1, "candidate": 1 })
                    .options(unique)
                    .build(),
            )
            .await?;
        self.candidates
            .create_index(
                IndexModel::builder()
                    .keys(doc! { "owner": 1, "score": -1, "candidate": 1 })
                    .build(),
            )
            .await?;
        Ok(())
    }

    /// Whom `user` follows (`side = "owner"`) or who follows `user` (`side = "user"`), all.
    async fn everyone(&self, side: &str, user: &str) -> mongodb::error::Result<Vec<String>> {
        let other = if side == "owner" { "user" } else { "owner" };
        let found: Vec<Document> = self
            .subscriptions
            .find(doc! { side: user, "origins.0": { "$exists": true } })
            .projection(doc! { "_id": 0, other: 1 })
            .batch_size(100_000)
            .await?
            .try_collect()
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| d.get_str(other).ok().map(str::to_owned))
            .collect())
    }

    /// The candidates of `owner` as they should be: every followee's followee but `owner`, with
    /// the followees who follow them.
    async fn computed(
        &self,
        owner: &str,
    ) -> mongodb::error::Result<BTreeMap<String, BTreeSet<String>>> {
        let followees = self.everyone("owner", owner).await?;
        let mut via: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        if followees.is_empty() {
            return Ok(via);
        }
        let found: Vec<Document> = self
            .subscriptions
            .find(doc! { "owner": { "$in": &followees }, "origins.0": { "$exists": true } })
            .projection(doc! { "_id": 0, "owner": 1, "user": 1 })
            .batch_size(100_000)
            .await?
            .try_collect()
            .await?;
        for d in &found {
            if let (Ok(followee), Ok(candidate)) = (d.get_str("owner"), d.get_str("user")) {
                if candidate != owner {
                    via.entry(candidate.to_owned())
                        .or_default()
                        .insert(followee.to_owned());
                }
            }
        }
        Ok(via)
    }

    /// Replaces `owner`'s candidates with the computed ones; how many.
    pub async fn rebuild(&self, owner: &str) -> mongodb::error::Result<usize> {
        let via = self.computed(owner).await?;
        self.candidates.delete_many(doc! { "owner": owner }).await?;
        let documents: Vec<Document> = via
            .iter()
            .map(|(candidate, via)| {
                let via: Vec<&String> = via.iter().collect();
                doc! {
                    "owner": owner, "candidate": candidate, "score": via.len() as i64, "via": via,
                }
            })
            .collect();
        let n = documents.len();
        for chunk in documents.chunks(1_000) {
            self.candidates
                .insert_many(chunk.to_vec())
                .ordered(false)
                .await?;
        }
        Ok(n)
    }

    /// `owner`'s stored candidates, each with its `via` set.
    pub async fn stored(
        &self,
        owner: &str,
    ) -> mongodb::error::Result<BTreeMap<String, BTreeSet<String>>> {
        let found: Vec<Document> = self
            .candidates
            .find(doc! { "owner": owner, "score": { "$gt": 0 } })
            .batch_size(100_000)
            .await?
            .try_collect()
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| {
                let via = d
                    .get_array("via")
                    .ok()?
                    .iter()
                    .filter_map(Bson::as_str)
                    .map(str::to_owned)
                    .collect();
                Some((d.get_str("candidate").ok()?.to_owned(), via))
            })
            .collect())
    }

    /// Whether `owner`'s stored candidates equal a rebuild's.
    pub async fn agrees_with_rebuild(&self, owner: &str) -> mongodb::error::Result<bool> {
        Ok(self.stored(owner).await? == self.computed(owner).await?)
    }

    /// What the follow path (or its job) does once `a -> b` is a subscription.
    pub async fn on_follow(&self, a: &str, b: &str) -> mongodb::error::Result<Work> {
        self.change(a, b, true).await
    }

    /// What the unfollow path does once `a -> b` is gone.
    pub async fn on_unfollow(&self, a: &str, b: &str) -> mongodb::error::Result<Work> {
        self.change(a, b, false).await
    }

    async fn change(&self, a: &str, b: &str, add: bool) -> mongodb::error::Result<Work> {
        let followers = self.everyone("user", a).await?;
        let followees = self.everyone("owner", b).await?;
        let statement = |owner: &str, candidate: &str, via: &str| {
            if add {
                doc! {
                    "q": { "owner": owner, "candidate": candidate, "via": { "$ne": via } },
                    "u": { "$push": { "via": via }, "$inc": { "score": 1 } },
                    "upsert": true,
                }
            } else {
                doc! {
                    "q": { "owner": owner, "candidate": candidate, "via": via },
                    "u": { "$pull": { "via": via }, "$inc": { "score": -1 } },
                }
            }
        };
        let statements: Vec<Document> = followers
            .iter()
            .filter(|x| x.as_str() != b)
            .map(|x| statement(x, b, a))
            .chain(
                followees
                    .iter()
                    .filter(|c| c.as_str() != a)
                    .map(|c| statement(a, c, b)),
            )
            .collect();
        for chunk in statements.chunks(self.max_statements.max(1)) {
            let reply = self
                .db
                .run_command(doc! {
                    "update": self.candidates.name(), "updates": chunk.to_vec(), "ordered": false,
                })
                .await?;
            if let Ok(errors) = reply.get_array("writeErrors") {
                for error in errors.iter().filter_map(Bson::as_document) {
                    // A duplicate key is a statement applied already: done.
                    let code = error.get_i32("code").unwrap_or(0);
                    assert_eq!(code, 11000, "candidate statement failed: {error}");
                }
            }
        }
        Ok(Work {
            statements: statements.len(),
        })
    }

    /// The first `limit` of `owner`'s candidates that `owner` neither follows nor excluded, by
    /// score: the stored ranking, read in rounds as the crate's checks are, each round checked
    /// as the crate's read checks its page.
    pub async fn page(
        &self,
        owner: &str,
        limit: usize,
    ) -> mongodb::error::Result<Vec<(String, i64)>> {
        let mut kept = Vec::new();
        let mut after: Option<(i64, String)> = None;
        let mut last = 0;
        while kept.len() < limit {
            let mut filter = doc! { "owner": owner, "score": { "$gt": 0 } };
            if let Some((score, candidate)) = &after {
                filter.insert(
                    "$or",
                    vec![
                        doc! { "score": { "$lt": score } },
                        doc! { "score": score, "candidate": { "$gt": candidate } },
                    ],
                );
            }
            // As the crate's read: twice as many as are missing, and as the round before.
            let want = ((limit - kept.len()) * 2).max(8).max(last * 2);
            last = want;
            let found: Vec<Document> = self
                .candidates
                .find(filter)
                .projection(doc! { "_id": 0, "candidate": 1, "score": 1 })
                .sort(doc! { "score": -1, "candidate": 1 })
                .limit(want as i64)
                .await?
                .try_collect()
                .await?;
            let ranked: Vec<(String, i64)> = found
                .iter()
                .filter_map(|d| {
                    Some((
                        d.get_str("candidate").ok()?.to_owned(),
                        d.get_i64("score")
                            .ok()
                            .or_else(|| d.get_i32("score").ok().map(i64::from))?,
                    ))
                })
                .collect();
            if ranked.is_empty() {
                break;
            }
            let ids: Vec<&String> = ranked.iter().map(|(c, _)| c).collect();
            let followed: BTreeSet<String> = self.listed("subscriptions", owner, &ids).await?;
            let excluded: BTreeSet<String> = self.listed("graph_exclusions", owner, &ids).await?;
            let full = ranked.len() == want;
            after = ranked.last().map(|(c, s)| (*s, c.clone()));
            kept.extend(
                ranked
                    .into_iter()
                    .filter(|(c, _)| !followed.contains(c) && !excluded.contains(c))
                    .take(limit - kept.len()),
            );
            if !full {
                break;
            }
        }
        Ok(kept)
    }

    /// Which of `ids` `owner` follows (`subscriptions`) or excluded (`graph_exclusions`, either
    /// way for blocks), one `find`.
    async fn listed(
        &self,
        collection: &str,
        owner: &str,
        ids: &[&String],
    ) -> mongodb::error::Result<BTreeSet<String>> {
        let filter = if collection == "subscriptions" {
            doc! { "owner": owner, "user": { "$in": ids }, "origins.0": { "$exists": true } }
        } else {
            doc! { "$or": [
                { "owner": owner, "user": { "$in": ids } },
                { "user": owner, "kind": "block", "owner": { "$in": ids } },
            ] }
        };
        let collection = if collection == "subscriptions" {
            &self.subscriptions
        } else {
            &self.exclusions
        };
        let found: Vec<Document> = collection
            .find(filter)
            .projection(doc! { "_id": 0, "owner": 1, "user": 1 })
            .await?
            .try_collect()
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| {
                let (by, of) = (d.get_str("owner").ok()?, d.get_str("user").ok()?);
                Some(if by == owner { of } else { by }.to_owned())
            })
            .collect())
    }
}
