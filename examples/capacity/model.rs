//! From measured costs to the load a workload puts on a sharded cluster.

use crate::measure::{Cost, Costs};

/// The stated workload.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub users: f64,
    /// Followers of a typical account.
    pub followers: f64,
    /// Share of accounts in the tail...
    pub tail_share: f64,
    /// ...and their followers.
    pub tail_followers: f64,
    pub posts_per_user_day: f64,
    pub reads_per_user_day: f64,
    /// Authors with at least this many followers are not copied, when the threshold is on.
    pub celebrity_threshold: f64,
}

pub const WORKLOAD: Workload = Workload {
    users: 10_000_000.0,
    followers: 100.0,
    tail_share: 0.01,
    tail_followers: 100_000.0,
    posts_per_user_day: 20.0,
    reads_per_user_day: 200.0,
    celebrity_threshold: 10_000.0,
};

/// What one shard (a replica set) is taken to sustain.
#[derive(Clone, Copy, Debug)]
pub struct ShardLimits {
    pub commands_per_s: f64,
    pub documents_written_per_s: f64,
    pub storage_bytes: f64,
    pub retention_days: f64,
    /// Bytes per index entry (key, record id, overhead), for index storage.
    pub index_entry_bytes: f64,
}

pub const LIMITS: ShardLimits = ShardLimits {
    commands_per_s: 40_000.0,
    documents_written_per_s: 20_000.0,
    storage_bytes: 4e12,
    retention_days: 365.0,
    index_entry_bytes: 24.0,
};

const DAY: f64 = 86_400.0;
/// Followers per fan-out job (the `Delivery` default).
const JOB: f64 = 500.0;

/// A cost as a function of recipients: `base + per_recipient * n`.
#[derive(Clone, Copy, Debug, Default)]
struct Linear {
    base: Cost,
    per_recipient: Cost,
}

fn combine(a: Cost, b: Cost, f: impl Fn(f64, f64) -> f64) -> Cost {
    let mut out = Cost::default();
    out.totals.commands = f(a.totals.commands, b.totals.commands);
    out.totals.documents_read = f(a.totals.documents_read, b.totals.documents_read);
    out.totals.documents_written = f(a.totals.documents_written, b.totals.documents_written);
    out.totals.index_entries_written = f(
        a.totals.index_entries_written,
        b.totals.index_entries_written,
    );
    out.bytes_written = f(a.bytes_written, b.bytes_written);
    out
}

impl Linear {
    /// Through the measured sends to 100 and to 1,000.
    fn fit(at_100: Cost, at_1000: Cost) -> Self {
        let per_recipient = combine(at_1000, at_100, |a, b| ((a - b) / 900.0).max(0.0));
        let base = combine(at_100, per_recipient, |a, p| (a - 100.0 * p).max(0.0));
        Self {
            base,
            per_recipient,
        }
    }

    fn at(&self, n: f64) -> Cost {
        combine(self.base, self.per_recipient, |b, p| b + p * n)
    }
}

/// The load of one strategy under the workload.
#[derive(Clone, Debug)]
pub struct Load {
    pub strategy: &'static str,
    pub celebrities: &'static str,
    pub copies_per_day: f64,
    pub write_commands_per_s: f64,
    pub documents_written_per_s: f64,
    pub index_entries_per_s: f64,
    pub read_commands_per_s: f64,
    /// Shards each read asks (1, or every shard).
    pub read_broadcast: bool,
    pub storage_per_day: f64,
    pub shards: Shards,
}

/// Shards needed, by what limits them.
#[derive(Clone, Copy, Debug)]
pub struct Shards {
    pub by_commands: Option<f64>,
    pub by_writes: f64,
    pub by_storage: f64,
}

impl Shards {
    pub fn needed(&self) -> Option<f64> {
        self.by_commands
            .map(|c| c.max(self.by_writes).max(self.by_storage).max(1.0))
    }
}

fn cost(costs: &Costs, store: &str, operation: &str) -> Cost {
    costs
        .get(&(store.to_owned(), operation.to_owned()))
        .copied()
        .unwrap_or_default()
}

/// The load of each inbox strategy, with the celebrity threshold off and (where the strategy
/// allows it) on.
pub fn loads(costs: &Costs, w: &Workload, limits: &ShardLimits) -> Vec<Load> {
    let posts = w.users * w.posts_per_user_day / DAY;
    let tail_posts = posts * w.tail_share;
    let typical_posts = posts - tail_posts;
    let reads = w.users * w.reads_per_user_day / DAY;
    let mut loads = Vec::new();
    for strategy in crate::measure::INBOXES {
        let read_broadcast = strategy == "fan-out on read";
        // Fan-out on read stores each post once, with its `to` list: linear in followers.
        let send = Linear::fit(
            cost(costs, strategy, "send to 100"),
            cost(costs, strategy, "send to 1000"),
        );
        // The copying inboxes are fed by `Delivery`: the author's side, then a job per 500
        // followers, each measured over that inbox.
        let delivery = crate::measure::delivery_store(strategy);
        let post_side = cost(costs, &delivery, "post (author's side)");
        let job = cost(costs, &delivery, "fan-out to 500 followers");
        let thresholds: &[bool] = match strategy {
            "fan-out on read" => &[false],
            // Delivery refuses celebrities with buckets, which keep arrival order.
            "buckets" => &[false],
            _ => &[false, true],
        };
        for &threshold in thresholds {
            let mut per_s = Cost::default();
            let mut copies = 0.0;
            for (rate, followers) in [(typical_posts, w.followers), (tail_posts, w.tail_followers)]
            {
                let celebrity = threshold && followers >= w.celebrity_threshold;
                let copied = !read_broadcast && !celebrity;
                let one = if read_broadcast {
                    send.at(followers)
                } else if copied {
                    copies += rate * followers * DAY;
                    let jobs = followers / JOB;
                    combine(post_side, job, |side, job| side + job * jobs)
                } else {
                    post_side
                };
                per_s = combine(per_s, one, |total, one| total + one * rate);
            }
            let read = if read_broadcast {
                cost(costs, strategy, "newest 50")
            } else if threshold {
                cost(costs, &delivery, "timeline page of 20, a celebrity")
            } else {
                cost(costs, &delivery, "timeline page of 20")
            };
            let read_commands = read.totals.commands * reads;
            let storage_per_day = per_s.bytes_written * DAY
                + per_s.totals.index_entries_written * DAY * limits.index_entry_bytes;
            let commands = per_s.totals.commands + read_commands;
            let by_commands = if read_broadcast {
                // Every read reaches every shard: shards add write capacity only.
                (read_commands < limits.commands_per_s).then(|| {
                    (per_s.totals.commands / (limits.commands_per_s - read_commands)).ceil()
                })
            } else {
                Some((commands / limits.commands_per_s).ceil())
            };
            loads.push(Load {
                strategy,
                celebrities: if threshold {
                    "merged at read"
                } else {
                    "copied"
                },
                copies_per_day: copies,
                write_commands_per_s: per_s.totals.commands,
                documents_written_per_s: per_s.totals.documents_written,
                index_entries_per_s: per_s.totals.index_entries_written,
                read_commands_per_s: read_commands,
                read_broadcast,
                storage_per_day,
                shards: Shards {
                    by_commands,
                    by_writes: (per_s.totals.documents_written / limits.documents_written_per_s)
                        .ceil(),
                    by_storage: (storage_per_day * limits.retention_days / limits.storage_bytes)
                        .ceil(),
                },
            });
        }
    }
    loads
}
