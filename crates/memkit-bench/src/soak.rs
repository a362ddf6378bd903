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
//!
//! Beside them run a slow reader of dumps and a storm of connections reset at once or
//! mid-request (module `abuse`): the checks hold with them running.
//!
//! The clients are module `client`; this file starts the server, runs them in phases
//! (baseline, drive, settle) and checks the end state (`End`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;

use crate::procs::{self, Kind, Server};

mod abuse;
mod client;
use client::Client;

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
    /// Connections of the abusive clients (`abuse`), and the dumps they read whole.
    extra_conns: AtomicU64,
    dumps: AtomicU64,
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
    let (kind, server) = start_server(a)?;
    let start = Instant::now();
    let before = baseline(&server)?;
    let tally = Arc::new(Tally::default());
    let errors = Arc::new(Errors::default());
    let sampler = PeakSampler::start(server.pid());
    let finished = drive(a, &server, &tally, &errors)?;

    let mut failures = Vec::new();
    if finished != a.conns {
        failures.push(format!(
            "{} of {} clients did not finish (stuck)",
            a.conns - finished,
            a.conns
        ));
    }
    failures.extend(errors.lock().unwrap().iter().cloned());
    let (after, stats_conns) = settled(&server, &before)?;
    let peak = sampler.stop().max(server.rss()?.0);
    let (rss, hwm) = server.rss()?;
    let end = End {
        before,
        after,
        stats_conns,
        rss,
        hwm,
        peak,
        bound: (a.memory_mb as f64 * 1.1 + 32.0) * 1024.0 * 1024.0,
    };
    failures.extend(end.failures(&tally));
    let mut lines = vec![format!("server {} ({})", kind.name(), server.version())];
    lines.extend(end.lines(a, &tally));
    Ok(SoakReport {
        elapsed: start.elapsed(),
        failures,
        lines,
    })
}

/// memcached from PATH, or memkitd (`--memkitd`, or the build of this program's profile),
/// started with the soak's settings.
fn start_server(a: &SoakArgs) -> std::io::Result<(Kind, Server)> {
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
    Ok((kind, server))
}

/// The server's counters before the clients start.
fn baseline(server: &Server) -> std::io::Result<HashMap<String, u64>> {
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
            return Ok(before);
        }
    }
}

/// Runs `--conns` clients until `--duration` is over; how many finished in time.
fn drive(
    a: &SoakArgs,
    server: &Server,
    tally: &Arc<Tally>,
    errors: &Arc<Errors>,
) -> std::io::Result<usize> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let deadline = tokio::time::Instant::now() + a.duration;
    let item_max = a.item_max_kb * 1024;
    Ok(rt.block_on(async {
        let mut tasks = Vec::new();
        for w in 0..a.conns {
            let c = Client::new(
                server.addr,
                w,
                a.seed,
                item_max,
                tally.clone(),
                errors.clone(),
            );
            tasks.push(tokio::spawn(c.run(deadline)));
        }
        let abusers = [
            tokio::spawn(abuse::slow_dumps(
                server.addr,
                deadline,
                tally.clone(),
                errors.clone(),
            )),
            tokio::spawn(abuse::storm(server.addr, deadline, tally.clone())),
        ];
        let mut finished = 0;
        for t in tasks {
            // Each session ends by the deadline plus one request's timeout.
            if let Ok(Ok(())) = tokio::time::timeout_at(deadline + 3 * OP_TIMEOUT, t).await {
                finished += 1;
            }
        }
        for t in abusers {
            if tokio::time::timeout_at(deadline + 3 * OP_TIMEOUT, t)
                .await
                .is_err()
            {
                errors
                    .lock()
                    .unwrap()
                    .push("an abusive client did not finish".into());
            }
        }
        finished
    }))
}

/// The server's counters once every connection closed (or after 10 s), and how many
/// `stats` connections that took.
fn settled(
    server: &Server,
    before: &HashMap<String, u64>,
) -> std::io::Result<(HashMap<String, u64>, u64)> {
    let settle = Instant::now() + Duration::from_secs(10);
    let mut stats_conns = 0u64;
    loop {
        let s = numeric(server.stats()?);
        stats_conns += 1;
        if s["curr_connections"] == before["curr_connections"] || Instant::now() > settle {
            return Ok((s, stats_conns));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The largest VmRSS seen, sampled every 250 ms on a thread of its own.
struct PeakSampler {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl PeakSampler {
    fn start(pid: u32) -> PeakSampler {
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0u64;
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(rss_of(pid));
                std::thread::sleep(Duration::from_millis(250));
            }
            peak
        });
        PeakSampler { done, thread }
    }

    fn stop(self) -> u64 {
        self.done.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// The server at the end of the soak, against the start and what the clients sent.
struct End {
    before: HashMap<String, u64>,
    after: HashMap<String, u64>,
    /// Connections the soak opened for `stats` after the baseline.
    stats_conns: u64,
    rss: u64,
    hwm: u64,
    peak: u64,
    /// The memory bound, bytes.
    bound: f64,
}

fn v(x: &AtomicU64) -> u64 {
    x.load(Ordering::Relaxed)
}

impl End {
    /// How much a counter grew.
    fn d(&self, k: &str) -> u64 {
        self.after.get(k).copied().unwrap_or(0) - self.before.get(k).copied().unwrap_or(0)
    }

    /// Every check that failed: connections, memory, and `stats` against what was sent.
    fn failures(&self, tl: &Tally) -> Vec<String> {
        let mut failures = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                failures.push(what);
            }
        };
        let d = |k: &str| self.d(k);
        let (before, after) = (&self.before, &self.after);
        check(
            after["curr_connections"] == before["curr_connections"],
            format!(
                "curr_connections {} at the end, {} at the start",
                after["curr_connections"], before["curr_connections"]
            ),
        );
        // The peak (the kernel's VmHWM, which no sampling interval can miss) is held to the
        // bound too: memory that came back by the end was still memory the machine had to have.
        check(
            (self.rss.max(self.hwm) as f64) <= self.bound,
            format!(
                "RSS {} MiB at the end, {} MiB peak (VmHWM): over the bound {:.1} MiB",
                self.rss >> 20,
                self.hwm >> 20,
                self.bound / 1048576.0
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
        let opened = v(&tl.sessions) + v(&tl.extra_conns) + self.stats_conns;
        check(
            d("total_connections") == opened,
            format!(
                "total_connections grew {} but {opened} connections were opened",
                d("total_connections")
            ),
        );
        failures
    }

    /// The report after the server line: settings, what was sent, what `stats` counted,
    /// memory.
    fn lines(&self, a: &SoakArgs, tl: &Tally) -> Vec<String> {
        let mut lines = vec![format!(
            "settings -m {} -I {}k -t {}, {} clients, {:.0} s of requests",
            a.memory_mb,
            a.item_max_kb,
            a.threads,
            a.conns,
            a.duration.as_secs_f64()
        )];
        for (name, x) in [
            ("sessions", &tl.sessions),
            ("abusive connections", &tl.extra_conns),
            ("dumps read whole", &tl.dumps),
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
            lines.push(format!("stats {k} +{}", self.d(k)));
        }
        lines.push(format!(
            "rss end {:.1} MiB, peak sampled {:.1} MiB, VmHWM {:.1} MiB, bound {:.1} MiB",
            self.rss as f64 / 1048576.0,
            self.peak as f64 / 1048576.0,
            self.hwm as f64 / 1048576.0,
            self.bound / 1048576.0
        ));
        lines
    }
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
}
