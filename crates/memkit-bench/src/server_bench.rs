//! `memkit-bench server`: memkitd against memcached over loopback, same settings, same load,
//! one table of ratios memkitd / memcached.
//!
//! Parts ([`ServerPart`]):
//! - **throughput**: get/set 90/10, keys 16-32 B, 100 B values, 50 connections, pipeline
//!   depth 1 and 16, server threads 1 and 2; a key space that fits in `-m` (pre-loaded) and
//!   one that does not (pre-filled; a missed get is followed by a set); and multi-gets of
//!   100 keys; and the fitting key space at depth 1 over [`ServerBenchConfig::wide_conns`]
//!   connections (many connections on few workers). Each cell is bounded in time and request
//!   count, run as alternating rounds (memcached, memkitd, then the other order), best round
//!   reported. Each cell also yields the server's CPU seconds per million requests
//!   (`/proc/PID/stat` utime + stime) and the user part of it: divided by `perf`'s samples
//!   when it can record, else utime ([`crate::cpu_sample`] says why). With
//!   [`ServerBenchConfig::binary`], each depth of the fitting key space also runs in the
//!   binary protocol: the same requests as `GET`/`SET` frames, right after the text cell
//!   (`loadgen`'s `binary` module).
//! - **latency**: p50/p99/p999 at a fixed offered load (a fraction of the slower server's
//!   depth-1 throughput measured just before), open loop, on the fitting key space (module
//!   `latency`).
//! - **memory**: fill `-m 64` with 100-byte values, then `curr_items` and VmRSS / VmHWM
//!   (module `capacity`, with the hit ratio).
//! - **hit-ratio**: one Zipf(0.99) trace over 10x more distinct keys than memcached holds,
//!   replayed as get-then-set-on-miss against both servers at the same `-m`.
//! - **memaslap**: `memcaslap` (libmemcached-tools), 90/10, against both servers, also with
//!   `--binary` (module `memaslap`).
//!
//! Only one server is driven at a time; the other idles. The command line is module `cli`;
//! this file holds the configuration, the result rows and the throughput part.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cpu_sample::{CpuSplit, Sampler, SplitSource};
use crate::loadgen::{self, Closed, Proto, Shape, Source, Tally};
use crate::procs::{self, Kind, Server, Spec};
use crate::workload::{Dist, KeyGen};
use clap::ValueEnum;

mod capacity;
mod cli;
mod latency;
mod memaslap;

pub use cli::{ServerArgs, main};

/// Parts of the server bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ServerPart {
    /// Throughput and CPU per request.
    Throughput,
    /// Latency percentiles at a fixed offered load (needs throughput for its rate).
    Latency,
    /// Items retained and RSS at -m 64.
    Memory,
    /// Miss ratio on a Zipf trace.
    HitRatio,
    /// The memcaslap cross-check.
    Memaslap,
}

/// Sizes and settings of a server bench run.
#[derive(Debug, Clone)]
pub struct ServerBenchConfig {
    /// Length of one throughput cell per server per round.
    pub cell: Duration,
    /// Bound on requests per cell.
    pub cell_max_requests: u64,
    /// Alternating rounds per cell (best reported).
    pub rounds: usize,
    /// Server threads (`-t`), each run for both servers.
    pub threads: Vec<usize>,
    /// Pipeline depths.
    pub depths: Vec<usize>,
    /// Client connections.
    pub conns: usize,
    /// Client connections of the extra depth-1 cell of the fitting key space (0: no such
    /// cell): many PHP-FPM or Python workers, one request in flight each.
    pub wide_conns: usize,
    /// Key lengths.
    pub keys: KeyGen,
    /// Value length.
    pub value_len: usize,
    /// `-m` of the throughput, latency and memaslap runs, MiB.
    pub memory_mb: usize,
    /// Distinct keys of the fitting key space.
    pub keys_fit: u64,
    /// Distinct keys of the larger-than-memory key space.
    pub keys_big: u64,
    /// Keys per multi-get.
    pub multiget: usize,
    /// Also run the fitting key space's get/set cells in the binary protocol (and
    /// memcaslap with `--binary`).
    pub binary: bool,
    /// `-m` of the memory run, MiB.
    pub fill_memory_mb: usize,
    /// Sets in the memory run, as a multiple of what memcached's slab math holds.
    pub fill_factor: f64,
    /// `-m` of the hit-ratio run, MiB.
    pub hit_memory_mb: usize,
    /// Distinct keys of the trace, as a multiple of what memcached's slab math holds.
    pub hit_keys_factor: f64,
    /// Trace length, as a multiple of the distinct keys.
    pub hit_requests_factor: f64,
    /// Zipf exponent.
    pub zipf_s: f64,
    /// Offered load of the latency run, as a fraction of the slower server's depth-1
    /// throughput at the same thread count. A quarter: at half, the load generator and the
    /// server together kept both cores busy and p99 measured the run queue (8-80 ms).
    pub latency_fraction: f64,
    /// Offered load when the throughput part did not run.
    pub latency_default_rate: f64,
    /// Length of one latency run (one server, one round).
    pub latency_secs: Duration,
    /// Alternating latency rounds; each server's percentiles are the median over them.
    pub latency_rounds: usize,
    /// Length of one memcaslap run.
    pub memaslap_secs: u64,
    /// Load generator threads (tokio workers).
    pub client_threads: usize,
    /// Where the throughput cells' user/system split comes from.
    pub cpu_split: CpuSplit,
    /// Seed of every random choice.
    pub seed: u64,
}

impl ServerBenchConfig {
    /// The documented run (about 4-5 minutes).
    pub fn full() -> Self {
        ServerBenchConfig {
            cell: Duration::from_millis(2500),
            cell_max_requests: 20_000_000,
            rounds: 2,
            threads: vec![1, 2],
            depths: vec![1, 16],
            conns: 50,
            wide_conns: 500,
            keys: KeyGen::new(16, 32),
            value_len: 100,
            memory_mb: 64,
            keys_fit: 100_000,
            keys_big: 2_000_000,
            multiget: 100,
            binary: true,
            fill_memory_mb: 64,
            fill_factor: 3.0,
            hit_memory_mb: 32,
            hit_keys_factor: 10.0,
            hit_requests_factor: 3.0,
            zipf_s: 0.99,
            latency_fraction: 0.25,
            latency_default_rate: 20_000.0,
            latency_secs: Duration::from_secs(2),
            latency_rounds: 5,
            memaslap_secs: 4,
            client_threads: 2,
            cpu_split: CpuSplit::Auto,
            seed: 0x6d65_6d6b_6974,
        }
    }

    /// A smoke run of about 30 s: every part, small sizes, one round.
    pub fn quick() -> Self {
        ServerBenchConfig {
            cell: Duration::from_millis(400),
            cell_max_requests: 2_000_000,
            rounds: 1,
            keys_fit: 20_000,
            keys_big: 400_000,
            memory_mb: 16,
            fill_memory_mb: 16,
            fill_factor: 2.0,
            hit_memory_mb: 8,
            hit_keys_factor: 10.0,
            hit_requests_factor: 1.5,
            latency_secs: Duration::from_secs(1),
            latency_rounds: 1,
            memaslap_secs: 1,
            ..Self::full()
        }
    }
}

/// A figure for both servers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pair {
    /// memcached's.
    pub memcached: f64,
    /// memkitd's.
    pub memkitd: f64,
}

impl Pair {
    /// memkitd / memcached.
    pub fn ratio(&self) -> f64 {
        self.memkitd / self.memcached
    }

    fn get(&self, kind: Kind) -> f64 {
        match kind {
            Kind::Memcached => self.memcached,
            Kind::Memkitd => self.memkitd,
        }
    }

    fn set(&mut self, kind: Kind, v: f64) {
        match kind {
            Kind::Memcached => self.memcached = v,
            Kind::Memkitd => self.memkitd = v,
        }
    }
}

/// Which load a throughput row carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TpWorkload {
    /// 90% get / 10% set over keys that fit.
    Fits,
    /// 90% get / 10% set over a key space larger than memory, get-miss then set.
    Exceeds,
    /// Multi-gets of N keys over keys that fit.
    MultiGet,
    /// [`TpWorkload::Fits`]'s requests in the binary protocol (`GET` and `SET` frames).
    Binary,
}

impl TpWorkload {
    fn proto(self) -> Proto {
        match self {
            TpWorkload::Binary => Proto::Binary,
            _ => Proto::Text,
        }
    }

    fn source(self, cfg: &ServerBenchConfig) -> Source {
        match self {
            TpWorkload::Fits | TpWorkload::Binary => Source::Mix {
                get_pct: 90,
                dist: Dist::Uniform(cfg.keys_fit),
                offset: 0,
                set_on_miss: false,
            },
            TpWorkload::Exceeds => Source::Mix {
                get_pct: 90,
                dist: Dist::Uniform(cfg.keys_big),
                offset: 0,
                set_on_miss: true,
            },
            TpWorkload::MultiGet => Source::MultiGet {
                n: cfg.multiget,
                dist: Dist::Uniform(cfg.keys_fit),
            },
        }
    }
}

/// Server CPU seconds over a run.
#[derive(Debug, Clone, Copy)]
struct Cpu {
    user: f64,
    system: f64,
    /// `/proc`'s utime, whichever split `user` comes from: the log shows both.
    ticks_user: f64,
}

impl Cpu {
    fn total(self) -> f64 {
        self.user + self.system
    }
}

/// One throughput cell.
#[derive(Debug, Clone)]
pub struct TpRow {
    /// The load.
    pub workload: TpWorkload,
    /// `-t` of both servers.
    pub threads: usize,
    /// Pipeline depth.
    pub depth: usize,
    /// Client connections.
    pub conns: usize,
    /// Requests per second (best round).
    pub rate: Pair,
    /// Server CPU seconds (user + system) per million requests (same round).
    pub cpu_per_m: Pair,
    /// Of which user CPU (same round).
    pub user_per_m: Pair,
    /// Hits / keys asked (same round).
    pub hit: Pair,
    /// Error replies (all rounds).
    pub errors: Pair,
}

/// One latency run.
#[derive(Debug, Clone)]
pub struct LatRow {
    /// `-t`.
    pub threads: usize,
    /// Offered load, requests/s.
    pub offered: f64,
    /// Achieved load.
    pub achieved: Pair,
    /// Percentiles, µs.
    pub p50: Pair,
    /// 99th.
    pub p99: Pair,
    /// 99.9th.
    pub p999: Pair,
    /// Server CPU per million requests.
    pub cpu_per_m: Pair,
}

/// The memory run.
#[derive(Debug, Clone)]
pub struct MemRow {
    /// `-m`, MiB.
    pub memory_mb: usize,
    /// Sets sent.
    pub sets: u64,
    /// `curr_items` after the fill.
    pub items: Pair,
    /// VmRSS after the fill, bytes.
    pub rss: Pair,
    /// VmHWM (peak RSS), bytes.
    pub hwm: Pair,
    /// `evictions`.
    pub evictions: Pair,
    /// What memcached's slab math says `-m` holds at this shape (mean key length).
    pub slab_math_items: u64,
}

/// The hit-ratio run.
#[derive(Debug, Clone)]
pub struct HitRow {
    /// `-m`, MiB.
    pub memory_mb: usize,
    /// Distinct keys in the trace.
    pub keys: u64,
    /// Trace length (gets).
    pub requests: u64,
    /// Get misses / gets, client-side.
    pub miss: Pair,
    /// `curr_items` at the end.
    pub items: Pair,
    /// Replay seconds.
    pub secs: Pair,
}

/// One memcaslap run.
#[derive(Debug, Clone)]
pub struct MemaslapRow {
    /// `-t`.
    pub threads: usize,
    /// memcaslap's `--binary` (the binary protocol).
    pub binary: bool,
    /// memcaslap's TPS.
    pub tps: Pair,
    /// Server CPU per million of memcaslap's ops.
    pub cpu_per_m: Pair,
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct ServerReport {
    /// Settings.
    pub config: ServerBenchConfig,
    /// Throughput cells.
    pub tp: Vec<TpRow>,
    /// Latency runs.
    pub lat: Vec<LatRow>,
    /// The memory run.
    pub mem: Option<MemRow>,
    /// The hit-ratio run.
    pub hit: Option<HitRow>,
    /// memcaslap runs.
    pub memaslap: Vec<MemaslapRow>,
    /// Why memcaslap did not run, if it did not.
    pub memaslap_note: Option<String>,
    /// Versions as the servers report them.
    pub versions: Pair2<String>,
    /// Load average at start and end.
    pub loadavg: (Option<String>, Option<String>),
    /// Wall time of the run.
    pub elapsed: Duration,
    /// The split behind every user figure of the throughput cells.
    pub cpu_split: SplitSource,
}

impl ServerReport {
    /// A report of `config` with nothing measured yet.
    pub fn empty(config: ServerBenchConfig) -> Self {
        ServerReport {
            config,
            tp: Vec::new(),
            lat: Vec::new(),
            mem: None,
            hit: None,
            memaslap: Vec::new(),
            memaslap_note: None,
            versions: Pair2::default(),
            loadavg: (None, None),
            elapsed: Duration::ZERO,
            cpu_split: SplitSource::Proc,
        }
    }
}

/// Two strings, memcached's and memkitd's.
#[derive(Debug, Clone, Default)]
pub struct Pair2<T> {
    /// memcached's.
    pub memcached: T,
    /// memkitd's.
    pub memkitd: T,
}

/// Paths of the programs under test.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// memcached.
    pub memcached: PathBuf,
    /// memkitd.
    pub memkitd: PathBuf,
    /// memcaslap / memaslap, if found.
    pub memaslap: Option<PathBuf>,
}

impl Binaries {
    fn of(&self, kind: Kind) -> &Path {
        match kind {
            Kind::Memcached => &self.memcached,
            Kind::Memkitd => &self.memkitd,
        }
    }

    /// memcached and memcaslap from PATH (or /usr/bin), memkitd of `profile` located (and
    /// built first when `build`) by [`procs::locate_memkitd`].
    pub fn find(profile: &str, build: bool) -> io::Result<Binaries> {
        Self::find_with(procs::locate_memkitd(profile, build)?)
    }

    /// memcached and memcaslap from PATH (or /usr/bin), this memkitd.
    pub fn find_with(memkitd: PathBuf) -> io::Result<Binaries> {
        let memcached = procs::find_on_path("memcached").ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "memcached not found on PATH (Debian: apt-get install memcached)",
            )
        })?;
        Ok(Binaries {
            memcached,
            memkitd,
            memaslap: procs::find_on_path("memcaslap").or_else(|| procs::find_on_path("memaslap")),
        })
    }
}

const KINDS: [Kind; 2] = [Kind::Memcached, Kind::Memkitd];

struct Ctx<'a> {
    cfg: &'a ServerBenchConfig,
    bins: &'a Binaries,
    rt: tokio::runtime::Runtime,
    log: &'a mut dyn FnMut(&str),
    shape: Shape,
    /// The latency part runs inside the throughput part, on its pre-loaded servers.
    wants_latency: bool,
    /// How [`Ctx::split_closed`] divides a cell's CPU.
    split: SplitSource,
}

/// Starts both servers with `spec`.
fn start_pair(bins: &Binaries, spec: Spec) -> io::Result<[Server; 2]> {
    Ok([
        Server::start(Kind::Memcached, bins.of(Kind::Memcached), spec)?,
        Server::start(Kind::Memkitd, bins.of(Kind::Memkitd), spec)?,
    ])
}

impl Ctx<'_> {
    fn closed(
        &self,
        server: &Server,
        cfg: Closed,
        source: impl Fn(usize) -> Source,
    ) -> io::Result<(Tally, Cpu)> {
        let (user0, system0) = server.cpu_times()?;
        let t = self
            .rt
            .block_on(loadgen::closed_loop(server.addr, cfg, self.shape, source))?;
        let (user, system) = server.cpu_times()?;
        let cpu = Cpu {
            user: user - user0,
            system: system - system0,
            ticks_user: user - user0,
        };
        Ok((t, cpu))
    }

    /// [`Ctx::closed`] with its user/system split taken from perf's samples when the run
    /// uses them. The total stays `/proc`'s, which is exact where the split is not. Both
    /// servers are sampled alike, so perf's own cost lands on each the same way.
    fn split_closed(
        &self,
        server: &Server,
        cfg: Closed,
        source: impl Fn(usize) -> Source,
    ) -> io::Result<(Tally, Cpu)> {
        let SplitSource::Perf { perf, hz } = &self.split else {
            return self.closed(server, cfg, source);
        };
        // Enabled before the first /proc reading and disabled after the second: the samples
        // cover the same span as the total they divide.
        let sampler = Sampler::start(perf, server.pid(), *hz)?;
        let (t, cpu) = self.closed(server, cfg, source)?;
        let samples = sampler.finish()?;
        let (user, system) = samples.split(cpu.total()).ok_or_else(|| {
            io::Error::other(format!(
                "perf took no samples of {} over a load that used {:.2} s of CPU",
                server.kind.name(),
                cpu.total()
            ))
        })?;
        Ok((
            t,
            Cpu {
                user,
                system,
                ..cpu
            },
        ))
    }

    /// Sets keys `lo..hi` on `server`, depth 16.
    fn fill(&self, server: &Server, lo: u64, hi: u64) -> io::Result<Tally> {
        let conns = self.cfg.conns as u64;
        let cfg = Closed {
            conns: self.cfg.conns,
            depth: 16,
            duration: Duration::from_secs(600),
            max_requests: hi - lo,
            seed: self.cfg.seed,
            proto: Proto::Text,
        };
        Ok(self
            .closed(server, cfg, |i| Source::Fill {
                next: lo + i as u64,
                end: hi,
                step: conns,
            })?
            .0)
    }

    fn throughput(&mut self, report: &mut ServerReport) -> io::Result<()> {
        let cfg = self.cfg;
        // Each client connection is a socket of this process (the servers get -c 4096).
        // Linux's usual soft limit of 1024 holds 500 and the bench's own files; a lower one
        // would fail mid-run with EMFILE, so it is named up front.
        let want = cfg.conns.max(cfg.wide_conns) as u64 + 64;
        if let Some(limit) = procs::open_files_limit()
            && limit < want
        {
            return Err(io::Error::other(format!(
                "open files limit {limit} < {want} needed for {} connections (ulimit -n)",
                cfg.conns.max(cfg.wide_conns)
            )));
        }
        for &threads in &cfg.threads {
            let spec = Spec {
                threads,
                memory_mb: cfg.memory_mb,
            };
            for workload in [TpWorkload::Fits, TpWorkload::Exceeds] {
                let servers = start_pair(self.bins, spec)?;
                // Pre-load: every fitting key; or enough of the big key space to fill memory.
                let (lo, hi) = match workload {
                    TpWorkload::Exceeds => {
                        let fill = (crate::slab::items_that_fit(
                            cfg.memory_mb << 20,
                            cfg.keys.max_len,
                            cfg.value_len,
                        ) as f64
                            * 1.5) as u64;
                        (0, fill.min(cfg.keys_big))
                    }
                    _ => (0, cfg.keys_fit),
                };
                for s in &servers {
                    (self.log)(&format!(
                        "-t {threads}: pre-loading {} keys into {}",
                        hi - lo,
                        s.kind.name()
                    ));
                    self.fill(s, lo, hi)?;
                }
                for (wl, depth, conns) in self.cells(workload) {
                    let row = self.cell(&servers, threads, wl, depth, conns)?;
                    report.tp.push(row);
                }
                if workload == TpWorkload::Fits && self.wants_latency {
                    let lat = self.latency(&servers, threads, report)?;
                    report.lat.push(lat);
                }
                if report.versions.memcached.is_empty() {
                    report.versions = Pair2 {
                        memcached: servers[0].version(),
                        memkitd: servers[1].version(),
                    };
                }
            }
        }
        Ok(())
    }

    /// The cells run on servers pre-loaded for `workload`, in order, as (load, depth,
    /// connections). Each depth's binary cell comes right after its text cell, so the two
    /// are measured close in time; the wide depth-1 cell follows them.
    fn cells(&self, workload: TpWorkload) -> Vec<(TpWorkload, usize, usize)> {
        let cfg = self.cfg;
        let fits = workload == TpWorkload::Fits;
        let mut cells = Vec::new();
        for &depth in &cfg.depths {
            cells.push((workload, depth, cfg.conns));
            if fits && cfg.binary {
                cells.push((TpWorkload::Binary, depth, cfg.conns));
            }
            if fits && depth == 1 && cfg.wide_conns > 0 && cfg.wide_conns != cfg.conns {
                cells.push((workload, depth, cfg.wide_conns));
            }
        }
        if fits && cfg.multiget > 0 {
            cells.push((TpWorkload::MultiGet, 1, cfg.conns));
        }
        cells
    }

    /// One throughput cell: alternating rounds on both servers, the best round of each.
    fn cell(
        &mut self,
        servers: &[Server; 2],
        threads: usize,
        wl: TpWorkload,
        depth: usize,
        conns: usize,
    ) -> io::Result<TpRow> {
        let cfg = self.cfg;
        let mut row = TpRow {
            workload: wl,
            threads,
            depth,
            conns,
            rate: Pair::default(),
            cpu_per_m: Pair::default(),
            user_per_m: Pair::default(),
            hit: Pair::default(),
            errors: Pair::default(),
        };
        for round in 0..cfg.rounds {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let s = &servers[i];
                let closed = Closed {
                    conns,
                    depth,
                    duration: cfg.cell,
                    max_requests: cfg.cell_max_requests,
                    // The same requests in both protocols.
                    seed: cfg.seed ^ (depth as u64) ^ ((round as u64) << 8),
                    proto: wl.proto(),
                };
                let (t, cpu) = self.split_closed(s, closed, |_| wl.source(cfg))?;
                let rate = t.rate();
                let per_m = |secs: f64| secs / t.requests.max(1) as f64 * 1e6;
                (self.log)(&format!(
                    "-t {threads} {wl:?} depth {depth} x {conns} round {round}: {} {:.0} req/s, \
                     cpu {:.2} s/M (user {:.2}, utime {:.2}), hit {:.3}, errors {}",
                    s.kind.name(),
                    rate,
                    per_m(cpu.total()),
                    per_m(cpu.user),
                    per_m(cpu.ticks_user),
                    t.hit_ratio(),
                    t.errors
                ));
                let kind = s.kind;
                row.errors.set(kind, row.errors.get(kind) + t.errors as f64);
                if rate > row.rate.get(kind) {
                    row.rate.set(kind, rate);
                    row.cpu_per_m.set(kind, per_m(cpu.total()));
                    row.user_per_m.set(kind, per_m(cpu.user));
                    row.hit.set(kind, t.hit_ratio());
                }
            }
        }
        Ok(row)
    }
}

/// Runs `parts` and returns what they measured; progress lines go to `log`.
pub fn run(
    cfg: &ServerBenchConfig,
    bins: &Binaries,
    parts: &[ServerPart],
    log: &mut dyn FnMut(&str),
) -> io::Result<ServerReport> {
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.client_threads.max(1))
        .enable_all()
        .build()?;
    let mut report = ServerReport::empty(cfg.clone());
    report.loadavg = (procs::loadavg(), None);
    let throughput =
        parts.contains(&ServerPart::Throughput) || parts.contains(&ServerPart::Latency);
    if throughput {
        let (split, why_not) = crate::cpu_sample::choose(cfg.cpu_split)?;
        log(&format!(
            "CPU split: {}{}",
            split.describe(),
            why_not.map_or(String::new(), |e| format!(" (perf cannot record: {e})"))
        ));
        report.cpu_split = split;
    }
    let mut ctx = Ctx {
        cfg,
        bins,
        rt,
        log,
        shape: Shape {
            keys: cfg.keys,
            value_len: cfg.value_len,
        },
        wants_latency: parts.contains(&ServerPart::Latency),
        split: report.cpu_split.clone(),
    };
    if throughput {
        ctx.throughput(&mut report)?;
    }
    if parts.contains(&ServerPart::Memory) {
        report.mem = Some(ctx.memory()?);
    }
    if parts.contains(&ServerPart::HitRatio) {
        report.hit = Some(ctx.hit_ratio()?);
    }
    if parts.contains(&ServerPart::Memaslap) {
        ctx.memaslap(&mut report)?;
    }
    if report.versions.memcached.is_empty() {
        let servers = start_pair(
            bins,
            Spec {
                threads: 1,
                memory_mb: 8,
            },
        )?;
        report.versions = Pair2 {
            memcached: servers[0].version(),
            memkitd: servers[1].version(),
        };
    }
    report.loadavg.1 = procs::loadavg();
    report.elapsed = started.elapsed();
    Ok(report)
}
