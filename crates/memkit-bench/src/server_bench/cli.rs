//! The `memkit-bench server` command line: options to a [`ServerBenchConfig`], the run,
//! markdown out.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{Binaries, ServerBenchConfig, ServerPart, run};
use crate::cpu_sample::CpuSplit;

/// `memkit-bench server` options.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Smoke-run sizes (about 30 s): short cells, one round, small memory.
    #[arg(long)]
    pub quick: bool,
    /// Seconds per throughput cell per server (default 2.5, or 0.4 with --quick).
    #[arg(long)]
    pub secs: Option<f64>,
    /// Alternating rounds per throughput cell.
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Parts to run (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<ServerPart>,
    /// Server thread counts (`-t`).
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// memkitd to run (default: the release build next to this program, built first with
    /// `cargo build --release -p memkit-server` when run by cargo).
    #[arg(long)]
    pub memkitd: Option<PathBuf>,
    /// Do not run `cargo build` for memkitd.
    #[arg(long)]
    pub no_build: bool,
    /// Skip the binary-protocol cells (throughput and memcaslap --binary).
    #[arg(long)]
    pub no_binary: bool,
    /// Write the chart (SVG) here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Seed of every random choice.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Source of the CPU table's user/system split: `perf` samples (4000 Hz cpu-clock; the
    /// run fails if perf cannot record), `proc` (utime and stime, the kernel's per-tick
    /// samples), or `auto`: perf when it can record, else proc. The total is always
    /// `/proc`'s.
    #[arg(long, value_enum, default_value_t = CpuSplit::Auto)]
    pub cpu_split: CpuSplit,
}

/// Runs the subcommand: markdown to stdout, progress to stderr; the exit code.
pub fn main(a: ServerArgs) -> i32 {
    let mut cfg = if a.quick {
        ServerBenchConfig::quick()
    } else {
        ServerBenchConfig::full()
    };
    if let Some(s) = a.secs {
        cfg.cell = Duration::from_secs_f64(s);
    }
    if let Some(r) = a.rounds {
        cfg.rounds = r.max(1);
    }
    if !a.threads.is_empty() {
        cfg.threads = a.threads;
    }
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    cfg.binary &= !a.no_binary;
    cfg.cpu_split = a.cpu_split;
    let found = match a.memkitd {
        Some(p) => Binaries::find_with(p),
        None => Binaries::find("release", !a.no_build),
    };
    let bins = match found {
        Ok(b) => b,
        Err(e) => {
            eprintln!("memkit-bench: {e}");
            return 1;
        }
    };
    eprintln!(
        "# memcached: {}\n# memkitd: {}\n# memcaslap: {}",
        bins.memcached.display(),
        bins.memkitd.display(),
        bins.memaslap
            .as_ref()
            .map_or("not found".into(), |p| p.display().to_string())
    );
    let parts = if a.only.is_empty() {
        vec![
            ServerPart::Throughput,
            ServerPart::Latency,
            ServerPart::Memory,
            ServerPart::HitRatio,
            ServerPart::Memaslap,
        ]
    } else {
        a.only
    };
    match run(&cfg, &bins, &parts, &mut |line| eprintln!("# {line}")) {
        Ok(report) => {
            print!("{}", report.to_markdown());
            if let Some(path) = a.svg
                && let Err(e) = std::fs::write(&path, report.to_svg())
            {
                eprintln!("memkit-bench: cannot write {}: {e}", path.display());
                return 1;
            }
            0
        }
        Err(e) => {
            eprintln!("memkit-bench: server bench failed: {e}");
            1
        }
    }
}
