//! Runs each store's operations against the server and measures what one costs: commands,
//! documents read and written, index entries written (from command monitoring) and bytes
//! written (`dbStats.dataSize` before and after).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use bson::doc;
use futures::TryStreamExt;
use mongo_social::comments::{
    Author, DynCommentStore, Embedded, HybridPages, NewComment, Order, PerComment,
};
use mongo_social::delivery::Delivery;
use mongo_social::feed::{FeedKind, FeedStore, NewPost, NewUser};
use mongo_social::graph::{FollowGraph, FollowList};
use mongo_social::{
    BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite, NewMessage, PageRequest,
};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};

use crate::log::{CommandLog, Totals};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// What one operation costs, averaged over its repetitions.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    pub totals: Totals,
    /// Bytes of documents written (growth of `dataSize`).
    pub bytes_written: f64,
}

/// Every measured cost, by `(store, operation)`.
pub type Costs = BTreeMap<(String, String), Cost>;

struct Bench {
    client: Client,
    log: CommandLog,
    costs: Costs,
}

impl Bench {
    fn database(&self, name: &str) -> Database {
        self.client
            .database(&format!("mongo_social_capacity_{name}"))
    }

    /// Tells the log the indexes of every collection of `db`.
    async fn learn_indexes(&self, db: &Database) -> Result<(), Error> {
        for name in db.list_collection_names().await? {
            let indexes: Vec<mongodb::IndexModel> = db
                .collection::<bson::Document>(&name)
                .list_indexes()
                .await?
                .try_collect()
                .await?;
            let keys = indexes
                .iter()
                .map(|index| {
                    index
                        .keys
                        .keys()
                        .map(|path| path.split('.').next().unwrap_or(path).to_owned())
                        .collect()
                })
                .collect();
            self.log.set_indexes(&name, keys);
        }
        Ok(())
    }

    async fn data_size(db: &Database) -> Result<f64, Error> {
        let stats = db.run_command(doc! { "dbStats": 1 }).await?;
        Ok(match stats.get("dataSize") {
            Some(bson::Bson::Double(v)) => *v,
            Some(bson::Bson::Int32(v)) => f64::from(*v),
            Some(bson::Bson::Int64(v)) => *v as f64,
            _ => 0.0,
        })
    }

    /// Runs `operation(i)` for `i` in `0..reps` and records the average cost.
    async fn measure<F, Fut, T>(
        &mut self,
        db: &Database,
        store: &str,
        operation: &str,
        reps: usize,
        run: F,
    ) -> Result<(), Error>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = mongo_social::Result<T>>,
    {
        self.measure_units(db, store, operation, reps, 1, run).await
    }

    /// Like [`Bench::measure`], for a run that does the work of `units` operations at once (a
    /// queue holding the jobs of `units` posts): the cost is divided by `reps * units`.
    async fn measure_units<F, Fut, T>(
        &mut self,
        db: &Database,
        store: &str,
        operation: &str,
        reps: usize,
        units: usize,
        mut run: F,
    ) -> Result<(), Error>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = mongo_social::Result<T>>,
    {
        self.learn_indexes(db).await?;
        let before = Self::data_size(db).await?;
        self.log.reset();
        for i in 0..reps {
            run(i).await?;
        }
        let n = (reps * units) as f64;
        let totals = self.log.totals().per(n);
        let after = Self::data_size(db).await?;
        let cost = Cost {
            totals,
            bytes_written: ((after - before) / n).max(0.0),
        };
        println!(
            "  {store:<18} {operation:<28} {:>7.1} commands {:>8.1} read {:>8.1} written {:>8.1} index entries {:>10.0} bytes",
            totals.commands,
            totals.documents_read,
            totals.documents_written,
            totals.index_entries_written,
            cost.bytes_written
        );
        self.costs
            .insert((store.to_owned(), operation.to_owned()), cost);
        Ok(())
    }
}

fn users(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:05}")).collect()
}

/// Measures every operation the model needs, against `uri`.
pub async fn run(uri: &str) -> Result<Costs, Error> {
    let log = CommandLog::default();
    let mut options = ClientOptions::parse(uri).await?;
    options.command_event_handler = Some(log.handler());
    let client = Client::with_options(options)?;
    let mut bench = Bench {
        client,
        log,
        costs: Costs::new(),
    };
    inboxes(&mut bench).await?;
    comments(&mut bench).await?;
    graph(&mut bench).await?;
    feed(&mut bench).await?;
    delivery(&mut bench).await?;
    Ok(bench.costs)
}

pub const INBOXES: [&str; 3] = ["fan-out on read", "fan-out on write", "buckets"];

async fn inboxes(bench: &mut Bench) -> Result<(), Error> {
    for strategy in INBOXES {
        let db = bench.database(&strategy.replace(['-', ' '], "_"));
        db.drop().await?;
        let inbox: Arc<DynInboxStore<String>> = match strategy {
            "fan-out on read" => Arc::new(FanOutOnRead::new(&db)),
            "fan-out on write" => Arc::new(FanOutOnWrite::new(&db)),
            _ => Arc::new(BucketedFanOut::new(&db)),
        };
        inbox.create_indexes().await?;
        let text = "a message of about sixty bytes, as a short chat line would be".to_owned();
        bench
            .measure(&db, strategy, "send to 1", 50, |i| {
                inbox.send(NewMessage::new(format!("s{i}"), ["reader"], text.clone()))
            })
            .await?;
        for n in [10, 100, 1000] {
            let to = users("r", n);
            let reps = if n == 1000 { 4 } else { 10 };
            bench
                .measure(&db, strategy, &format!("send to {n}"), reps, |i| {
                    inbox.send(NewMessage::new(format!("s{i}"), to.clone(), text.clone()))
                })
                .await?;
        }
        for i in 0..150 {
            inbox
                .send(NewMessage::new(format!("s{i}"), ["reader"], text.clone()))
                .await?;
        }
        bench
            .measure(&db, strategy, "newest 50", 20, |_| {
                inbox.inbox_page("reader", PageRequest::first(50))
            })
            .await?;
        bench
            .measure(&db, strategy, "count", 20, |_| inbox.count("reader"))
            .await?;
    }
    Ok(())
}

async fn comments(bench: &mut Bench) -> Result<(), Error> {
    type MakeStore = fn(&Database) -> Box<DynCommentStore>;
    let strategies: [(&str, MakeStore); 3] = [
        ("per-comment", |db| Box::new(PerComment::new(db))),
        ("embedded", |db| Box::new(Embedded::new(db))),
        ("hybrid pages", |db| Box::new(HybridPages::new(db))),
    ];
    for (strategy, make) in strategies {
        let db = bench.database(&format!("comments_{}", strategy.replace(['-', ' '], "_")));
        db.drop().await?;
        let store = make(&db);
        store.create_indexes().await?;
        store.create_discussion("d").await?;
        let author = Author::new("u1", "Ann");
        let text = "a comment of about sixty bytes, as a short reply would be..";
        bench
            .measure(&db, strategy, "post", 50, |_| {
                store.post("d", NewComment::new(author.clone(), text))
            })
            .await?;
        if let Some(threads) = store.threaded() {
            let page = store
                .chronological("d", Order::OldestFirst, PageRequest::first(1))
                .await?;
            let parent = page
                .items
                .first()
                .map(|comment| comment.link.clone())
                .unwrap_or_default();
            bench
                .measure(&db, strategy, "reply", 20, |_| {
                    threads.reply("d", &parent, NewComment::new(author.clone(), text))
                })
                .await?;
        }
        bench
            .measure(&db, strategy, "page of 50", 20, |_| {
                store.chronological("d", Order::OldestFirst, PageRequest::first(50))
            })
            .await?;
    }
    Ok(())
}

async fn graph(bench: &mut Bench) -> Result<(), Error> {
    let db = bench.database("graph");
    db.drop().await?;
    let graph = FollowGraph::new(&db);
    graph.create_indexes().await?;
    let people = users("u", 101);
    for user in &people {
        graph.add_user(user).await?;
    }
    bench
        .measure(&db, "graph", "follow", 100, |i| {
            graph.follow(&people[0], &people[i + 1])
        })
        .await?;
    bench
        .measure(&db, "graph", "following page of 100", 20, |_| {
            graph.following(&people[0], PageRequest::first(100))
        })
        .await?;
    bench
        .measure(&db, "graph", "unfollow", 50, |i| {
            graph.unfollow(&people[0], &people[i + 1])
        })
        .await?;
    Ok(())
}

async fn feed(bench: &mut Bench) -> Result<(), Error> {
    let db = bench.database("feed");
    db.drop().await?;
    let fans = users("f", 100);
    let follows = Arc::new(FollowList::from_pairs(
        fans.iter().map(|fan| (fan.clone(), "ann".to_owned())),
    ));
    let store: FeedStore<()> = FeedStore::builder(&db).follows(follows).build()?;
    store.create_indexes().await?;
    store.users().create(NewUser::new("ann", "ann")).await?;
    for fan in &fans {
        store
            .users()
            .create(NewUser::new(fan.as_str(), fan.as_str()))
            .await?;
    }
    let mut post_ids = Vec::new();
    for _ in 0..10 {
        let post = store
            .posts()
            .create(NewPost::new("ann", "Title", "A short post body.", ()))
            .await?;
        post_ids.push(post.id);
    }
    bench
        .measure_units(
            &db,
            "feed",
            "fan-out to 100 followers",
            1,
            post_ids.len(),
            |_| store.run_pending(),
        )
        .await?;
    let (posts, likes, feeds) = (store.posts(), store.likes(), store.feeds());
    bench
        .measure(&db, "feed", "create post", 10, |_| {
            posts.create(NewPost::new("ann", "Title", "A short post body.", ()))
        })
        .await?;
    store.run_pending().await?;
    bench
        .measure(&db, "feed", "like", 50, |i| {
            likes.like(post_ids[i % post_ids.len()], &fans[i])
        })
        .await?;
    let kinds: Vec<FeedKind> = fans.iter().map(|fan| FeedKind::User(fan.clone())).collect();
    bench
        .measure(&db, "feed", "feed page of 20", 20, |i| {
            feeds.page(&kinds[i], PageRequest::first(20))
        })
        .await?;
    Ok(())
}

/// The store name under which `Delivery` over `strategy` is measured.
pub fn delivery_store(strategy: &str) -> String {
    format!("delivery ({strategy})")
}

async fn delivery(bench: &mut Bench) -> Result<(), Error> {
    for strategy in &INBOXES[1..] {
        delivery_over(bench, strategy).await?;
    }
    Ok(())
}

/// `Delivery` over a copying inbox: an author with 500 followers, and (where the inbox allows
/// it) a celebrity with 550, merged in at read time; 50 of the author's followers do not follow
/// the celebrity.
async fn delivery_over(bench: &mut Bench, strategy: &str) -> Result<(), Error> {
    let store = delivery_store(strategy);
    let db = bench.database(&format!("delivery_{}", strategy.replace(['-', ' '], "_")));
    db.drop().await?;
    let graph = Arc::new(FollowGraph::new(&db));
    graph.create_indexes().await?;
    let buckets = strategy == "buckets";
    let inbox: Arc<DynInboxStore<String>> = if buckets {
        Arc::new(BucketedFanOut::new(&db))
    } else {
        Arc::new(FanOutOnWrite::new(&db))
    };
    let delivery: Delivery<String> = Delivery::builder(&db, graph.clone(), inbox)
        // Buckets keep arrival order, so they cannot merge celebrities in.
        .celebrity_followers(if buckets { None } else { Some(520) })
        .build()?;
    delivery.create_indexes().await?;
    let fans = users("f", 600);
    for user in ["ann", "star"]
        .iter()
        .map(|u| u.to_string())
        .chain(fans.iter().cloned())
    {
        graph.add_user(&user).await?;
        delivery.touch(&user).await?;
    }
    for fan in &fans[..500] {
        graph.follow(fan, "ann").await?;
    }
    // 550 followers make "star" a celebrity: never copied, merged in at read time.
    for fan in &fans[50..] {
        graph.follow(fan, "star").await?;
    }
    // First sightings queue inbox rebuilds: done before anything is measured.
    delivery.run_pending().await?;
    let text = "a post of about sixty bytes, as a short status would be....".to_owned();
    bench
        .measure(&db, &store, "post (author's side)", 10, |_| {
            delivery.post("ann", text.clone())
        })
        .await?;
    bench
        .measure_units(&db, &store, "fan-out to 500 followers", 1, 10, |_| {
            delivery.run_pending()
        })
        .await?;
    if !buckets {
        for _ in 0..5 {
            delivery.post("star", text.clone()).await?;
        }
        bench
            .measure(&db, &store, "timeline page of 20, a celebrity", 20, |i| {
                delivery.timeline(&fans[100 + i], PageRequest::first(20))
            })
            .await?;
    }
    bench
        .measure(&db, &store, "timeline page of 20", 20, |i| {
            delivery.timeline(&fans[i], PageRequest::first(20))
        })
        .await?;
    Ok(())
}
