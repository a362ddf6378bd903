//! Linearizability of real memkitd processes, over the memcached text protocol: a group of
//! three nodes (the testkit's `Group`, relays between every two) and four clients, each on
//! a connection of its own to a node picked at random (another one after a connection
//! error), issuing random `set`, `get`, `gets` + `cas`, `incr` and `delete` on three keys
//! while faults are injected: the leader cut off then healed, the leader SIGKILLed and
//! restarted, a follower SIGKILLed and restarted, a follower cut off. The recorded history
//! must pass [`memkit_testkit::linear::check`].
//!
//! Why a second such test after memkit-raft's: that one drives the library in-process.
//! This one goes through everything a client goes through: the text protocol, the node a
//! client reached forwarding to the leader, the reply's mapping back to memcached's words,
//! process death (SIGKILL, not a shutdown) and restarts from the directory.
//!
//! What a reply means: a memcached answer completes the operation in the history; a
//! `SERVER_ERROR`, a connection error or no reply within [`REPLY_WAIT`] leaves it
//! unanswered (it may or may not have taken effect, and the checker allows both). Any
//! other answer (`NOT_STORED` to a `set`, garbage) fails the round.
//!
//! Besides the history, each round samples every node's `stats` while the faults run: no
//! two nodes may ever report `raft_role leader` with the same `raft_term` (Raft's election
//! safety, as the nodes themselves report it).
//!
//! Rounds: 3 by default, about 10 s each (a fresh group each, so every key starts absent, as the model
//! assumes); `MEMKIT_LINEAR_ROUNDS=N` runs N, a soak:
//! `MEMKIT_LINEAR_ROUNDS=100 cargo test -p memkit-server --test linearizable -- --nocapture`
//! (`--release` for more operations a round). `MEMKIT_LINEAR_SEED` fixes the first round's
//! seed (the faults' order and the clients' choices; timing still varies).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{JoinHandle, sleep, spawn};
use std::time::{Duration, Instant};

#[path = "support/lines.rs"]
mod lines;

use lines::Lines;
use memkit_testkit::fuzz::Rng;
use memkit_testkit::linear::{self, Op, Recorder, Ret};
use memkit_testkit::server::{Group, GroupOptions};
use memkit_testkit::wire::{BlockingWire, Until};

const KEYS: [&str; 3] = ["a", "b", "c"];
const CLIENTS: u32 = 4;
/// How long the clients go on once the last fault is healed (what a healed node answers
/// is checked too).
const TAIL: Duration = Duration::from_millis(500);
/// How long a client waits for a reply before it gives up on it (unknown outcome) and
/// moves to another node. The group's nodes answer `SERVER_ERROR` after 3 s without a
/// leader or a majority (`Group` passes `--raft-timeout-ms 3000`): this is past that.
const REPLY_WAIT: Duration = Duration::from_secs(4);
const ELECTION: Duration = Duration::from_secs(15);

/// A generator for `seed` (any seed: xorshift must not start at 0).
fn rng(seed: u64) -> Rng {
    Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
}

/// How one request went.
enum Outcome {
    /// A memcached answer: the operation returned this.
    Answer(Ret),
    /// `SERVER_ERROR`: the group could not say (no leader, no majority in time).
    Unknown(String),
    /// An answer no memcached gives to this request: the round fails.
    Wrong(String),
}

/// The request's text.
fn request(key: &str, op: &Op) -> String {
    let store = |verb: &str, value: &[u8], token: &str| {
        let v = String::from_utf8_lossy(value);
        format!("{verb} {key} 0 0 {}{token}\r\n{v}\r\n", value.len())
    };
    match op {
        Op::Set { value } => store("set", value, ""),
        Op::Cas { token, value, .. } => store("cas", value, &format!(" {token}")),
        Op::Get => format!("get {key}\r\n"),
        Op::Gets => format!("gets {key}\r\n"),
        Op::Incr { delta } => format!("incr {key} {delta}\r\n"),
        Op::Delete => format!("delete {key}\r\n"),
    }
}

/// Sends `op` on `key` and reads its reply; `Err` on a connection error or a timeout.
fn exchange(conn: &mut Lines, key: &str, op: &Op) -> std::io::Result<Outcome> {
    let head = conn.ask(&request(key, op))?;
    if head.starts_with("SERVER_ERROR") {
        return Ok(Outcome::Unknown(head));
    }
    let ret = match (op, head.as_str()) {
        (Op::Set { .. } | Op::Cas { .. }, "STORED") => Ret::Stored,
        (Op::Cas { .. }, "EXISTS") => Ret::Exists,
        (Op::Cas { .. } | Op::Incr { .. } | Op::Delete, "NOT_FOUND") => Ret::NotFound,
        (Op::Delete, "DELETED") => Ret::Deleted,
        (Op::Get | Op::Gets, "END") => Ret::Miss,
        (Op::Get | Op::Gets, h) if h.starts_with("VALUE ") => return hit(conn, key, op, h),
        (Op::Incr { .. }, h) if h.starts_with("CLIENT_ERROR cannot increment") => Ret::NonNumeric,
        (Op::Incr { .. }, h) if h.parse::<u64>().is_ok() => Ret::Number(h.parse().unwrap()),
        (_, h) => return Ok(Outcome::Wrong(format!("{op:?} on {key}: {h:?}"))),
    };
    Ok(Outcome::Answer(ret))
}

/// The rest of a `VALUE key flags bytes [cas]` reply: the data line and `END`.
fn hit(conn: &mut Lines, key: &str, op: &Op, head: &str) -> std::io::Result<Outcome> {
    let words: Vec<&str> = head.split(' ').collect();
    let gets = *op == Op::Gets;
    let cas = match (gets, words.as_slice()) {
        (false, ["VALUE", k, _, _]) if *k == key => None,
        (true, ["VALUE", k, _, _, cas]) if *k == key => cas.parse().ok(),
        _ => return Ok(Outcome::Wrong(format!("{op:?} on {key}: {head:?}"))),
    };
    if gets && cas.is_none() {
        return Ok(Outcome::Wrong(format!("{op:?} on {key}: {head:?}")));
    }
    let value = conn.line()?;
    let end = conn.line()?;
    if end != "END" || words[3].parse() != Ok(value.len()) {
        let what = format!("{op:?} on {key}: {head:?} {value:?} {end:?}");
        return Ok(Outcome::Wrong(what));
    }
    Ok(Outcome::Answer(Ret::Hit {
        value: value.into_bytes(),
        cas,
    }))
}

/// The next operation for client `c`: unique values (see `linear`), numbers 2^20 apart
/// so that `incr` never reaches another write's; a `cas` from the key's last `gets` hit.
fn pick(
    rng: &mut Rng,
    c: u32,
    seq: u64,
    key: &str,
    seen: &mut HashMap<String, (Vec<u8>, u64)>,
) -> Op {
    let number = (u64::from(c) + 1) << 40 | seq << 20;
    match rng.below(20) {
        0..=3 => Op::Set {
            value: number.to_string().into_bytes(),
        },
        // Not a number: `incr` answers CLIENT_ERROR on it.
        4..=5 => Op::Set {
            value: format!("t{c}-{seq}").into_bytes(),
        },
        6..=9 => Op::Get,
        10..=12 => Op::Gets,
        13..=15 => match seen.remove(key) {
            Some((read, token)) => Op::Cas {
                read,
                token,
                value: format!("c{c}-{seq}").into_bytes(),
            },
            None => Op::Gets,
        },
        16..=18 => Op::Incr { delta: 1 },
        _ => Op::Delete,
    }
}

/// One client: random operations until `stop`, on one connection at a time; `Err` names
/// a wrong answer.
fn client(
    c: u32,
    ports: &[u16],
    rec: &Recorder,
    stop: &AtomicBool,
    seed: u64,
) -> Result<(), String> {
    let mut rng = rng(seed);
    let mut seen = HashMap::new();
    let mut at = rng.below(ports.len());
    let mut conn: Option<Lines> = None;
    let mut seq = 0u64;
    // What the history does not keep, for a wrong answer's report: unknowns' replies and
    // reconnections.
    let mut recent = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let lines = match conn.as_mut() {
            Some(l) => l,
            None => match Lines::connect_waiting(ports[at], REPLY_WAIT) {
                Ok(l) => {
                    recent.push(format!("connected to port {}", ports[at]));
                    conn.insert(l)
                }
                Err(_) => {
                    // Down (killed, restarting): another node.
                    at = (at + 1 + rng.below(ports.len() - 1)) % ports.len();
                    sleep(Duration::from_millis(20));
                    continue;
                }
            },
        };
        seq += 1;
        let key = KEYS[rng.below(KEYS.len())];
        let op = pick(&mut rng, c, seq, key, &mut seen);
        let call = rec.invoke(c, key, op.clone());
        match exchange(lines, key, &op) {
            Ok(Outcome::Answer(ret)) => {
                if let (
                    Op::Gets,
                    Ret::Hit {
                        value,
                        cas: Some(t),
                    },
                ) = (&op, &ret)
                {
                    seen.insert(key.to_string(), (value.clone(), *t));
                }
                rec.complete(call, ret);
            }
            // Not completed: the history keeps it as unknown. The connection stays in step
            // (one request, one reply: a failed retrieval is its error line alone), so any
            // stray line would show as a wrong answer to the next request.
            Ok(Outcome::Unknown(why)) => {
                recent.push(format!("#{} {why}", call.0));
            }
            Ok(Outcome::Wrong(what)) => {
                return Err(format!(
                    "client {c}, node port {}: #{}: {what}; before, on this client: {}",
                    ports[at],
                    call.0,
                    recent.join("; ")
                ));
            }
            // A reply may still come on this connection: never read it as the next's.
            Err(e) => {
                recent.push(format!(
                    "#{} {:?}, dropped the connection",
                    call.0,
                    e.kind()
                ));
                conn = None;
                at = (at + 1 + rng.below(ports.len() - 1)) % ports.len();
            }
        }
        // The last few are enough.
        if recent.len() > 12 {
            recent.remove(0);
        }
    }
    Ok(())
}

/// A node's `stats`, by name; `None` if it does not answer within a second (down).
fn stats_of(port: u16) -> Option<BTreeMap<String, String>> {
    let mut w = BlockingWire::tcp(("127.0.0.1", port))
        .ok()?
        .with_timeout(Duration::from_secs(1));
    let reply = w.try_ask(b"stats\r\n", Until::END).ok()?;
    let stats = reply
        .lines()
        .filter_map(|l| l.strip_prefix("STAT "))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Some(stats)
}

/// `(term, node)` if the node at `port` reports itself leader.
fn leads(port: u16) -> Option<(u64, u64)> {
    let s = stats_of(port)?;
    if s.get("raft_role").map(String::as_str) != Some("leader") {
        return None;
    }
    Some((
        s.get("raft_term")?.parse().ok()?,
        s.get("raft_node")?.parse().ok()?,
    ))
}

/// Who reported leading which term, sampled over the round.
#[derive(Default)]
struct Sightings {
    leaders: BTreeMap<u64, BTreeSet<u64>>,
    samples: usize,
}

/// Samples every node's role and term until `stop`.
fn sample_leaders(ports: Vec<u16>, stop: Arc<AtomicBool>) -> Sightings {
    let mut seen = Sightings::default();
    while !stop.load(Ordering::Relaxed) {
        for &p in &ports {
            if let Some((term, node)) = leads(p) {
                seen.leaders.entry(term).or_default().insert(node);
            }
        }
        seen.samples += 1;
        sleep(Duration::from_millis(30));
    }
    seen
}

/// The running node that reports leading the highest term, waiting up to 3 s for one.
fn current_leader(g: &Group) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let best = g
            .ids()
            .into_iter()
            .filter(|&i| g.is_up(i))
            .filter_map(|i| leads(g.port(i)))
            .max();
        if best.is_some() || Instant::now() > deadline {
            return best.map(|(_, node)| node);
        }
        sleep(Duration::from_millis(50));
    }
}

/// The four faults a round injects, in an order of its own.
#[derive(Debug, Clone, Copy)]
enum Fault {
    IsolateLeader,
    KillLeader,
    KillFollower,
    IsolateFollower,
}

/// The four faults, one after another in a random order, each healed before the next;
/// what was done, when (ms since the clients started).
fn faults(g: &mut Group, start: Instant, rng: &mut Rng) -> Vec<String> {
    let mut order = [
        Fault::IsolateLeader,
        Fault::KillLeader,
        Fault::KillFollower,
        Fault::IsolateFollower,
    ];
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let ms = |lo: u64, hi: u64, rng: &mut Rng| {
        Duration::from_millis(lo + rng.below((hi - lo) as usize) as u64)
    };
    let at = || start.elapsed().as_millis();
    let mut log = Vec::new();
    for fault in order {
        sleep(ms(100, 400, rng));
        let Some(leader) = current_leader(g) else {
            log.push(format!("{}ms: no leader, {fault:?} skipped", at()));
            continue;
        };
        let follower = (leader + rng.below(2) as u64) % 3 + 1;
        // The others elect about 2 to 3 s after the leader's last heartbeat (measured, with
        // `Group`'s 100 ms heartbeat): most leader faults see an election, some end before
        // (the old leader back in its term). A follower's need not be long.
        let (id, kill, hold) = match fault {
            Fault::IsolateLeader => (leader, false, ms(1500, 3500, rng)),
            Fault::KillLeader => (leader, true, ms(1500, 3500, rng)),
            Fault::KillFollower => (follower, true, ms(300, 1500, rng)),
            Fault::IsolateFollower => (follower, false, ms(300, 1500, rng)),
        };
        let what = if kill { "killed" } else { "cut off" };
        log.push(format!(
            "{}ms: node {id} {what} (leader {leader}) for {hold:?}",
            at()
        ));
        if kill {
            g.kill(id);
            sleep(hold);
            g.start_node(id);
        } else {
            g.isolate(id);
            sleep(hold);
            g.heal(id);
        }
        log.push(format!("{}ms: node {id} back", at()));
    }
    log
}

/// What a round did, for the soak's totals.
struct Tally {
    ops: usize,
    unknown: usize,
}

/// One round: a fresh group, the clients and the sampler while the faults run and for
/// [`TAIL`] after; then the checks.
fn round(n: u64, seed: u64) -> Tally {
    let mut g = Group::start_with(GroupOptions {
        relays: true,
        ..Default::default()
    });
    g.leader(ELECTION);
    let ports: Vec<u16> = g.ids().iter().map(|&i| g.port(i)).collect();
    let rec = Recorder::new();
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<JoinHandle<Result<(), String>>> = (0..CLIENTS)
        .map(|c| {
            let (ports, rec, stop) = (ports.clone(), rec.clone(), stop.clone());
            let seed = seed ^ u64::from(c + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            spawn(move || client(c, &ports, &rec, &stop, seed))
        })
        .collect();
    let sampled = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (ports, sampled) = (ports.clone(), sampled.clone());
        spawn(move || sample_leaders(ports, sampled))
    };
    let log = faults(&mut g, start, &mut rng(seed));
    sleep(TAIL);
    stop.store(true, Ordering::Relaxed);
    let wrong: Vec<String> = clients
        .into_iter()
        .filter_map(|c| c.join().expect("client panicked").err())
        .collect();
    let leader = g.leader(ELECTION);
    sampled.store(true, Ordering::Relaxed);
    let seen = sampler.join().expect("sampler panicked");
    let history = rec.history();
    let (ops, unknown) = (history.operations().len(), history.unknown());
    let checked = Instant::now();
    let verdict = linear::check(&history);
    let faults = log.join("\n  ");
    eprintln!(
        "round {n} (seed {seed:#x}): {ops} operations ({unknown} unanswered), leader {leader} \
         at the end; terms with a leader seen: {:?} ({} samples); checked in {:?}\n  {faults}",
        seen.leaders,
        seen.samples,
        checked.elapsed()
    );
    let fail = |what: String| -> ! {
        panic!(
            "round {n} (seed {seed:#x}): {what}\nfaults (ms since the clients started, as the history's times):\n  {faults}"
        )
    };
    if !wrong.is_empty() {
        fail(format!("answers no memcached gives:\n{}", wrong.join("\n")));
    }
    for (term, nodes) in &seen.leaders {
        if nodes.len() > 1 {
            fail(format!("nodes {nodes:?} all reported leading term {term}"));
        }
    }
    if let Err(e) = verdict {
        fail(format!("not linearizable:\n{e}"));
    }
    assert!(
        ops - unknown > 50,
        "round {n}: too few operations answered ({}) to mean anything",
        ops - unknown
    );
    Tally { ops, unknown }
}

#[test]
fn histories_under_faults_are_linearizable() {
    let (rounds, first) = linear::soak_plan(3);
    let began = Instant::now();
    let (mut ops, mut unknown) = (0, 0);
    for n in 0..rounds {
        let t = round(n, first.wrapping_add(n));
        ops += t.ops;
        unknown += t.unknown;
    }
    eprintln!(
        "{rounds} rounds in {:?}: {ops} operations, {unknown} unanswered",
        began.elapsed()
    );
}
