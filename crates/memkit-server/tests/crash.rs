//! Crash safety of persistent mode: memkitd (`--persist DIR`, `sync` durability) under
//! concurrent writers is killed with SIGKILL at random moments, again and again. After each
//! restart every acknowledged write must be there with its value, flags and CAS, CAS values
//! must keep growing, and the store must open every time.
//!
//! Each writer owns its keys and runs one request at a time, so at the kill it has at most
//! one write in flight: that one may or may not have landed, everything acknowledged must
//! have. Odd-numbered writers make their sets over the binary protocol: its replies wait
//! for durability like the text ones. Cycles: `MEMKIT_CRASH_CYCLES` (default 20). Only
//! 127.0.0.1; only our own child is killed.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[path = "support/daemon.rs"]
mod daemon;
#[path = "support/lines.rs"]
mod lines;

use lines::Lines;
use memkit_testkit::wire::Until;
use memkit_testkit::{TestServer, tempdir};

const WRITERS: usize = 4;
const SET_KEYS: u64 = 16;

/// A connection to the server under test: its first request picks text or binary.
type Conn = Lines;

/// A binary `SET` (on a connection that speaks binary: its first byte, 0x80, picks the
/// protocol) → the CAS in the reply's header, `None` if not stored.
fn bin_set(c: &mut Lines, key: &str, value: &str, flags: u32) -> std::io::Result<Option<u64>> {
    use memkit_protocol::binary::{Status, decode_response, encode_request, op};
    let mut extras = flags.to_be_bytes().to_vec();
    extras.extend_from_slice(&0u32.to_be_bytes());
    let mut frame = Vec::new();
    encode_request(
        &mut frame,
        op::SET,
        7,
        0,
        &extras,
        key.as_bytes(),
        value.as_bytes(),
    );
    c.0.try_send(&frame)?;
    let reply = c.0.try_read(Until::Frame)?;
    let Ok(Some((r, _))) = decode_response(&reply) else {
        panic!("not a response frame: {reply:?}");
    };
    assert_eq!(r.header.opaque, 7);
    let ok = r.header.status == Status::Ok as u16;
    Ok(ok.then_some(r.header.cas))
}

/// What a writer knows was acknowledged, and what it had in flight when the server died.
#[derive(Debug, Default, Clone)]
struct Acked {
    sets: HashMap<u64, (String, u32, u64)>,
    counter: u64,
    log_len: u64,
    cas_value: u64,
    in_flight: Option<Op>,
    /// The highest CAS seen (and acknowledged) so far.
    max_cas: u64,
    /// The highest CAS seen before the last crash: every later write's CAS is above it.
    floor: u64,
    ops: u64,
}

#[derive(Debug, Clone)]
enum Op {
    Set(u64, String, u32),
    Incr,
    Append,
    Cas,
}

fn writer(port: u16, w: usize, mut st: Acked, stop: Arc<AtomicBool>, seed: u64) -> Acked {
    let Ok(mut c) = Conn::connect(port) else {
        return st;
    };
    let mut bin = match w % 2 {
        1 => match Conn::connect(port) {
            Ok(b) => Some(b),
            Err(_) => return st,
        },
        _ => None,
    };
    let mut rng = seed;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while !stop.load(Ordering::Relaxed) {
        let r = next();
        let op = match r % 4 {
            0 => {
                let k = next() % SET_KEYS;
                Op::Set(k, format!("v{w}-{}", st.ops), (next() % 1000) as u32)
            }
            1 => Op::Incr,
            2 => Op::Append,
            _ => Op::Cas,
        };
        st.in_flight = Some(op.clone());
        let done: std::io::Result<()> = (|| {
            match &op {
                Op::Set(k, v, f) => {
                    let key = format!("w{w}:s{k}");
                    let cas = match bin.as_mut() {
                        Some(b) => bin_set(b, &key, v, *f)?,
                        None => c.ms(&key, v, *f)?,
                    }
                    .expect("stored");
                    let prev = st.sets.get(k).map_or(0, |s| s.2);
                    // Per key, CAS grows; across a restart it grows past everything
                    // issued before (within one run shards count CAS independently).
                    assert!(cas > prev && cas > st.floor, "CAS must grow");
                    st.max_cas = st.max_cas.max(cas);
                    st.sets.insert(*k, (v.clone(), *f, cas));
                }
                Op::Incr => {
                    let r = c.ask(&format!("incr w{w}:ctr 1\r\n"))?;
                    st.counter = r.parse().unwrap_or_else(|_| panic!("incr: {r}"));
                }
                Op::Append => {
                    let r = c.ask(&format!("append w{w}:log 0 0 2\r\nx,\r\n"))?;
                    assert_eq!(r, "STORED");
                    st.log_len += 1;
                }
                Op::Cas => {
                    let key = format!("w{w}:cas");
                    let (v, _, cas) = c.mg(&key)?.expect("cas key exists");
                    let n: u64 = v.parse().unwrap();
                    assert_eq!(n, st.cas_value, "nobody else writes this key");
                    let r = c.ask(&format!(
                        "cas {key} 0 0 {} {cas}\r\n{}\r\n",
                        (n + 1).to_string().len(),
                        n + 1
                    ))?;
                    assert_eq!(r, "STORED");
                    st.cas_value = n + 1;
                }
            }
            Ok(())
        })();
        if done.is_err() {
            return st; // the server died with `op` in flight
        }
        st.in_flight = None;
        st.ops += 1;
    }
    st
}

/// Checks the restarted server against what was acknowledged; returns the state to go on
/// from (an in-flight write that landed counts as acknowledged from now on).
fn verify(port: u16, w: usize, mut st: Acked) -> Acked {
    let mut c = Conn::connect(port).expect("connect after restart");
    let fl = st.in_flight.take();
    for k in 0..SET_KEYS {
        let got = c.mg(&format!("w{w}:s{k}")).unwrap();
        let want = st.sets.get(&k).cloned();
        match (&fl, got, want) {
            (Some(Op::Set(fk, v, f)), Some(g), _) if *fk == k && g.0 == *v => {
                assert_eq!(g.1, *f, "in-flight set landed with its flags");
                assert!(g.2 > st.floor);
                st.max_cas = st.max_cas.max(g.2);
                st.sets.insert(k, g);
            }
            (_, got, want) => assert_eq!(got, want, "writer {w} key s{k}"),
        }
    }
    let ctr = c.mg(&format!("w{w}:ctr")).unwrap().unwrap().0;
    let ctr: u64 = ctr.trim().parse().unwrap();
    let in_flight = |o: fn(&Op) -> bool| fl.as_ref().is_some_and(o);
    assert!(
        ctr == st.counter || (in_flight(|o| matches!(o, Op::Incr)) && ctr == st.counter + 1),
        "writer {w}: counter {ctr}, acknowledged {}",
        st.counter
    );
    st.counter = ctr;
    let log = c.mg(&format!("w{w}:log")).unwrap().unwrap().0;
    let n = (log.len() / 2) as u64;
    assert_eq!(log, "x,".repeat(n as usize), "log holds whole appends only");
    assert!(
        n == st.log_len || (in_flight(|o| matches!(o, Op::Append)) && n == st.log_len + 1),
        "writer {w}: log {n}, acknowledged {}",
        st.log_len
    );
    st.log_len = n;
    let v: u64 = c
        .mg(&format!("w{w}:cas"))
        .unwrap()
        .unwrap()
        .0
        .parse()
        .unwrap();
    assert!(
        v == st.cas_value || (in_flight(|o| matches!(o, Op::Cas)) && v == st.cas_value + 1),
        "writer {w}: cas value {v}, acknowledged {}",
        st.cas_value
    );
    st.cas_value = v;
    st
}

/// memkitd (two worker threads) over the store in `dir`, once it is ready: recovered and
/// listening.
fn start(dir: &std::path::Path) -> (TestServer, u16) {
    let server = daemon::launch(&["-t", "2", "--persist", dir.to_str().unwrap()]).start();
    let port = server.port();
    (server, port)
}

#[test]
fn sigkill_under_concurrent_writes_loses_no_acknowledged_write() {
    let cycles: usize = std::env::var("MEMKIT_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let scratch = tempdir("crash");
    let dir = scratch.path().join("store");
    let (mut child, mut port) = start(&dir);
    {
        let mut c = Conn::connect(port).unwrap();
        for w in 0..WRITERS {
            for (k, v) in [("ctr", "0"), ("log", ""), ("cas", "0")] {
                let r = c.ask(&format!("set w{w}:{k} 0 0 {}\r\n{v}\r\n", v.len()));
                assert_eq!(r.unwrap(), "STORED");
            }
        }
    }
    let mut states = vec![Acked::default(); WRITERS];
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(std::process::id());
    let (mut total_ops, started) = (0, Instant::now());
    for cycle in 0..cycles {
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = states
            .drain(..)
            .enumerate()
            .map(|(w, st)| {
                let stop = stop.clone();
                let s = seed.wrapping_mul(2 * w as u64 + 1) | 1;
                std::thread::spawn(move || writer(port, w, st, stop, s))
            })
            .collect();
        seed = seed.rotate_left(7) ^ 0xA5A5_5A5A_0F0F_F0F0;
        // Kill at a random moment while the writers are busy.
        std::thread::sleep(Duration::from_millis(30 + seed % 300));
        child.kill(); // SIGKILL
        stop.store(true, Ordering::Relaxed);
        let crashed: Vec<Acked> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let max_before = crashed.iter().map(|s| s.max_cas).max().unwrap_or(0);
        (child, port) = start(&dir);
        states = crashed
            .into_iter()
            .enumerate()
            .map(|(w, st)| {
                total_ops += st.ops;
                verify(port, w, st)
            })
            .collect();
        // A write after the restart gets a CAS above everything before the crash.
        let mut c = Conn::connect(port).unwrap();
        let cas = c.ms("probe", &cycle.to_string(), 0).unwrap().unwrap();
        assert!(cas > max_before, "cycle {cycle}: CAS {cas} <= {max_before}");
        for s in states.iter_mut() {
            s.floor = max_before.max(s.max_cas);
        }
    }
    drop(child);
    eprintln!(
        "crash test: {cycles} SIGKILL cycles, {total_ops} acknowledged writes verified, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
