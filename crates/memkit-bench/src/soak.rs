//! `memkit-bench soak`: a bounded mixed run against one memkitd (or, with `--memcached`,
//! against memcached, which checks the soak's own accounting against the reference).
//!
//! `--conns` clients run sessions until `--duration` is over: connect, a random number of
//! requests, then leave (`quit`, a plain close, a close in the middle of a data block or a
//! command line, or a close right after a `get` whose reply is never read). Requests: gets,
//! multi-gets, sets (some `noreply`) of random sizes up to `-I`, deletes, incr, and
//! malformed ones (unknown commands, bad numbers, over-long keys, values over `-I`).
//! Every key is private to one client, so each reply is checked: well-formed, in order,
//! and a value read back is the last one stored (a miss is allowed: eviction).
//!
//! At the end it checks that every client finished (no request waited more than 10 s),
//! `curr_connections` is back to where it started, the server's RSS is within
//! `1.1 x -m + 32 MiB`, and `stats` adds up with what was sent: `cmd_get` is the keys asked
//! for, hits + misses is `cmd_get`, `cmd_set`, deletes, incrs and `total_connections` match.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::procs::{self, Kind, Server};

/// The soak's settings.
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// How long clients keep starting requests: seconds, or with an s/m/h suffix (`30m`).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Concurrent clients (each reconnects after every session).
    #[arg(long, default_value_t = 48)]
    pub conns: usize,
    /// The server's `-m`, MiB.
    #[arg(long, default_value_t = 64)]
    pub memory_mb: u64,
    /// The server's `-I`, KiB.
    #[arg(long, default_value_t = 1024)]
    pub item_max_kb: usize,
    /// The server's `-t`.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// memkitd to run (default: the build of this program's profile, next to it).
    #[arg(long)]
    pub memkitd: Option<PathBuf>,
    /// Soak memcached instead (from PATH): checks the soak's expectations.
    #[arg(long)]
    pub memcached: bool,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("bad duration unit in {s:?} (s, m or h)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// No single request (or the server's reply to it) may take longer than this.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Keys per client.
const KEYS: usize = 64;

/// What the clients sent and saw, summed over all of them.
#[derive(Debug, Default)]
struct Tally {
    sessions: AtomicU64,
    requests: AtomicU64,
    /// Keys in `get` commands sent whole (whether or not the reply was read).
    get_keys: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Misses on keys the client had stored (evicted).
    evicted: AtomicU64,
    sets: AtomicU64,
    too_large: AtomicU64,
    /// Sets refused with `SERVER_ERROR out of memory`.
    out_of_memory: AtomicU64,
    deletes: AtomicU64,
    incrs: AtomicU64,
    malformed: AtomicU64,
    aborted_mid_data: AtomicU64,
    aborted_mid_line: AtomicU64,
    unread_gets: AtomicU64,
    bytes_checked: AtomicU64,
}

/// The soak's outcome.
#[derive(Debug)]
pub struct SoakReport {
    /// Wall time, from the first client's start to the end of the checks.
    pub elapsed: Duration,
    /// Every failed check (empty: passed).
    pub failures: Vec<String>,
    /// What was sent and seen, and what the server reported, as `name value` lines.
    pub lines: Vec<String>,
}

/// Runs the soak with these settings; exit status 0 when every check passed.
pub fn main(a: SoakArgs) -> i32 {
    match run(&a) {
        Ok(r) => {
            for l in &r.lines {
                println!("{l}");
            }
            for f in &r.failures {
                println!("FAIL {f}");
            }
            println!(
                "soak {} after {:.0} s",
                if r.failures.is_empty() {
                    "PASSED"
                } else {
                    "FAILED"
                },
                r.elapsed.as_secs_f64()
            );
            i32::from(!r.failures.is_empty())
        }
        Err(e) => {
            eprintln!("soak: {e}");
            2
        }
    }
}

/// Starts the server, soaks it, checks.
pub fn run(a: &SoakArgs) -> std::io::Result<SoakReport> {
    let (kind, bin) = if a.memcached {
        let bin = procs::find_on_path("memcached")
            .ok_or_else(|| std::io::Error::other("memcached not found on PATH"))?;
        (Kind::Memcached, bin)
    } else {
        let profile = if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        };
        let bin = match &a.memkitd {
            Some(p) => p.clone(),
            None => procs::locate_memkitd(profile, false)?,
        };
        (Kind::Memkitd, bin)
    };
    let (m, t, i) = (
        a.memory_mb.to_string(),
        a.threads.to_string(),
        format!("{}k", a.item_max_kb),
    );
    let server = Server::start_args(kind, &bin, &["-m", &m, "-t", &t, "-I", &i, "-c", "4096"])?;
    let start = Instant::now();
    // The start-up probe's connection may still be closing (on another server thread) or
    // not yet accepted: take the baseline once two reads agree, the second having opened
    // only its own connection.
    let mut before = numeric(server.stats()?);
    let settle = Instant::now() + Duration::from_secs(3);
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let s = numeric(server.stats()?);
        let stable = s["curr_connections"] == before["curr_connections"]
            && s["total_connections"] == before["total_connections"] + 1;
        before = s;
        if stable || Instant::now() > settle {
            break;
        }
    }
    let mut stats_conns = 0u64;

    let tally = Arc::new(Tally::default());
    let errors = Arc::new(Errors::default());
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        let pid = server.pid();
        std::thread::spawn(move || {
            let mut peak = 0u64;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(rss_of(pid));
                std::thread::sleep(Duration::from_millis(250));
            }
            peak
        })
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let deadline = tokio::time::Instant::now() + a.duration;
    let item_max = a.item_max_kb * 1024;
    let finished = rt.block_on(async {
        let mut tasks = Vec::new();
        for w in 0..a.conns {
            let c = Client {
                addr: server.addr,
                id: w,
                rng: SmallRng::seed_from_u64(a.seed.wrapping_mul(1000).wrapping_add(w as u64)),
                keys: vec![None; KEYS],
                item_max,
                tally: tally.clone(),
                errors: errors.clone(),
                version: 0,
                unsynced: false,
            };
            tasks.push(tokio::spawn(c.run(deadline)));
        }
        let mut finished = 0;
        for t in tasks {
            // Each session ends by the deadline plus one request's timeout.
            if let Ok(Ok(())) = tokio::time::timeout_at(deadline + 3 * OP_TIMEOUT, t).await {
                finished += 1;
            }
        }
        finished
    });
    drop(rt);

    let mut failures = Vec::new();
    if finished != a.conns {
        failures.push(format!(
            "{} of {} clients did not finish (stuck)",
            a.conns - finished,
            a.conns
        ));
    }
    failures.extend(errors.lock().unwrap().iter().cloned());

    // Every connection closes: curr_connections returns to where it was.
    let settle = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let s = numeric(server.stats()?);
        stats_conns += 1;
        if s["curr_connections"] == before["curr_connections"] || Instant::now() > settle {
            break s;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    done.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap_or(0).max(server.rss()?.0);
    let (rss, hwm) = server.rss()?;
    let d = |k: &str| after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
    let v = |x: &AtomicU64| x.load(Ordering::Relaxed);
    let tl = &*tally;
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    check(
        after["curr_connections"] == before["curr_connections"],
        format!(
            "curr_connections {} at the end, {} at the start",
            after["curr_connections"], before["curr_connections"]
        ),
    );
    let bound = (a.memory_mb as f64 * 1.1 + 32.0) * 1024.0 * 1024.0;
    // The peak (the kernel's VmHWM, which no sampling interval can miss) is held to the
    // bound too: memory that came back by the end was still memory the machine had to have.
    check(
        (rss.max(hwm) as f64) <= bound,
        format!(
            "RSS {} MiB at the end, {} MiB peak (VmHWM): over the bound {:.1} MiB",
            rss >> 20,
            hwm >> 20,
            bound / 1048576.0
        ),
    );
    check(
        d("cmd_get") == v(&tl.get_keys),
        format!(
            "cmd_get {} but {} keys asked for",
            d("cmd_get"),
            v(&tl.get_keys)
        ),
    );
    check(
        d("get_hits") + d("get_misses") == d("cmd_get"),
        format!(
            "get_hits {} + get_misses {} != cmd_get {}",
            d("get_hits"),
            d("get_misses"),
            d("cmd_get")
        ),
    );
    check(
        d("get_hits") >= v(&tl.hits) && d("get_misses") >= v(&tl.misses),
        format!(
            "server hits/misses {}/{} below those seen {}/{}",
            d("get_hits"),
            d("get_misses"),
            v(&tl.hits),
            v(&tl.misses)
        ),
    );
    check(
        d("cmd_set") == v(&tl.sets),
        format!("cmd_set {} but {} sets sent", d("cmd_set"), v(&tl.sets)),
    );
    check(
        d("delete_hits") + d("delete_misses") == v(&tl.deletes),
        format!(
            "delete_hits + delete_misses {} but {} deletes sent",
            d("delete_hits") + d("delete_misses"),
            v(&tl.deletes)
        ),
    );
    check(
        d("incr_hits") + d("incr_misses") == v(&tl.incrs),
        format!(
            "incr_hits + incr_misses {} but {} incrs sent",
            d("incr_hits") + d("incr_misses"),
            v(&tl.incrs)
        ),
    );
    let opened = v(&tl.sessions) + stats_conns;
    check(
        d("total_connections") == opened,
        format!(
            "total_connections grew {} but {opened} connections were opened",
            d("total_connections")
        ),
    );
    let mut lines = vec![
        format!("server {} ({})", kind.name(), server.version()),
        format!(
            "settings -m {} -I {}k -t {}, {} clients, {:.0} s of requests",
            a.memory_mb,
            a.item_max_kb,
            a.threads,
            a.conns,
            a.duration.as_secs_f64()
        ),
    ];
    for (name, x) in [
        ("sessions", &tl.sessions),
        ("requests", &tl.requests),
        ("get_keys", &tl.get_keys),
        ("hits_seen", &tl.hits),
        ("misses_seen", &tl.misses),
        ("evicted_seen", &tl.evicted),
        ("sets", &tl.sets),
        ("too_large", &tl.too_large),
        ("out_of_memory", &tl.out_of_memory),
        ("deletes", &tl.deletes),
        ("incrs", &tl.incrs),
        ("malformed", &tl.malformed),
        ("aborted_mid_data", &tl.aborted_mid_data),
        ("aborted_mid_line", &tl.aborted_mid_line),
        ("unread_gets", &tl.unread_gets),
        ("value_bytes_checked", &tl.bytes_checked),
    ] {
        lines.push(format!("sent {name} {}", v(x)));
    }
    for k in [
        "cmd_get",
        "get_hits",
        "get_misses",
        "cmd_set",
        "evictions",
        "total_connections",
    ] {
        lines.push(format!("stats {k} +{}", d(k)));
    }
    lines.push(format!(
        "rss end {:.1} MiB, peak sampled {:.1} MiB, VmHWM {:.1} MiB, bound {:.1} MiB",
        rss as f64 / 1048576.0,
        peak as f64 / 1048576.0,
        hwm as f64 / 1048576.0,
        bound / 1048576.0
    ));
    Ok(SoakReport {
        elapsed: start.elapsed(),
        failures,
        lines,
    })
}

/// The first failures clients report.
type Errors = std::sync::Mutex<Vec<String>>;

fn numeric(s: HashMap<String, String>) -> HashMap<String, u64> {
    s.into_iter()
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect()
}

fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

/// What a client knows of one of its keys.
#[derive(Debug, Clone, Copy)]
enum Held {
    /// A value of this length, generated from this tag.
    Value(usize, u64),
    /// A counter at this number.
    Counter(u64),
    /// Unknown: the old value or none (memcached keeps the old value when a large set fails
    /// for memory in the middle of its data).
    Unknown,
}

struct Client {
    addr: SocketAddr,
    id: usize,
    rng: SmallRng,
    keys: Vec<Option<Held>>,
    item_max: usize,
    tally: Arc<Tally>,
    errors: Arc<Errors>,
    version: u64,
    /// A noreply request was sent and no reply has been read since.
    unsynced: bool,
}

type Conn = BufReader<TcpStream>;

/// A value's bytes: any byte values (`\r\n` included), fixed by its tag.
fn value(len: usize, tag: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    for word in 0..len.div_ceil(8) {
        v.extend_from_slice(&crate::workload::mix64(tag ^ (word as u64) << 20).to_le_bytes());
    }
    v.truncate(len);
    v
}

impl Client {
    async fn run(mut self, deadline: tokio::time::Instant) {
        while tokio::time::Instant::now() < deadline {
            if let Err(e) = self.session(deadline).await {
                let mut errs = self.errors.lock().unwrap();
                if errs.len() < 20 {
                    errs.push(format!("client {}: {e}", self.id));
                }
                return;
            }
        }
    }

    fn key(&self, k: usize) -> String {
        format!("soak:{}:{k}", self.id)
    }

    async fn session(&mut self, deadline: tokio::time::Instant) -> Result<(), String> {
        let stream = tokio::time::timeout(OP_TIMEOUT, TcpStream::connect(self.addr))
            .await
            .map_err(|_| "connect timed out".to_string())?
            .map_err(|e| format!("connect: {e}"))?;
        self.tally.sessions.fetch_add(1, Ordering::Relaxed);
        let mut c = BufReader::new(stream);
        let n = self.rng.random_range(1..=200);
        for _ in 0..n {
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            self.tally.requests.fetch_add(1, Ordering::Relaxed);
            tokio::time::timeout(OP_TIMEOUT, self.request(&mut c))
                .await
                .map_err(|_| "no reply within 10 s".to_string())??;
        }
        self.leave(c).await
    }

    /// Ends a session one of five ways; none leaves a request half-counted.
    async fn leave(&mut self, mut c: Conn) -> Result<(), String> {
        // A noreply set not yet followed by a reply may still be unapplied when the next
        // session's requests, on another connection, arrive: wait for it first.
        if self.unsynced {
            let v = self.ask(&mut c, "version\r\n").await?;
            if !v.starts_with("VERSION ") {
                return Err(format!("version: {v:?}"));
            }
        }
        let k = self.rng.random_range(0..KEYS);
        let key = self.key(k);
        let w = |e: std::io::Error| format!("write: {e}");
        match self.rng.random_range(0..10) {
            // In the middle of a data block: the set never happened.
            0 => {
                let len = self.rng.random_range(2..64 * 1024);
                let head = format!("set {key} 0 0 {len}\r\n");
                c.get_mut().write_all(head.as_bytes()).await.map_err(w)?;
                let part = value(self.rng.random_range(0..len), 7);
                c.get_mut().write_all(&part).await.map_err(w)?;
                self.tally.aborted_mid_data.fetch_add(1, Ordering::Relaxed);
            }
            // In the middle of a command line.
            1 => {
                c.get_mut().write_all(b"get soak:").await.map_err(w)?;
                self.tally.aborted_mid_line.fetch_add(1, Ordering::Relaxed);
            }
            // Right after a get whose reply is never read.
            2 => {
                let line = format!("get {key}\r\n");
                c.get_mut().write_all(line.as_bytes()).await.map_err(w)?;
                self.tally.get_keys.fetch_add(1, Ordering::Relaxed);
                self.tally.unread_gets.fetch_add(1, Ordering::Relaxed);
            }
            3..=5 => {}
            _ => {
                c.get_mut().write_all(b"quit\r\n").await.map_err(w)?;
                let mut rest = Vec::new();
                let n = c.read_to_end(&mut rest).await.map_err(|e| e.to_string())?;
                if n != 0 {
                    return Err(format!("bytes after quit: {:?}", show(&rest)));
                }
            }
        }
        Ok(())
    }

    async fn request(&mut self, c: &mut Conn) -> Result<(), String> {
        let k = self.rng.random_range(0..KEYS);
        // A request with a reply is answered after the noreply ones before it; only a
        // noreply set leaves the connection unsynced.
        self.unsynced = false;
        match self.rng.random_range(0..100) {
            0..35 => self.get(c, &[k]).await,
            35..45 => {
                let n = self.rng.random_range(2..=8);
                let ks: Vec<usize> = (0..n).map(|_| self.rng.random_range(0..KEYS)).collect();
                self.get(c, &ks).await
            }
            45..70 => self.set(c, k, false).await,
            70..75 => self.set(c, k, true).await,
            75..80 => {
                let line = format!("delete {}\r\n", self.key(k));
                let r = self.ask(c, &line).await?;
                self.tally.deletes.fetch_add(1, Ordering::Relaxed);
                match (r.as_str(), self.keys[k]) {
                    ("DELETED\r\n", Some(_)) => {}
                    ("NOT_FOUND\r\n", _) => {}
                    _ => return Err(format!("delete of {:?}: {r:?}", self.keys[k])),
                }
                self.keys[k] = None;
                Ok(())
            }
            80..88 => self.incr(c, k).await,
            _ => self.malformed(c, k).await,
        }
    }

    async fn ask(&mut self, c: &mut Conn, line: &str) -> Result<String, String> {
        c.get_mut()
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        read_line(c).await
    }

    async fn get(&mut self, c: &mut Conn, ks: &[usize]) -> Result<(), String> {
        let mut line = String::from("get");
        for &k in ks {
            line.push(' ');
            line.push_str(&self.key(k));
        }
        line.push_str("\r\n");
        c.get_mut()
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        self.tally
            .get_keys
            .fetch_add(ks.len() as u64, Ordering::Relaxed);
        let mut found = vec![false; ks.len()];
        loop {
            let l = read_line(c).await?;
            if l == "END\r\n" {
                break;
            }
            let w: Vec<&str> = l.trim_end().split(' ').collect();
            let (Some(&"VALUE"), Some(key), Some(len)) = (w.first(), w.get(1), w.get(3)) else {
                return Err(format!("get: unexpected {l:?}"));
            };
            let len: usize = len.parse().map_err(|_| format!("get: bad length {l:?}"))?;
            let mut data = vec![0u8; len + 2];
            c.read_exact(&mut data)
                .await
                .map_err(|e| format!("read: {e}"))?;
            // Replies come in the order asked; a key asked twice is answered twice.
            let Some(i) = (0..ks.len()).find(|&i| !found[i] && self.key(ks[i]) == *key) else {
                return Err(format!(
                    "get: {key} not asked for or out of order in {:?}",
                    line.trim_end()
                ));
            };
            found[i] = true;
            let ok = match self.keys[ks[i]] {
                Some(Held::Value(n, tag)) => n == len && data[..len] == value(n, tag)[..],
                Some(Held::Counter(n)) => data[..len] == *n.to_string().as_bytes(),
                Some(Held::Unknown) => true,
                None => false,
            };
            if !ok || &data[len..] != b"\r\n" {
                return Err(format!(
                    "get {key}: {len} bytes that are not the last value stored ({:?})",
                    self.keys[ks[i]]
                ));
            }
            self.tally.hits.fetch_add(1, Ordering::Relaxed);
            self.tally
                .bytes_checked
                .fetch_add(len as u64, Ordering::Relaxed);
        }
        for (i, &k) in ks.iter().enumerate() {
            if !found[i] {
                self.tally.misses.fetch_add(1, Ordering::Relaxed);
                if self.keys[k].is_some() {
                    self.tally.evicted.fetch_add(1, Ordering::Relaxed);
                    self.keys[k] = None;
                }
            }
        }
        Ok(())
    }

    /// A random size: mostly small, some up to `-I`.
    fn size(&mut self) -> usize {
        let max = self.item_max - 512;
        match self.rng.random_range(0..100) {
            0..60 => self.rng.random_range(0..=100),
            60..90 => self.rng.random_range(100..=10_000),
            90..99 => self.rng.random_range(10_000..=100_000.min(max)),
            _ => self.rng.random_range(100_000.min(max)..=max),
        }
    }

    async fn set(&mut self, c: &mut Conn, k: usize, noreply: bool) -> Result<(), String> {
        let len = if noreply {
            self.rng.random_range(0..=1000)
        } else {
            self.size()
        };
        self.version += 1;
        let tag = (self.id as u64) << 40 | self.version;
        let mut req = format!(
            "set {} 0 0 {len}{}\r\n",
            self.key(k),
            if noreply { " noreply" } else { "" }
        )
        .into_bytes();
        req.extend_from_slice(&value(len, tag));
        req.extend_from_slice(b"\r\n");
        c.get_mut()
            .write_all(&req)
            .await
            .map_err(|e| format!("write: {e}"))?;
        if noreply {
            // A noreply set refused for memory would go unseen: only small ones are sent.
            self.tally.sets.fetch_add(1, Ordering::Relaxed);
            self.keys[k] = Some(Held::Value(len, tag));
            self.unsynced = true;
            return Ok(());
        }
        let r = read_line(c).await?;
        if r == "STORED\r\n" {
            self.tally.sets.fetch_add(1, Ordering::Relaxed);
            self.keys[k] = Some(Held::Value(len, tag));
        } else if r
            .to_ascii_lowercase()
            .starts_with("server_error out of memory")
        {
            // memcached at a small -m (its slab classes are taken): the set is not counted
            // in cmd_set; whether the old value stays depends on where the allocation failed.
            self.tally.out_of_memory.fetch_add(1, Ordering::Relaxed);
            self.keys[k] = Some(Held::Unknown);
        } else {
            return Err(format!("set of {len} bytes: {r:?}"));
        }
        Ok(())
    }

    async fn incr(&mut self, c: &mut Conn, k: usize) -> Result<(), String> {
        let Some(Held::Counter(n)) = self.keys[k] else {
            let line = format!("set {} 0 0 1\r\n0\r\n", self.key(k));
            let r = self.ask(c, &line).await?;
            self.tally.sets.fetch_add(1, Ordering::Relaxed);
            if r != "STORED\r\n" {
                return Err(format!("set counter: {r:?}"));
            }
            self.keys[k] = Some(Held::Counter(0));
            return Ok(());
        };
        let by = self.rng.random_range(1..1000u64);
        let r = self
            .ask(c, &format!("incr {} {by}\r\n", self.key(k)))
            .await?;
        self.tally.incrs.fetch_add(1, Ordering::Relaxed);
        if r == "NOT_FOUND\r\n" {
            self.tally.evicted.fetch_add(1, Ordering::Relaxed);
            self.keys[k] = None;
        } else if r.trim_end() == (n + by).to_string() {
            self.keys[k] = Some(Held::Counter(n + by));
        } else {
            return Err(format!("incr {n} by {by}: {r:?}"));
        }
        Ok(())
    }

    /// A malformed request and the error line it must get; the connection goes on.
    async fn malformed(&mut self, c: &mut Conn, k: usize) -> Result<(), String> {
        self.tally.malformed.fetch_add(1, Ordering::Relaxed);
        let key = self.key(k);
        let (req, want): (Vec<u8>, &str) = match self.rng.random_range(0..6) {
            0 => (
                format!("bogus{} {key}\r\n", self.rng.random_range(0..100)).into_bytes(),
                "ERROR\r\n",
            ),
            1 => (b"\r\n".to_vec(), "ERROR\r\n"),
            2 => (
                format!("set {key} 0 0 notanumber\r\n").into_bytes(),
                "CLIENT_ERROR bad command line format\r\n",
            ),
            3 => (
                format!("incr {key} notanumber\r\n").into_bytes(),
                "CLIENT_ERROR invalid numeric delta argument\r\n",
            ),
            4 => (
                format!("get {}\r\n", "k".repeat(251)).into_bytes(),
                "CLIENT_ERROR bad command line format\r\n",
            ),
            // A value over -I: refused, its data swallowed, and (as memcached does) the
            // key's old value removed.
            _ => {
                let len = self.item_max + 1;
                let mut r = format!("set {key} 0 0 {len}\r\n").into_bytes();
                r.extend_from_slice(&value(len, 3));
                r.extend_from_slice(b"\r\n");
                self.keys[k] = None;
                self.tally.too_large.fetch_add(1, Ordering::Relaxed);
                (r, "SERVER_ERROR object too large for cache\r\n")
            }
        };
        c.get_mut()
            .write_all(&req)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let r = read_line(c).await?;
        if r != want {
            return Err(format!("{:?}: {r:?}, want {want:?}", show(&req)));
        }
        Ok(())
    }
}

async fn read_line(c: &mut Conn) -> Result<String, String> {
    let mut l = Vec::new();
    let n = c
        .read_until(b'\n', &mut l)
        .await
        .map_err(|e| format!("read: {e}"))?;
    if n == 0 || !l.ends_with(b"\r\n") {
        return Err(format!("connection closed; got {:?}", show(&l)));
    }
    String::from_utf8(l).map_err(|e| format!("reply not UTF-8: {e}"))
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(80)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("3d").is_err());
    }

    #[test]
    fn values_are_fixed_by_their_tag() {
        assert_eq!(value(1000, 5), value(1000, 5));
        assert_ne!(value(1000, 5), value(1000, 6));
        assert!(value(1_000_000, 1).windows(2).any(|w| w == b"\r\n"));
    }
}
