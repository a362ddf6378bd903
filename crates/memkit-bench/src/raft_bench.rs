//! `memkit-bench raft`: a replicated group of three memkitd nodes on loopback
//! ([`crate::raft_group`]) against one unreplicated `memkitd --persist DIR --durability
//! sync`, in the same run, with the same load.
//!
//! 1. **Sets**: `conns` connections, each keeping `depth` pipelined sets in flight, for
//!    each depth asked; through the leader and through a follower (which forwards to the
//!    leader). Only `STORED` replies count: in the group each means a majority holds the
//!    entry fsynced, unreplicated it means fsynced.
//! 2. **Gets**: `read_keys` keys loaded, then uniformly random gets of them, through the
//!    leader and a follower, `--read-consistency linearizable` (the default: a read waits
//!    for a read barrier) and then `local` (the same directories, every node restarted).
//! 3. **Failover**: a writer on each follower sets keys one at a time; the leader is
//!    SIGKILLed (by PID); the time from the signal to the first `STORED` for a set sent
//!    after it, through either survivor. Then the killed node starts again and every node
//!    catches up before the next kill.
//!
//! Every phase is bounded in time and in requests; the nodes listen on 127.0.0.1 only and
//! are killed by PID when done.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::loadgen::{self, Closed, Proto, Shape, Source, Tally};
use crate::procs::{Kind, Server};
use crate::raft_failover::{self, Failovers};
use crate::raft_group::Group;
use crate::workload::{Dist, KeyGen};

/// How long a group may take to elect its first leader, or a node to catch up.
pub(crate) const SETTLE: Duration = Duration::from_secs(30);

/// `memkit-bench raft` options.
#[derive(Debug, Clone, clap::Args)]
pub struct RaftArgs {
    /// memkitd binary (default: $MEMKITD, else next to this binary).
    #[arg(long)]
    pub memkitd: Option<PathBuf>,
    /// Scratch directory for the nodes' and the baseline's data (default: a fresh one
    /// under the temp dir, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Memory budget of every memkitd, MiB (`-m`).
    #[arg(long, default_value_t = 64)]
    pub memory_mb: usize,
    /// Worker threads of every memkitd (`-t`).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Connections of the throughput phases.
    #[arg(long, default_value_t = 64)]
    pub conns: usize,
    /// Pipeline depths (requests in flight per connection), one cell each.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16])]
    pub depths: Vec<usize>,
    /// Value size, bytes.
    #[arg(long, default_value_t = 100)]
    pub value_len: usize,
    /// Keys the sets spread over, and that the gets read (loaded first).
    #[arg(long, default_value_t = 20_000)]
    pub keys: u64,
    /// Seconds per measured cell.
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Bound on the requests of one cell.
    #[arg(long, default_value_t = 5_000_000)]
    pub max_requests: u64,
    /// Leader kills of the failover phase.
    #[arg(long, default_value_t = 20)]
    pub kills: usize,
    /// The nodes' heartbeat, ms (memkitd's hidden `--raft-heartbeat-ms`; elections after 6
    /// to 8 of them without one). Default: memkitd's (100).
    #[arg(long)]
    pub heartbeat_ms: Option<u64>,
    /// Parts to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Part>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The parts of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Replicated sets against unreplicated sync sets.
    Sets,
    /// Linearizable and local gets against unreplicated gets.
    Gets,
    /// Time from a SIGKILL of the leader to the next acknowledged write.
    Failover,
}

/// One measured cell.
#[derive(Debug, Clone)]
struct Cell {
    what: String,
    depth: usize,
    tally: Tally,
    /// CPU µs per acknowledged request, over every process serving it.
    cpu_us: f64,
}

impl Cell {
    fn ok(&self) -> u64 {
        self.tally.requests - self.tally.errors
    }

    fn rate(&self) -> f64 {
        self.ok() as f64 / self.tally.secs.max(1e-9)
    }
}

struct Ctx {
    rt: tokio::runtime::Runtime,
    a: RaftArgs,
    shape: Shape,
}

impl Ctx {
    fn closed(&self, depth: usize, conns: usize, max: u64) -> Closed {
        Closed {
            conns,
            depth,
            duration: Duration::from_secs_f64(self.a.secs),
            max_requests: max,
            seed: self.a.seed,
            proto: Proto::Text,
        }
    }

    /// Runs `get_pct`% gets (the rest sets) over the keys against `addr`; `cpu` reads the
    /// CPU seconds of whatever serves it.
    fn cell(
        &self,
        what: &str,
        addr: SocketAddr,
        depth: usize,
        get_pct: u32,
        cpu: &dyn Fn() -> f64,
    ) -> std::io::Result<Cell> {
        let cfg = self.closed(depth, self.a.conns, self.a.max_requests);
        let keys = self.a.keys;
        let cpu0 = cpu();
        let tally = self
            .rt
            .block_on(loadgen::closed_loop(addr, cfg, self.shape, |_| {
                Source::Mix {
                    get_pct,
                    dist: Dist::Uniform(keys),
                    offset: 0,
                    set_on_miss: false,
                }
            }))?;
        let cpu_s = cpu() - cpu0;
        let cell = Cell {
            what: what.into(),
            depth,
            cpu_us: cpu_s * 1e6 / (tally.requests - tally.errors).max(1) as f64,
            tally,
        };
        eprintln!(
            "# {what}, depth {depth}: {:.0}/s ({} ok, {} errors, hit ratio {:.3}, {:.1} CPU µs each)",
            cell.rate(),
            cell.ok(),
            cell.tally.errors,
            cell.tally.hit_ratio(),
            cell.cpu_us
        );
        Ok(cell)
    }

    /// Sets every key once through `addr` (16 connections x 16 pipelined).
    fn load(&self, addr: SocketAddr) -> std::io::Result<()> {
        let mut cfg = self.closed(16, 16, self.a.keys);
        cfg.duration = Duration::from_secs(600);
        let (end, step) = (self.a.keys, 16);
        let t = self
            .rt
            .block_on(loadgen::closed_loop(addr, cfg, self.shape, |i| {
                Source::Fill {
                    next: i as u64,
                    end,
                    step,
                }
            }))?;
        eprintln!(
            "# loaded {} keys in {:.1} s ({} errors)",
            t.requests, t.secs, t.errors
        );
        if t.errors > 0 {
            return Err(std::io::Error::other("the load was refused in part"));
        }
        Ok(())
    }
}

fn node_args(a: &RaftArgs, extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        "-m".to_string(),
        a.memory_mb.to_string(),
        "-t".into(),
        a.threads.to_string(),
        "-c".into(),
        "4096".into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// [`node_args`] for a group's node: the heartbeat too, when asked for.
fn group_args(a: &RaftArgs, extra: &[&str]) -> Vec<String> {
    let mut v = node_args(a, extra);
    if let Some(ms) = a.heartbeat_ms {
        v.extend(["--raft-heartbeat-ms".to_string(), ms.to_string()]);
    }
    v
}

/// The unreplicated baseline: sets at each depth, then gets of the loaded keys.
fn baseline(cx: &Ctx, bin: &std::path::Path, dir: &std::path::Path) -> std::io::Result<Vec<Cell>> {
    let d = dir.join("single");
    let d = d.to_string_lossy();
    let args = node_args(&cx.a, &["--persist", &d, "--durability", "sync"]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let s = Server::start_args(Kind::Memkitd, bin, &argv)?;
    let cpu = || s.cpu_secs().unwrap_or(0.0);
    let mut cells = Vec::new();
    if cx.wants(Part::Sets) {
        for &depth in &cx.a.depths {
            cells.push(cx.cell("unreplicated, sync", s.addr, depth, 0, &cpu)?);
        }
    }
    if cx.wants(Part::Gets) {
        cx.load(s.addr)?;
        for &depth in &cx.a.depths {
            cells.push(cx.cell("unreplicated", s.addr, depth, 100, &cpu)?);
        }
    }
    Ok(cells)
}

impl Ctx {
    fn wants(&self, p: Part) -> bool {
        self.a.only.is_empty() || self.a.only.contains(&p)
    }
}

/// The group's cells: sets, then linearizable gets, then (every node restarted with
/// `--read-consistency local`) local gets, each through the leader and a follower.
fn group_cells(cx: &Ctx, g: &mut Group) -> std::io::Result<Vec<Cell>> {
    let mut cells = Vec::new();
    let leader = g.leader(SETTLE)?;
    let follower = g.follower(leader).expect("a group of at least two");
    eprintln!("# group: leader {leader}, follower {follower}");
    if cx.wants(Part::Sets) {
        for &depth in &cx.a.depths {
            for (what, id) in [
                ("group via leader", leader),
                ("group via follower", follower),
            ] {
                let cpu = || g.cpu_secs();
                cells.push(cx.cell(what, g.addr(id)?, depth, 0, &cpu)?);
            }
        }
    }
    if !cx.wants(Part::Gets) {
        return Ok(cells);
    }
    cx.load(g.addr(leader)?)?;
    g.wait_caught_up(SETTLE)?;
    for consistency in ["linearizable", "local"] {
        if consistency == "local" {
            g.kill_all();
            g.set_args(&group_args(&cx.a, &["--read-consistency", "local"]));
            for id in g.ids() {
                g.start_node(id)?;
            }
            g.wait_caught_up(SETTLE)?;
        }
        let leader = g.leader(SETTLE)?;
        let follower = g.follower(leader).expect("a group of at least two");
        for &depth in &cx.a.depths {
            for (via, id) in [("leader", leader), ("follower", follower)] {
                let what = format!("group {consistency}, via {via}");
                let cpu = || g.cpu_secs();
                cells.push(cx.cell(&what, g.addr(id)?, depth, 100, &cpu)?);
            }
        }
    }
    Ok(cells)
}

/// Runs the benchmark; prints markdown to stdout. Returns the exit code.
pub fn main(a: RaftArgs) -> i32 {
    let bin = a
        .memkitd
        .clone()
        .or_else(|| std::env::var_os("MEMKITD").map(PathBuf::from))
        .or_else(|| Some(std::env::current_exe().ok()?.with_file_name("memkitd")))
        .expect("memkitd path");
    let fresh = a.dir.is_none();
    let dir = a.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("memkit-raft-bench-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let cx = Ctx {
        rt: tokio::runtime::Runtime::new().expect("runtime"),
        shape: Shape {
            keys: KeyGen::new(16, 32),
            value_len: a.value_len,
        },
        a,
    };
    let r = run(&cx, &bin, &dir);
    if fresh {
        let _ = std::fs::remove_dir_all(&dir);
    }
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("memkit-bench raft: {e} ({})", bin.display());
            1
        }
    }
}

fn run(cx: &Ctx, bin: &std::path::Path, dir: &std::path::Path) -> std::io::Result<()> {
    let mut cells = Vec::new();
    if cx.wants(Part::Sets) || cx.wants(Part::Gets) {
        cells.extend(baseline(cx, bin, dir)?);
        let mut g = Group::start(bin, &dir.join("group"), 3, &group_args(&cx.a, &[]))?;
        cells.extend(group_cells(cx, &mut g)?);
    }
    let failovers = if cx.wants(Part::Failover) {
        let mut g = Group::start(bin, &dir.join("failover"), 3, &group_args(&cx.a, &[]))?;
        Some(raft_failover::run(&mut g, cx.a.kills, cx.a.value_len)?)
    } else {
        None
    };
    print_report(&cx.a, &cells, failovers.as_ref());
    Ok(())
}

fn print_report(a: &RaftArgs, cells: &[Cell], failovers: Option<&Failovers>) {
    for (part, get_pct, unit) in [(Part::Sets, 0, "sets/s"), (Part::Gets, 100, "gets/s")] {
        let rows: Vec<&Cell> = cells
            .iter()
            .filter(|c| (c.tally.gets > 0) == (get_pct == 100))
            .collect();
        if rows.is_empty() {
            continue;
        }
        println!(
            "| {part:?}: {} conns, {} B values, {} keys | depth | {unit} | / unreplicated | errors | CPU µs each, all nodes |",
            a.conns, a.value_len, a.keys
        );
        println!("|---|---:|---:|---:|---:|---:|");
        for c in &rows {
            let base = rows
                .iter()
                .find(|b| b.what.starts_with("unreplicated") && b.depth == c.depth)
                .map_or(f64::NAN, |b| b.rate());
            println!(
                "| {} | {} | {:.0} | {:.2}x | {} | {:.1} |",
                c.what,
                c.depth,
                c.rate(),
                c.rate() / base,
                c.tally.errors,
                c.cpu_us
            );
        }
        println!();
    }
    if let Some(f) = failovers {
        f.print();
    }
}
