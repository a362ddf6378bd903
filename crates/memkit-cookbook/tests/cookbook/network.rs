//! The structures through memkit-client: against memkitd, against real memcached (when
//! installed), and on a three-server cluster that loses a server mid-way.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use memkit_client::{Client, Cluster, ClusterConfig, Distribution, ServerSpec};
use memkit_cookbook::*;
use memkit_types::{Clock, Memcache, SystemClock};

use crate::servers::{Memcached, Memkitd};
use crate::units::Ev;

fn fast() -> QueueOptions {
    QueueOptions {
        hole_wait: Duration::from_millis(50),
        ..Default::default()
    }
}

/// What must behave exactly as on the embedded store, through a real wire.
async fn scenarios<M: Memcache + Clone + 'static>(mc: M) {
    // lock: owner-checked unlock through md C / gets+cas
    let lock = Lock::with_options(mc.clone(), "net-lock", LockOptions::ttl_secs(30));
    let mut a = lock.try_lock().await.unwrap().unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(a.extend(60).await.unwrap());
    assert!(a.unlock().await.unwrap());
    let a = lock.try_lock().await.unwrap().unwrap();
    mc.delete(lock.key()).await.unwrap(); // as if A's TTL ran out
    let b = lock.try_lock().await.unwrap().unwrap();
    assert!(
        !a.unlock().await.unwrap(),
        "seed flaw: must not free B's lock"
    );
    assert!(b.is_held().await.unwrap());
    assert!(b.unlock().await.unwrap());

    // counters: create-on-miss, padding after decr
    let c = Counter::new(mc.clone(), "net-counter");
    assert_eq!(c.incr(10).await.unwrap(), 10);
    assert_eq!(c.decr(1).await.unwrap(), 9);
    assert_eq!(c.value().await.unwrap(), 9);
    let v = ViewCounter::new(mc.clone(), "net-views");
    assert_eq!(
        v.hit(|| async { Ok::<_, std::io::Error>(41) })
            .await
            .unwrap(),
        42
    );
    assert_eq!(
        v.hit(|| async { Ok::<_, std::io::Error>(0) })
            .await
            .unwrap(),
        43
    );

    // event log on the system clock
    let log: EventLog<_, Ev> = EventLog::new(mc.clone(), "net-log", 10, 6, Arc::new(SystemClock));
    let now = SystemClock.now_secs();
    for seq in 0..5 {
        log.put(&Ev {
            at: now,
            who: 1,
            seq,
        })
        .await
        .unwrap();
    }
    assert_eq!(log.fetch(Some(now), Some(now)).await.unwrap().len(), 5);

    // arrays, set, hash
    let arr: Array<_, u32> = Array::new(mc.clone(), "net-arr");
    arr.change(&[1, 2, 3], &[]).await.unwrap();
    arr.change(&[], &[2]).await.unwrap();
    assert_eq!(arr.fetch().await.unwrap(), vec![1, 3]);
    let app: AppendArray<_, u32> = AppendArray::new(mc.clone(), "net-app").compact_above(16);
    for i in 0..10 {
        app.add(&i).await.unwrap();
    }
    app.remove(&3).await.unwrap();
    let want: Vec<u32> = (0..10).filter(|&i| i != 3).collect();
    assert_eq!(app.fetch().await.unwrap(), want);
    assert_eq!(app.fetch().await.unwrap(), want, "after compaction");
    let set = Set::new(mc.clone(), "net-set");
    set.add("a b").await.unwrap();
    assert!(set.contains("a b").await.unwrap());
    assert_eq!(set.members().await.unwrap(), vec!["a b"]);

    // online users (window long enough not to matter)
    let users = OnlineUsers::new(mc.clone(), "net-users", 300, 4, Arc::new(SystemClock));
    users.touch(5).await.unwrap();
    users.touch(9).await.unwrap();
    assert_eq!(users.count().await.unwrap(), 2);

    // queue with a hole, stack
    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "net-q", fast());
    q.push(&1).await.unwrap();
    mc.incr(b"queue:net-q:tail", 1).await.unwrap(); // a stalled producer's slot
    q.push(&3).await.unwrap();
    assert_eq!(q.pop().await.unwrap(), Some(1));
    assert_eq!(q.pop().await.unwrap(), Some(3));
    assert_eq!(q.pop().await.unwrap(), None);
    let s: Stack<_, u32> = Stack::with_options(mc.clone(), "net-s", fast());
    s.push(&1).await.unwrap();
    s.push(&2).await.unwrap();
    assert_eq!(s.pop().await.unwrap(), Some(2));
    assert_eq!(s.pop().await.unwrap(), Some(1));
}

#[test]
fn structures_through_client_memkitd() {
    let server = Memkitd::start();
    let rt = crate::support::net_rt();
    rt.block_on(async {
        let mc = Arc::new(Client::connect(&server.addr).await.unwrap());
        scenarios(mc).await;
    });
}

#[test]
fn structures_through_client_real_memcached() {
    let Some(server) = Memcached::start() else {
        return;
    };
    let rt = crate::support::net_rt();
    rt.block_on(async {
        let mc = Arc::new(Client::connect(&server.addr).await.unwrap());
        scenarios(mc).await;
    });
}

/// Three memkitd behind a ketama cluster; one dies mid-way. Structures whose keys lived on
/// it behave as after an eviction (counters restart, queue elements there are lost); the
/// others are exact, and nothing is duplicated.
#[test]
fn cluster_losing_a_server() {
    let mut servers: Vec<Memkitd> = (0..3).map(|_| Memkitd::start()).collect();
    let specs: Vec<ServerSpec> = servers.iter().map(|s| s.addr.parse().unwrap()).collect();
    let mut cfg = ClusterConfig::new(Distribution::Ketama);
    cfg.client.request_timeout = Duration::from_millis(300);
    cfg.client.connect_timeout = Duration::from_millis(300);
    let cluster = Arc::new(Cluster::new(specs, cfg));
    let rt = crate::support::net_rt();
    let names: Vec<String> = (0..30).map(|i| format!("cl-{i}")).collect();
    let victim = 1usize;
    rt.block_on(async {
        for n in &names {
            Counter::new(cluster.clone(), n).incr(10).await.unwrap();
        }
        let q: Queue<_, u32> = Queue::with_options(cluster.clone(), "cl-q", fast());
        for i in 0..60 {
            q.push(&i).await.unwrap();
        }
    });
    let on_victim = |key: &[u8]| cluster.server_for(key) == Some(victim);
    let counters_on_victim: Vec<bool> = names
        .iter()
        .map(|n| on_victim(Counter::new(cluster.clone(), n).key()))
        .collect();
    assert!(
        counters_on_victim.iter().any(|&v| v),
        "some counters live on the victim"
    );
    servers[victim].kill();
    rt.block_on(async {
        for (n, was_on_victim) in names.iter().zip(&counters_on_victim) {
            let c = Counter::new(cluster.clone(), n);
            // Until the cluster marks the server down, calls for its keys fail.
            let mut value = None;
            for _ in 0..5 {
                if let Ok(v) = c.incr(1).await {
                    value = Some(v);
                    break;
                }
            }
            let v = value.expect("the cluster fails over within a few calls");
            if *was_on_victim {
                assert!(v <= 5, "{n}: restarted on another server, got {v}");
            } else {
                assert_eq!(v, 11, "{n}: untouched by the failure");
            }
        }
        // The queue: whatever survived comes out once; nothing is duplicated.
        let q: Queue<_, u32> = Queue::with_options(cluster.clone(), "cl-q", fast());
        let mut got = Vec::new();
        for _ in 0..200 {
            match q.pop().await {
                Ok(Some(x)) => got.push(x),
                Ok(None) => break,
                Err(_) => continue, // the dead server's keys, until it is marked down
            }
        }
        let unique: HashSet<u32> = got.iter().copied().collect();
        assert_eq!(unique.len(), got.len(), "no element delivered twice");
        assert!(got.iter().all(|&x| x < 60));
    });
}
