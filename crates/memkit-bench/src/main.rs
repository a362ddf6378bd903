//! `memkit-bench`: command-line front of the [`memkit_bench`] library.
//!
//! Subcommands:
//! - `engine`: the embedded engine against moka and LRU baselines (see
//!   [`memkit_bench::engine_bench`]); prints markdown to stdout, progress to stderr.
//! - `server`: memkitd against memcached over loopback (see [`memkit_bench::server_bench`]).
//! - `persist`: memkitd's persistent mode (see [`memkit_bench::persist_bench`]).
//! - `fill`: warm-up fills and mixed value sizes, memkitd vs memcached (see
//!   [`memkit_bench::fill`]).
//! - `flash`: memcached's extstore against memkitd's flash tier (`-o ext_path`): a fill read
//!   back and checked, and a cache-aside Zipf trace (see [`memkit_bench::flash_bench`]).
//! - `soak`: a bounded mixed run against memkitd with checks (see [`memkit_bench::soak`]).
//! - `restart`: warm restart (`-e`) of a full cache, memkitd and memcached (see
//!   [`memkit_bench::restart_bench`]).
//! - `raft-snapshot`: a three-node replicated group in-process: a pipelined fill through the
//!   leader, a snapshot, a wiped follower rebuilt from it (see [`memkit_bench::raft_snapshot`]).
//! - `raft`: a replicated group of three memkitd nodes against an unreplicated one: sets,
//!   linearizable and local gets, failover after a SIGKILL of the leader (see
//!   [`memkit_bench::raft_bench`]).
//! - `router`: memkitd `--route` against twemproxy (`nutcracker`) in front of the same three
//!   memcached backends (see [`memkit_bench::router_bench`]).

use clap::{Args, Parser, Subcommand};
use memkit_bench::engine_bench::{self, EngineBenchConfig, Part};

#[derive(Debug, Parser)]
#[command(
    name = "memkit-bench",
    about = "memkit benchmarks, printed as markdown tables"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The embedded engine vs moka and LRU: throughput, hit ratio, per-item overhead.
    Engine(EngineArgs),
    /// memkitd vs memcached over loopback: throughput, CPU, latency, memory, miss ratio.
    Server(memkit_bench::server_bench::ServerArgs),
    /// memkitd --persist: durable sets/s and gets/s over a data set 4x the memory budget.
    Persist(memkit_bench::persist_bench::PersistArgs),
    /// A bounded mixed run with bad requests and clients leaving mid-request; checks replies,
    /// memory, stuck connections and stats. Prints a report; exits non-zero on a failure.
    Soak(memkit_bench::soak::SoakArgs),
    /// memkitd vs memcached: write-only fills from 10 B to 1 MB values, and a Zipf trace with
    /// log-normal value sizes.
    Fill(memkit_bench::fill::FillArgs),
    /// memcached's extstore vs memkitd's flash tier (`-o ext_path=FILE:SIZE`): a fill of
    /// 4 KB values read back and checked, and a cache-aside Zipf trace over 10x the memory.
    Flash(memkit_bench::flash_bench::FlashArgs),
    /// memkitd and memcached with `-e FILE`: a full cache stopped with SIGUSR1 and started
    /// again: stop and start times, items kept.
    Restart(memkit_bench::restart_bench::RestartArgs),
    /// A three-node memkit-raft group on loopback: replicated writes/s with concurrent
    /// writers, a snapshot of every item, and the time a wiped follower takes to install it.
    RaftSnapshot(memkit_bench::raft_snapshot::RaftSnapshotArgs),
    /// A replicated group of three memkitd nodes on loopback against one unreplicated
    /// `--persist --durability sync` memkitd: sets, gets, failover after a leader SIGKILL.
    Raft(memkit_bench::raft_bench::RaftArgs),
    /// memkitd's router mode (`--route`) against twemproxy (`nutcracker`), both in front of
    /// the same three memcached backends: throughput, CPU per request, added latency.
    Router(memkit_bench::router_bench::RouterArgs),
}

#[derive(Debug, Args)]
struct EngineArgs {
    /// Smoke-run sizes: 0.5 s per throughput cell, a 10x smaller hit-ratio trace.
    #[arg(long)]
    quick: bool,
    /// Seconds per throughput cell (overrides the default of 3, or 0.5 with --quick).
    #[arg(long)]
    secs: Option<f64>,
    /// Parts to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Part>,
    /// Thread counts for the throughput part.
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// Seed of every random choice.
    #[arg(long)]
    seed: Option<u64>,
}

fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Engine(a) => {
            let mut cfg = if a.quick {
                EngineBenchConfig::quick()
            } else {
                EngineBenchConfig::full()
            };
            if let Some(s) = a.secs {
                cfg.cell = std::time::Duration::from_secs_f64(s);
            }
            if !a.threads.is_empty() {
                cfg.threads = a.threads;
            }
            if let Some(s) = a.seed {
                cfg.seed = s;
            }
            let parts = if a.only.is_empty() {
                vec![Part::Throughput, Part::HitRatio, Part::Overhead]
            } else {
                a.only
            };
            let report = engine_bench::run(&cfg, &parts, &mut |line| eprintln!("# {line}"));
            print!("{}", report.to_markdown());
        }
        Cmd::Server(a) => std::process::exit(memkit_bench::server_bench::main(a)),
        Cmd::Persist(a) => std::process::exit(memkit_bench::persist_bench::main(a)),
        Cmd::Soak(a) => std::process::exit(memkit_bench::soak::main(a)),
        Cmd::Fill(a) => std::process::exit(memkit_bench::fill::main(a)),
        Cmd::Flash(a) => std::process::exit(memkit_bench::flash_bench::main(a)),
        Cmd::Restart(a) => std::process::exit(memkit_bench::restart_bench::main(a)),
        Cmd::RaftSnapshot(a) => std::process::exit(memkit_bench::raft_snapshot::main(a)),
        Cmd::Raft(a) => std::process::exit(memkit_bench::raft_bench::main(a)),
        Cmd::Router(a) => std::process::exit(memkit_bench::router_bench::main(a)),
    }
}
