//! Many tasks on a multi-threaded runtime hammer one structure; the results are exact.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use memkit_cookbook::*;
use memkit_engine::Embedded;
use tokio::task::JoinSet;

use crate::support::{dyn_clock, mt_rt, store};
use crate::units::{Ev, ev};

const TASKS: u32 = 8;

fn join_all<T: Send + 'static>(rt: &tokio::runtime::Runtime, set: JoinSet<T>) -> Vec<T> {
    rt.block_on(set.join_all())
}

#[test]
fn lock_mutual_exclusion() {
    let rt = mt_rt();
    let (mc, _clock) = store();
    let inside = Arc::new(AtomicBool::new(false));
    let entries = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    for _ in 0..TASKS {
        let (mc, inside, entries) = (mc.clone(), inside.clone(), entries.clone());
        set.spawn_on(
            async move {
                let opts = LockOptions::ttl_secs(30)
                    .max_wait(Duration::from_secs(30))
                    .backoff(Duration::from_micros(200), Duration::from_millis(2));
                let lock = Lock::with_options(mc, "mutex", opts);
                for _ in 0..40 {
                    let g = lock.lock().await.unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    entries.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    inside.store(false, Ordering::SeqCst);
                    assert!(g.unlock().await.unwrap());
                }
            },
            rt.handle(),
        );
    }
    join_all(&rt, set);
    assert_eq!(entries.load(Ordering::SeqCst), u64::from(TASKS) * 40);
}

#[test]
fn counters_lose_nothing() {
    let rt = mt_rt();
    let (mc, clock) = store();
    let mut set = JoinSet::new();
    for _ in 0..TASKS {
        let mc = mc.clone();
        let clock = clock.clone();
        set.spawn_on(
            async move {
                let c = Counter::new(mc.clone(), "hits");
                let v = ViewCounter::new(mc.clone(), "page");
                let vis = VisitorCounter::new(mc.clone(), "vis", 60, dyn_clock(&clock));
                let on = OnlineCounter::new(mc.clone(), "on", 6, 60, dyn_clock(&clock));
                for _ in 0..500 {
                    c.incr(1).await.unwrap();
                    v.hit(|| async { Ok::<_, std::io::Error>(1000) })
                        .await
                        .unwrap();
                    vis.increment().await.unwrap();
                    on.hit().await.unwrap();
                    tokio::task::yield_now().await;
                }
            },
            rt.handle(),
        );
    }
    join_all(&rt, set);
    let n = u64::from(TASKS) * 500;
    rt.block_on(async {
        assert_eq!(Counter::new(mc.clone(), "hits").value().await.unwrap(), n);
        assert_eq!(
            ViewCounter::new(mc.clone(), "page").cached().await.unwrap(),
            Some(1000 + n),
            "seeded once, no view lost"
        );
        clock.advance(60);
        let vis = VisitorCounter::new(mc.clone(), "vis", 60, dyn_clock(&clock));
        assert_eq!(vis.value().await.unwrap(), n);
        let on = OnlineCounter::new(mc.clone(), "on", 6, 60, dyn_clock(&clock));
        assert_eq!(on.value().await.unwrap(), n);
    });
}

#[test]
fn event_log_no_lost_or_duplicated_events() {
    let rt = mt_rt();
    let (mc, clock) = store();
    let log: Arc<EventLog<Embedded, Ev>> =
        Arc::new(EventLog::new(mc.clone(), "ev", 10, 10, dyn_clock(&clock)));
    let done = Arc::new(AtomicBool::new(false));
    // Producers stamp, then append: an event may land after newer ones. The poller
    // tolerates `LAG` seconds of that, so the clock only moves while no producer holds a
    // stamp more than `LAG` seconds behind it: a thread the OS parked between its stamp
    // and its append cannot fall further behind than the poller's contract allows.
    const LAG: u64 = 5;
    let stamps: Arc<Vec<AtomicU64>> =
        Arc::new((0..TASKS).map(|_| AtomicU64::new(u64::MAX)).collect());
    // A poller runs alongside the producers and must end up with every event exactly once.
    let poller = {
        let (log, done) = (log.clone(), done.clone());
        rt.spawn(async move {
            let mut p = log.poller_with_lag(LAG);
            let mut got = Vec::new();
            loop {
                let finished = done.load(Ordering::SeqCst);
                got.extend(p.poll().await.unwrap());
                if finished {
                    return got;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let mut set = JoinSet::new();
    for who in 0..TASKS {
        let (log, clock, stamps) = (log.clone(), clock.clone(), stamps.clone());
        set.spawn_on(
            async move {
                let now = || memkit_types::Clock::now_secs(&clock);
                for seq in 0..300u32 {
                    // Time moves while events arrive: several chunks are used.
                    if who == 0 && seq % 30 == 29 {
                        let next = now() + 1;
                        while stamps
                            .iter()
                            .any(|s| s.load(Ordering::SeqCst).saturating_add(LAG) < next)
                        {
                            tokio::task::yield_now().await;
                        }
                        clock.advance(1);
                    }
                    // Published before the stamp is taken, so the stamp is never older
                    // than what the clock's mover sees.
                    stamps[who as usize].store(now(), Ordering::SeqCst);
                    log.put(&ev(now(), who, seq)).await.unwrap();
                    stamps[who as usize].store(u64::MAX, Ordering::SeqCst);
                }
            },
            rt.handle(),
        );
    }
    join_all(&rt, set);
    done.store(true, Ordering::SeqCst);
    let polled = rt.block_on(poller).unwrap();
    let all = rt.block_on(log.fetch(None, None)).unwrap();
    let want = (TASKS * 300) as usize;
    assert_eq!(all.len(), want);
    let unique: HashSet<(u32, u32)> = all.iter().map(|e| (e.who, e.seq)).collect();
    assert_eq!(unique.len(), want, "no duplicates");
    let polled_unique: HashSet<(u32, u32)> = polled.iter().map(|e| (e.who, e.seq)).collect();
    assert_eq!(polled.len(), want, "poller: each event once");
    assert_eq!(polled_unique.len(), want);
}

#[test]
fn arrays_and_set_lose_no_change() {
    let rt = mt_rt();
    let (mc, _clock) = store();
    let mut set = JoinSet::new();
    for t in 0..TASKS {
        let mc = mc.clone();
        set.spawn_on(
            async move {
                let arr: Array<_, u32> = Array::new(mc.clone(), "arr");
                let app: AppendArray<_, u32> =
                    AppendArray::new(mc.clone(), "app").compact_above(256);
                let s = Set::with_lock_options(
                    mc.clone(),
                    "set",
                    LockOptions::ttl_secs(30)
                        .backoff(Duration::from_micros(200), Duration::from_millis(2)),
                );
                for i in 0..30u32 {
                    let x = t * 1000 + i;
                    arr.change(&[x], &[]).await.unwrap();
                    app.add(&x).await.unwrap();
                    app.add(&(x + 500)).await.unwrap();
                    app.remove(&(x + 500)).await.unwrap();
                    if i % 5 == 0 {
                        app.fetch().await.unwrap(); // compacts concurrently with appends
                    }
                    if i < 10 {
                        s.add(&format!("m{x}")).await.unwrap();
                    }
                }
            },
            rt.handle(),
        );
    }
    join_all(&rt, set);
    rt.block_on(async {
        let want: HashSet<u32> = (0..TASKS)
            .flat_map(|t| (0..30).map(move |i| t * 1000 + i))
            .collect();
        let arr: Array<_, u32> = Array::new(mc.clone(), "arr");
        let got = arr.fetch().await.unwrap();
        assert_eq!(got.len(), want.len());
        assert_eq!(got.into_iter().collect::<HashSet<_>>(), want);
        let app: AppendArray<_, u32> = AppendArray::new(mc.clone(), "app");
        let got = app.fetch().await.unwrap();
        assert_eq!(
            got.len(),
            want.len(),
            "no add lost, no remove lost, through compactions"
        );
        assert_eq!(got.into_iter().collect::<HashSet<_>>(), want);
        let s = Set::new(mc.clone(), "set");
        let members = s.members().await.unwrap();
        assert_eq!(members.len(), (TASKS * 10) as usize);
        for m in &members {
            assert!(s.contains(m).await.unwrap());
        }
    });
}

fn queue_opts() -> QueueOptions {
    QueueOptions {
        hole_wait: Duration::from_millis(200),
        ..Default::default()
    }
}

#[test]
fn queue_and_stack_deliver_each_element_once() {
    for kind in ["queue", "stack"] {
        let rt = mt_rt();
        let (mc, _clock) = store();
        let per = 250u32;
        let producers = 4u32;
        let total = (per * producers) as usize;
        let taken = Arc::new(AtomicU64::new(0));
        let mut set = JoinSet::new();
        for p in 0..producers {
            let mc = mc.clone();
            set.spawn_on(
                async move {
                    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "q", queue_opts());
                    let s: Stack<_, u32> = Stack::with_options(mc, "s", queue_opts());
                    for i in 0..per {
                        if kind == "queue" {
                            q.push(&(p * 10_000 + i)).await.unwrap();
                        } else {
                            s.push(&(p * 10_000 + i)).await.unwrap();
                        }
                        tokio::task::yield_now().await;
                    }
                    Vec::new()
                },
                rt.handle(),
            );
        }
        for _ in 0..4 {
            let (mc, taken) = (mc.clone(), taken.clone());
            set.spawn_on(
                async move {
                    let q: Queue<_, u32> = Queue::with_options(mc.clone(), "q", queue_opts());
                    let s: Stack<_, u32> = Stack::with_options(mc, "s", queue_opts());
                    let mut got = Vec::new();
                    while (taken.load(Ordering::SeqCst) as usize) < total {
                        let x = if kind == "queue" {
                            q.pop().await.unwrap()
                        } else {
                            s.pop().await.unwrap()
                        };
                        match x {
                            Some(x) => {
                                taken.fetch_add(1, Ordering::SeqCst);
                                got.push(x);
                            }
                            None => tokio::task::yield_now().await,
                        }
                    }
                    got
                },
                rt.handle(),
            );
        }
        let got: Vec<u32> = join_all(&rt, set).into_iter().flatten().collect();
        assert_eq!(got.len(), total, "{kind}: none lost or duplicated");
        let unique: HashSet<u32> = got.iter().copied().collect();
        assert_eq!(unique.len(), total, "{kind}: no duplicates");
        if kind == "queue" {
            // Per producer, FIFO: elements of one producer come out in order per consumer.
            let q: Queue<_, u32> = Queue::new(mc.clone(), "q");
            assert_eq!(rt.block_on(q.pop()).unwrap(), None);
        }
    }
}
