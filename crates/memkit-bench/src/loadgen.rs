//! The server bench's load generator: tokio, N connections, memcached's text protocol or
//! its binary protocol ([`Proto`]; the binary side is the private `binary` module, on
//! `memkit_protocol`'s codec).
//!
//! - [`closed_loop`]: every connection keeps up to `depth` requests in flight (refilled as
//!   replies arrive), until the deadline or the shared request budget runs out. A get that
//!   misses can be followed by a set of the same key on the same connection
//!   (get-then-set-on-miss, the cache-aside pattern).
//! - [`open_loop`]: a pacing thread hands out send times at a fixed offered load, in turn
//!   over the connections, one request in flight each; latency is measured from the
//!   scheduled send time when the connection was still busy then (no coordinated omission),
//!   else from the actual send.
//!
//! What is sent is a pure function of the seed and the connection's index, so both servers
//! get the same requests, in either protocol. A closed-loop run that is still waiting for a
//! reply [`STALL`] after its deadline fails: a server that stops answering cannot stall the
//! bench or look fast.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::workload::{Dist, KeyGen, MAX_GEN_KEY, mix64};

mod binary;

/// How long a closed-loop run may wait for its last replies after its deadline.
pub const STALL: Duration = Duration::from_secs(30);

/// The protocol a closed-loop run speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Proto {
    /// memcached's text protocol (`get`, `set`, multi-key `get`).
    #[default]
    Text,
    /// memcached's binary protocol: `GET` and `SET` frames, every reply's magic, opcode,
    /// opaque and status checked, and a hit's flags, length and first bytes.
    Binary,
}

/// Key and value shape of every request.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Key lengths.
    pub keys: KeyGen,
    /// Value length of every set.
    pub value_len: usize,
}

/// What one connection sends.
#[derive(Debug, Clone)]
pub enum Source {
    /// Random gets and sets: `get_pct`% gets; keys from `dist`, plus `offset`.
    Mix {
        /// Percentage of gets.
        get_pct: u32,
        /// Key picks.
        dist: Dist,
        /// Added to every key number (to use a different key range).
        offset: u64,
        /// Follow a missed get with a set of that key.
        set_on_miss: bool,
    },
    /// Multi-gets of `n` random keys.
    MultiGet {
        /// Keys per request.
        n: usize,
        /// Key picks.
        dist: Dist,
    },
    /// Sets of `next, next + step, ...` below `end` (a fill, split over connections).
    Fill {
        /// Next key number.
        next: u64,
        /// First key number not set.
        end: u64,
        /// Stride (the number of connections).
        step: u64,
    },
    /// Replay of a trace: get each key, set it on a miss. This connection takes entries
    /// `next, next + step, ...`.
    Trace {
        /// Key numbers.
        trace: Arc<Vec<u32>>,
        /// Next index.
        next: usize,
        /// Stride (the number of connections).
        step: usize,
    },
}

enum Op {
    Get(u64),
    Set(u64),
    Multi(Vec<u64>),
}

impl Source {
    fn set_on_miss(&self) -> bool {
        match self {
            Source::Mix { set_on_miss, .. } => *set_on_miss,
            Source::Trace { .. } => true,
            _ => false,
        }
    }

    fn next(&mut self, rng: &mut SmallRng) -> Option<Op> {
        use rand::Rng;
        match self {
            Source::Mix {
                get_pct,
                dist,
                offset,
                ..
            } => {
                let id = dist.sample(rng) + *offset;
                Some(if rng.random_range(0..100) < *get_pct {
                    Op::Get(id)
                } else {
                    Op::Set(id)
                })
            }
            Source::MultiGet { n, dist } => {
                Some(Op::Multi((0..*n).map(|_| dist.sample(rng)).collect()))
            }
            Source::Fill { next, end, step } => (*next < *end).then(|| {
                let id = *next;
                *next += *step;
                Op::Set(id)
            }),
            Source::Trace { trace, next, step } => trace.get(*next).map(|&id| {
                *next += *step;
                Op::Get(u64::from(id))
            }),
        }
    }
}

/// Counts from one run (all connections).
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Requests answered (a multi-get counts once).
    pub requests: u64,
    /// Single-key gets answered.
    pub gets: u64,
    /// Of which hits.
    pub get_hits: u64,
    /// Sets answered.
    pub sets: u64,
    /// Keys asked for in multi-gets.
    pub multi_keys: u64,
    /// Values returned by multi-gets.
    pub multi_hits: u64,
    /// Replies that were not the expected success (e.g. `SERVER_ERROR`).
    pub errors: u64,
    /// Wall seconds from the first connection's start to the last one's end.
    pub secs: f64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.requests += o.requests;
        self.gets += o.gets;
        self.get_hits += o.get_hits;
        self.sets += o.sets;
        self.multi_keys += o.multi_keys;
        self.multi_hits += o.multi_hits;
        self.errors += o.errors;
    }

    /// Requests per second.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.secs.max(1e-9)
    }

    /// Get misses / gets (single-key gets).
    pub fn miss_ratio(&self) -> f64 {
        (self.gets - self.get_hits) as f64 / self.gets.max(1) as f64
    }

    /// Hits / keys asked, over single gets and multi-gets.
    pub fn hit_ratio(&self) -> f64 {
        (self.get_hits + self.multi_hits) as f64 / (self.gets + self.multi_keys).max(1) as f64
    }
}

/// Closed-loop settings.
#[derive(Debug, Clone, Copy)]
pub struct Closed {
    /// Connections.
    pub conns: usize,
    /// Requests in flight per connection.
    pub depth: usize,
    /// Stop issuing new requests after this long.
    pub duration: Duration,
    /// ... or after this many new requests (follow-up sets not counted).
    pub max_requests: u64,
    /// Seed of every random choice (combined with the connection index).
    pub seed: u64,
    /// The protocol.
    pub proto: Proto,
}

#[derive(Debug)]
enum Pending {
    Get(u64),
    Set,
    Multi(u32),
}

#[derive(Debug)]
struct Parsed {
    used: usize,
    hits: u32,
    ok: bool,
}

fn find_nl(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// Parses the reply to `p` at the start of `buf`; `None` if it is not complete yet.
fn parse(buf: &[u8], p: &Pending) -> Option<Parsed> {
    match p {
        Pending::Set => {
            let e = find_nl(buf)?;
            Some(Parsed {
                used: e + 1,
                hits: 0,
                ok: buf[..e].strip_suffix(b"\r") == Some(b"STORED"),
            })
        }
        Pending::Get(_) | Pending::Multi(_) => {
            let mut pos = 0;
            let mut hits = 0;
            loop {
                let e = pos + find_nl(&buf[pos..])?;
                let line = buf[pos..e].strip_suffix(b"\r").unwrap_or(&buf[pos..e]);
                if line == b"END" {
                    return Some(Parsed {
                        used: e + 1,
                        hits,
                        ok: true,
                    });
                }
                let len = line
                    .strip_prefix(b"VALUE ")
                    .and_then(|rest| rest.rsplit(|&c| c == b' ').next())
                    .and_then(|n| std::str::from_utf8(n).ok())
                    .and_then(|n| n.parse::<usize>().ok());
                match len {
                    Some(len) => {
                        let end = e + 1 + len + 2;
                        if buf.len() < end {
                            return None;
                        }
                        hits += 1;
                        pos = end;
                    }
                    None => {
                        return Some(Parsed {
                            used: e + 1,
                            hits,
                            ok: false,
                        });
                    }
                }
            }
        }
    }
}

struct Encoder {
    shape: Shape,
    value: Vec<u8>,
    key: [u8; MAX_GEN_KEY],
}

impl Encoder {
    fn new(shape: Shape) -> Self {
        Encoder {
            shape,
            value: (0..shape.value_len)
                .map(|i| b'a' + (i % 26) as u8)
                .collect(),
            key: [0; MAX_GEN_KEY],
        }
    }

    fn get(&mut self, out: &mut Vec<u8>, id: u64) {
        out.extend_from_slice(b"get ");
        out.extend_from_slice(self.shape.keys.write(id, &mut self.key));
        out.extend_from_slice(b"\r\n");
    }

    fn multi(&mut self, out: &mut Vec<u8>, ids: &[u64]) {
        out.extend_from_slice(b"get");
        for &id in ids {
            out.push(b' ');
            out.extend_from_slice(self.shape.keys.write(id, &mut self.key));
        }
        out.extend_from_slice(b"\r\n");
    }

    fn set(&mut self, out: &mut Vec<u8>, id: u64) {
        let (key, value) = self.key_value(id);
        out.extend_from_slice(b"set ");
        out.extend_from_slice(key);
        out.extend_from_slice(b" 0 0 ");
        out.extend_from_slice(value.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }

    /// The key of `id` and the value a set of it carries: its first bytes are the key
    /// number (little-endian), so values differ per key and a hit can be checked.
    fn key_value(&mut self, id: u64) -> (&[u8], &[u8]) {
        let n = self.value.len().min(8);
        self.value[..n].copy_from_slice(&id.to_le_bytes()[..n]);
        (self.shape.keys.write(id, &mut self.key), &self.value)
    }
}

/// A protocol as the closed loop drives it: how an operation is written, how its reply is
/// read.
trait Wire: Send + 'static {
    fn new(shape: Shape) -> Self;
    /// Appends the request for `op` to `out`; what its reply is read against.
    fn encode(&mut self, op: Op, out: &mut Vec<u8>) -> io::Result<Pending>;
    /// Parses the reply to `p` at the start of `buf`: `Ok(None)` until it is complete, an
    /// error when the reply stream can no longer be followed.
    fn parse(&mut self, buf: &[u8], p: &Pending) -> io::Result<Option<Parsed>>;
}

/// The text protocol.
struct Text(Encoder);

impl Wire for Text {
    fn new(shape: Shape) -> Self {
        Text(Encoder::new(shape))
    }

    fn encode(&mut self, op: Op, out: &mut Vec<u8>) -> io::Result<Pending> {
        Ok(match op {
            Op::Get(id) => {
                self.0.get(out, id);
                Pending::Get(id)
            }
            Op::Set(id) => {
                self.0.set(out, id);
                Pending::Set
            }
            Op::Multi(ids) => {
                self.0.multi(out, &ids);
                Pending::Multi(ids.len() as u32)
            }
        })
    }

    fn parse(&mut self, buf: &[u8], p: &Pending) -> io::Result<Option<Parsed>> {
        Ok(parse(buf, p))
    }
}

fn conn_rng(seed: u64, conn: usize) -> SmallRng {
    SmallRng::seed_from_u64(mix64(seed ^ mix64(conn as u64 + 1)))
}

async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Reads more of the reply stream into `rbuf`; an error at end of stream.
async fn fill(s: &mut TcpStream, rbuf: &mut Vec<u8>) -> io::Result<()> {
    if rbuf.capacity() - rbuf.len() < 16 * 1024 {
        rbuf.reserve(64 * 1024);
    }
    if s.read_buf(rbuf).await? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "server closed the connection",
        ));
    }
    Ok(())
}

async fn closed_conn<W: Wire>(
    addr: SocketAddr,
    cfg: Closed,
    shape: Shape,
    mut src: Source,
    mut rng: SmallRng,
    budget: Arc<AtomicI64>,
    deadline: Instant,
) -> io::Result<Tally> {
    let mut s = connect(addr).await?;
    let mut wire = W::new(shape);
    let set_on_miss = src.set_on_miss();
    let mut wbuf = Vec::with_capacity(16 * 1024);
    let mut rbuf = Vec::with_capacity(64 * 1024);
    let mut rpos = 0;
    let mut pending: VecDeque<Pending> = VecDeque::with_capacity(cfg.depth);
    let mut follow: VecDeque<u64> = VecDeque::new();
    let mut t = Tally::default();
    let mut done = false;
    loop {
        while pending.len() < cfg.depth {
            let op = if let Some(id) = follow.pop_front() {
                Op::Set(id)
            } else if done {
                break;
            } else if budget.fetch_sub(1, Ordering::Relaxed) <= 0 || Instant::now() >= deadline {
                done = true;
                continue;
            } else if let Some(op) = src.next(&mut rng) {
                op
            } else {
                done = true;
                continue;
            };
            pending.push_back(wire.encode(op, &mut wbuf)?);
        }
        if pending.is_empty() {
            break;
        }
        if !wbuf.is_empty() {
            s.write_all(&wbuf).await?;
            wbuf.clear();
        }
        fill(&mut s, &mut rbuf).await?;
        while let Some(p) = pending.front() {
            let Some(r) = wire.parse(&rbuf[rpos..], p)? else {
                break;
            };
            rpos += r.used;
            t.requests += 1;
            t.errors += u64::from(!r.ok);
            match *p {
                Pending::Get(id) => {
                    t.gets += 1;
                    if r.hits > 0 {
                        t.get_hits += 1;
                    } else if set_on_miss && r.ok {
                        follow.push_back(id);
                    }
                }
                Pending::Set => t.sets += 1,
                Pending::Multi(n) => {
                    t.multi_keys += u64::from(n);
                    t.multi_hits += u64::from(r.hits);
                }
            }
            pending.pop_front();
        }
        if rpos == rbuf.len() {
            rbuf.clear();
            rpos = 0;
        } else if rpos > 32 * 1024 {
            rbuf.drain(..rpos);
            rpos = 0;
        }
    }
    Ok(t)
}

/// Runs `cfg.conns` connections against `addr`, connection `i` sending what
/// `source(i)` yields in `cfg.proto`, and adds up their counts. Fails when a connection
/// fails (a reply that cannot be followed, a closed connection) or is still waiting [`STALL`]
/// after the deadline.
pub async fn closed_loop(
    addr: SocketAddr,
    cfg: Closed,
    shape: Shape,
    source: impl Fn(usize) -> Source,
) -> io::Result<Tally> {
    closed_loop_within(addr, cfg, shape, source, STALL).await
}

async fn closed_loop_within(
    addr: SocketAddr,
    cfg: Closed,
    shape: Shape,
    source: impl Fn(usize) -> Source,
    stall: Duration,
) -> io::Result<Tally> {
    let budget = Arc::new(AtomicI64::new(
        i64::try_from(cfg.max_requests).unwrap_or(i64::MAX),
    ));
    let start = Instant::now();
    let deadline = start + cfg.duration;
    let tasks: Vec<_> = (0..cfg.conns)
        .map(|i| {
            let (src, rng, budget) = (source(i), conn_rng(cfg.seed, i), budget.clone());
            match cfg.proto {
                Proto::Text => tokio::spawn(closed_conn::<Text>(
                    addr, cfg, shape, src, rng, budget, deadline,
                )),
                Proto::Binary => tokio::spawn(closed_conn::<binary::Binary>(
                    addr, cfg, shape, src, rng, budget, deadline,
                )),
            }
        })
        .collect();
    let limit = tokio::time::Instant::from_std(deadline + stall);
    let mut total = Tally::default();
    let mut tasks = tasks.into_iter();
    while let Some(mut t) = tasks.next() {
        match tokio::time::timeout_at(limit, &mut t).await {
            Ok(r) => total.add(&r.map_err(io::Error::other)??),
            Err(_) => {
                t.abort();
                tasks.for_each(|t| t.abort());
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{addr}: a connection still waited for replies {stall:?} after the run's end"
                    ),
                ));
            }
        }
    }
    total.secs = start.elapsed().as_secs_f64();
    Ok(total)
}

/// Open-loop settings.
#[derive(Debug, Clone)]
pub struct Open {
    /// Connections, each with one request in flight.
    pub conns: usize,
    /// Offered load, requests per second over all connections.
    pub rate: f64,
    /// Length of the run.
    pub duration: Duration,
    /// Bound on requests sent.
    pub max_requests: u64,
    /// Percentage of gets (the rest are sets).
    pub get_pct: u32,
    /// Key picks.
    pub dist: Dist,
    /// Seed.
    pub seed: u64,
}

/// Latency percentiles in microseconds, from an open-loop run.
#[derive(Debug, Clone, Default)]
pub struct Latency {
    /// Counts.
    pub tally: Tally,
    /// 50th percentile, µs.
    pub p50: f64,
    /// 99th percentile, µs.
    pub p99: f64,
    /// 99.9th percentile, µs.
    pub p999: f64,
    /// Worst, µs.
    pub max: f64,
}

async fn open_conn(
    addr: SocketAddr,
    cfg: Open,
    shape: Shape,
    conn: usize,
    mut ticks: mpsc::UnboundedReceiver<Instant>,
) -> io::Result<(Tally, Vec<u32>)> {
    let mut s = connect(addr).await?;
    let mut rng = conn_rng(cfg.seed, conn);
    let mut enc = Encoder::new(shape);
    let mut src = Source::Mix {
        get_pct: cfg.get_pct,
        dist: cfg.dist.clone(),
        offset: 0,
        set_on_miss: false,
    };
    let mut wbuf = Vec::with_capacity(512);
    let mut rbuf = Vec::with_capacity(16 * 1024);
    let mut lat = Vec::new();
    let mut t = Tally::default();
    let mut idle_since = Instant::now();
    while let Some(sched) = ticks.recv().await {
        // A tick that came due while the previous reply was awaited is late because of it:
        // that wait counts. Otherwise the clock starts at the send, so the pacer's own
        // wake-up delay is not charged to the server.
        let from = if sched < idle_since {
            sched
        } else {
            Instant::now()
        };
        let pending = match src.next(&mut rng) {
            Some(Op::Get(id)) => {
                enc.get(&mut wbuf, id);
                Pending::Get(id)
            }
            Some(Op::Set(id)) => {
                enc.set(&mut wbuf, id);
                Pending::Set
            }
            _ => unreachable!("Mix yields gets and sets"),
        };
        s.write_all(&wbuf).await?;
        wbuf.clear();
        let r = loop {
            fill(&mut s, &mut rbuf).await?;
            if let Some(r) = parse(&rbuf, &pending) {
                break r;
            }
        };
        idle_since = Instant::now();
        let us = (idle_since - from).as_nanos() as u64 / 100; // tenths of a microsecond
        lat.push(us.min(u64::from(u32::MAX)) as u32);
        rbuf.drain(..r.used);
        t.requests += 1;
        t.errors += u64::from(!r.ok);
        match pending {
            Pending::Get(_) => {
                t.gets += 1;
                t.get_hits += u64::from(r.hits > 0);
            }
            _ => t.sets += 1,
        }
    }
    Ok((t, lat))
}

/// Hands out send times, one request every `1 / rate` seconds in turn over the connections,
/// from a thread of its own: tokio's timer has millisecond granularity, which turned the
/// schedule into bursts of one millisecond's requests at once (50 at the bench's rate), so
/// the percentiles measured how each server drains a burst rather than a steady load.
/// `thread::sleep` wakes within the kernel's timer slack (50 µs by default).
fn pace(cfg: &Open, start: Instant, conns: Vec<mpsc::UnboundedSender<Instant>>) {
    let step = Duration::from_secs_f64(1.0 / cfg.rate);
    let end = start + cfg.duration;
    let mut at = start;
    for i in 0..cfg.max_requests {
        if at >= end {
            break;
        }
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        // A connection that failed has dropped its receiver; its error is reported by its task.
        let _ = conns[(i % conns.len() as u64) as usize].send(at);
        at += step;
    }
}

/// Runs a fixed offered load against `addr` and reports latency percentiles.
pub async fn open_loop(addr: SocketAddr, cfg: Open, shape: Shape) -> io::Result<Latency> {
    let mut senders = Vec::with_capacity(cfg.conns);
    let tasks: Vec<_> = (0..cfg.conns.max(1))
        .map(|i| {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.push(tx);
            tokio::spawn(open_conn(addr, cfg.clone(), shape, i, rx))
        })
        .collect();
    let start = Instant::now() + Duration::from_millis(20);
    let pacer = {
        let cfg = cfg.clone();
        std::thread::spawn(move || pace(&cfg, start, senders))
    };
    let mut tally = Tally::default();
    let mut all = Vec::new();
    for t in tasks {
        let (c, l) = t.await.map_err(io::Error::other)??;
        tally.add(&c);
        all.extend(l);
    }
    pacer
        .join()
        .map_err(|_| io::Error::other("pacer thread panicked"))?;
    tally.secs = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |q: f64| {
        if all.is_empty() {
            return 0.0;
        }
        let i = ((q * all.len() as f64).ceil() as usize).clamp(1, all.len()) - 1;
        f64::from(all[i]) / 10.0
    };
    Ok(Latency {
        p50: pct(0.50),
        p99: pct(0.99),
        p999: pct(0.999),
        max: pct(1.0),
        tally,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_replies() {
        let p = parse(b"STORED\r\nEND", &Pending::Set).unwrap();
        assert!(p.ok && p.used == 8);
        assert!(
            !parse(b"SERVER_ERROR out of memory\r\n", &Pending::Set)
                .unwrap()
                .ok
        );
        assert!(parse(b"STOR", &Pending::Set).is_none());
        let miss = parse(b"END\r\n", &Pending::Get(1)).unwrap();
        assert!(miss.ok && miss.hits == 0 && miss.used == 5);
        let hit = b"VALUE k 0 3\r\nabc\r\nEND\r\n";
        let p = parse(hit, &Pending::Get(1)).unwrap();
        assert_eq!((p.hits, p.used), (1, hit.len()));
        for cut in 0..hit.len() {
            assert!(parse(&hit[..cut], &Pending::Get(1)).is_none(), "{cut}");
        }
        let two = b"VALUE a 0 1\r\nx\r\nVALUE b 5 2\r\nyz\r\nEND\r\n";
        assert_eq!(parse(two, &Pending::Multi(3)).unwrap().hits, 2);
    }

    /// A server that reads every request and answers none fails the run, in both protocols,
    /// instead of holding the bench forever.
    #[test]
    fn a_server_that_stops_answering_fails_the_run() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                while let Ok((mut s, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        let mut sink = [0u8; 4096];
                        while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
                    });
                }
            });
            let shape = Shape {
                keys: KeyGen::new(16, 32),
                value_len: 100,
            };
            for proto in [Proto::Text, Proto::Binary] {
                let cfg = Closed {
                    conns: 2,
                    depth: 4,
                    duration: Duration::from_millis(50),
                    max_requests: 100,
                    seed: 1,
                    proto,
                };
                let source = |_| Source::Mix {
                    get_pct: 90,
                    dist: Dist::Uniform(100),
                    offset: 0,
                    set_on_miss: false,
                };
                let stall = Duration::from_millis(200);
                let e = closed_loop_within(addr, cfg, shape, source, stall)
                    .await
                    .unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{proto:?}: {e}");
            }
        });
    }
}
