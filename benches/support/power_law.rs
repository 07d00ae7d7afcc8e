//! A generated follow graph whose follower counts follow a power law, loaded in bulk with the
//! documents `FollowGraph`'s follows and memberships would leave (`graph_users`, `follows`,
//! `subscriptions`, `graph_groups`, `group_members`, as the graph module documents them): a
//! graph of 10,000 users takes about 100,000 follows, which one by one would take hours on the
//! test servers.
//!
//! Who follows whom: each user follows `d` others, `d` drawn from a Pareto distribution (shape
//! 1.5, mean about `mean_following`, at most 2,000: a few users follow very many, the hubs), the
//! followed drawn by a Zipf law (exponent 1) over a popularity order shuffled from the id order:
//! the most popular user is followed by a large part of the graph (the celebrity), most users by
//! a handful. Each user is a member of 0 to 2 of 100 groups, drawn by the same Zipf law. The
//! same seed gives the same graph.

use std::collections::BTreeSet;

use bson::{doc, Document};
use mongodb::Database;

/// A generated graph: users by index, each one's followees (sorted), and group memberships.
#[derive(Debug)]
pub struct Generated {
    pub ids: Vec<String>,
    pub following: Vec<Vec<u32>>,
    pub followers: Vec<u32>,
    pub groups: Vec<(String, Vec<u32>)>,
}

/// splitmix64: small, seeded, the same everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Draws ranks `0..n` with probability proportional to `1 / (rank + 1)`.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: usize) -> Self {
        let mut total = 0.0;
        let cumulative = (0..n)
            .map(|rank| {
                total += 1.0 / (rank + 1) as f64;
                total
            })
            .collect();
        Self { cumulative }
    }

    fn draw(&self, rng: &mut Rng) -> usize {
        let total = *self.cumulative.last().expect("at least one rank");
        let x = rng.unit() * total;
        self.cumulative
            .partition_point(|c| *c < x)
            .min(self.cumulative.len() - 1)
    }
}

/// The user id of index `i`: `u00042`.
pub fn id(i: usize) -> String {
    format!("u{i:05}")
}

/// A graph of `n` users, each following about `mean_following` on average.
pub fn generate(n: usize, mean_following: f64, seed: u64) -> Generated {
    let mut rng = Rng::new(seed);
    let mut popularity: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        popularity.swap(i, rng.below(i + 1));
    }
    let zipf = Zipf::new(n);
    let shape = 1.5;
    let scale = mean_following * (shape - 1.0) / shape;
    let most = 2_000.min(n - 1);
    let mut following = Vec::with_capacity(n);
    let mut followers = vec![0_u32; n];
    for user in 0..n {
        let wanted = ((scale / rng.unit().powf(1.0 / shape)) as usize).clamp(1, most);
        let mut chosen = BTreeSet::new();
        while chosen.len() < wanted {
            let target = popularity[zipf.draw(&mut rng)];
            if target as usize != user {
                chosen.insert(target);
            }
        }
        for target in &chosen {
            followers[*target as usize] += 1;
        }
        following.push(chosen.into_iter().collect());
    }
    let group_zipf = Zipf::new(100);
    let mut groups: Vec<(String, Vec<u32>)> =
        (0..100).map(|g| (format!("g{g:03}"), Vec::new())).collect();
    for user in 0..n as u32 {
        let count = rng.below(3);
        let mut joined = BTreeSet::new();
        for _ in 0..count {
            joined.insert(group_zipf.draw(&mut rng));
        }
        for group in joined {
            groups[group].1.push(user);
        }
    }
    Generated {
        ids: (0..n).map(id).collect(),
        following,
        followers,
        groups,
    }
}

impl Generated {
    pub fn edges(&self) -> usize {
        self.following.iter().map(Vec::len).sum()
    }

    /// The index of the most followed user.
    pub fn celebrity(&self) -> usize {
        (0..self.ids.len())
            .max_by_key(|&i| (self.followers[i], std::cmp::Reverse(i)))
            .expect("users")
    }

    pub fn follows(&self, owner: usize, user: usize) -> bool {
        self.following[owner].binary_search(&(user as u32)).is_ok()
    }

    /// Loads the graph into `db`, whose graph's indexes exist already, in unordered `insert`s of
    /// 1,000 documents.
    pub async fn load(&self, db: &Database) -> mongodb::error::Result<()> {
        let now = bson::DateTime::now();
        let users = (0..self.ids.len()).map(|i| {
            doc! {
                "_id": &self.ids[i], "followers": i64::from(self.followers[i]),
                "following": self.following[i].len() as i64, "since": now,
            }
        });
        insert_all(db, "graph_users", users).await?;
        let relations = self.pairs().map(|(owner, user)| {
            doc! { "owner": owner, "kind": "user", "target": user, "since": now }
        });
        insert_all(db, "follows", relations).await?;
        let subscriptions = self.pairs().map(|(owner, user)| {
            doc! { "owner": owner, "user": user, "origins": ["!"], "since": now }
        });
        insert_all(db, "subscriptions", subscriptions).await?;
        let groups = self
            .groups
            .iter()
            .map(|(group, _)| doc! { "_id": group, "since": now });
        insert_all(db, "graph_groups", groups).await?;
        let members = self.groups.iter().flat_map(|(group, members)| {
            members.iter().map(move |member| {
                doc! { "group": group, "user": &self.ids[*member as usize], "since": now }
            })
        });
        insert_all(db, "group_members", members).await
    }

    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.following
            .iter()
            .enumerate()
            .flat_map(move |(owner, users)| {
                users
                    .iter()
                    .map(move |user| (self.ids[owner].as_str(), self.ids[*user as usize].as_str()))
            })
    }
}

async fn insert_all(
    db: &Database,
    collection: &str,
    documents: impl Iterator<Item = Document>,
) -> mongodb::error::Result<()> {
    let collection = db.collection::<Document>(collection);
    let mut batch = Vec::with_capacity(1_000);
    for document in documents {
        batch.push(document);
        if batch.len() == 1_000 {
            collection
                .insert_many(std::mem::take(&mut batch))
                .ordered(false)
                .await?;
        }
    }
    if !batch.is_empty() {
        collection.insert_many(batch).ordered(false).await?;
    }
    Ok(())
}
