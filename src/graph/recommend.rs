//! People a user may know, computed when asked from the subscriptions: friends of friends,
//! ranked by how many of the people the user follows follow them, with a bounded read whatever
//! the graph.
//!
//! The steps and their costs are in [`FollowGraph::recommendations`]'s documentation.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use bson::{doc, Bson, Document};
use futures::TryStreamExt;

use super::{listed, FollowGraph, Recommendation};
use crate::error::Result;
use crate::observe::spans::Op;
use crate::page::{invalid, Cursor, Scope};
use crate::page::{Page, PageRequest};
use crate::{bson_ext, validate};

/// The tag of recommendation cursors.
const TAG: &str = "gr";

/// Candidates checked per round of final checks, at least.
const MIN_CHECK: usize = 8;

/// What the first hop found: the followees read (in id order), the hubs among them, and each
/// `(followee, user)` subscription read.
#[derive(Debug, Default)]
struct Hop {
    followees: Vec<String>,
    hubs: Vec<String>,
    edges: Vec<(String, String)>,
}

/// A candidate, ranked.
#[derive(Debug)]
struct Ranked {
    user: String,
    score: u64,
    via: Vec<String>,
    shared_groups: Vec<String>,
}

impl FollowGraph {
    /// People `user` may know: users they do not follow (by any route), whom people they follow
    /// follow, most of those first, with the reasons. One page of the ranking; every page costs
    /// about the same bounded read, whatever the graph (below, and
    /// [`RecommendOptions`](super::RecommendOptions)). Never `user`, anyone `user` follows,
    /// dismissed ([`FollowGraph::dismiss`]) or blocked either way ([`FollowGraph::block`]).
    ///
    /// # The read
    ///
    /// 1. **One hop.** The user's first [`followees`](super::RecommendOptions::followees)
    ///    subscriptions, the stats of each (their `following` count) and, for each followee
    ///    following at most [`per_followee`](super::RecommendOptions::per_followee) users, all of
    ///    their subscriptions. Where the server has them
    ///    ([`Capabilities::graph_lookup`](crate::server::Capabilities::graph_lookup)) this is one
    ///    `aggregate`: `$lookup` of the stats, `$graphLookup` (one hop) of the followees'
    ///    subscriptions, skipping hubs; elsewhere three `find`s, over the `{owner, user}` index
    ///    and the stats' `_id`.
    /// 2. **Hubs.** A followee who follows more is sampled: a window of `per_followee` of their
    ///    subscriptions from the reader's own id on (wrapping round to the start), one or two
    ///    `find`s each, for at most [`hubs`](super::RecommendOptions::hubs) of them.
    /// 3. **Rank.** Every user reached who is neither the reader nor one of the followees read is
    ///    a candidate, scored by the followees who follow them (plus the group boost, two `find`s,
    ///    if set), in descending score, then by user id.
    /// 4. **Final checks.** The page is filled from the ranking, after the cursor, checking twice
    ///    as many candidates as are missing at a time against the subscriptions (a `find`:
    ///    followed now, by any route) and the exclusions (a `find`: dismissed, blocked either
    ///    way); those are skipped. These reads come last, so anyone followed, dismissed or blocked
    ///    before they run is never returned, whatever raced the earlier steps.
    ///
    /// Nothing here reads anyone's followers: a celebrity followed by everyone is one
    /// subscription of each of their followers, and costs no read more than anyone else.
    ///
    /// # Costs
    ///
    /// Without hubs and group boost, a page is 3 commands with `$graphLookup` (1 `aggregate`, 2
    /// `find`s) and 5 without (5 `find`s), plus 2 per further round of final checks (only when
    /// more than half of those checked were excluded; each round checks twice as many as the
    /// one before). Each sampled hub adds 1 `find`, or 2 when
    /// its window wraps round; the group boost adds 2. A user who follows nobody costs 2 (the
    /// subscriptions read, and the user's existence). Documents read are bounded by
    /// [`RecommendOptions::bound`](super::RecommendOptions::bound) and the checks. Every page
    /// costs the same: the ranking is computed again and the cursor (the score and user id of
    /// the page's last) says where to go on. So a page follows the previous one without a gap or
    /// a repeat while the graph holds still; a candidate whose score changes in between can move
    /// across the cursor.
    ///
    /// ```no_run
    /// # async fn demo(graph: mongo_social::graph::FollowGraph) -> mongo_social::Result<()> {
    /// use mongo_social::PageRequest;
    ///
    /// let page = graph.recommendations("ann", PageRequest::first(10)).await?;
    /// for candidate in &page.items {
    ///     // "followed by bob, cat and 2 others you follow"
    ///     println!("{}: {}", candidate.user, candidate.reason());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank), [`crate::Error::NotFound`] for an unregistered user,
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor), [`Invalid::PageLimit`](crate::error::Invalid::PageLimit).
    pub async fn recommendations(
        &self,
        user: &str,
        page: PageRequest,
    ) -> Result<Page<Recommendation>> {
        Op::GraphRecommendations
            .span()
            .run(async move {
                validate::user_id("user", user)?;
                page.check()?;
                let after = page.decode_after(|after| position(after, user))?;
                let joins = self.backend.dialect().await?.joins_in_aggregate();
                let mut hop = if self.recommend.graph_lookup && joins {
                    self.hop_in_one_aggregate(user).await?
                } else {
                    self.hop_in_finds(user).await?
                };
                if hop.followees.is_empty() {
                    // Anyone who follows someone is registered (every route checks); anyone else may
                    // not be.
                    self.check_users(&[user]).await?;
                    return Ok(Page {
                        items: Vec::new(),
                        next: None,
                    });
                }
                for hub in hop.hubs.iter().take(self.recommend.hubs) {
                    for candidate in self.sample_hub(hub, user).await? {
                        hop.edges.push((hub.clone(), candidate));
                    }
                }
                let mut ranked = self.rank(user, hop).await?;
                let start = match &after {
                    Some((score, last)) => ranked.partition_point(|r| {
                        r.score > *score || (r.score == *score && r.user <= *last)
                    }),
                    None => 0,
                };
                ranked.drain(..start);
                let kept = self.final_checks(user, ranked, page.limit + 1).await?;
                let items: Vec<Recommendation> = kept
                    .into_iter()
                    .map(|ranked| Recommendation {
                        followed_by: ranked.via.len() as u64,
                        via: ranked
                            .via
                            .into_iter()
                            .take(self.recommend.reasons)
                            .collect(),
                        user: ranked.user,
                        score: ranked.score,
                        shared_groups: ranked.shared_groups,
                    })
                    .collect();
                Ok(Page::from_overfetch(items, page.limit, |last| {
                    cursor(user, last.score, &last.user)
                }))
            })
            .await
    }

    /// Step 1 in one `aggregate`: the followees, each one's `following` from its stats
    /// (`$lookup`), and the subscriptions of those who are no hubs (`$graphLookup`, one hop),
    /// one document per subscription (or per followee without any read).
    async fn hop_in_one_aggregate(&self, user: &str) -> Result<Hop> {
        let options = &self.recommend;
        let per_followee = options.per_followee as i64;
        let pipeline = vec![
            doc! { "$match": listed(doc! { "owner": user }) },
            doc! { "$sort": { "user": 1 } },
            doc! { "$limit": options.followees as i64 },
            doc! { "$project": { "_id": 0, "user": 1 } },
            doc! { "$lookup": {
                "from": self.users.name(), "localField": "user", "foreignField": "_id",
                "as": "stats",
            } },
            doc! { "$project": {
                "followee": "$user", "following": { "$max": "$stats.following" },
            } },
            // Hubs start from nobody: `$graphLookup` reads nothing for them. (The start is also
            // the `connectFromField`, `user`: some servers start from that field, not from
            // `startWith`.)
            doc! { "$project": {
                "followee": 1, "following": 1,
                "user": { "$cond": [
                    { "$lte": ["$following", per_followee] }, "$followee", Bson::Array(Vec::new()),
                ] },
            } },
            doc! { "$graphLookup": {
                "from": self.subscriptions.name(), "startWith": "$user",
                "connectFromField": "user", "connectToField": "owner", "as": "hop", "maxDepth": 0,
            } },
            doc! { "$unwind": { "path": "$hop", "preserveNullAndEmptyArrays": true } },
            // Subscriptions being removed (no origin left) are not listed.
            doc! { "$match": { "$or": [
                { "hop": { "$exists": false } }, { "hop.origins.0": { "$exists": true } },
            ] } },
            doc! { "$project": {
                "_id": 0, "followee": 1, "following": 1, "candidate": "$hop.user",
            } },
        ];
        let rows: Vec<Document> = self
            .subscriptions
            .aggregate(pipeline)
            .batch_size(batch(options.followees * (options.per_followee + 1)))
            .await?
            .try_collect()
            .await?;
        let mut hop = Hop::default();
        let mut seen = BTreeSet::new();
        for row in &rows {
            let Ok(followee) = row.get_str("followee") else {
                continue;
            };
            if seen.insert(followee.to_owned()) {
                hop.followees.push(followee.to_owned());
                if bson_ext::count(row, "following") > options.per_followee as u64 {
                    hop.hubs.push(followee.to_owned());
                }
            }
            if let Ok(candidate) = row.get_str("candidate") {
                hop.edges.push((followee.to_owned(), candidate.to_owned()));
            }
        }
        hop.followees.sort();
        hop.hubs.sort();
        Ok(hop)
    }

    /// Step 1 in three `find`s: the followees, their stats, and the subscriptions of those who
    /// are no hubs.
    async fn hop_in_finds(&self, user: &str) -> Result<Hop> {
        let options = &self.recommend;
        let followees = self
            .ids(
                &self.subscriptions,
                listed(doc! { "owner": user }),
                options.followees,
                "user",
            )
            .await?;
        if followees.is_empty() {
            return Ok(Hop::default());
        }
        let stats: Vec<Document> = self
            .users
            .find(doc! { "_id": { "$in": &followees } })
            .projection(doc! { "following": 1 })
            .batch_size(batch(followees.len()))
            .await?
            .try_collect()
            .await?;
        let following: BTreeMap<&str, u64> = stats
            .iter()
            .filter_map(|d| Some((d.get_str("_id").ok()?, bson_ext::count(d, "following"))))
            .collect();
        let is_hub = |followee: &String| {
            following.get(followee.as_str()).copied().unwrap_or(0) > options.per_followee as u64
        };
        let (hubs, others): (Vec<String>, Vec<String>) =
            followees.iter().cloned().partition(is_hub);
        let mut edges = Vec::new();
        if !others.is_empty() {
            // At most `per_followee` each by their counts; the limit holds the bound while a
            // count lags its subscriptions.
            let most = others.len() * options.per_followee;
            let by_followees = listed(doc! { "owner": { "$in": &others } });
            let found = self
                .first_in_order(&self.subscriptions, by_followees, &["owner", "user"], most)
                .await?;
            edges = found
                .iter()
                .filter_map(|d| {
                    Some((
                        d.get_str("owner").ok()?.to_owned(),
                        d.get_str("user").ok()?.to_owned(),
                    ))
                })
                .collect();
        }
        Ok(Hop {
            followees,
            hubs,
            edges,
        })
    }

    /// Step 2: `per_followee` of `hub`'s subscriptions from `pivot` on, wrapping round to the
    /// start.
    async fn sample_hub(&self, hub: &str, pivot: &str) -> Result<Vec<String>> {
        let most = self.recommend.per_followee;
        let mut sample = self
            .ids(
                &self.subscriptions,
                listed(doc! { "owner": hub, "user": { "$gte": pivot } }),
                most,
                "user",
            )
            .await?;
        if sample.len() < most {
            let wrapped = self
                .ids(
                    &self.subscriptions,
                    listed(doc! { "owner": hub, "user": { "$lt": pivot } }),
                    most - sample.len(),
                    "user",
                )
                .await?;
            sample.extend(wrapped);
        }
        Ok(sample)
    }

    /// Step 3: the candidates reached by `hop`, scored (with the group boost, if set) and sorted.
    async fn rank(&self, user: &str, hop: Hop) -> Result<Vec<Ranked>> {
        let followed: BTreeSet<&str> = hop
            .followees
            .iter()
            .map(String::as_str)
            .chain([user])
            .collect();
        let mut via: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (followee, candidate) in hop.edges {
            if !followed.contains(candidate.as_str()) {
                via.entry(candidate).or_default().insert(followee);
            }
        }
        let mut shared = if self.recommend.group_boost > 0 && !via.is_empty() {
            let candidates: Vec<&String> = via.keys().collect();
            self.shared_groups(user, &candidates).await?
        } else {
            BTreeMap::new()
        };
        let boost = self.recommend.group_boost;
        let mut ranked: Vec<Ranked> = via
            .into_iter()
            .map(|(candidate, via)| {
                let groups = shared.remove(&candidate).unwrap_or_default();
                Ranked {
                    score: via.len() as u64 + boost * groups.len() as u64,
                    user: candidate,
                    via: via.into_iter().collect(),
                    shared_groups: groups,
                }
            })
            .collect();
        ranked.sort_by(|a, b| (Reverse(a.score), &a.user).cmp(&(Reverse(b.score), &b.user)));
        Ok(ranked)
    }

    /// The groups each of `candidates` shares with `user`, among `user`'s first
    /// [`groups`](super::RecommendOptions::groups) groups and `per_followee` memberships of each.
    async fn shared_groups(
        &self,
        user: &str,
        candidates: &[&String],
    ) -> Result<BTreeMap<String, Vec<String>>> {
        let options = &self.recommend;
        let groups = self
            .ids(
                &self.members,
                doc! { "user": user },
                options.groups,
                "group",
            )
            .await?;
        let mut shared: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if groups.is_empty() {
            return Ok(shared);
        }
        let most = groups.len() * options.per_followee;
        let shared_by_candidates =
            doc! { "group": { "$in": &groups }, "user": { "$in": candidates } };
        let memberships = self
            .first_in_order(
                &self.members,
                shared_by_candidates,
                &["group", "user"],
                most,
            )
            .await?;
        for membership in &memberships {
            if let (Ok(group), Ok(member)) =
                (membership.get_str("group"), membership.get_str("user"))
            {
                shared
                    .entry(member.to_owned())
                    .or_default()
                    .push(group.to_owned());
            }
        }
        Ok(shared)
    }

    /// Step 4: the first `wanted` of `ranked` that `user` does not follow now and has not
    /// excluded, checked in rounds: twice as many as are missing, and twice as many as the
    /// round before, so even a reader who follows or excluded most of the ranking takes few
    /// rounds (their number grows with the logarithm of the candidates).
    async fn final_checks(
        &self,
        user: &str,
        ranked: Vec<Ranked>,
        wanted: usize,
    ) -> Result<Vec<Ranked>> {
        let mut kept = Vec::with_capacity(wanted);
        let mut rest = ranked.into_iter().peekable();
        let mut last = 0;
        while kept.len() < wanted && rest.peek().is_some() {
            let size = ((wanted - kept.len()) * 2).max(MIN_CHECK).max(last * 2);
            last = size;
            let chunk: Vec<Ranked> = rest.by_ref().take(size).collect();
            let ids: Vec<String> = chunk.iter().map(|r| r.user.clone()).collect();
            let followed: BTreeSet<String> =
                self.follows_any(user, &ids).await?.into_iter().collect();
            let excluded = self.excluded(user, &ids).await?;
            kept.extend(
                chunk
                    .into_iter()
                    .filter(|r| !followed.contains(&r.user) && !excluded.contains(&r.user))
                    .take(wanted - kept.len()),
            );
        }
        Ok(kept)
    }

    /// The `field` of the first `limit` documents of `collection` matching `filter` in `field`
    /// order (one `find`).
    async fn ids(
        &self,
        collection: &mongodb::Collection<Document>,
        filter: Document,
        limit: usize,
        field: &str,
    ) -> Result<Vec<String>> {
        let found = self
            .first_in_order(collection, filter, &[field], limit)
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| d.get_str(field).ok().map(str::to_owned))
            .collect())
    }

    /// The first `limit` documents of `collection` matching `filter` in the order of `fields`,
    /// each with only `fields` (one `find`, one batch).
    async fn first_in_order(
        &self,
        collection: &mongodb::Collection<Document>,
        filter: Document,
        fields: &[&str],
        limit: usize,
    ) -> Result<Vec<Document>> {
        let mut projection = doc! { "_id": 0 };
        let mut sort = Document::new();
        for field in fields {
            projection.insert(*field, 1);
            sort.insert(*field, 1);
        }
        Ok(collection
            .find(filter)
            .projection(projection)
            .sort(sort)
            .limit(limit as i64)
            .batch_size(batch(limit))
            .await?
            .try_collect()
            .await?)
    }
}

/// A first batch holding `n` documents (the server caps a batch at 16 MiB), so a bounded read is
/// one command.
fn batch(n: usize) -> u32 {
    u32::try_from(n.max(1) + 1).unwrap_or(u32::MAX)
}

/// The scope of `reader`'s recommendation cursors.
fn scope(reader: &str) -> Scope {
    Scope::new("user's recommendations", &[reader])
}

/// The cursor of `reader`'s recommendations after a candidate of `score`.
fn cursor(reader: &str, score: u64, user: &str) -> Cursor {
    Cursor::new(TAG, scope(reader), &[&score.to_string(), user])
}

/// The score and user id a cursor of `reader`'s recommendations holds.
fn position(cursor: &Cursor, reader: &str) -> Result<(u64, String)> {
    let [score, user] = cursor.fields(TAG, scope(reader))?;
    let score = score
        .parse()
        .map_err(|_| invalid("not a recommendation cursor"))?;
    if user.is_empty() {
        return Err(invalid("not a recommendation cursor"));
    }
    Ok((score, user))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::List;

    #[test]
    fn cursors_hold_a_score_and_any_user_id() {
        for (score, user) in [(0, "ann"), (7, "a.b"), (u64::MAX, "名前 %2E")] {
            assert_eq!(
                position(&cursor("bob", score, user), "bob").unwrap(),
                (score, user.to_owned())
            );
            assert!(position(&cursor("bob", score, user), "ann").is_err());
        }
        assert!(position(&Cursor::new(TAG, scope("ann"), &["x", "ann"]), "ann").is_err());
        assert!(position(&Cursor::new(TAG, scope("ann"), &["1", ""]), "ann").is_err());
        assert!(position(&Cursor::new("g", scope("ann"), &["ann"]), "ann").is_err());
        let followers = super::super::cursor_after(List::Followers("ann"), "ann");
        assert!(position(&followers, "ann").is_err());
    }
}
