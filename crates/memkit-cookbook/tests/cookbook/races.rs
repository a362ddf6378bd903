//! Races and losses the structures must survive, each scenario run against the embedded
//! store (on the system clock), memkitd and real memcached. Counters and slots are deleted by
//! hand where the scenario needs a key evicted or expired, so nothing waits for a TTL.

use std::sync::Arc;
use std::time::Duration;

use memkit_client::Client;
use memkit_cookbook::structures::incr_or_create;
use memkit_cookbook::*;
use memkit_engine::{Embedded, EngineConfig};
use memkit_types::{Exptime, Memcache};

use crate::servers::{Memcached, Memkitd};

/// A test per backend for `scenario(mc, backend_name)`.
macro_rules! on_every_backend {
    ($name:ident, $scenario:path) => {
        mod $name {
            use super::*;

            #[test]
            fn embedded() {
                let mc = Embedded::new(EngineConfig::with_memory(64 << 20));
                crate::support::mt_net_rt().block_on($scenario(mc, "embedded"));
            }

            #[test]
            fn memkitd() {
                let server = Memkitd::start();
                crate::support::mt_net_rt().block_on(async {
                    let mc = Arc::new(Client::connect(&server.addr).await.unwrap());
                    $scenario(mc, "memkitd").await;
                });
            }

            #[test]
            fn real_memcached() {
                let Some(server) = Memcached::start() else {
                    return;
                };
                crate::support::mt_net_rt().block_on(async {
                    let mc = Arc::new(Client::connect(&server.addr).await.unwrap());
                    $scenario(mc, "memcached").await;
                });
            }
        }
    };
}

async fn drain<M: Memcache>(q: &Queue<M, u32>) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(x) = q.pop().await.unwrap() {
        out.push(x);
    }
    out
}

/// The tail is lost while the head survives at 2, the consumed slots' tombstones are gone,
/// and one producer has already re-created the tail at 1. The next push reserves slot 2, at
/// the head: no consumer would ever claim it, so the push must not write there.
async fn queue_push_never_lands_at_or_below_the_head<M: Memcache + Clone>(mc: M, name: &str) {
    let q: Queue<_, u32> = Queue::new(mc.clone(), "race-push");
    for i in 1..=3 {
        q.push(&i).await.unwrap();
    }
    assert_eq!(q.pop().await.unwrap(), Some(1));
    assert_eq!(q.pop().await.unwrap(), Some(2));
    for key in ["tail", "1", "2"] {
        mc.delete(format!("queue:race-push:{key}").as_bytes())
            .await
            .unwrap();
    }
    let tail = b"queue:race-push:tail";
    assert_eq!(
        incr_or_create(&mc, tail, 1, Exptime::NEVER).await.unwrap(),
        1
    );
    q.push(&4).await.unwrap();
    assert_eq!(
        drain(&q).await,
        vec![3, 4],
        "{name}: an acknowledged push was lost"
    );
}

on_every_backend!(
    queue_push_at_the_head,
    queue_push_never_lands_at_or_below_the_head
);

/// The head is lost after 100 elements were consumed and their tombstones expired. With a
/// `hole_wait` of an hour, walking the 100 empty consumed slots would take 100 hours: the
/// recovery must restart below the waiting element instead, and close the empty slots just
/// under it to producers that reserved them and have not written yet.
async fn queue_head_recovery_skips_expired_tombstones<M: Memcache + Clone>(mc: M, name: &str) {
    let opts = QueueOptions {
        hole_wait: Duration::from_secs(3600),
        ..Default::default()
    };
    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "race-head", opts);
    for i in 0..100 {
        q.push(&i).await.unwrap();
    }
    for i in 0..100 {
        assert_eq!(q.pop().await.unwrap(), Some(i));
    }
    mc.delete(b"queue:race-head:head").await.unwrap();
    for n in 1..=100 {
        mc.delete(format!("queue:race-head:{n}").as_bytes())
            .await
            .unwrap();
    }
    assert_eq!(q.push(&100).await.unwrap(), 101);
    let popped = tokio::time::timeout(Duration::from_secs(20), q.pop())
        .await
        .unwrap_or_else(|_| panic!("{name}: pop walked the consumed slots' holes"))
        .unwrap();
    assert_eq!(popped, Some(100), "{name}");
    assert_eq!(q.pop().await.unwrap(), None, "{name}");
    assert!(
        !mc.add(b"queue:race-head:100", b"I7", 0, Exptime::NEVER)
            .await
            .unwrap(),
        "{name}: a stalled producer could still write just below the recovered head"
    );
}

on_every_backend!(
    queue_head_recovery,
    queue_head_recovery_skips_expired_tombstones
);
