//! Text against binary protocol on one server, as alternating pairs of short runs, medians
//! reported: a steadier comparison of CPU per request than the server bench's best round
//! when other work shares the cores (the pairs alternate, so drifts in load hit both).
//!
//! ```sh
//! cargo build --release -p memkit-server -p memkit-bench
//! cargo run --release -p memkit-bench --example proto_ab -- [memkitd|memcached] [depth] [pairs] [secs] [-t]
//! ```
//! Defaults: memkitd, depth 1, 8 pairs of 2 s, `-t 1`; 50 connections, get/set 90/10 over
//! 100k pre-loaded keys of 16-32 B with 100 B values (the server bench's "keys fit" cell).

use std::time::Duration;

use memkit_bench::loadgen::{Closed, Proto, Shape, Source, closed_loop};
use memkit_bench::procs::{self, Kind, Server, Spec};
use memkit_bench::workload::{Dist, KeyGen};

const KEYS: u64 = 100_000;

/// (requests/s, user s per M, system s per M) of one run.
fn run(
    rt: &tokio::runtime::Runtime,
    s: &Server,
    proto: Proto,
    depth: usize,
    secs: f64,
) -> std::io::Result<[f64; 3]> {
    let shape = Shape {
        keys: KeyGen::new(16, 32),
        value_len: 100,
    };
    let cfg = Closed {
        conns: 50,
        depth,
        duration: Duration::from_secs_f64(secs),
        max_requests: 50_000_000,
        seed: 7,
        proto,
    };
    let (u0, s0) = s.cpu_times()?;
    let t = rt.block_on(closed_loop(s.addr, cfg, shape, |_| Source::Mix {
        get_pct: 90,
        dist: Dist::Uniform(KEYS),
        offset: 0,
        set_on_miss: false,
    }))?;
    let (u1, s1) = s.cpu_times()?;
    if t.errors > 0 || t.hit_ratio() < 0.99 {
        return Err(std::io::Error::other(format!("bad replies: {t:?}")));
    }
    let m = t.requests as f64 / 1e6;
    Ok([t.rate(), (u1 - u0) / m, (s1 - s0) / m])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> std::io::Result<()> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| a.get(i).cloned().unwrap_or_else(|| d.to_string());
    let kind = match arg(0, "memkitd").as_str() {
        "memcached" => Kind::Memcached,
        _ => Kind::Memkitd,
    };
    let depth: usize = arg(1, "1").parse().expect("depth");
    let pairs: usize = arg(2, "8").parse().expect("pairs");
    let secs: f64 = arg(3, "2").parse().expect("secs");
    let threads: usize = arg(4, "1").parse().expect("-t");
    let bin = match kind {
        Kind::Memkitd => procs::locate_memkitd("release", false)?,
        Kind::Memcached => procs::find_on_path("memcached").expect("memcached on PATH"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let s = Server::start(
        kind,
        &bin,
        Spec {
            threads,
            memory_mb: 64,
        },
    )?;
    let fill = Closed {
        conns: 50,
        depth: 16,
        duration: Duration::from_secs(60),
        max_requests: KEYS,
        seed: 7,
        proto: Proto::Text,
    };
    let shape = Shape {
        keys: KeyGen::new(16, 32),
        value_len: 100,
    };
    rt.block_on(closed_loop(s.addr, fill, shape, |i| Source::Fill {
        next: i as u64,
        end: KEYS,
        step: 50,
    }))?;
    let mut got: [Vec<[f64; 3]>; 2] = [Vec::new(), Vec::new()];
    for pair in 0..pairs {
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let proto = [Proto::Text, Proto::Binary][i];
            let r = run(&rt, &s, proto, depth, secs)?;
            eprintln!(
                "{proto:?}: {:.0} req/s, user {:.3} + sys {:.3} s/M",
                r[0], r[1], r[2]
            );
            got[i].push(r);
        }
    }
    println!(
        "{} -t {threads}, depth {depth}, {pairs} pairs of {secs} s, medians; load average {}",
        kind.name(),
        procs::loadavg().unwrap_or_default()
    );
    for (i, name) in ["text", "binary"].iter().enumerate() {
        let col = |c: usize| median(got[i].iter().map(|r| r[c]).collect());
        let total = median(got[i].iter().map(|r| r[1] + r[2]).collect());
        println!(
            "{name:>6}: {:.1} kreq/s, CPU {total:.2} s/M (user {:.2} + sys {:.2})",
            col(0) / 1e3,
            col(1),
            col(2)
        );
    }
    Ok(())
}
