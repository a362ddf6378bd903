//! The cache on a cluster of servers, through memkit-client: hot-key copies spread over
//! distinct servers by the cluster's own `home_server`, and by an explicit
//! [`CacheBuilder::placement`](crate::caching::CacheBuilder::placement) (every server's
//! `get_hits` rises under the reads), and the server holding a tag restarting
//! right after an invalidation (the reader goes to the master). Three in-process memkitd, and
//! three real memcached processes (restarted by PID), all started by `net.rs`'s harness on
//! 127.0.0.1. Real time; the assertions are about counts, sources and loader contexts.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use memkit_client::{ClientConfig, Cluster, ClusterConfig, Distribution, Placement, ServerSpec};
use memkit_testkit::TestServer;
use memkit_types::Memcache;

use super::net::{
    Memcached, start_memcached, start_memcached_on, start_memkitd, start_memkitd_on, stop_memkitd,
};
use crate::caching::{Cache, LoadContext, Policy, Reason, Source, copy_key, tag_key};

const SERVERS: usize = 3;
/// Reads of the hot key: with 3 copies read at random, some server gets none of 60 reads
/// with probability 3 * (2/3)^60, about 1e-10.
const READS: usize = 60;

fn cluster(ports: &[u16]) -> Cluster {
    let specs = ports
        .iter()
        .map(|&p| ServerSpec::new("127.0.0.1", p))
        .collect();
    Cluster::new(
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
    )
}

/// `get_hits` of every server, in server order.
async fn get_hits(cluster: &Cluster) -> Vec<u64> {
    let mut out = Vec::new();
    for (server, stats) in cluster.stats("").await {
        let stats = stats.unwrap_or_else(|e| panic!("stats of {server}: {e}"));
        let hits = stats
            .iter()
            .find(|(k, _)| k == "get_hits")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("{server} reports no get_hits"));
        out.push(hits);
    }
    out
}

/// A hot key with one copy per server, on a key whose plain copy names `<key>#0..#2` leave a
/// server out (what the hash alone decides): with the cluster's ring as the cache's
/// placement, the hot key's reads reach every server, and each copy sits on its own server:
/// placed by the cluster itself (`placed_by_ring` false: a plain `Cache::new(cluster)`), or
/// by a ring given to the builder.
async fn hot_copies_on_every_server(name: &str, cluster: &Cluster, placed_by_ring: bool) {
    let at = |k: &str| cluster.server_for(k.as_bytes()).expect("a live server");
    let key = (0..)
        .map(|i| format!("front-page:{i}"))
        .find(|k| {
            (0..SERVERS)
                .map(|i| at(&copy_key(k, i)))
                .collect::<HashSet<_>>()
                .len()
                < SERVERS
        })
        .unwrap();
    let builder = Cache::builder(cluster.clone()).seed(5);
    let cache = if placed_by_ring {
        let ring = Placement::build(Distribution::Ketama, cluster.servers(), &[]);
        builder.placement(move |k| ring.server_for(k)).build()
    } else {
        builder.build()
    };
    let name = &format!(
        "{name} ({})",
        if placed_by_ring { "ring" } else { "cluster" }
    );
    let p = Policy::ttl(Duration::from_secs(60)).hot_copies(SERVERS);
    let load = |_: LoadContext| async { Ok::<_, std::io::Error>("<html>".to_owned()) };

    let f = cache.fetch(&key, &p, load).await.unwrap();
    assert_eq!(f.source, Source::Computed, "{name}");
    let before = get_hits(cluster).await;
    for read in 0..READS {
        let f = cache.fetch(&key, &p, load).await.unwrap();
        assert_eq!(f.source, Source::Hit, "{name}: read {read}");
    }
    let after = get_hits(cluster).await;
    eprintln!("{name}: get_hits per server {before:?} -> {after:?}");
    for i in 0..SERVERS {
        assert!(
            after[i] > before[i],
            "{name}: server {i} served none of the hot key's {READS} reads \
             ({before:?} -> {after:?}): its copies are not on every server"
        );
    }
    assert_eq!(
        after.iter().sum::<u64>() - before.iter().sum::<u64>(),
        READS as u64,
        "{name}: one get per read"
    );
    assert_eq!(cache.stats().loads, 1, "{name}");

    let names = cache.item_keys(&key, &p).unwrap();
    assert_eq!(names[0], copy_key(&key, 0), "{name}");
    let servers: HashSet<usize> = names.iter().map(|k| at(k)).collect();
    assert_eq!(servers.len(), SERVERS, "{name}: {names:?}");
    for k in &names {
        let item = cluster.client(at(k)).get(k.as_bytes()).await.unwrap();
        assert!(item.is_some(), "{name}: copy {k} on its server");
    }
    assert!(cache.remove_with(&key, &p).await.unwrap(), "{name}");
    for k in &names {
        assert!(cluster.get(k.as_bytes()).await.unwrap().is_none(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_copies_on_every_server_memkitd() {
    let servers: Vec<_> = (0..SERVERS).map(|_| start_memkitd()).collect();
    let ports: Vec<u16> = servers.iter().map(|s| s.1).collect();
    let cluster = cluster(&ports);
    hot_copies_on_every_server("memkitd", &cluster, false).await;
    hot_copies_on_every_server("memkitd", &cluster, true).await;
    drop(servers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_copies_on_every_server_real_memcached() {
    let mut servers = Vec::new();
    for _ in 0..SERVERS {
        let Some(s) = start_memcached() else {
            return;
        };
        servers.push(s);
    }
    let ports: Vec<u16> = servers.iter().map(|s| s.1).collect();
    let cluster = cluster(&ports);
    hot_copies_on_every_server("memcached", &cluster, false).await;
    hot_copies_on_every_server("memcached", &cluster, true).await;
}

/// Waits (at most 5 s) until `server` answers on fresh connections: `2 * pool_size` gets in
/// a row through its own client, so the cluster's pooled connections to the old process are
/// replaced without the cluster ever counting a failure. Returns what the gets found.
async fn reconnect(cluster: &Cluster, server: usize, key: &str) -> bool {
    let c = cluster.client(server);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut in_a_row = 0;
    let mut found = false;
    while in_a_row < 4 {
        match c.get(key.as_bytes()).await {
            Ok(item) => {
                in_a_row += 1;
                found |= item.is_some();
            }
            Err(e) => {
                assert!(Instant::now() < deadline, "server {server} is back: {e}");
                in_a_row = 0;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    found
}

/// A value tagged `blog:7` lives on one server, the tag on another. The tag is invalidated,
/// and at once the server holding it restarts (`restart(i)`: stopped, a fresh process on the
/// same port): the tag is gone, the value is not. The reader finds the value's tag missing,
/// rebuilds, and its loader is told to read the master (a lost tag cannot say when it last
/// changed). A rebuild well after the replication lag reads the replica again.
async fn master_after_tag_server_restart(
    name: &str,
    cluster: &Cluster,
    restart: impl FnOnce(usize),
) {
    let tag = "blog:7";
    let holder = cluster.server_for(tag_key(tag).as_bytes()).unwrap();
    let key = (0..)
        .map(|i| format!("posts:{i}"))
        .find(|k| cluster.server_for(k.as_bytes()) != Some(holder))
        .unwrap();
    let cache = Cache::new(cluster.clone());
    let p = Policy::ttl(Duration::from_secs(60))
        .tags([tag])
        .replica_lag(Duration::from_secs(1));
    // The loader records why it ran and whether it was told to read the master.
    let told = std::sync::Mutex::new(Vec::new());
    let load = |ctx: LoadContext| {
        told.lock().unwrap().push((ctx.reason, ctx.read_master));
        async { Ok::<_, std::io::Error>(1u8) }
    };
    let last = || *told.lock().unwrap().last().expect("the loader ran");

    cache.invalidate_tag(tag).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let f = cache.fetch(&key, &p, load).await.unwrap();
    assert_eq!(
        (f.source, last()),
        (Source::Computed, (Reason::Miss, false))
    );
    let f = cache.fetch(&key, &p, load).await.unwrap();
    assert_eq!(f.source, Source::Hit, "{name}");

    cache.invalidate_tag(tag).await.unwrap();
    tokio::task::block_in_place(|| restart(holder));
    assert!(
        !reconnect(cluster, holder, &tag_key(tag)).await,
        "{name}: the restarted server {holder} still has the tag"
    );
    let f = cache.fetch(&key, &p, load).await.unwrap();
    assert_eq!(
        (f.source, last()),
        (Source::Computed, (Reason::TagChanged, true)),
        "{name}: the tag was invalidated and then lost with its server: the rebuild must read \
         the master"
    );
    for h in cluster.health() {
        assert_eq!((h.failures, h.down), (0, false), "{name}: {h:?}");
    }

    tokio::time::sleep(Duration::from_millis(1_100)).await;
    cache.remove(&key).await.unwrap();
    let f = cache.fetch(&key, &p, load).await.unwrap();
    assert_eq!(
        (f.source, last()),
        (Source::Computed, (Reason::Miss, false)),
        "{name}: after the lag, the replica"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_after_tag_server_restart_memkitd() {
    let mut servers: Vec<Option<TestServer>> = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..SERVERS {
        let (server, port) = start_memkitd();
        servers.push(Some(server));
        ports.push(port);
    }
    let c = cluster(&ports);
    master_after_tag_server_restart("memkitd", &c, |i| {
        stop_memkitd(servers[i].take().unwrap());
        servers[i] = Some(start_memkitd_on(ports[i]).0);
    })
    .await;
    drop(servers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_after_tag_server_restart_real_memcached() {
    let mut servers: Vec<Option<Memcached>> = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..SERVERS {
        let Some((m, port)) = start_memcached() else {
            return;
        };
        servers.push(Some(m));
        ports.push(port);
    }
    let c = cluster(&ports);
    master_after_tag_server_restart("memcached", &c, |i| {
        // Killed by PID and waited for (Memcached's drop), then a fresh one on its port.
        drop(servers[i].take());
        servers[i] = Some(start_memcached_on(ports[i]));
    })
    .await;
}
