//! The binary protocol against the text protocol, per server: each binary cell beside the
//! text cell with the same requests (same seed, same pre-loaded servers, run right after
//! it), throughput and server CPU per request split into user and system time.

use std::fmt::Write as _;

use crate::procs::Kind;
use crate::server_bench::{ServerReport, TpRow, TpWorkload};

/// Each binary cell with its text cell (same `-t`, depth and connections).
fn pairs(report: &ServerReport) -> impl Iterator<Item = (&TpRow, &TpRow)> {
    report
        .tp
        .iter()
        .filter(|r| r.workload == TpWorkload::Binary)
        .filter_map(|b| {
            report
                .tp
                .iter()
                .find(|t| {
                    t.workload == TpWorkload::Fits
                        && t.threads == b.threads
                        && t.depth == b.depth
                        && t.conns == b.conns
                })
                .map(|t| (t, b))
        })
}

/// memkitd's binary CPU per request over its text CPU per request, the worst cell, and where.
pub(super) fn worst_binary_cpu(report: &ServerReport) -> Option<(f64, String)> {
    pairs(report)
        .map(|(t, b)| {
            (
                b.cpu_per_m.memkitd / t.cpu_per_m.memkitd,
                format!("-t {} depth {}", b.threads, b.depth),
            )
        })
        .filter(|(r, _)| r.is_finite())
        .reduce(|a, b| if b.0 > a.0 { b } else { a })
}

/// The comparison as markdown (empty when no binary cell ran).
pub(super) fn table(report: &ServerReport) -> String {
    let mut o = String::new();
    if pairs(report).next().is_none() {
        return o;
    }
    o.push_str(
        "\nBinary protocol against text, per server: each binary cell sends the same requests \
         as the text cell beside it (get/set 90/10, keys fit), to the same pre-loaded servers, \
         right after it. Server CPU is s per million requests, user + system.\n\n\
         | server | -t | depth | text kreq/s | binary kreq/s | binary / text | text CPU (user + sys) | binary CPU (user + sys) | binary / text CPU |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (t, b) in pairs(report) {
        for kind in [Kind::Memcached, Kind::Memkitd] {
            let get = |p: &crate::server_bench::Pair| match kind {
                Kind::Memcached => p.memcached,
                Kind::Memkitd => p.memkitd,
            };
            let cpu = |r: &TpRow| {
                let (all, user) = (get(&r.cpu_per_m), get(&r.user_per_m));
                format!("{all:.2} ({user:.2} + {:.2})", all - user)
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {:.1} | {:.1} | {:.2}x | {} | {} | **{:.2}x** |",
                kind.name(),
                b.threads,
                b.depth,
                get(&t.rate) / 1e3,
                get(&b.rate) / 1e3,
                get(&b.rate) / get(&t.rate),
                cpu(t),
                cpu(b),
                get(&b.cpu_per_m) / get(&t.cpu_per_m),
            );
        }
    }
    o
}
