//! Replicas, hot keys, the gutter pool and the classic dialect, checked server by server.

mod common;

use std::time::Duration;

use common::{Memcached, Memkitd, config};
use memkit_client::cluster::{Gutter, HotKeys};
use memkit_client::{Client, ClientConfig, Cluster, ClusterConfig, Dialect, Distribution};
use memkit_types::{Error, Exptime, GetOptions, Memcache, Ttl};

fn three() -> (Vec<Memkitd>, Cluster, ClusterConfig) {
    let servers: Vec<Memkitd> = (0..3).map(|_| Memkitd::start()).collect();
    let cfg = ClusterConfig {
        client: config(),
        ..ClusterConfig::new(Distribution::Ketama)
    };
    let c = Cluster::new(servers.iter().map(Memkitd::spec).collect(), cfg.clone());
    (servers, c, cfg)
}

async fn holders(c: &Cluster, key: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    for i in 0..c.servers().len() {
        if c.client(i).get(key).await.unwrap().is_some() {
            out.push(i);
        }
    }
    out
}

/// Each server's `get_hits`.
async fn get_hits(c: &Cluster) -> Vec<u64> {
    let mut out = Vec::new();
    for i in 0..c.servers().len() {
        let stats = c.client(i).stats("").await.unwrap();
        let (_, v) = stats.iter().find(|(k, _)| k == "get_hits").unwrap();
        out.push(v.parse().unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_call_replicas_write_two_servers_and_delete_both() {
    let (_s, c, _) = three();
    let r = c.replicated(2);
    r.set(b"session:1", b"alice", 0, Exptime::NEVER)
        .await
        .unwrap();
    let h = holders(&c, b"session:1").await;
    assert_eq!(h.len(), 2);
    assert!(h.contains(&c.server_for(b"session:1").unwrap()));
    // The first copy gone: still readable from the second.
    let primary = c.server_for(b"session:1").unwrap();
    c.client(primary).delete(b"session:1").await.unwrap();
    assert_eq!(
        r.get_value(b"session:1").await.unwrap().as_deref(),
        Some(&b"alice"[..])
    );
    assert!(r.delete(b"session:1").await.unwrap());
    assert!(holders(&c, b"session:1").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_key_copies_sit_on_distinct_servers() {
    let servers: Vec<Memkitd> = (0..3).map(|_| Memkitd::start()).collect();
    let cfg = ClusterConfig {
        client: config(),
        hot_keys: HotKeys {
            rules: vec![(b"front".to_vec(), 3)],
        },
        ..ClusterConfig::new(Distribution::Ketama)
    };
    let c = Cluster::new(servers.iter().map(Memkitd::spec).collect(), cfg);
    c.set(b"front", b"page", 0, Exptime::NEVER).await.unwrap();
    let mut where_: Vec<usize> = Vec::new();
    for i in 0..3 {
        let name = format!("front{i}");
        let h = holders(&c, name.as_bytes()).await;
        assert_eq!(h.len(), 1, "{name} on {h:?}");
        where_.push(h[0]);
    }
    where_.sort();
    assert_eq!(where_, vec![0, 1, 2], "copies on distinct servers");
    // Reads pick a copy at random: 90 reads reach every server (all on two of three by
    // chance: 3 x (2/3)^90, about 4e-16).
    let before = get_hits(&c).await;
    for _ in 0..90 {
        assert_eq!(
            c.get_value(b"front").await.unwrap().as_deref(),
            Some(&b"page"[..])
        );
    }
    let after = get_hits(&c).await;
    let spread: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(spread.iter().sum::<u64>(), 90, "{spread:?}");
    assert!(spread.iter().all(|&n| n > 0), "reads per server {spread:?}");
    let got = c
        .get_multi(&[b"front", b"other"], &GetOptions::default())
        .await
        .unwrap();
    assert!(got[0].is_some() && got[1].is_none());
    assert!(c.delete(b"front").await.unwrap());
    for i in 0..3 {
        assert!(holders(&c, format!("front{i}").as_bytes()).await.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gutter_takes_over_with_short_ttls() {
    let mut main: Vec<Memkitd> = (0..2).map(|_| Memkitd::start()).collect();
    let gutter = Memkitd::start();
    let cfg = ClusterConfig {
        client: ClientConfig {
            request_timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(500),
            ..ClientConfig::default()
        },
        remap_on_failure: false,
        gutter: Some(Gutter {
            servers: vec![gutter.spec()],
            ttl: Duration::from_secs(10),
        }),
        ..ClusterConfig::new(Distribution::Ketama)
    };
    let c = Cluster::new(main.iter().map(Memkitd::spec).collect(), cfg);
    let key = (0..100)
        .map(|i| format!("g:{i}"))
        .find(|k| c.server_for(k.as_bytes()) == Some(0))
        .unwrap();
    main[0].kill();
    // Writes land in the gutter with the TTL capped, reads find them there.
    c.set(key.as_bytes(), b"v", 0, Exptime::NEVER)
        .await
        .unwrap();
    assert_eq!(
        c.get_value(key.as_bytes()).await.unwrap().as_deref(),
        Some(&b"v"[..])
    );
    let direct = Client::new(gutter.spec(), config());
    let meta = GetOptions {
        meta: true,
        ..Default::default()
    };
    let item = direct
        .get_with(key.as_bytes(), &meta)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(item.ttl, Some(Ttl::Secs(1..=10))),
        "{:?}",
        item.ttl
    );
    assert!(c.delete(key.as_bytes()).await.unwrap());
    assert_eq!(direct.get(key.as_bytes()).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_dialect_against_memcached() {
    let Some(m) = Memcached::start() else { return };
    let c = Client::new(
        m.spec(),
        ClientConfig {
            dialect: Dialect::Classic,
            ..config()
        },
    );
    c.set(b"a", b"1", 5, Exptime::NEVER).await.unwrap();
    c.set(b"b", b"2", 0, Exptime::NEVER).await.unwrap();
    let got = c
        .get_multi(&[b"a", b"x", b"b", b"a"], &GetOptions::default())
        .await
        .unwrap();
    let vals: Vec<Option<&[u8]>> = got
        .iter()
        .map(|i| i.as_ref().map(|i| &i.value[..]))
        .collect();
    assert_eq!(vals, vec![Some(&b"1"[..]), None, Some(b"2"), Some(b"1")]);
    assert_eq!(got[0].as_ref().unwrap().flags, 5);
    let cas = got[0].as_ref().unwrap().cas;
    assert_eq!(
        c.cas(b"a", b"3", 0, Exptime::NEVER, cas).await.unwrap(),
        memkit_types::StoreOutcome::Stored
    );
    assert_eq!(c.incr(b"a", 4).await.unwrap(), Some(7));
    assert!(c.append(b"a", b"0").await.unwrap());
    assert_eq!(
        c.gat(b"a", Exptime(100)).await.unwrap().unwrap().value,
        &b"70"[..]
    );
    assert!(c.touch(b"a", Exptime(50)).await.unwrap());
    assert!(c.delete(b"a").await.unwrap());
    let viv = GetOptions {
        vivify: Some(Exptime(5)),
        ..Default::default()
    };
    assert!(matches!(
        c.get_with(b"a", &viv).await,
        Err(Error::Protocol(_))
    ));
    assert_eq!(c.version().await.unwrap().split('.').count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_pipeline_on_one_connection() {
    let d = Memkitd::start();
    let c = Client::new(
        d.spec(),
        ClientConfig {
            pool_size: 1,
            ..config()
        },
    );
    let mut tasks = Vec::new();
    for t in 0..64 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..50 {
                let k = format!("p:{t}:{i}");
                let v = format!("{t}-{i}").repeat(i % 7 + 1);
                c.set(k.as_bytes(), v.as_bytes(), 0, Exptime::NEVER)
                    .await
                    .unwrap();
                let keys = [k.as_bytes(), b"p:absent"];
                let got = c.get_multi(&keys, &GetOptions::default()).await.unwrap();
                assert_eq!(got[0].as_ref().unwrap().value, v.as_bytes());
                assert!(got[1].is_none());
            }
        }));
    }
    for t in tasks {
        t.await.expect("no panic");
    }
    let stats = c.stats("").await.unwrap();
    let conns = stats.iter().find(|(k, _)| k == "total_connections");
    eprintln!("3200 set+get pairs from 64 tasks over one connection; {conns:?}");
}

#[test]
fn blocking_facade_without_a_runtime() {
    let d = Memkitd::start();
    let b = memkit_client::BlockingClient::new(Client::new(d.spec(), config())).unwrap();
    let cas = b.set(b"bk", b"1", 3, Exptime::NEVER).unwrap();
    let item = b.get(b"bk").unwrap().unwrap();
    assert_eq!((item.flags, item.cas), (3, cas));
    assert_eq!(b.incr(b"bk", 9).unwrap(), Some(10));
    assert!(b.delete(b"bk").unwrap());
    assert!(b.run(|c| c.version()).unwrap().contains("memkit"));
}
