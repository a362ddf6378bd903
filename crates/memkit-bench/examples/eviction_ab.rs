//! The engine's two eviction policies, S3-FIFO and SIEVE, side by side on more traces than
//! the engine bench's one: Zipf skews from 0.6 to 1.2, and the s=0.99 trace with a scan
//! mixed in (every third request asks for a key never asked for before).
//!
//! ```sh
//! cargo run --release -p memkit-bench --example eviction_ab             # 5M keys, 64 MiB
//! cargo run --release -p memkit-bench --example eviction_ab -- --quick  # 500k keys, 8 MiB
//! ```
//!
//! Prints a markdown table. The traces come from a fixed seed, so the miss ratios repeat from
//! run to run up to the engine's random hash seed (which moves them by about 0.0001); the
//! replay seconds depend on the machine.

use memkit_bench::engine_bench::{EngineBenchConfig, POLICIES, replay_engine, zipf_trace};

/// The s=0.99 trace with every third request replaced by a key outside the Zipf key space,
/// each asked for once.
fn with_scan(cfg: &EngineBenchConfig) -> Vec<u32> {
    let mut trace = zipf_trace(cfg);
    let scan = trace.iter_mut().skip(2).step_by(3);
    for (fresh, r) in (cfg.hr_keys as u32..).zip(scan) {
        *r = fresh;
    }
    trace
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let base = if quick {
        EngineBenchConfig::quick()
    } else {
        EngineBenchConfig::full()
    };
    println!(
        "{} requests over {} keys of {}-{} bytes, {}-byte values, -m {} MiB; get, then set \
         on a miss.\n",
        base.hr_requests,
        base.hr_keys,
        base.keys.min_len,
        base.keys.max_len,
        base.value_len,
        base.hr_memory >> 20
    );
    println!(
        "| trace | S3-FIFO miss | SIEVE miss | SIEVE / S3-FIFO | S3-FIFO items | SIEVE items | replay s (S3-FIFO, SIEVE) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut traces: Vec<(String, Vec<u32>)> = [0.6, 0.8, 0.99, 1.2]
        .into_iter()
        .map(|s| {
            let cfg = EngineBenchConfig {
                zipf_s: s,
                ..base.clone()
            };
            (format!("Zipf s={s}"), zipf_trace(&cfg))
        })
        .collect();
    traces.push(("Zipf s=0.99 + 1/3 scan".into(), with_scan(&base)));
    for (name, trace) in &traces {
        let runs: Vec<_> = (POLICIES.iter())
            .map(|&p| replay_engine(trace, base.keys, base.value_len, base.hr_memory, p))
            .collect();
        let (s3, sieve) = (&runs[0], &runs[1]);
        println!(
            "| {name} | {:.4} | {:.4} | {:.3} | {} | {} | {:.1}, {:.1} |",
            s3.miss,
            sieve.miss,
            sieve.miss / s3.miss,
            s3.items,
            sieve.items,
            s3.secs,
            sieve.secs
        );
    }
}
