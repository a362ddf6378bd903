//! The time-keyed structures on real clocks: producers whose clocks run up to 2 s ahead of and
//! behind the reader's and the server's (memkit-testkit's `SkewedClock`), on the embedded
//! store, memkitd and real memcached (whose expiry ticks once a second at its own phase).
//! Short periods make the event log's ring wrap and the counters' periods turn over within
//! seconds. Every check is about what was acknowledged and what is read back, never about
//! how long anything took.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memkit_client::Client;
use memkit_cookbook::*;
use memkit_engine::{Embedded, EngineConfig};
use memkit_testkit::clock::SkewedClock;
use memkit_types::{Clock, Memcache, SystemClock};

use crate::servers::{Memcached, Memkitd};
use crate::units::Ev;

/// The producers' offsets from the real clock, in milliseconds: whole and half seconds both
/// ways, so their second boundaries fall at different phases of the server's.
const OFFSETS_MS: [i64; 6] = [-2_000, -1_500, -1_000, 0, 1_000, 2_000];
/// The counters' period: long enough that a read can wait for the slowest producer (2 s
/// behind) to leave a period while the fastest (2 s ahead) has not entered the next-but-one.
const PERIOD: u64 = 4;

fn clocks() -> Vec<Arc<dyn Clock>> {
    OFFSETS_MS
        .iter()
        .map(|&o| Arc::new(SkewedClock::system(o)) as Arc<dyn Clock>)
        .collect()
}

fn real_ms() -> u64 {
    SystemClock.now_millis()
}

async fn sleep_until_ms(at: u64) {
    let now = real_ms();
    if at > now {
        tokio::time::sleep(Duration::from_millis(at - now)).await;
    }
}

/// The event log's ring of 3 one-second chunks wraps every 3 s for 7 s. Every `fetch`
/// returns each acknowledged event whose chunk it covers: an event is never appended to an
/// older chunk's key that then expires under it. Each scenario returns its failure rather
/// than panicking, so one run reports every structure.
async fn event_log<M: Memcache + Clone + Send + Sync + 'static>(mc: M) -> Result<(), String> {
    let acked: Arc<Mutex<Vec<Ev>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut producers = Vec::new();
    for (who, clock) in clocks().into_iter().enumerate() {
        let log: EventLog<M, Ev> = EventLog::new(mc.clone(), "skew", 1, 3, clock.clone());
        let (acked, stop) = (acked.clone(), stop.clone());
        producers.push(tokio::spawn(async move {
            let mut seq = 0;
            while !stop.load(Ordering::SeqCst) {
                let e = Ev {
                    at: clock.now_secs(),
                    who: who as u32,
                    seq,
                };
                log.put(&e).await.unwrap();
                acked.lock().unwrap().push(e);
                seq += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
    }
    let reader: EventLog<M, Ev> = EventLog::new(mc, "skew", 1, 3, Arc::new(SystemClock));
    let end = real_ms() + 7_000;
    let mut checked = 0;
    let mut failure = None;
    while real_ms() < end && failure.is_none() {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let before = SystemClock.now_secs();
        let snapshot = acked.lock().unwrap().clone();
        let got: HashSet<(u32, u32)> = reader
            .fetch(None, None)
            .await
            .unwrap()
            .iter()
            .map(|e| (e.who, e.seq))
            .collect();
        let after = SystemClock.now_secs();
        // The fetch read chunks [now - 2, now] for some `now` in [before, after].
        let missing: Vec<&Ev> = snapshot
            .iter()
            .filter(|e| e.at + 2 >= after && e.at <= before)
            .filter(|e| !got.contains(&(e.who, e.seq)))
            .collect();
        if !missing.is_empty() {
            failure = Some(format!(
                "event log: {} acknowledged events lost from the ring at {before}, first {:?}",
                missing.len(),
                &missing[..missing.len().min(5)]
            ));
        }
        checked += snapshot.len();
    }
    stop.store(true, Ordering::SeqCst);
    for p in producers {
        p.await.unwrap();
    }
    match failure {
        Some(f) => Err(f),
        None if checked == 0 => Err("event log: the check saw no events".into()),
        None => Ok(()),
    }
}

/// Runs `hit` on every skewed clock until `stop`, away from period boundaries (so the period
/// the test records is the one the structure used), counting acknowledged hits by period.
fn count_by_period<F, Fut>(hit: F, stop: Arc<AtomicBool>) -> Arc<Mutex<HashMap<u64, u64>>>
where
    F: Fn(Arc<dyn Clock>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<u64>> + Send,
{
    let counts: Arc<Mutex<HashMap<u64, u64>>> = Arc::default();
    let hit = Arc::new(hit);
    for clock in clocks() {
        let (counts, stop, hit) = (counts.clone(), stop.clone(), hit.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let ms = clock.now_millis();
                let phase = ms % (PERIOD * 1000);
                if (150..PERIOD * 1000 - 150).contains(&phase) {
                    hit(clock.clone()).await.unwrap();
                    *counts
                        .lock()
                        .unwrap()
                        .entry(ms / 1000 / PERIOD)
                        .or_default() += 1;
                }
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        });
    }
    counts
}

/// The first period that begins, on every producer's clock, after they all started.
fn first_full_period() -> u64 {
    (real_ms() + 2_000) / 1000 / PERIOD + 1
}

/// The visitor counter read 2.5 s into the period after `p` (the slowest producer has left
/// `p`, the fastest is not yet two periods on) shows exactly the hits counted in `p`.
async fn visitors<M: Memcache + Clone + Send + Sync + 'static>(mc: M) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let p = first_full_period();
    let m = mc.clone();
    let counts = count_by_period(
        move |clock| {
            let v = VisitorCounter::new(m.clone(), "skew", PERIOD, clock);
            async move { v.increment().await }
        },
        stop.clone(),
    );
    sleep_until_ms((p + 1) * PERIOD * 1000 + 2_500).await;
    let reader = VisitorCounter::new(mc, "skew", PERIOD, Arc::new(SystemClock));
    let shown = reader.value().await.unwrap();
    stop.store(true, Ordering::SeqCst);
    let want = counts.lock().unwrap().get(&p).copied().unwrap_or(0);
    if want == 0 || shown != want {
        return Err(format!(
            "visitors: period {p} counted {want}, the counter shows {shown}"
        ));
    }
    Ok(())
}

/// The online counter over 3 periods read 2.5 s into period `p + 2` shows exactly the hits of
/// `p` and `p + 1`.
async fn online<M: Memcache + Clone + Send + Sync + 'static>(mc: M) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let p = first_full_period();
    let m = mc.clone();
    let counts = count_by_period(
        move |clock| {
            let c = OnlineCounter::new(m.clone(), "skew", 3, PERIOD, clock);
            async move { c.hit().await }
        },
        stop.clone(),
    );
    sleep_until_ms((p + 2) * PERIOD * 1000 + 2_500).await;
    let reader = OnlineCounter::new(mc, "skew", 3, PERIOD, Arc::new(SystemClock));
    let shown = reader.value().await.unwrap();
    stop.store(true, Ordering::SeqCst);
    let counts = counts.lock().unwrap();
    let want = counts.get(&p).copied().unwrap_or(0) + counts.get(&(p + 1)).copied().unwrap_or(0);
    if want == 0 || shown != want {
        return Err(format!(
            "online: periods {p} and {} counted {want}, the counter shows {shown}",
            p + 1
        ));
    }
    Ok(())
}

async fn all<M: Memcache + Clone + Send + Sync + 'static>(mc: M, name: &str) {
    let (a, b, c) = tokio::join!(event_log(mc.clone()), visitors(mc.clone()), online(mc));
    let failures: Vec<String> = [a, b, c].into_iter().filter_map(|r| r.err()).collect();
    assert!(failures.is_empty(), "{name}: {failures:#?}");
}

#[test]
fn skewed_producers_embedded() {
    let mc = Embedded::new(EngineConfig::with_memory(64 << 20).clock(Arc::new(SystemClock)));
    crate::support::mt_net_rt().block_on(all(mc, "embedded"));
}

#[test]
fn skewed_producers_memkitd() {
    let server = Memkitd::start();
    crate::support::mt_net_rt().block_on(async {
        let mc = Arc::new(Client::connect(&server.addr).await.unwrap());
        all(mc, "memkitd").await;
    });
}

#[test]
fn skewed_producers_real_memcached() {
    let Some(server) = Memcached::start() else {
        return;
    };
    crate::support::mt_net_rt().block_on(async {
        let mc = Arc::new(Client::connect(&server.addr).await.unwrap());
        all(mc, "memcached").await;
    });
}
