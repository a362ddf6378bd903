//! A small web backend's data layer on memkit's cookbook: a cached database query with
//! stampede protection and tag invalidation, a view counter, an online counter and an event
//! log. Requests are simulated (no HTTP server, to keep the example about the cache).
//!
//! ```text
//! cargo run -p memkit-tools --example backend                       # embedded store
//! cargo run -p memkit-tools --example backend -- 127.0.0.1:11211    # memkitd (or memcached)
//! ```
//!
//! Everything below `main` is generic over `M: Memcache`; the store is chosen on one line
//! (see `main`). The program checks what it prints and exits non-zero if the cache misbehaves,
//! so CI runs it in both modes (`tests/operations/run.sh`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memkit_client::{Cluster, ClusterConfig, Distribution, ServerSpec};
use memkit_cookbook::caching::{Cache, FileTrace, Policy, Protection};
use memkit_cookbook::{Event, EventLog, OnlineCounter, ViewCounter};
use memkit_engine::Embedded;
use memkit_types::{Clock, Memcache, SystemClock};
use serde::{Deserialize, Serialize};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let servers = std::env::args().nth(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        match servers {
            // THE line: the same application on the embedded store ...
            None => backend(Embedded::with_defaults(), "embedded store").await,
            // ... or on a memkitd (or memcached) cluster.
            Some(list) => backend(cluster(&list)?, &list).await,
        }
    })
}

/// A pool placed like libmemcached's weighted ketama (pylibmc, php-memcached agree).
fn cluster(list: &str) -> Result<Cluster, BoxError> {
    let servers = ServerSpec::parse_list(list)?;
    Ok(Cluster::new(
        servers,
        ClusterConfig::new(Distribution::Ketama),
    ))
}

/// The "database": posts with a slow query, and a count of queries run.
#[derive(Debug, Default)]
struct Db {
    posts: Mutex<HashMap<u64, Post>>,
    queries: AtomicU64,
    views: Mutex<HashMap<u64, u64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Post {
    id: u64,
    title: String,
}

impl Db {
    async fn load_post(&self, id: u64) -> Result<Post, BoxError> {
        self.queries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(50)).await; // a slow query
        let posts = self.posts.lock().unwrap();
        posts.get(&id).cloned().ok_or_else(|| "no such post".into())
    }

    fn update_title(&self, id: u64, title: &str) {
        if let Some(p) = self.posts.lock().unwrap().get_mut(&id) {
            p.title = title.to_owned();
        }
    }

    fn stored_views(&self, id: u64) -> u64 {
        self.views.lock().unwrap().get(&id).copied().unwrap_or(0)
    }
}

/// One "request happened" record for the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Viewed {
    at: u64,
    post: u64,
    user: u64,
}

impl Event for Viewed {
    fn when(&self) -> u64 {
        self.at
    }
}

/// The application: request handlers over one store.
struct App<M> {
    db: Arc<Db>,
    cache: Cache<M>,
    store: M,
    online: OnlineCounter<M>,
    log: EventLog<M, Viewed>,
    clock: Arc<dyn Clock>,
}

impl<M: Memcache + Clone + 'static> App<M> {
    /// `GET /posts/{id}` as user `user`: the post (cached, tagged `post:{id}`), its view
    /// count, an online-session count and an event.
    async fn get_post(&self, id: u64, user: u64) -> Result<(Post, u64), BoxError> {
        let policy = Policy::ttl(Duration::from_secs(300))
            .protection(Protection::Lock)
            .max_wait(Duration::from_secs(2))
            .tags([format!("post:{id}")]);
        let db = self.db.clone();
        let post: Post = self
            .cache
            .get_or_compute(&format!("post:{id}"), &policy, move |_ctx| async move {
                db.load_post(id).await
            })
            .await?;
        let db = self.db.clone();
        let views = ViewCounter::new(self.store.clone(), &format!("post:{id}"))
            .hit(move || async move { Ok::<_, BoxError>(db.stored_views(id)) })
            .await?;
        self.online.hit().await?;
        self.log
            .put(&Viewed {
                at: self.clock.now_secs(),
                post: id,
                user,
            })
            .await?;
        Ok((post, views))
    }

    /// `POST /posts/{id}`: update the database, then drop every cached value tagged with it.
    async fn edit_post(&self, id: u64, title: &str) -> Result<(), BoxError> {
        self.db.update_title(id, title);
        self.cache.invalidate_tag(&format!("post:{id}")).await?;
        Ok(())
    }
}

fn check(ok: bool, what: &str) -> Result<(), BoxError> {
    if ok {
        println!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("FAILED: {what}").into())
    }
}

async fn backend<M: Memcache + Clone + 'static>(store: M, name: &str) -> Result<(), BoxError> {
    println!("memkit backend example on {name}");
    let db = Arc::new(Db::default());
    db.posts.lock().unwrap().insert(
        1,
        Post {
            id: 1,
            title: "Hello, memkit".into(),
        },
    );
    db.views.lock().unwrap().insert(1, 1000); // views counted before the cache existed
    // A run id keeps keys apart when the example runs twice against the same servers.
    let run = SystemClock.now_millis();
    let started = SystemClock.now_secs();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let trace_dir = std::env::temp_dir().join("memkit-backend-trace");
    std::fs::create_dir_all(&trace_dir)?;
    let _ = std::fs::remove_file(trace_dir.join("posts.trace"));
    let cache = Cache::builder(store.clone())
        .trace(Arc::new(FileTrace::prefix_group(
            &trace_dir, "post:", "posts",
        )))
        .build();
    let app = Arc::new(App {
        db: db.clone(),
        cache,
        store: store.clone(),
        online: OnlineCounter::new(store.clone(), &format!("site{run}"), 6, 60, clock.clone()),
        log: EventLog::new(store.clone(), &format!("views{run}"), 10, 10, clock.clone()),
        clock,
    });
    // Start clean for post 1 (another run may have cached it on these servers).
    app.cache.remove("post:1").await?;
    let _ = store
        .delete(ViewCounter::new(store.clone(), "post:1").key())
        .await?;

    println!("1. 50 concurrent GET /posts/1 on a cold cache");
    let mut tasks = Vec::new();
    for user in 0..50u64 {
        let app = app.clone();
        tasks.push(tokio::task::spawn_local(async move {
            app.get_post(1, user).await
        }));
    }
    let mut max_views = 0;
    for t in tasks {
        let (post, views) = t.await??;
        assert_eq!(post.title, "Hello, memkit");
        max_views = max_views.max(views);
    }
    let q = db.queries.load(Ordering::Relaxed);
    println!("   database queries: {q}; views: {max_views}");
    check(
        q == 1,
        "stampede protection: one query for 50 concurrent misses",
    )?;
    check(
        max_views == 1050,
        "view counter seeded from the database, +50",
    )?;

    println!("2. 10 more GETs: cache hits");
    for user in 50..60 {
        app.get_post(1, user).await?;
    }
    check(
        db.queries.load(Ordering::Relaxed) == 1,
        "no database query on hits",
    )?;

    println!("3. POST /posts/1 (new title): the tag is invalidated");
    app.edit_post(1, "Hello again").await?;
    let (post, views) = app.get_post(1, 60).await?;
    println!("   title now {:?}; views {views}", post.title);
    check(
        post.title == "Hello again",
        "tag invalidation: the edit is visible",
    )?;
    check(
        db.queries.load(Ordering::Relaxed) == 2,
        "exactly one rebuild after the edit",
    )?;

    println!("4. online counter and event log");
    let online = app.online.hit().await?;
    let same_minute = app.online.period_at(started) == app.online.period_at(SystemClock.now_secs());
    let events = app.log.fetch(None, None).await?;
    println!(
        "   sessions this minute: {online}; events logged: {}",
        events.len()
    );
    // (A run that straddles a minute boundary counts in two slots.)
    check(
        online == 62 || (!same_minute && online <= 62),
        "61 requests + 1 counted this minute",
    )?;
    check(events.len() == 61, "every request is in the event log")?;
    check(
        events.iter().filter(|e| e.post == 1).count() == 61,
        "events decode",
    )?;

    let s = app.cache.stats();
    println!(
        "cache: {} hits, {} misses, {} waited for another caller's rebuild, {} loads",
        s.hits, s.misses, s.waited_hits, s.loads
    );
    println!(
        "trace of post:* keys: memkit trace {}",
        trace_dir.join("posts.trace").display()
    );
    println!("all checks passed");
    Ok(())
}
