//! Failover: a server of a three-server pool dies under load; a server that hangs.
//!
//! Bounded: every wait has a deadline, servers are in-process memkitd (killed by dropping
//! their runtime: sockets close, the port refuses) or a local listener that never answers.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Memkitd, black_hole};
use memkit_client::cluster::Replicas;
use memkit_client::{Client, ClientConfig, Cluster, ClusterConfig, Distribution, ServerSpec};
use memkit_types::{Error, Exptime, Memcache};

/// Stops the load tasks even when an assertion fails.
struct StopGuard(Arc<AtomicBool>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

const TIMEOUT: Duration = Duration::from_millis(500);
/// Slack for scheduling on a busy two-core machine.
const SLACK: Duration = Duration::from_millis(750);

fn cluster(servers: Vec<ServerSpec>) -> Cluster {
    let cfg = ClusterConfig {
        client: ClientConfig {
            connect_timeout: TIMEOUT,
            request_timeout: TIMEOUT,
            ..ClientConfig::default()
        },
        failure_limit: 2,
        retry_interval: Duration::from_secs(60),
        replicas: Replicas {
            default: 1,
            prefixes: vec![(b"session:".to_vec(), 2)],
        },
        ..ClusterConfig::new(Distribution::Ketama)
    };
    Cluster::new(servers, cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_one_of_three_servers_under_load() {
    let mut servers: Vec<Memkitd> = (0..3).map(|_| Memkitd::start()).collect();
    let c = cluster(servers.iter().map(Memkitd::spec).collect());
    let keys: Vec<String> = (0..600).map(|i| format!("k:{i}")).collect();
    let sessions: Vec<String> = (0..100).map(|i| format!("session:{i}")).collect();
    for k in keys.iter().chain(&sessions) {
        c.set(k.as_bytes(), k.as_bytes(), 0, Exptime::NEVER)
            .await
            .unwrap();
    }
    let victim = 1;
    let on_victim: Vec<&String> = keys
        .iter()
        .filter(|k| c.server_for(k.as_bytes()) == Some(victim))
        .collect();
    assert!(
        on_victim.len() > 100,
        "{} keys on the victim",
        on_victim.len()
    );

    // Load: four tasks reading and writing random keys, timing every call.
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_panic = StopGuard(stop.clone());
    let worst_us = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(AtomicU64::new(0));
    let mut load = Vec::new();
    for t in 0..4u64 {
        let (c, stop, worst, calls) = (c.clone(), stop.clone(), worst_us.clone(), calls.clone());
        let keys = keys.clone();
        load.push(tokio::spawn(async move {
            let mut i = t as usize;
            while !stop.load(Ordering::Relaxed) {
                let k = keys[i % keys.len()].as_bytes();
                let started = Instant::now();
                if i.is_multiple_of(4) {
                    // Writes go to other keys, so the victim's keys stay missing until the
                    // test writes them again.
                    let w = format!("load:{i}");
                    let _ = c.set(w.as_bytes(), k, 0, Exptime::NEVER).await;
                } else {
                    let r = c.get(k).await;
                    assert!(r.is_ok(), "a read failed instead of missing: {r:?}");
                }
                worst.fetch_max(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                calls.fetch_add(1, Ordering::Relaxed);
                i += 7;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed_at = Instant::now();
    servers[victim].kill();

    // Reads of the victim's keys are misses, never errors.
    for k in &on_victim {
        assert_eq!(c.get_value(k.as_bytes()).await, Ok(None), "{k}");
    }
    // It is ejected: its keys map to the two others now, the others' keys did not move. Their
    // home (the full ring, for names that must not move) is still the victim.
    assert!(c.health()[victim].down);
    for k in &keys {
        assert_ne!(
            c.server_for(k.as_bytes()),
            Some(victim),
            "{k}: {:?}",
            c.health()
        );
        let home = c.home_server(k.as_bytes());
        assert_eq!(
            home == Some(victim),
            on_victim.contains(&k),
            "{k}: home {home:?}"
        );
    }
    let ejected_after = killed_at.elapsed();
    // Written again, they are hits on the remaining servers.
    for k in &on_victim {
        c.set(k.as_bytes(), b"again", 0, Exptime::NEVER)
            .await
            .unwrap();
        assert_eq!(
            c.get_value(k.as_bytes()).await.unwrap().as_deref(),
            Some(&b"again"[..])
        );
    }
    // Keys that lived elsewhere are still there (no remap for them).
    let mut kept = 0;
    for k in keys.iter().filter(|k| !on_victim.contains(k)) {
        kept += usize::from(c.get_value(k.as_bytes()).await.unwrap().is_some());
    }
    assert_eq!(kept, keys.len() - on_victim.len());
    // Replicated keys survive, including those whose first copy was on the victim.
    for s in &sessions {
        let v = c.get_value(s.as_bytes()).await.unwrap();
        assert_eq!(v.as_deref(), Some(s.as_bytes()), "{s}");
    }
    // A multi-get over everything answers at once, batched per live server.
    let all: Vec<&[u8]> = sessions.iter().map(|s| s.as_bytes()).collect();
    let got = c.get_multi(&all, &Default::default()).await.unwrap();
    assert!(got.iter().all(Option::is_some));

    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.expect("a load task panicked");
    }
    let worst = Duration::from_micros(worst_us.load(Ordering::Relaxed));
    eprintln!(
        "{} calls under load, worst {worst:?}; victim held {} of {} keys, ejected within {ejected_after:?}",
        calls.load(Ordering::Relaxed),
        on_victim.len(),
        keys.len()
    );
    assert!(worst < TIMEOUT + SLACK, "a call took {worst:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_times_out_then_is_ejected() {
    let (port, task) = black_hole().await;
    let hung = ServerSpec::new("127.0.0.1", port);
    let single = Client::new(
        hung.clone(),
        ClientConfig {
            request_timeout: TIMEOUT,
            ..ClientConfig::default()
        },
    );
    let t = Instant::now();
    assert_eq!(single.get(b"k").await, Err(Error::Timeout));
    assert!(t.elapsed() < TIMEOUT + SLACK, "{:?}", t.elapsed());

    let live = Memkitd::start();
    let c = cluster(vec![live.spec(), hung]);
    let keys: Vec<String> = (0..200).map(|i| format!("h:{i}")).collect();
    let on_hung: Vec<&String> = keys
        .iter()
        .filter(|k| c.server_for(k.as_bytes()) == Some(1))
        .collect();
    assert!(!on_hung.is_empty());
    // Concurrent reads of the hung server's keys: misses, each within the timeout.
    let t = Instant::now();
    let batch: Vec<&[u8]> = on_hung.iter().map(|k| k.as_bytes()).collect();
    assert!(
        c.get_multi(&batch, &Default::default())
            .await
            .unwrap()
            .iter()
            .all(Option::is_none)
    );
    assert!(t.elapsed() < TIMEOUT + SLACK, "{:?}", t.elapsed());
    // The batch was one call, so one failure: not ejected yet.
    assert_eq!((c.health()[1].failures, c.health()[1].down), (1, false));
    // The next write still goes there, fails with an unavailable error, and is the second
    // consecutive failure (`failure_limit`): ejected.
    let w = c.set(on_hung[0].as_bytes(), b"v", 0, Exptime::NEVER).await;
    assert!(w.as_ref().is_err_and(Error::is_unavailable), "{w:?}");
    assert!(c.health()[1].down);
    // ...then everything goes to the live server, fast.
    for k in &on_hung {
        // Anything that still reached the hung server would take the whole timeout.
        let t = Instant::now();
        c.set(k.as_bytes(), b"v", 0, Exptime::NEVER).await.unwrap();
        assert!(c.get(k.as_bytes()).await.unwrap().is_some());
        assert!(t.elapsed() < TIMEOUT, "{:?} for {k}", t.elapsed());
    }
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modula_does_not_remap_by_default_and_writes_fail() {
    let mut servers: Vec<Memkitd> = (0..2).map(|_| Memkitd::start()).collect();
    let cfg = ClusterConfig {
        client: ClientConfig {
            request_timeout: TIMEOUT,
            connect_timeout: TIMEOUT,
            ..ClientConfig::default()
        },
        ..ClusterConfig::new(Distribution::MODULA)
    };
    let c = Cluster::new(servers.iter().map(Memkitd::spec).collect(), cfg);
    let key = (0..100)
        .map(|i| format!("m:{i}"))
        .find(|k| c.server_for(k.as_bytes()) == Some(0))
        .unwrap();
    c.set(key.as_bytes(), b"v", 0, Exptime::NEVER)
        .await
        .unwrap();
    servers[0].kill();
    for _ in 0..3 {
        assert_eq!(c.get(key.as_bytes()).await, Ok(None));
        let w = c.set(key.as_bytes(), b"v", 0, Exptime::NEVER).await;
        assert!(w.is_err_and(|e| e.is_unavailable()));
    }
    assert_eq!(
        c.server_for(key.as_bytes()),
        Some(0),
        "modula keeps the mapping"
    );
}
