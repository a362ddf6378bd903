//! The CPU view of the throughput cells: server CPU per request split into user and
//! system time, for the get/set 90/10 keys-fit load at each `-t`, depth and connection
//! count, and the targets memkitd holds itself to (at depth 1, user CPU at most 0.75x
//! memcached's and total at most 0.95x, throughput at least 1.0x; depth 16 kept ahead).
//!
//! The split matters because the kernel's loopback work (one receive and one send per
//! request at depth 1) is about the same for both servers: the servers' own code shows in
//! user time, which a user + system total dilutes. The caption names where the split came
//! from ([`crate::cpu_sample`]): `/proc`'s tick samples are too few to judge 0.75x by.

use std::fmt::Write as _;

use super::{Target, worst};
use crate::server_bench::{Pair, ServerReport, TpRow, TpWorkload};

const D1_USER_MAX: f64 = 0.75;
const D1_TOTAL_MAX: f64 = 0.95;
const D1_TP_MIN: f64 = 1.0;
const D16_TP_MIN: f64 = 4.0;

/// The keys-fit text cells, ordered by `-t`, depth, connections.
fn rows(report: &ServerReport) -> Vec<&TpRow> {
    let mut rows: Vec<&TpRow> = report
        .tp
        .iter()
        .filter(|r| r.workload == TpWorkload::Fits)
        .collect();
    rows.sort_by_key(|r| (r.threads, r.depth, r.conns));
    rows
}

fn system(p: &Pair, user: &Pair) -> Pair {
    Pair {
        memcached: p.memcached - user.memcached,
        memkitd: p.memkitd - user.memkitd,
    }
}

/// The table as markdown (empty when no keys-fit cell ran).
pub(super) fn table(report: &ServerReport) -> String {
    let mut o = String::new();
    let rows = rows(report);
    if rows.is_empty() {
        return o;
    }
    let _ = write!(
        o,
        "\nCPU per request, user and system: get/set 90/10, keys fit, text protocol; µs per \
         request (the same figure as s / M req above) of each server over its best round; {}.\n\n",
        report.cpu_split.describe()
    );
    o.push_str(
        "| -t | depth | connections | memcached user | memcached system | memkitd user | memkitd system | memkitd / memcached user | memkitd / memcached total | memkitd / memcached throughput |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let sys = system(&r.cpu_per_m, &r.user_per_m);
        let _ = writeln!(
            o,
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | **{:.2}x** | **{:.2}x** | {:.2}x |",
            r.threads,
            r.depth,
            r.conns,
            r.user_per_m.memcached,
            sys.memcached,
            r.user_per_m.memkitd,
            sys.memkitd,
            r.user_per_m.ratio(),
            r.cpu_per_m.ratio(),
            r.rate.ratio(),
        );
    }
    o
}

fn target(name: &'static str, measured: Option<(f64, String)>, ok: impl Fn(f64) -> bool) -> Target {
    Target {
        name,
        measured: measured
            .as_ref()
            .map_or("not run".into(), |(r, a)| format!("worst {r:.2}x ({a})")),
        met: measured.map(|(r, _)| ok(r)),
    }
}

/// The CPU targets, each over the worst cell it covers.
pub(super) fn targets(report: &ServerReport) -> Vec<Target> {
    let rows = rows(report);
    let at = |r: &TpRow| format!("-t {} depth {}, {} conns", r.threads, r.depth, r.conns);
    // `-t 1` and `-t 2`, every connection count.
    let d1 = || {
        rows.iter()
            .filter(|r| r.depth == 1 && (1..=2).contains(&r.threads))
    };
    let d16 = rows.iter().filter(|r| r.depth == 16 && r.threads == 1);
    vec![
        target(
            "depth 1 user CPU per request <= 0.75x memcached (get/set keys fit, -t 1 and 2, \
             every connection count)",
            worst(d1().map(|r| (&r.user_per_m, at(r))), false),
            |r| r <= D1_USER_MAX,
        ),
        target(
            "depth 1 total CPU per request <= 0.95x (same cells)",
            worst(d1().map(|r| (&r.cpu_per_m, at(r))), false),
            |r| r <= D1_TOTAL_MAX,
        ),
        target(
            "depth 1 throughput >= 1.0x (same cells)",
            worst(d1().map(|r| (&r.rate, at(r))), true),
            |r| r >= D1_TP_MIN,
        ),
        target(
            "depth 16 throughput >= 4x at -t 1 (get/set keys fit)",
            worst(d16.map(|r| (&r.rate, at(r))), true),
            |r| r >= D16_TP_MIN,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_sample::SplitSource;
    use crate::server_bench::ServerBenchConfig;

    fn pair(memcached: f64, memkitd: f64) -> Pair {
        Pair { memcached, memkitd }
    }

    fn row(workload: TpWorkload, threads: usize, depth: usize, conns: usize) -> TpRow {
        // memkitd: 1.5 user + 6 system against memcached's 2 + 6; twice the rate at depth 16.
        let tp = if depth == 16 { 2.0 } else { 1.1 };
        TpRow {
            workload,
            threads,
            depth,
            conns,
            rate: pair(100e3, tp * 100e3),
            cpu_per_m: pair(8.0, 7.5),
            user_per_m: pair(2.0, 1.5),
            hit: pair(1.0, 1.0),
            errors: pair(0.0, 0.0),
        }
    }

    fn report() -> ServerReport {
        let mut tp = Vec::new();
        for t in [1, 2] {
            tp.push(row(TpWorkload::Fits, t, 1, 50));
            tp.push(row(TpWorkload::Binary, t, 1, 50));
            tp.push(row(TpWorkload::Fits, t, 1, 500));
            tp.push(row(TpWorkload::Fits, t, 16, 50));
            tp.push(row(TpWorkload::Exceeds, t, 1, 50));
        }
        // A worst depth-1 cell for each measure, each in a different cell.
        tp[2].user_per_m = pair(2.0, 2.5);
        tp[7].cpu_per_m = pair(8.0, 7.8);
        tp[5].rate = pair(100e3, 90e3);
        ServerReport {
            tp,
            ..ServerReport::empty(ServerBenchConfig::quick())
        }
    }

    #[test]
    fn table_has_a_row_per_keys_fit_cell_with_user_and_system() {
        let md = table(&report());
        assert!(md.contains("CPU per request, user and system"), "{md}");
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| 1 ") || l.starts_with("| 2 "))
            .collect();
        assert_eq!(
            rows,
            [
                "| 1 | 1 | 50 | 2.00 | 6.00 | 1.50 | 6.00 | **0.75x** | **0.94x** | 1.10x |",
                "| 1 | 1 | 500 | 2.00 | 6.00 | 2.50 | 5.00 | **1.25x** | **0.94x** | 1.10x |",
                "| 1 | 16 | 50 | 2.00 | 6.00 | 1.50 | 6.00 | **0.75x** | **0.94x** | 2.00x |",
                "| 2 | 1 | 50 | 2.00 | 6.00 | 1.50 | 6.00 | **0.75x** | **0.94x** | 0.90x |",
                "| 2 | 1 | 500 | 2.00 | 6.00 | 1.50 | 6.30 | **0.75x** | **0.97x** | 1.10x |",
                "| 2 | 16 | 50 | 2.00 | 6.00 | 1.50 | 6.00 | **0.75x** | **0.94x** | 2.00x |",
            ],
            "{md}"
        );
    }

    #[test]
    fn caption_names_the_split_source() {
        let mut r = report();
        let caption = |r: &ServerReport| table(r).lines().nth(1).unwrap_or_default().to_string();
        assert!(caption(&r).contains("split from `/proc/PID/stat` utime and stime"));
        r.cpu_split = SplitSource::Perf {
            perf: "perf".into(),
            hz: 4000,
        };
        let c = caption(&r);
        assert!(
            c.contains("split from 4000 Hz cpu-clock samples (perf), total from `/proc/PID/stat`"),
            "{c}"
        );
    }

    #[test]
    fn targets_take_the_worst_depth_1_cell_and_depth_16_at_t1() {
        let t = targets(&report());
        let got: Vec<(&str, Option<bool>)> =
            t.iter().map(|t| (t.measured.as_str(), t.met)).collect();
        assert_eq!(
            got,
            [
                ("worst 1.25x (-t 1 depth 1, 500 conns)", Some(false)),
                ("worst 0.97x (-t 2 depth 1, 500 conns)", Some(false)),
                ("worst 0.90x (-t 2 depth 1, 50 conns)", Some(false)),
                ("worst 2.00x (-t 1 depth 16, 50 conns)", Some(false)),
            ]
        );
    }

    #[test]
    fn targets_not_run_without_cells() {
        let mut r = report();
        r.tp.clear();
        assert!(table(&r).is_empty());
        assert!(targets(&r).iter().all(|t| t.met.is_none()));
    }
}
