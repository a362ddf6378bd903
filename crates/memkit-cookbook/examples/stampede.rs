//! The dog-pile benchmark: 1,000 concurrent callers on one expired key whose loader takes
//! 200 ms, under each protection policy.
//!
//! ```text
//! cargo run --release -p memkit-cookbook --example stampede
//! ```
//!
//! Part 1 runs on the embedded store under tokio's paused clock (deterministic: the 200 ms
//! and every back-off are virtual). Part 2 runs in real time on a multi-threaded runtime
//! against the embedded store, in-process memkitd and real memcached (`/usr/bin/memcached`,
//! started on a free loopback port and killed by PID; skipped when not installed).
//! The numbers are in `docs/cookbook/caching-stampede.md`.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use memkit_client::{Client, ClientConfig, ServerSpec};
use memkit_cookbook::caching::stampede::{StampedeReport, run, run_xfetch};
use memkit_cookbook::caching::{Cache, Policy, Protection};
use memkit_engine::{Embedded, EngineConfig};
use memkit_types::{Clock, DeleteOptions, Memcache};

const CALLERS: usize = 1000;
const LOADER: Duration = Duration::from_millis(200);

#[derive(Debug)]
struct TokioClock(u64, tokio::time::Instant);
impl Clock for TokioClock {
    fn now_millis(&self) -> u64 {
        self.0 + self.1.elapsed().as_millis() as u64
    }
}

fn policies() -> Vec<(&'static str, Policy)> {
    let base = Policy::ttl(Duration::from_millis(300))
        .no_jitter()
        .max_wait(Duration::from_secs(3));
    let lease = Policy::ttl(Duration::from_secs(30))
        .no_jitter()
        .max_wait(Duration::from_secs(3))
        .protection(Protection::Lease);
    vec![
        ("none", base.clone().protection(Protection::None)),
        ("lock + wait", base.clone()),
        ("lock + stale", base.clone().serve_stale()),
        // Leases expire server-side: a real TTL (the item is marked stale with `md I`).
        ("lease + wait", lease.clone()),
        ("lease + stale", lease.serve_stale()),
    ]
}

fn row(backend: &str, name: &str, r: &StampedeReport) {
    println!(
        "| {backend} | {name} | {} | {} | {} | {} | {} | {:.0?} | {:.0?} | {:.0?} |",
        r.loads,
        r.computed,
        r.waited + r.hits,
        r.stale,
        r.errors,
        r.quantile(0.5),
        r.quantile(0.99),
        r.quantile(1.0)
    );
}

/// Makes `key` expired for `policy`: soft-expired with a stale value for the lock
/// policies, marked stale server-side for leases, absent for "none".
async fn expire<M: Memcache + Clone + 'static>(
    cache: &Cache<M>,
    key: &str,
    p: &Policy,
    real: bool,
) {
    cache.put(key, p, &0u64).await.unwrap();
    match p.protection {
        Protection::Lease => {
            let o = DeleteOptions {
                invalidate: true,
                ..Default::default()
            };
            cache.store().delete_with(key.as_bytes(), &o).await.unwrap();
        }
        _ => {
            let d = p.ttl + Duration::from_millis(50);
            if real {
                tokio::time::sleep(d).await;
            } else {
                tokio::time::advance(d).await;
            }
        }
    }
}

async fn suite<M>(backend: &str, mc: M, real: bool, clock: Option<Arc<dyn Clock>>)
where
    M: Memcache + Clone + Send + Sync + 'static,
{
    for (i, (name, p)) in policies().into_iter().enumerate() {
        let mut b = Cache::builder(mc.clone()).seed(i as u64);
        if let Some(c) = &clock {
            b = b.clock(c.clone());
        }
        let cache = b.build();
        let key = format!("stampede:{backend}:{i}");
        expire(&cache, &key, &p, real).await;
        let r = run(&cache, &key, &p, CALLERS, LOADER).await;
        row(backend, name, &r);
    }
}

fn virtual_part() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(1_704_067_200_000, tokio::time::Instant::now()));
        let mc = Embedded::new(EngineConfig::with_memory(64 << 20).clock(clock.clone()));
        println!("## Virtual time (embedded store, tokio paused clock)\n");
        header();
        suite("embedded", mc.clone(), false, Some(clock.clone())).await;

        println!("\n### XFetch (beta = 1, delta = 200 ms, 1,000 callers over the last 5 s)\n");
        println!("| protection | runs | recompute before expiry | loads | median lead | reads that saw it expired |");
        println!("|---|---|---|---|---|---|");
        for (name, prot) in [("none", Protection::None), ("lock", Protection::Lock)] {
            let runs = 100;
            let (mut before, mut loads, mut expired) = (0, 0, 0);
            let mut leads = Vec::new();
            for seed in 0..runs {
                let cache = Cache::builder(mc.clone()).clock(clock.clone()).seed(seed).build();
                let p = Policy::ttl(Duration::from_secs(60))
                    .no_jitter()
                    .protection(prot)
                    .serve_stale()
                    .xfetch(1.0);
                let key = format!("xfetch:{name}:{seed}");
                let r = run_xfetch(&cache, &key, &p, CALLERS, Duration::from_millis(5), LOADER).await;
                if let Some(l) = r.lead {
                    before += 1;
                    leads.push(l);
                }
                loads += r.loads;
                expired += r.expired_reads;
            }
            leads.sort();
            let median = leads.get(leads.len() / 2).copied().unwrap_or_default();
            println!("| {name} | {runs} | {before} | {loads} | {median:.0?} | {expired} |");
        }
    });
}

struct Memcached(Child);
impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn client(port: u16) -> Client {
    Client::new(
        ServerSpec::new("127.0.0.1", port),
        ClientConfig {
            request_timeout: Duration::from_secs(5),
            pool_size: 4,
            ..ClientConfig::default()
        },
    )
}

fn header() {
    println!(
        "| backend | policy | loads | computed | fresh after wait | stale | errors | p50 | p99 | max |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
}

fn real_part() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("\n## Real time (2 worker threads)\n");
    header();
    rt.block_on(suite("embedded", Embedded::with_defaults(), true, None));

    // memkitd in-process on its own runtime.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    server_rt.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let settings = memkit_server::Settings::default();
        let shared =
            memkit_server::Shared::new(Arc::new(memkit_server::engine_for(&settings)), settings);
        memkit_server::run(listener, shared, std::future::pending()).await;
    });
    rt.block_on(suite("memkitd", client(port), true, None));
    server_rt.shutdown_background();

    if std::path::Path::new("/usr/bin/memcached").exists() {
        let port = free_port();
        let child = Command::new("/usr/bin/memcached")
            .args([
                "-l",
                "127.0.0.1",
                "-U",
                "0",
                "-m",
                "64",
                "-u",
                "nobody",
                "-p",
            ])
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn memcached");
        let _guard = Memcached(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "memcached did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        rt.block_on(suite("memcached", client(port), true, None));
    } else {
        println!("\n(/usr/bin/memcached not installed: skipped)");
    }
}

fn main() {
    println!("# Stampede: {CALLERS} callers, loader {LOADER:?}\n");
    virtual_part();
    real_part();
}
