//! `memkit-bench router`: memkitd's router mode (`memkitd --route FILE`) against twemproxy
//! (`nutcracker`), both in front of the same three memcached backends on loopback, in one
//! run, with the same load.
//!
//! - **Backends**: three memcached, `-m 64 -t 1`, each on a free 127.0.0.1 port.
//! - **memkitd**: `--route FILE -t 2` (release build), the file one ketama pool of the three
//!   and one `hash` route ([`route_toml`]); everything else memkitd's defaults (meta protocol
//!   to the backends, one connection a backend and worker).
//! - **nutcracker**: one pool of the three, `hash: md5`, `distribution: ketama`,
//!   `auto_eject_hosts: false`, `timeout: 1000` (memkitd's default batch deadline), its
//!   defaults otherwise (one connection a backend), stats on a free loopback port
//!   ([`nutcracker_yaml`]). twemproxy's ketama need not place a key where libmemcached's
//!   does: every key is loaded through each proxy, so both find every key.
//! - **Throughput** (per depth, then multi-gets): `conns` connections of the closed-loop load
//!   generator ([`crate::loadgen`]), get/set 90/10 over keys loaded first, `depth` requests
//!   in flight a connection; then multi-gets of `multiget` keys at depth 1. Each cell is run
//!   `rounds` times on each proxy, alternating (memkitd, nutcracker; the order swapped every
//!   round), bounded in time and requests; the table gives medians. Each run also reads the
//!   proxy's CPU seconds (`/proc/PID/stat` utime + stime, all threads) and the backends'.
//! - **Latency**: open loop at a low offered load (a quarter of the slower proxy's depth-1
//!   median, or `--latency-rate`), one request in flight a connection: direct to one
//!   memcached backend, through memkitd, through nutcracker, rotating, `latency_rounds`
//!   each; medians of p50 and p99, and each proxy's p50 above the direct one.
//!
//! Every process listens on 127.0.0.1 only and is killed (by its PID) when the run ends.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::ValueEnum;

use crate::loadgen::{self, Closed, Open, Proto, Shape, Source, Tally};
use crate::procs::{self, Kind, Server};
use crate::workload::{Dist, KeyGen};

mod nutcracker;
mod report;

pub use nutcracker::nutcracker_yaml;
use nutcracker::{Nutcracker, Scratch, nutcracker_version};

/// Parts of the router bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RouterPart {
    /// get/set 90/10 at each depth: throughput and CPU per request.
    Throughput,
    /// Multi-gets of `multiget` keys.
    MultiGet,
    /// p50/p99 at a low offered load: direct, through memkitd, through nutcracker.
    Latency,
}

/// Sizes and settings of a router bench run.
#[derive(Debug, Clone)]
pub struct RouterBenchConfig {
    /// Length of one throughput run (one proxy, one round).
    pub cell: Duration,
    /// Bound on the requests of one throughput run.
    pub cell_max_requests: u64,
    /// Alternating rounds per cell; the table gives medians.
    pub rounds: usize,
    /// memkitd's `-t` (its workers and the router's backend runtime threads).
    pub threads: usize,
    /// Each backend memcached's `-t`.
    pub backend_threads: usize,
    /// Each backend memcached's `-m`, MiB.
    pub backend_memory_mb: usize,
    /// Pipeline depths of the get/set cells.
    pub depths: Vec<usize>,
    /// Client connections.
    pub conns: usize,
    /// Key lengths.
    pub keys: KeyGen,
    /// Value length.
    pub value_len: usize,
    /// Distinct keys, all loaded through each proxy (and into the direct backend) first.
    pub keys_fit: u64,
    /// Keys per multi-get.
    pub multiget: usize,
    /// Offered load of the latency part as a fraction of the slower proxy's depth-1 median.
    pub latency_fraction: f64,
    /// Offered load of the latency part, requests/s (overrides the fraction).
    pub latency_rate: Option<f64>,
    /// Offered load when there is no depth-1 cell to take a fraction of.
    pub latency_default_rate: f64,
    /// Length of one latency run.
    pub latency_secs: Duration,
    /// Rounds of the latency part (each path once a round).
    pub latency_rounds: usize,
    /// Load generator threads (tokio workers).
    pub client_threads: usize,
    /// Parts to run.
    pub parts: Vec<RouterPart>,
    /// Seed of every random choice.
    pub seed: u64,
}

impl RouterBenchConfig {
    /// The documented run (about 2 minutes).
    pub fn full() -> Self {
        RouterBenchConfig {
            cell: Duration::from_secs(2),
            cell_max_requests: 20_000_000,
            rounds: 5,
            threads: 2,
            backend_threads: 1,
            backend_memory_mb: 64,
            depths: vec![1, 16],
            conns: 50,
            keys: KeyGen::new(16, 32),
            value_len: 100,
            keys_fit: 100_000,
            multiget: 100,
            latency_fraction: 0.25,
            latency_rate: None,
            latency_default_rate: 10_000.0,
            latency_secs: Duration::from_secs(2),
            latency_rounds: 5,
            client_threads: 2,
            parts: vec![
                RouterPart::Throughput,
                RouterPart::MultiGet,
                RouterPart::Latency,
            ],
            seed: 0x726f_7574_6572,
        }
    }

    /// A smoke run of a few seconds: every part, small sizes, one round.
    pub fn quick() -> Self {
        RouterBenchConfig {
            cell: Duration::from_millis(300),
            cell_max_requests: 1_000_000,
            rounds: 1,
            backend_memory_mb: 16,
            conns: 8,
            keys_fit: 5_000,
            latency_secs: Duration::from_millis(500),
            latency_rounds: 1,
            ..Self::full()
        }
    }
}

/// The programs under test.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// memcached (the backends).
    pub memcached: PathBuf,
    /// memkitd (the router).
    pub memkitd: PathBuf,
    /// nutcracker (twemproxy).
    pub nutcracker: PathBuf,
}

impl Binaries {
    /// memcached and nutcracker from PATH (or /usr/bin, /usr/local/bin) unless given;
    /// memkitd given, or the release build located (and built first when `build`) by
    /// [`procs::locate_memkitd`].
    pub fn find(
        memkitd: Option<PathBuf>,
        nutcracker: Option<PathBuf>,
        build: bool,
    ) -> io::Result<Binaries> {
        let missing = |what: &str, pkg: &str| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{what} not found on PATH (Debian: apt-get install {pkg})"),
            )
        };
        let memcached =
            procs::find_on_path("memcached").ok_or_else(|| missing("memcached", "memcached"))?;
        let nutcracker = match nutcracker {
            Some(p) => p,
            None => procs::find_on_path("nutcracker")
                .ok_or_else(|| missing("nutcracker", "nutcracker"))?,
        };
        let memkitd = match memkitd {
            Some(p) => p,
            None => procs::locate_memkitd("release", build)?,
        };
        Ok(Binaries {
            memcached,
            memkitd,
            nutcracker,
        })
    }
}

/// memkitd's route file: one ketama pool of `backends`, one `hash` route to it.
pub fn route_toml(backends: &[SocketAddr]) -> String {
    let servers: Vec<String> = backends.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "[pools.main]\nservers = [{}]\nplacement = \"ketama\"\n\n[[route]]\ntype = \"hash\"\npool = \"main\"\n",
        servers.join(", ")
    )
}

/// The paths a request can take: index into [`LatResult::runs`] and the names.
pub const PATHS: [&str; 3] = ["direct", "memkitd", "nutcracker"];
/// The two proxies, as indexed in [`CellResult::runs`].
pub const PROXIES: [&str; 2] = ["memkitd", "nutcracker"];

/// What one throughput run of one proxy measured.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Requests answered (a multi-get counts once).
    pub requests: u64,
    /// Requests per second.
    pub rate: f64,
    /// The proxy's CPU seconds (user + system, all threads) over the run.
    pub proxy_cpu: f64,
    /// The three backends' CPU seconds over the run.
    pub backend_cpu: f64,
    /// This process's CPU seconds over the run: the load generator (the bench's other
    /// threads idle meanwhile).
    pub client_cpu: f64,
    /// Hits / keys asked.
    pub hit: f64,
    /// Replies that were not the expected success.
    pub errors: u64,
}

impl Run {
    /// The proxy's CPU µs per request.
    pub fn proxy_us(&self) -> f64 {
        self.proxy_cpu / self.requests.max(1) as f64 * 1e6
    }

    /// The backends' CPU µs per request.
    pub fn backend_us(&self) -> f64 {
        self.backend_cpu / self.requests.max(1) as f64 * 1e6
    }

    /// The load generator's CPU µs per request.
    pub fn client_us(&self) -> f64 {
        self.client_cpu / self.requests.max(1) as f64 * 1e6
    }

    /// Every process's CPU µs per request: proxy, backends, load generator.
    pub fn total_us(&self) -> f64 {
        self.proxy_us() + self.backend_us() + self.client_us()
    }
}

/// Which load a throughput cell carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellLoad {
    /// get/set 90/10 at this depth.
    Mix {
        /// Requests in flight a connection.
        depth: usize,
    },
    /// Multi-gets of this many keys, depth 1.
    MultiGet {
        /// Keys a request.
        keys: usize,
    },
}

/// One throughput cell: every round of both proxies.
#[derive(Debug, Clone)]
pub struct CellResult {
    /// The load.
    pub load: CellLoad,
    /// Client connections.
    pub conns: usize,
    /// memkitd's runs, then nutcracker's, in round order.
    pub runs: [Vec<Run>; 2],
}

/// The latency part.
#[derive(Debug, Clone)]
pub struct LatResult {
    /// Offered load, requests/s.
    pub offered: f64,
    /// Connections.
    pub conns: usize,
    /// Direct, memkitd, nutcracker ([`PATHS`]), in round order.
    pub runs: [Vec<loadgen::Latency>; 3],
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct RouterReport {
    /// Settings.
    pub config: RouterBenchConfig,
    /// Throughput cells.
    pub cells: Vec<CellResult>,
    /// The latency part.
    pub lat: Option<LatResult>,
    /// Versions: memcached, memkitd, nutcracker.
    pub versions: [String; 3],
    /// Load average at start and end.
    pub loadavg: (Option<String>, Option<String>),
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// A process the load goes to.
#[derive(Debug, Clone, Copy)]
struct Target {
    addr: SocketAddr,
    pid: u32,
}

/// The processes of a run.
struct Rig {
    backends: Vec<Server>,
    memkitd: Server,
    nutcracker: Nutcracker,
    _scratch: Scratch,
}

impl Rig {
    fn start(cfg: &RouterBenchConfig, bins: &Binaries) -> io::Result<Rig> {
        let scratch = Scratch::new()?;
        let (m, t) = (
            cfg.backend_memory_mb.to_string(),
            cfg.backend_threads.to_string(),
        );
        let backends = (0..3)
            .map(|_| {
                Server::start_args(
                    Kind::Memcached,
                    &bins.memcached,
                    &["-m", &m, "-t", &t, "-c", "4096"],
                )
            })
            .collect::<io::Result<Vec<_>>>()?;
        let addrs: Vec<SocketAddr> = backends.iter().map(|s| s.addr).collect();
        let route = scratch.0.join("route.toml");
        std::fs::write(&route, route_toml(&addrs))?;
        let route = route.to_string_lossy().into_owned();
        let threads = cfg.threads.to_string();
        let memkitd = Server::start_args(
            Kind::Memkitd,
            &bins.memkitd,
            &["--route", &route, "-t", &threads, "-c", "4096"],
        )?;
        let nutcracker = Nutcracker::start(&bins.nutcracker, &scratch.0, &addrs)?;
        Ok(Rig {
            backends,
            memkitd,
            nutcracker,
            _scratch: scratch,
        })
    }

    /// Direct (the first backend), memkitd, nutcracker: [`PATHS`]' order.
    fn paths(&self) -> [Target; 3] {
        [
            Target {
                addr: self.backends[0].addr,
                pid: self.backends[0].pid(),
            },
            Target {
                addr: self.memkitd.addr,
                pid: self.memkitd.pid(),
            },
            Target {
                addr: self.nutcracker.addr,
                pid: self.nutcracker.pid(),
            },
        ]
    }

    fn backends_cpu(&self) -> io::Result<f64> {
        self.backends.iter().map(|s| s.cpu_secs()).sum()
    }
}

struct Ctx<'a> {
    cfg: &'a RouterBenchConfig,
    rig: Rig,
    rt: tokio::runtime::Runtime,
    shape: Shape,
    log: &'a mut dyn FnMut(&str),
}

impl Ctx<'_> {
    fn closed(&self, t: Target, cfg: Closed, src: impl Fn(usize) -> Source) -> io::Result<Run> {
        let cpu = |pid| procs::cpu_times_of(pid).map(|(u, s)| u + s);
        let me = std::process::id();
        let (p0, b0, c0) = (cpu(t.pid)?, self.rig.backends_cpu()?, cpu(me)?);
        let tally: Tally = self
            .rt
            .block_on(loadgen::closed_loop(t.addr, cfg, self.shape, src))?;
        let (p1, b1, c1) = (cpu(t.pid)?, self.rig.backends_cpu()?, cpu(me)?);
        Ok(Run {
            requests: tally.requests,
            rate: tally.rate(),
            proxy_cpu: p1 - p0,
            backend_cpu: b1 - b0,
            client_cpu: c1 - c0,
            hit: tally.hit_ratio(),
            errors: tally.errors,
        })
    }

    /// Sets every key through `t`, depth 16.
    fn load(&self, t: Target) -> io::Result<Run> {
        let cfg = self.cfg;
        let conns = cfg.conns as u64;
        let closed = Closed {
            conns: cfg.conns,
            depth: 16,
            duration: Duration::from_secs(300),
            // A connection whose keys ran out still takes one from the budget.
            max_requests: cfg.keys_fit + conns,
            seed: cfg.seed,
            proto: Proto::Text,
        };
        let end = cfg.keys_fit;
        self.closed(t, closed, |i| Source::Fill {
            next: i as u64,
            end,
            step: conns,
        })
    }

    fn cell(&mut self, load: CellLoad) -> io::Result<CellResult> {
        let cfg = self.cfg;
        let mut cell = CellResult {
            load,
            conns: cfg.conns,
            runs: [Vec::new(), Vec::new()],
        };
        let (depth, source) = match load {
            CellLoad::Mix { depth } => (
                depth,
                Source::Mix {
                    get_pct: 90,
                    dist: Dist::Uniform(cfg.keys_fit),
                    offset: 0,
                    set_on_miss: false,
                },
            ),
            CellLoad::MultiGet { keys } => (
                1,
                Source::MultiGet {
                    n: keys,
                    dist: Dist::Uniform(cfg.keys_fit),
                },
            ),
        };
        let paths = self.rig.paths();
        for round in 0..cfg.rounds.max(1) {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let closed = Closed {
                    conns: cfg.conns,
                    depth,
                    duration: cfg.cell,
                    max_requests: cfg.cell_max_requests,
                    // The same requests through both proxies in a round.
                    seed: cfg.seed ^ (depth as u64) ^ ((round as u64) << 8),
                    proto: Proto::Text,
                };
                let r = self.closed(paths[i + 1], closed, |_| source.clone())?;
                (self.log)(&format!(
                    "{load:?} x {} round {round}: {} {:.0} req/s, proxy {:.2} µs/req, \
                     backends {:.2} µs/req, load generator {:.2} µs/req, hit {:.3}, errors {}",
                    cfg.conns,
                    PROXIES[i],
                    r.rate,
                    r.proxy_us(),
                    r.backend_us(),
                    r.client_us(),
                    r.hit,
                    r.errors
                ));
                cell.runs[i].push(r);
            }
        }
        Ok(cell)
    }

    fn latency(&mut self, offered: f64) -> io::Result<LatResult> {
        let cfg = self.cfg;
        let mut res = LatResult {
            offered,
            conns: cfg.conns,
            runs: [Vec::new(), Vec::new(), Vec::new()],
        };
        let paths = self.rig.paths();
        for round in 0..cfg.latency_rounds.max(1) {
            for k in 0..3 {
                let i = (round + k) % 3;
                let open = Open {
                    conns: cfg.conns,
                    rate: offered,
                    duration: cfg.latency_secs,
                    max_requests: (offered * cfg.latency_secs.as_secs_f64() * 1.1) as u64 + 1000,
                    get_pct: 90,
                    dist: Dist::Uniform(cfg.keys_fit),
                    seed: cfg.seed ^ 0x1a7 ^ ((round as u64) << 8),
                };
                let l = self
                    .rt
                    .block_on(loadgen::open_loop(paths[i].addr, open, self.shape))?;
                (self.log)(&format!(
                    "latency at {offered:.0} req/s round {round}: {} p50 {:.0} p99 {:.0} \
                     max {:.0} µs, achieved {:.0}, errors {}",
                    PATHS[i],
                    l.p50,
                    l.p99,
                    l.max,
                    l.tally.rate(),
                    l.tally.errors
                ));
                res.runs[i].push(l);
            }
        }
        Ok(res)
    }
}

/// The median of `v` (the upper one of an even count); 0 when empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the parts `cfg` names and returns what they measured; progress lines go to `log`.
pub fn run(
    cfg: &RouterBenchConfig,
    bins: &Binaries,
    log: &mut dyn FnMut(&str),
) -> io::Result<RouterReport> {
    let started = Instant::now();
    let loadavg0 = procs::loadavg();
    let want = cfg.conns as u64 + 64;
    if let Some(limit) = procs::open_files_limit()
        && limit < want
    {
        return Err(io::Error::other(format!(
            "open files limit {limit} < {want} needed for {} connections (ulimit -n)",
            cfg.conns
        )));
    }
    let rig = Rig::start(cfg, bins)?;
    let versions = [
        rig.backends[0].version(),
        rig.memkitd.version(),
        nutcracker_version(&bins.nutcracker),
    ];
    log(&format!(
        "backends {:?}, memkitd on {} (pid {}), nutcracker on {} (pid {})",
        rig.backends.iter().map(|s| s.addr).collect::<Vec<_>>(),
        rig.memkitd.addr,
        rig.memkitd.pid(),
        rig.nutcracker.addr,
        rig.nutcracker.pid()
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.client_threads.max(1))
        .enable_all()
        .build()?;
    let mut ctx = Ctx {
        cfg,
        rig,
        rt,
        shape: Shape {
            keys: cfg.keys,
            value_len: cfg.value_len,
        },
        log,
    };
    // Every key through each proxy (their placements may differ) and into the direct backend.
    for (i, t) in ctx.rig.paths().into_iter().enumerate() {
        let r = ctx.load(t)?;
        (ctx.log)(&format!(
            "loaded {} keys through {}: {:.0} sets/s, errors {}",
            r.requests, PATHS[i], r.rate, r.errors
        ));
        if r.errors > 0 {
            return Err(io::Error::other(format!(
                "{} of the sets through {} failed",
                r.errors, PATHS[i]
            )));
        }
    }
    let mut cells = Vec::new();
    if cfg.parts.contains(&RouterPart::Throughput) {
        for &depth in &cfg.depths {
            cells.push(ctx.cell(CellLoad::Mix { depth })?);
        }
    }
    if cfg.parts.contains(&RouterPart::MultiGet) && cfg.multiget > 0 {
        cells.push(ctx.cell(CellLoad::MultiGet { keys: cfg.multiget })?);
    }
    let mut lat = None;
    if cfg.parts.contains(&RouterPart::Latency) {
        let depth1 = cells
            .iter()
            .find(|c| c.load == CellLoad::Mix { depth: 1 })
            .map(|c| {
                c.runs
                    .iter()
                    .map(|runs| median(runs.iter().map(|r| r.rate).collect()))
                    .fold(f64::INFINITY, f64::min)
            });
        let offered = cfg.latency_rate.unwrap_or_else(|| {
            depth1.map_or(cfg.latency_default_rate, |s| {
                (s * cfg.latency_fraction).max(1000.0)
            })
        });
        lat = Some(ctx.latency(offered)?);
    }
    Ok(RouterReport {
        config: cfg.clone(),
        cells,
        lat,
        versions,
        loadavg: (loadavg0, procs::loadavg()),
        elapsed: started.elapsed(),
    })
}

/// `memkit-bench router` options.
#[derive(Debug, clap::Args)]
pub struct RouterArgs {
    /// Smoke-run sizes (a few seconds): short runs, one round, few keys and connections.
    #[arg(long)]
    pub quick: bool,
    /// Seconds per throughput run (one proxy, one round; default 2, or 0.3 with --quick).
    #[arg(long)]
    pub secs: Option<f64>,
    /// Alternating rounds per throughput cell (default 5); the table gives medians.
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Rounds of the latency part (default 5).
    #[arg(long)]
    pub latency_rounds: Option<usize>,
    /// Offered load of the latency part, requests/s (default: a quarter of the slower
    /// proxy's depth-1 median).
    #[arg(long)]
    pub latency_rate: Option<f64>,
    /// memkitd's `-t` (default 2).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Client connections (default 50).
    #[arg(long)]
    pub conns: Option<usize>,
    /// Pipeline depths of the get/set cells (default 1,16).
    #[arg(long, value_delimiter = ',')]
    pub depths: Vec<usize>,
    /// Parts to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<RouterPart>,
    /// memkitd to run (default: the release build next to this program, built first with
    /// `cargo build --release -p memkit-server` when run by cargo).
    #[arg(long)]
    pub memkitd: Option<PathBuf>,
    /// nutcracker to run (default: from PATH).
    #[arg(long)]
    pub nutcracker: Option<PathBuf>,
    /// Do not run `cargo build` for memkitd.
    #[arg(long)]
    pub no_build: bool,
    /// Seed of every random choice.
    #[arg(long)]
    pub seed: Option<u64>,
}

/// Runs the subcommand: markdown to stdout, progress to stderr; the exit code.
pub fn main(a: RouterArgs) -> i32 {
    let mut cfg = if a.quick {
        RouterBenchConfig::quick()
    } else {
        RouterBenchConfig::full()
    };
    if let Some(s) = a.secs {
        cfg.cell = Duration::from_secs_f64(s);
    }
    if let Some(r) = a.rounds {
        cfg.rounds = r.max(1);
    }
    if let Some(r) = a.latency_rounds {
        cfg.latency_rounds = r.max(1);
    }
    cfg.latency_rate = a.latency_rate;
    if let Some(t) = a.threads {
        cfg.threads = t.max(1);
    }
    if let Some(c) = a.conns {
        cfg.conns = c.max(1);
    }
    if !a.depths.is_empty() {
        cfg.depths = a.depths;
    }
    if !a.only.is_empty() {
        cfg.parts = a.only;
    }
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    let bins = match Binaries::find(a.memkitd, a.nutcracker, !a.no_build) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("memkit-bench: {e}");
            return 1;
        }
    };
    eprintln!(
        "# memcached: {}\n# memkitd: {}\n# nutcracker: {}",
        bins.memcached.display(),
        bins.memkitd.display(),
        bins.nutcracker.display()
    );
    match run(&cfg, &bins, &mut |line| eprintln!("# {line}")) {
        Ok(report) => {
            print!("{}", report.to_markdown());
            0
        }
        Err(e) => {
            eprintln!("memkit-bench: router bench failed: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs() -> Vec<SocketAddr> {
        (0..3)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 20000 + i)))
            .collect()
    }

    #[test]
    fn route_file_names_every_backend() {
        let t = route_toml(&addrs());
        assert!(
            t.contains("servers = [\"127.0.0.1:20000\", \"127.0.0.1:20001\", \"127.0.0.1:20002\"]")
        );
        assert!(t.contains("placement = \"ketama\"") && t.contains("type = \"hash\""));
    }

    #[test]
    fn nutcracker_config_is_ketama_over_md5_without_ejection() {
        let y = nutcracker_yaml(SocketAddr::from(([127, 0, 0, 1], 30000)), &addrs());
        for want in [
            "listen: 127.0.0.1:30000",
            "hash: md5",
            "distribution: ketama",
            "auto_eject_hosts: false",
            "   - 127.0.0.1:20002:1\n",
        ] {
            assert!(y.contains(want), "{want} missing from\n{y}");
        }
    }

    #[test]
    fn median_takes_the_middle() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![]), 0.0);
    }
}
