//! The caching techniques through memkit-client against in-process memkitd and real
//! memcached 1.6 (the test harness's: free loopback ports, stopped on drop).
//! Real time here: the loader really takes 200 ms; the assertions are about counts and
//! sources, never about durations.

use std::sync::Arc;
use std::time::Duration;

use memkit_client::{Client, ClientConfig, Cluster, ClusterConfig, ServerSpec};
use memkit_testkit::{TestServer, memcached};
use memkit_types::{DeleteOptions, Exptime, GetOptions, Memcache};

use crate::caching::stampede::run;
use crate::caching::{Cache, Policy, Protection, Source, copy_key, tag_key};

const CALLERS: usize = 1000;
const LOADER: Duration = Duration::from_millis(200);
/// The loader of the stale-serving runs: long enough that most of the 1000 callers start while
/// it runs even on a loaded 2-core machine (at 200 ms, CI once started more than half of them
/// after the load had finished, which answers them fresh hits instead of stale ones).
const STALE_LOADER: Duration = Duration::from_secs(1);

pub(super) use memkit_testkit::memcached::Memcached;

/// memcached on a free port; `None` when it is not installed (a failure under CI).
pub(super) fn start_memcached() -> Option<(Memcached, u16)> {
    memcached::spawn(&[]).map(|m| {
        let port = m.port;
        (m, port)
    })
}

/// memcached on `port` (also the port of one just killed: memcached binds with
/// SO_REUSEADDR). Call only when it is installed.
pub(super) fn start_memcached_on(port: u16) -> Memcached {
    memcached::spawn_on(port, &[]).expect("memcached is installed")
}

/// memkitd in-process on a free port, stopped (every socket closed) when dropped.
pub(super) fn start_memkitd() -> (TestServer, u16) {
    start_memkitd_on(0)
}

/// memkitd on `port` (0: a free one), with an empty store; a fresh server can take the port
/// of one just stopped ([`stop_memkitd`]).
pub(super) fn start_memkitd_on(port: u16) -> (TestServer, u16) {
    let s = TestServer::start_on(port, &[]);
    let port = s.port();
    (s, port)
}

/// Stops an in-process memkitd and returns once its listener and connections are closed.
pub(super) fn stop_memkitd(server: TestServer) {
    drop(server);
}

pub(super) fn client(port: u16) -> Client {
    Client::new(
        ServerSpec::new("127.0.0.1", port),
        ClientConfig {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            pool_size: 4,
            ..ClientConfig::default()
        },
    )
}

/// One load, and every other caller answered at once: stale while the load runs, or the
/// fresh value if it only got to read after the load (a loaded machine can start the last
/// of 1000 callers more than the loader's time late). Nobody waits, nobody fails.
fn assert_stale_served(name: &str, r: &crate::caching::stampede::StampedeReport) {
    assert_eq!((r.loads, r.computed, r.errors), (1, 1, 0), "{name}: {r:?}");
    assert_eq!(r.stale + r.hits, CALLERS - 1, "{name}: {r:?}");
    assert!(
        r.stale >= CALLERS / 2,
        "{name}: stale serving unused: {r:?}"
    );
}

/// Every technique against one server.
async fn suite(name: &str, mc: Client) {
    let cache = Cache::builder(mc.clone()).seed(1).build();
    let wait = Policy::ttl(Duration::from_secs(30))
        .no_jitter()
        .max_wait(Duration::from_secs(3));
    lock_policy(name, &cache, &wait).await;
    leases(name, &cache, &mc, &wait).await;
    tags(name, &cache, &mc).await;
}

/// The rebuild lock: a cold key, a soft-expired key with waiting, then with stale serving.
async fn lock_policy(name: &str, cache: &Cache<Client>, wait: &Policy) {
    // Lock policy, cold key: exactly one load, nobody stale, nobody timed out.
    let r = run(cache, "net:cold", wait, CALLERS, LOADER).await;
    eprintln!(
        "{name} lock/wait cold: {r:?}",
        r = (r.loads, r.hits, r.waited, r.computed, r.stale, r.errors)
    );
    assert_eq!(
        (r.loads, r.errors, r.stale, r.computed),
        (1, 0, 0, 1),
        "{name}"
    );

    // Lock policy, soft-expired key, waiting: one load, every caller gets a value. (The
    // rebuilt value gets the 30 s TTL: with the 50 ms one it would expire again while late
    // callers still arrive, and rightly be rebuilt again.)
    let soft = Policy::ttl(Duration::from_millis(50)).no_jitter();
    cache.put("net:expired", &soft, &0u64).await.unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let r = run(cache, "net:expired", wait, CALLERS, LOADER).await;
    eprintln!(
        "{name} lock/wait expired: {r:?}",
        r = (r.loads, r.hits, r.waited, r.computed, r.stale, r.errors)
    );
    assert_eq!((r.loads, r.errors, r.computed), (1, 0, 1), "{name}: {r:?}");

    // Lock policy, soft-expired key, stale serving: one load, everyone else stale. (The
    // rebuild gets the 30 s TTL, as above: on a busy machine the last callers can start more
    // than 50 ms after the rebuild.)
    let short = Policy::ttl(Duration::from_millis(50))
        .no_jitter()
        .serve_stale();
    cache.put("net:stale", &short, &0u64).await.unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let r = run(
        cache,
        "net:stale",
        &wait.clone().serve_stale(),
        CALLERS,
        STALE_LOADER,
    )
    .await;
    eprintln!(
        "{name} lock/stale: {r:?}",
        r = (r.loads, r.computed, r.stale, r.hits, r.errors)
    );
    assert_stale_served(name, &r);
}

/// Leases (`mg N/R`, `W/X/Z`): a cold key, then one marked stale server-side.
async fn leases(name: &str, cache: &Cache<Client>, mc: &Client, wait: &Policy) {
    // Cold: one load.
    let lease = wait.clone().protection(Protection::Lease);
    let r = run(cache, "net:lease", &lease, CALLERS, LOADER).await;
    eprintln!(
        "{name} lease cold: {r:?}",
        r = (r.loads, r.waited, r.computed, r.errors)
    );
    assert_eq!(
        (r.loads, r.errors, r.stale, r.computed),
        (1, 0, 0, 1),
        "{name}"
    );
    // Marked stale server-side: one winner, the rest served stale.
    let o = DeleteOptions {
        invalidate: true,
        ..Default::default()
    };
    mc.delete_with(b"net:lease", &o).await.unwrap();
    let r = run(
        cache,
        "net:lease",
        &lease.clone().serve_stale(),
        CALLERS,
        STALE_LOADER,
    )
    .await;
    eprintln!(
        "{name} lease stale: {r:?}",
        r = (r.loads, r.computed, r.stale, r.hits, r.errors)
    );
    assert_stale_served(name, &r);
}

/// Tags: exactly the carriers are invalidated, also after a tag key is evicted.
async fn tags(name: &str, cache: &Cache<Client>, mc: &Client) {
    let pa = Policy::ttl(Duration::from_secs(60)).tags(["a"]);
    let pab = Policy::ttl(Duration::from_secs(60)).tags(["a", "b"]);
    let pb = Policy::ttl(Duration::from_secs(60)).tags(["b"]);
    let read = |key: &'static str, p: Policy| {
        let cache = cache.clone();
        async move {
            cache
                .fetch(key, &p, |_| async { Ok::<_, std::io::Error>(1u8) })
                .await
                .unwrap()
                .source
        }
    };
    for (k, p) in [("t:a", &pa), ("t:ab", &pab), ("t:b", &pb)] {
        assert_eq!(read(k, p.clone()).await, Source::Computed);
        assert_eq!(read(k, p.clone()).await, Source::Hit);
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    cache.invalidate_tag("a").await.unwrap();
    assert_eq!(read("t:a", pa.clone()).await, Source::Computed, "{name}");
    assert_eq!(read("t:ab", pab.clone()).await, Source::Computed, "{name}");
    assert_eq!(read("t:b", pb.clone()).await, Source::Hit, "{name}");
    mc.delete(tag_key("b").as_bytes()).await.unwrap();
    assert_eq!(
        read("t:ab", pab.clone()).await,
        Source::Computed,
        "{name}: evicted tag"
    );
    assert_eq!(
        read("t:b", pb.clone()).await,
        Source::Computed,
        "{name}: evicted tag"
    );
    assert_eq!(read("t:a", pa.clone()).await, Source::Hit, "{name}");
}

/// Takes `key`'s rebuild as a caller that then dies: the rebuild lock (`Protection::Lock`)
/// or the lease placeholder (`Protection::Lease`), living `ttl` seconds, never released.
pub(super) async fn die_holding_the_rebuild<M: Memcache + Clone + 'static>(
    mc: &M,
    key: &str,
    protection: Protection,
    ttl: u32,
) {
    if protection == Protection::Lease {
        let o = GetOptions {
            vivify: Some(Exptime::secs(ttl)),
            ..Default::default()
        };
        let won = mc.get_with(key.as_bytes(), &o).await.unwrap().unwrap();
        assert!(won.win, "the dying caller wins the lease");
    } else {
        let lock = crate::Lock::with_options(mc.clone(), key, crate::LockOptions::ttl_secs(ttl));
        lock.try_lock().await.unwrap().expect("free").forget();
    }
}

/// Real time: 1,000 callers on a cold key whose loader (2 s) is slower than `max_wait`
/// (200 ms of back-off), then on a key whose winner died holding a 2 s lock or lease. One
/// load each, nobody fails.
async fn no_herd_on_timeout(name: &str, mc: Client) {
    let cache = Cache::builder(mc.clone()).seed(2).build();
    let counts = |r: &crate::caching::stampede::StampedeReport| {
        (r.loads, r.computed, r.errors, r.waited, r.hits)
    };
    for protection in [Protection::Lock, Protection::Lease] {
        let p = Policy::ttl(Duration::from_secs(30))
            .no_jitter()
            .protection(protection)
            .max_wait(Duration::from_millis(200))
            .lock_ttl(4);
        let slow = format!("net:slow:{protection:?}");
        let r = run(&cache, &slow, &p, CALLERS, Duration::from_secs(2)).await;
        eprintln!(
            "{name} {slow}: (loads, computed, errors, waited, hits) {:?}",
            counts(&r)
        );
        assert_eq!(
            (r.loads, r.computed, r.errors),
            (1, 1, 0),
            "{name} {slow}: {:?}",
            counts(&r)
        );
        let dead = format!("net:dead:{protection:?}");
        die_holding_the_rebuild(&mc, &dead, protection, 2).await;
        let r = run(&cache, &dead, &p, CALLERS, Duration::from_millis(50)).await;
        eprintln!(
            "{name} {dead}: (loads, computed, errors, waited, hits) {:?}",
            counts(&r)
        );
        assert_eq!(
            (r.loads, r.computed, r.errors),
            (1, 1, 0),
            "{name} {dead}: {:?}",
            counts(&r)
        );
    }
}

/// A value tagged `blog:9` is built, the tag invalidated, and then the tag key lost as when
/// the server holding it restarts: the rebuild that follows reads the master. A second
/// rebuild, well after the replication lag, finds the tag re-created on first use and reads
/// the replica.
pub(super) async fn master_after_tag_loss<M: Memcache + Clone + 'static>(
    name: &str,
    cache: &Cache<M>,
) {
    let p = Policy::ttl(Duration::from_secs(60))
        .tags(["blog:9"])
        .replica_lag(Duration::from_secs(1));
    let master =
        |ctx: crate::caching::LoadContext| async move { Ok::<_, std::io::Error>(ctx.read_master) };
    cache.invalidate_tag("blog:9").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert!(
        !cache.get_or_compute("posts:9", &p, master).await.unwrap(),
        "{name}"
    );
    cache.invalidate_tag("blog:9").await.unwrap();
    cache
        .store()
        .delete(tag_key("blog:9").as_bytes())
        .await
        .unwrap();
    assert!(
        cache.get_or_compute("posts:9", &p, master).await.unwrap(),
        "{name}: the rebuild after the tag was lost must read the master"
    );
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    cache.remove("posts:9").await.unwrap();
    assert!(
        !cache.get_or_compute("posts:9", &p, master).await.unwrap(),
        "{name}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_after_tag_loss_memkitd() {
    let (_server, port) = start_memkitd();
    master_after_tag_loss("memkitd", &Cache::new(client(port))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_after_tag_loss_real_memcached() {
    let Some((_server, port)) = start_memcached() else {
        return;
    };
    master_after_tag_loss("memcached", &Cache::new(client(port))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_rechecks_memkitd() {
    let (_server, port) = start_memkitd();
    let clock = Arc::new(memkit_types::SystemClock);
    super::policies::refresh_rechecks("memkitd", client(port), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_rechecks_real_memcached() {
    let Some((_server, port)) = start_memcached() else {
        return;
    };
    let clock = Arc::new(memkit_types::SystemClock);
    super::policies::refresh_rechecks("memcached", client(port), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_load_invalidated_memkitd() {
    let (_server, port) = start_memkitd();
    let clock = Arc::new(memkit_types::SystemClock);
    super::policies::invalidation_during_a_lease_load("memkitd", client(port), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_load_invalidated_real_memcached() {
    let Some((_server, port)) = start_memcached() else {
        return;
    };
    let clock = Arc::new(memkit_types::SystemClock);
    super::policies::invalidation_during_a_lease_load("memcached", client(port), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_is_not_a_herd_memkitd() {
    let (_server, port) = start_memkitd();
    no_herd_on_timeout("memkitd", client(port)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_is_not_a_herd_real_memcached() {
    let Some((_server, port)) = start_memcached() else {
        return;
    };
    no_herd_on_timeout("memcached", client(port)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caching_against_memkitd() {
    let (_server, port) = start_memkitd();
    suite("memkitd", client(port)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caching_against_real_memcached() {
    let Some((_server, port)) = start_memcached() else {
        return;
    };
    suite("memcached", client(port)).await;
}

/// Replicated important keys through a 3-server cluster of memkitd: the cache's own copies
/// (`Policy::replicas`), and the cluster's replication (`Cluster::replicated`) as `M`; the
/// server holding the first copy is shut down and both entries are still read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicated_entry_survives_a_dead_server() {
    let mut servers: Vec<Option<TestServer>> = Vec::new();
    let mut specs = Vec::new();
    for _ in 0..3 {
        let (server, port) = start_memkitd();
        servers.push(Some(server));
        specs.push(ServerSpec::new("127.0.0.1", port));
    }
    let cluster = Cluster::new(
        specs,
        ClusterConfig {
            client: ClientConfig {
                connect_timeout: Duration::from_secs(1),
                request_timeout: Duration::from_secs(2),
                pool_size: 2,
                ..ClientConfig::default()
            },
            ..ClusterConfig::default()
        },
    );
    let at = |k: &str| cluster.server_for(k.as_bytes()).unwrap();
    // A key whose copies 0 and 1 hash to different servers (usual, not guaranteed: see
    // docs/cookbook/caching-hot-keys.md), and a key on copy 0's server for the cluster's
    // own replication.
    let key = (0..)
        .map(|i| format!("important:{i}"))
        .find(|k| at(&copy_key(k, 0)) != at(&copy_key(k, 1)))
        .unwrap();
    let dead = at(&copy_key(&key, 0));
    let key2 = (0..)
        .map(|i| format!("session:{i}"))
        .find(|k| at(k) == dead)
        .unwrap();

    let load = |v: u32| move |_| async move { Ok::<_, std::io::Error>(v) };
    let copies = Cache::new(cluster.clone());
    let p = Policy::ttl(Duration::from_secs(60)).replicas(3);
    let by_cluster = Cache::new(cluster.replicated(2));
    let one = Policy::ttl(Duration::from_secs(60));
    let f = copies.fetch(&key, &p, load(1)).await.unwrap();
    assert_eq!((f.value, f.source), (1, Source::Computed));
    let f = by_cluster.fetch(&key2, &one, load(1)).await.unwrap();
    assert_eq!((f.value, f.source), (1, Source::Computed));

    stop_memkitd(servers[dead].take().unwrap());
    let gone = cluster.client(dead).get(copy_key(&key, 0).as_bytes()).await;
    assert!(gone.is_err(), "server {dead} is down: {gone:?}");
    for round in 0..5 {
        let f = copies.fetch(&key, &p, load(2)).await.unwrap();
        assert_eq!(
            (f.value, f.source),
            (1, Source::Hit),
            "cache copies, read {round}"
        );
        let f = by_cluster.fetch(&key2, &one, load(2)).await.unwrap();
        assert_eq!(
            (f.value, f.source),
            (1, Source::Hit),
            "Cluster::replicated, read {round}"
        );
    }
    assert_eq!((copies.stats().loads, by_cluster.stats().loads), (1, 1));
}
