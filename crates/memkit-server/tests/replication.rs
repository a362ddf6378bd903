//! memkitd as a node of a replicated group (`--raft-*`): three processes on 127.0.0.1,
//! started, killed (SIGKILL), wiped and cut off from each other through the testkit's
//! `Group` (relays between every two nodes). What must hold: any node answers every
//! command as one memcached would, with the same CAS everywhere; an acknowledged write
//! survives any minority of nodes dying or being cut off; a node that cannot reach a
//! majority answers SERVER_ERROR, never a false STORED or a stale read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[path = "support/lines.rs"]
mod lines;

use lines::Lines;
use memkit_testkit::server::{Group, GroupOptions};
use memkit_testkit::wire::Until;

const ELECTION: Duration = Duration::from_secs(15);

fn ask(g: &Group, id: u64, req: &str) -> String {
    let mut w = g.wire(id);
    w.ask(req.as_bytes(), Until::LINE).trim_end().to_string()
}

/// `gets key` through node `id`: (value, cas), or `None` on a miss.
fn gets(g: &Group, id: u64, key: &str) -> Option<(String, u64)> {
    let reply = g
        .wire(id)
        .ask(format!("gets {key}\r\n").as_bytes(), Until::END);
    let mut lines = reply.lines();
    let head = lines.next()?;
    if head == "END" {
        return None;
    }
    let cas = head.rsplit(' ').next().unwrap().parse().unwrap();
    Some((lines.next().unwrap().to_string(), cas))
}

/// Waits until some node other than `old` leads, by its own and the others' word.
fn new_leader(g: &Group, old: u64) -> u64 {
    let deadline = Instant::now() + ELECTION;
    loop {
        for id in g.ids().into_iter().filter(|&i| i != old && g.is_up(i)) {
            let s = g.stats(id);
            if s["raft_role"] == "leader" {
                return id;
            }
        }
        assert!(Instant::now() < deadline, "no new leader");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_node_answers_every_command_alike() {
    let g = Group::start(3);
    g.leader(ELECTION);
    assert_eq!(ask(&g, 2, "set k 5 0 3\r\nabc\r\n"), "STORED");
    // Read at once on every node (linearizable): the same value and the same CAS.
    let seen: Vec<_> = g.ids().iter().map(|&i| gets(&g, i, "k").unwrap()).collect();
    assert!(seen.iter().all(|s| *s == seen[0]), "{seen:?}");
    let cas = seen[0].1;
    assert_eq!(ask(&g, 3, "add k 0 0 1\r\nx\r\n"), "NOT_STORED");
    assert_eq!(
        ask(&g, 1, &format!("cas k 0 0 2 {cas}\r\nv2\r\n")),
        "STORED"
    );
    assert_eq!(
        ask(&g, 3, &format!("cas k 0 0 2 {cas}\r\nv3\r\n")),
        "EXISTS"
    );
    assert_eq!(gets(&g, 3, "k").unwrap().0, "v2");
    // Counters: one increment each, through every node.
    assert_eq!(ask(&g, 1, "incr n 1\r\n"), "NOT_FOUND");
    assert_eq!(ask(&g, 2, "set n 0 0 2\r\n10\r\n"), "STORED");
    for id in g.ids() {
        ask(&g, id, "incr n 5\r\n");
    }
    assert_eq!(ask(&g, 3, "decr n 1\r\n"), "24");
    // Meta commands, with their flags.
    assert_eq!(
        ask(&g, 3, "ms m 2 T0 F7 c\r\nhi\r\n").split(' ').next(),
        Some("HD")
    );
    let mg = ask(&g, 1, "mg m f v\r\n");
    assert!(mg.starts_with("VA 2 f7"), "{mg}");
    assert_eq!(ask(&g, 2, "ma n D6 v\r\n"), "VA 2");
    assert_eq!(
        ask(&g, 2, "mg nope N30 v\r\n"),
        "CLIENT_ERROR mg N (create on a miss) is not replicated"
    );
    // A set too large is refused before the log: the old value stays, on every node alike.
    assert_eq!(ask(&g, 2, "set big 0 0 1\r\nx\r\n"), "STORED");
    let big = format!("set big 0 0 {}\r\n{}\r\n", 2 << 20, "y".repeat(2 << 20));
    let r = ask(&g, 2, &big);
    assert!(r.starts_with("SERVER_ERROR object too large"), "{r}");
    for id in g.ids() {
        assert_eq!(gets(&g, id, "big").unwrap().0, "x", "node {id}");
    }
    // touch, gat, delete and flush_all are replicated too.
    assert_eq!(ask(&g, 1, "touch k 1000\r\n"), "TOUCHED");
    let ttl = ask(&g, 3, "mg k t\r\n");
    assert!(
        ttl.starts_with("HD t") && ttl[4..].parse::<u32>().unwrap() > 990,
        "{ttl}"
    );
    // `t` before `T` reports the TTL the touch found, as memcached does.
    let ttl = ask(&g, 2, "mg k t T2000\r\n");
    let left: u32 = ttl.strip_prefix("HD t").unwrap().parse().unwrap();
    assert!((990..=1000).contains(&left), "{ttl}");
    let ttl = ask(&g, 1, "mg k t\r\n");
    assert!(ttl[4..].parse::<u32>().unwrap() > 1990, "{ttl}");
    assert_eq!(ask(&g, 2, "gat 0 k\r\n"), "VALUE k 0 2");
    assert_eq!(ask(&g, 1, "mg k t\r\n"), "HD t-1");
    assert_eq!(ask(&g, 3, "delete k\r\n"), "DELETED");
    assert_eq!(gets(&g, 1, "k"), None);
    assert_eq!(ask(&g, 2, "flush_all\r\n"), "OK");
    for id in g.ids() {
        assert_eq!(gets(&g, id, "n"), None, "node {id} flushed");
        assert_eq!(gets(&g, id, "m"), None, "node {id} flushed");
    }
}

/// A client's pipelined writes go to the group together (`session::gather`): far fewer log
/// entries than writes, and every reply in its place, reads and refusals among them.
#[test]
fn pipelined_writes_share_entries_and_answer_in_order() {
    let g = Group::start(3);
    g.leader(ELECTION);
    let index = |g: &Group| -> u64 { g.stats(3)["raft_last_log_index"].parse().unwrap() };
    let before = index(&g);
    let sets: String = (0..200)
        .map(|i| format!("set p{i} 0 0 {}\r\n{i}\r\n", i.to_string().len()))
        .collect();
    let mut w = g.wire(3);
    assert_eq!(
        w.ask(sets.as_bytes(), Until::Lines(200)),
        "STORED\r\n".repeat(200)
    );
    let entries = index(&g) - before;
    assert!(entries <= 20, "200 pipelined sets took {entries} entries");
    assert_eq!(gets(&g, 1, "p199").unwrap().0, "199");

    let mixed = "set a 0 0 1\r\n1\r\nincr n 1\r\nset n 0 0 1\r\n5\r\nincr n 2\r\n\
                 append a 0 0 1\r\n2\r\nget a\r\nmg x N30 v\r\nset b 0 0 1 noreply\r\nx\r\n\
                 ms c 1 O42\r\nz\r\nmg b v\r\ndelete a\r\nget a\r\n";
    let want = "STORED\r\nNOT_FOUND\r\nSTORED\r\n7\r\nSTORED\r\nVALUE a 0 2\r\n12\r\nEND\r\n\
                CLIENT_ERROR mg N (create on a miss) is not replicated\r\nHD O42\r\nVA 1\r\nx\r\n\
                DELETED\r\nEND\r\n";
    assert_eq!(
        w.ask(mixed.as_bytes(), Until::End(b"DELETED\r\nEND\r\n")),
        want
    );
    // Each write once, in order, on every node.
    for id in g.ids() {
        assert_eq!(ask(&g, id, "get n\r\n"), "VALUE n 0 1");
        assert_eq!(gets(&g, id, "b").unwrap().0, "x");
        assert_eq!(gets(&g, id, "a"), None);
    }
}

/// The state machine's clock moves only when an entry is applied; reads judge expiry and a
/// delayed flush_all at the node's own clock, so an idle group expires items on time.
#[test]
fn items_expire_and_delayed_flushes_land_on_time_without_writes() {
    let g = Group::start(3);
    g.leader(ELECTION);
    assert_eq!(ask(&g, 1, "set short 0 2 1\r\na\r\n"), "STORED");
    assert_eq!(ask(&g, 2, "set long 0 100 1\r\nb\r\n"), "STORED");
    std::thread::sleep(Duration::from_millis(3_100));
    for id in g.ids() {
        assert_eq!(gets(&g, id, "short"), None, "node {id}: expired");
        let ttl = ask(&g, id, "mg long t\r\n");
        let left: u32 = ttl.strip_prefix("HD t").unwrap().parse().unwrap();
        assert!((95..=98).contains(&left), "node {id}: {ttl}");
    }
    assert_eq!(ask(&g, 3, "flush_all 2\r\n"), "OK");
    assert!(gets(&g, 1, "long").is_some(), "the flush is not due yet");
    std::thread::sleep(Duration::from_millis(2_100));
    for id in g.ids() {
        assert_eq!(gets(&g, id, "long"), None, "node {id}: flushed");
    }
}

#[test]
fn stats_name_one_leader_and_the_indexes_move_together() {
    let g = Group::start(3);
    let leader = g.leader(ELECTION);
    let roles: Vec<String> = g
        .ids()
        .iter()
        .map(|&i| g.stats(i)["raft_role"].clone())
        .collect();
    assert_eq!(
        roles.iter().filter(|r| *r == "leader").count(),
        1,
        "{roles:?}"
    );
    assert_eq!(
        roles.iter().filter(|r| *r == "follower").count(),
        2,
        "{roles:?}"
    );
    let before = g.raft_stat(leader, "raft_commit_index");
    for i in 0..10 {
        assert_eq!(
            ask(&g, 1 + i % 3, &format!("set s{i} 0 0 1\r\nx\r\n")),
            "STORED"
        );
    }
    // The tenth write is applied on the node that took it before its reply left; the
    // others catch up within a heartbeat or two.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let applied: Vec<u64> = g
            .ids()
            .iter()
            .map(|&i| g.raft_stat(i, "raft_applied_index"))
            .collect();
        if applied.iter().all(|&a| a >= before + 10) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{applied:?} never reached {}",
            before + 10
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for id in g.ids() {
        let s = g.stats(id);
        let n = |k: &str| s[k].parse::<u64>().unwrap();
        assert_eq!(n("raft_leader"), leader);
        assert!(n("raft_commit_index") >= n("raft_applied_index"));
        assert!(n("raft_last_log_index") >= n("raft_commit_index"));
        assert_eq!(n("raft_node"), id);
    }
}

/// `watch mutations` reports a replicated store, with its outcome, on the node the client
/// sent it to (memcached's `item_store` line), as it reports a store on one server.
#[test]
fn watch_reports_replicated_stores_on_the_node_that_took_them() {
    let g = Group::start(3);
    let leader = g.leader(ELECTION);
    let node = g.ids().into_iter().find(|&i| i != leader).unwrap();
    let mut watcher = g.wire(node);
    assert_eq!(watcher.ask(b"watch mutations\r\n", Until::LINE), "OK\r\n");
    assert_eq!(ask(&g, node, "set wk 0 60 2\r\nab\r\n"), "STORED");
    assert_eq!(ask(&g, node, "add wk 0 0 1\r\nc\r\n"), "NOT_STORED");
    // memcached ends a watch line with \n alone.
    let first = String::from_utf8(watcher.read(Until::End(b"\n"))).unwrap();
    assert!(
        first.contains("type=item_store key=wk status=stored ttl=60"),
        "{first}"
    );
    assert!(first.ends_with("size=2\n"), "{first}");
    let second = String::from_utf8(watcher.read(Until::End(b"\n"))).unwrap();
    assert!(
        second.contains("type=item_store key=wk status=not_stored"),
        "{second}"
    );
}

#[test]
fn stats_detail_counts_writes_on_the_node_that_took_them() {
    let g = Group::start(3);
    let leader = g.leader(ELECTION);
    let follower = g.ids().into_iter().find(|&i| i != leader).unwrap();
    // One connection: `stats detail on` is the node's, the writes are forwarded.
    let mut w = g.wire(follower);
    w.expect(b"stats detail on\r\n", b"OK\r\n");
    w.expect(b"set user:1 0 0 1\r\nx\r\n", b"STORED\r\n");
    w.expect(b"add user:1 0 0 1\r\ny\r\n", b"NOT_STORED\r\n");
    w.expect(b"ms user:2 1 MA\r\nz\r\n", b"NS\r\n");
    w.expect(b"delete user:1\r\n", b"DELETED\r\n");
    w.expect(b"delete user:9\r\n", b"NOT_FOUND\r\n");
    w.expect(b"get user:1\r\n", b"END\r\n");
    // memcached counts every store and delete, whatever came of it, where it was asked.
    assert_eq!(
        w.ask(b"stats detail dump\r\n", Until::END),
        "PREFIX user get 1 hit 0 set 3 del 2\r\nEND\r\n"
    );
    // The leader applied them but was asked nothing.
    let mut l = g.wire(leader);
    l.expect(b"stats detail on\r\n", b"OK\r\n");
    assert_eq!(l.ask(b"stats detail dump\r\n", Until::END), "END\r\n");
}

/// Writers through every node, each owning its keys and writing one at a time; what they
/// had acknowledged, and how many acknowledgements came after `mark` was raised.
struct Writers {
    stop: Arc<AtomicBool>,
    mark: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<(BTreeMap<String, String>, usize)>>,
}

impl Writers {
    fn start(ports: Vec<u16>) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let mark = Arc::new(AtomicBool::new(false));
        let threads = (0..3)
            .map(|w| {
                let (ports, stop, mark) = (ports.clone(), stop.clone(), mark.clone());
                std::thread::spawn(move || write_loop(w, &ports, &stop, &mark))
            })
            .collect();
        Writers {
            stop,
            mark,
            threads,
        }
    }

    fn mark(&self) {
        self.mark.store(true, Ordering::Relaxed);
    }

    fn stop(self) -> (BTreeMap<String, String>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = BTreeMap::new();
        let mut after = 0;
        for t in self.threads {
            let (a, n) = t.join().unwrap();
            all.extend(a);
            after += n;
        }
        (all, after)
    }
}

fn write_loop(
    w: usize,
    ports: &[u16],
    stop: &AtomicBool,
    mark: &AtomicBool,
) -> (BTreeMap<String, String>, usize) {
    let mut acked = BTreeMap::new();
    let mut after = 0;
    let mut at = w;
    let mut conn: Option<Lines> = None;
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let (key, value) = (format!("w{w}-{}", seq % 50), format!("v{seq}"));
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Lines::connect(ports[at % ports.len()]) {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    at += 1;
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            },
        };
        match c.set(&key, &value) {
            Ok(r) if r == "STORED" => {
                acked.insert(key, value);
                after += usize::from(mark.load(Ordering::Relaxed));
            }
            // Not acknowledged: the key's last acknowledged value may or may not have been
            // overwritten, so it is not checked.
            Ok(r) => {
                assert!(r.starts_with("SERVER_ERROR"), "{r}");
                acked.remove(&key);
            }
            Err(_) => {
                acked.remove(&key);
                conn = None;
                at += 1;
            }
        }
    }
    (acked, after)
}

fn ports(g: &Group) -> Vec<u16> {
    g.ids().iter().map(|&i| g.port(i)).collect()
}

/// Every acknowledged value is there on every running node.
fn check_everywhere(g: &Group, acked: &BTreeMap<String, String>) {
    for id in g.ids().into_iter().filter(|&i| g.is_up(i)) {
        let mut c = Lines::connect(g.port(id)).unwrap();
        for (k, v) in acked {
            assert_eq!(
                c.get(k).unwrap().as_deref(),
                Some(v.as_str()),
                "node {id}, {k}"
            );
        }
    }
}

#[test]
fn sigkill_of_the_leader_under_writers_loses_nothing_acknowledged() {
    let mut g = Group::start(3);
    let leader = g.leader(ELECTION);
    let w = Writers::start(ports(&g));
    std::thread::sleep(Duration::from_millis(800));
    g.kill(leader);
    w.mark();
    std::thread::sleep(Duration::from_secs(3));
    let (acked, after) = w.stop();
    assert!(after > 0, "the group took no write after its leader died");
    assert_ne!(g.leader(ELECTION), leader);
    g.start_node(leader);
    g.leader(ELECTION);
    check_everywhere(&g, &acked);
}

#[test]
fn a_cut_off_leader_stops_acknowledging_and_the_majority_goes_on() {
    let g = Group::start_with(GroupOptions {
        relays: true,
        ..Default::default()
    });
    let old = g.leader(ELECTION);
    assert_eq!(ask(&g, old, "set before 0 0 1\r\nb\r\n"), "STORED");
    let w = Writers::start(ports(&g));
    std::thread::sleep(Duration::from_millis(500));
    g.isolate(old);
    w.mark();
    // Through the old leader: no acknowledgement, and no read of what it alone holds.
    let r = ask(&g, old, "set cut 0 0 1\r\nx\r\n");
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
    let r = ask(&g, old, "get before\r\n");
    assert!(
        r.starts_with("SERVER_ERROR"),
        "a linearizable read on a cut-off node: {r}"
    );
    let new = new_leader(&g, old);
    assert_ne!(new, old);
    // Its lease is long gone: a write through the new leader is never read stale there.
    assert_eq!(ask(&g, new, "set before 0 0 1\r\nc\r\n"), "STORED");
    let r = ask(&g, old, "get before\r\n");
    assert!(r.starts_with("SERVER_ERROR"), "the old leader read: {r}");
    let term = |id| g.raft_stat(id, "raft_term");
    if g.stats(old)["raft_role"] == "leader" {
        assert!(term(old) < term(new), "two leaders in one term");
    }
    std::thread::sleep(Duration::from_secs(1));
    let (acked, after) = w.stop();
    assert!(after > 0, "the majority took no write");
    g.heal(old);
    assert_eq!(g.leader(ELECTION), new, "the healed node follows");
    check_everywhere(&g, &acked);
    assert_eq!(gets(&g, old, "cut"), None, "the refused write never landed");
    assert_eq!(gets(&g, old, "before").unwrap().0, "c");
}

#[test]
fn a_minority_answers_server_error_until_a_majority_is_back() {
    let mut g = Group::start(3);
    g.leader(ELECTION);
    assert_eq!(ask(&g, 1, "set k 0 0 1\r\na\r\n"), "STORED");
    g.kill(2);
    g.kill(3);
    let r = ask(&g, 1, "set k 0 0 1\r\nb\r\n");
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
    let r = ask(&g, 1, "incr k 1\r\n");
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
    // A read that cannot be served is one reply, the error line (no END after it): the
    // next request's reply is the next line.
    let r = g.wire(1).ask(b"get k j\r\nversion\r\n", Until::Lines(2));
    let lines: Vec<&str> = r.lines().collect();
    assert!(lines[0].starts_with("SERVER_ERROR"), "{r}");
    assert!(lines[1].starts_with("VERSION"), "{r}");
    g.start_node(3);
    g.leader(ELECTION);
    assert_eq!(ask(&g, 1, "set k 0 0 1\r\nc\r\n"), "STORED");
    assert_eq!(gets(&g, 3, "k").unwrap().0, "c");
}

#[test]
fn every_node_killed_at_once_comes_back_with_every_write() {
    let mut g = Group::start(3);
    g.leader(ELECTION);
    let w = Writers::start(ports(&g));
    std::thread::sleep(Duration::from_millis(1500));
    for id in g.ids() {
        g.kill(id);
    }
    let (acked, _) = w.stop();
    assert!(!acked.is_empty());
    for id in g.ids() {
        g.start_node(id);
    }
    g.leader(ELECTION);
    check_everywhere(&g, &acked);
}

#[test]
fn a_wiped_follower_catches_up_from_a_snapshot() {
    let mut g = Group::start_with(GroupOptions {
        args: vec!["--raft-snapshot-after".into(), "200".into()],
        ..Default::default()
    });
    let leader = g.leader(ELECTION);
    let follower = g.ids().into_iter().rev().find(|&i| i != leader).unwrap();
    let mut acked = BTreeMap::new();
    let mut c = Lines::connect(g.port(leader)).unwrap();
    for i in 0..600 {
        let (k, v) = (format!("k{i}"), format!("value-{i}"));
        assert_eq!(c.set(&k, &v).unwrap(), "STORED");
        acked.insert(k, v);
    }
    g.kill(follower);
    g.wipe(follower);
    g.start_node(follower);
    g.leader(ELECTION);
    let deadline = Instant::now() + Duration::from_secs(20);
    while g.raft_stat(follower, "raft_applied_index") < g.raft_stat(leader, "raft_applied_index") {
        assert!(Instant::now() < deadline, "the wiped node never caught up");
        std::thread::sleep(Duration::from_millis(50));
    }
    check_everywhere(&g, &acked);
}

#[test]
fn a_node_whose_disk_fills_stops_acknowledging_and_the_group_goes_on() {
    let scratch = memkit_testkit::tempdir("raft-full");
    let small = memkit_testkit::tempdir::Tmpfs::mount(&scratch.path().join("small"), 8);
    let g = Group::start_with(GroupOptions {
        dirs: [(3, small.path().join("node3"))].into(),
        ..Default::default()
    });
    let leader = g.leader(ELECTION);
    // 16 KiB values until node 3's 8 MiB are gone: its log cannot take them. Random
    // letters, which the log's compression cannot shrink much.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut value = move || {
        (0..16 << 10)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'a' + (seed % 26) as u8)
            })
            .collect::<String>()
    };
    let mut acked = BTreeMap::new();
    let mut c = Lines::connect(g.port(1)).unwrap();
    let mut full = false;
    let mut refused = 0;
    for i in 0..3000 {
        let (key, value) = (format!("big{}", i % 40), value());
        match c.set(&key, &value).unwrap().as_str() {
            "STORED" => {
                acked.insert(key, value);
            }
            // Node 3 leading when its disk fills: the writes in flight then have no known
            // outcome (SERVER_ERROR, not acknowledged) until the others elect.
            r if leader == 3 && r.starts_with("SERVER_ERROR") && refused < 5 => {
                eprintln!("while node 3 stops: {r}");
                acked.remove(&key);
                refused += 1;
            }
            r => {
                for id in g.ids() {
                    eprintln!(
                        "node {id}: {:?}",
                        g.stats(id)
                            .into_iter()
                            .filter(|(k, _)| k.starts_with("raft"))
                            .collect::<Vec<_>>()
                    );
                }
                panic!("the healthy majority refused write {i} (leader {leader}): {r}")
            }
        }
        if i % 20 == 19 {
            let r = ask(&g, 3, "set probe 0 0 1\r\np\r\n");
            if r.starts_with("SERVER_ERROR") {
                full = true;
                break;
            }
            assert_eq!(r, "STORED", "node 3 before its disk filled");
        }
    }
    assert!(full, "node 3 never stopped acknowledging");
    // The other two go on, and hold every acknowledged write.
    for i in 0..20 {
        let key = format!("after{i}");
        assert_eq!(c.set(&key, "x").unwrap(), "STORED");
        acked.insert(key, "x".into());
    }
    for id in [1, 2] {
        let mut c = Lines::connect(g.port(id)).unwrap();
        for (k, v) in &acked {
            assert_eq!(
                c.get(k).unwrap().as_deref(),
                Some(v.as_str()),
                "node {id}, {k}"
            );
        }
    }
}
