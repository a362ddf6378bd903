//! Several OS processes against one server: this test binary re-runs itself as workers
//! (`worker` below does nothing unless `COOKBOOK_WORKER` is set), each talking to memkitd
//! (in-process, port 0) or to real memcached through memkit-client.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use memkit_cookbook::*;
use memkit_types::SystemClock;

use crate::units::Ev;
use memkit_client::Client;

const WORKERS: usize = 4;
const ENV: &str = "COOKBOOK_WORKER";

/// The worker side. Arguments in `COOKBOOK_WORKER`: `<role> <addr> <id> <n> <run>`.
#[test]
fn worker() {
    let Ok(spec) = std::env::var(ENV) else {
        return; // an ordinary test run: nothing to do
    };
    let parts: Vec<String> = spec.split(' ').map(str::to_owned).collect();
    let (role, addr, id, n, run) = (
        parts[0].as_str(),
        parts[1].as_str(),
        parts[2].parse::<u32>().unwrap(),
        parts[3].parse::<u32>().unwrap(),
        parts[4].as_str(),
    );
    let rt = crate::support::net_rt();
    rt.block_on(async {
        let mc = Arc::new(Client::connect(addr).await.unwrap());
        match role {
            "lock" => {
                let opts = LockOptions::ttl_secs(30)
                    .max_wait(Duration::from_secs(60))
                    .backoff(Duration::from_micros(500), Duration::from_millis(5));
                let lock = Lock::with_options(mc.clone(), &format!("{run}-lock"), opts);
                let inside = Counter::new(mc.clone(), &format!("{run}-inside"));
                let violations = Counter::new(mc.clone(), &format!("{run}-violations"));
                let entries = Counter::new(mc.clone(), &format!("{run}-entries"));
                for _ in 0..n {
                    let g = lock.lock().await.unwrap();
                    if inside.incr(1).await.unwrap() != 1 {
                        violations.incr(1).await.unwrap();
                    }
                    entries.incr(1).await.unwrap();
                    inside.decr(1).await.unwrap();
                    assert!(g.unlock().await.unwrap());
                }
            }
            "counter" => {
                let c = Counter::new(mc.clone(), &format!("{run}-counter"));
                for _ in 0..n {
                    c.incr(1).await.unwrap();
                }
            }
            "events" => {
                let log: EventLog<_, Ev> = EventLog::new(
                    mc.clone(),
                    &format!("{run}-log"),
                    60,
                    10,
                    Arc::new(SystemClock),
                );
                for seq in 0..n {
                    let at = memkit_types::Clock::now_secs(&SystemClock);
                    log.put(&Ev { at, who: id, seq }).await.unwrap();
                }
            }
            "producer" => {
                let q: Queue<_, u32> = Queue::new(mc.clone(), &format!("{run}-q"));
                for i in 0..n {
                    q.push(&(id * 100_000 + i)).await.unwrap();
                }
                Counter::new(mc.clone(), &format!("{run}-producers-done"))
                    .incr(1)
                    .await
                    .unwrap();
            }
            "consumer" => {
                let q: Queue<_, u32> = Queue::new(mc.clone(), &format!("{run}-q"));
                let done = Counter::new(mc.clone(), &format!("{run}-producers-done"));
                loop {
                    match q.pop().await.unwrap() {
                        Some(x) => println!("GOT {x}"),
                        None => {
                            // n = how many producers there are
                            if done.value().await.unwrap() == u64::from(n)
                                && q.pop().await.unwrap().is_none()
                            {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                }
            }
            other => panic!("unknown role {other}"),
        }
    });
}

fn spawn_worker(role: &str, addr: &str, id: usize, n: u32, run: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "multiprocess::worker",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV, format!("{role} {addr} {id} {n} {run}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Runs the workers to completion; returns their stdout.
fn run_all(children: Vec<Child>) -> Vec<String> {
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "worker failed: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            String::from_utf8(out.stdout).unwrap()
        })
        .collect()
}

/// Every multi-process scenario against the server at `addr`.
fn scenarios(addr: &str, run: &str) {
    let rt = crate::support::net_rt();
    let mc = Arc::new(rt.block_on(Client::connect(addr)).unwrap());
    let n = 100u32;
    let total = u64::from(n) * WORKERS as u64;

    // lock: mutual exclusion across processes
    run_all(
        (0..WORKERS)
            .map(|i| spawn_worker("lock", addr, i, n, run))
            .collect(),
    );
    rt.block_on(async {
        assert_eq!(
            Counter::new(mc.clone(), &format!("{run}-violations"))
                .value()
                .await
                .unwrap(),
            0
        );
        assert_eq!(
            Counter::new(mc.clone(), &format!("{run}-entries"))
                .value()
                .await
                .unwrap(),
            total
        );
    });

    // counter: no lost increments, including the racing first create
    run_all(
        (0..WORKERS)
            .map(|i| spawn_worker("counter", addr, i, 500, run))
            .collect(),
    );
    rt.block_on(async {
        let c = Counter::new(mc.clone(), &format!("{run}-counter"));
        assert_eq!(c.value().await.unwrap(), 500 * WORKERS as u64);
    });

    // event log: none lost, none duplicated
    run_all(
        (0..WORKERS)
            .map(|i| spawn_worker("events", addr, i, n, run))
            .collect(),
    );
    rt.block_on(async {
        let log: EventLog<_, Ev> = EventLog::new(
            mc.clone(),
            &format!("{run}-log"),
            60,
            10,
            Arc::new(SystemClock),
        );
        let all = log.fetch(None, None).await.unwrap();
        let unique: HashSet<(u32, u32)> = all.iter().map(|e| (e.who, e.seq)).collect();
        assert_eq!(all.len() as u64, total);
        assert_eq!(unique.len() as u64, total);
    });

    // queue: two producer and two consumer processes; every element exactly once
    let producers = 2;
    let mut children: Vec<Child> = (0..producers)
        .map(|i| spawn_worker("producer", addr, i, n, run))
        .collect();
    children.extend((0..2).map(|i| spawn_worker("consumer", addr, 10 + i, producers as u32, run)));
    let got: Vec<u32> = run_all(children)
        .iter()
        // libtest prints "test ... " without a newline before the first GOT line
        .flat_map(|out| {
            out.lines()
                .filter_map(|l| l.find("GOT ").map(|i| &l[i + 4..]))
                .map(|x| x.trim().parse().unwrap())
                .collect::<Vec<u32>>()
        })
        .collect();
    let want: HashSet<u32> = (0..producers as u32)
        .flat_map(|p| (0..n).map(move |i| p * 100_000 + i))
        .collect();
    let missing: Vec<&u32> = want.iter().filter(|x| !got.contains(x)).collect();
    let left: Vec<u32> = rt.block_on(async {
        let q: Queue<_, u32> = Queue::new(mc.clone(), &format!("{run}-q"));
        let mut left = Vec::new();
        while let Some(x) = q.pop().await.unwrap() {
            left.push(x);
        }
        left
    });
    assert_eq!(
        got.len(),
        want.len(),
        "no element lost or delivered twice; missing {missing:?}, left in queue {left:?}"
    );
    assert_eq!(got.into_iter().collect::<HashSet<_>>(), want);
}

#[test]
fn processes_against_memkitd() {
    let server = crate::servers::Memkitd::start();
    scenarios(&server.addr, "memkitd");
}

/// The same scenarios against real memcached (`/usr/bin/memcached`), when installed.
#[test]
fn processes_against_real_memcached() {
    if let Some(server) = crate::servers::Memcached::start() {
        scenarios(&server.addr, "memcached");
    }
}
