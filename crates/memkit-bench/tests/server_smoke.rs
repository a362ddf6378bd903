//! Smoke test of `memkit-bench server --quick`: real memcached and a spawned memkitd (the
//! build of this test's profile, built first with the cargo running the test), every part.
//! Checks sanity of what comes back, never timings or ratios. memcached must be installed
//! (CI installs it): without it this test fails, it does not skip.

use memkit_bench::server_bench::{
    self, Binaries, ServerBenchConfig, ServerPart, ServerReport, TpWorkload,
};

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

#[test]
fn quick_server_bench_is_sane() {
    let bins = Binaries::find(profile(), true)
        .unwrap_or_else(|e| panic!("the server bench needs memcached and memkitd: {e}"));
    let cfg = ServerBenchConfig::quick();
    let parts = [
        ServerPart::Throughput,
        ServerPart::Latency,
        ServerPart::Memory,
        ServerPart::HitRatio,
        ServerPart::Memaslap,
    ];
    let report = server_bench::run(&cfg, &bins, &parts, &mut |l| eprintln!("# {l}"))
        .unwrap_or_else(|e| panic!("server bench failed: {e}"));

    check_throughput(&cfg, &report);

    assert_eq!(report.lat.len(), cfg.threads.len());
    for l in &report.lat {
        for (p50, p99, p999) in [
            (l.p50.memcached, l.p99.memcached, l.p999.memcached),
            (l.p50.memkitd, l.p99.memkitd, l.p999.memkitd),
        ] {
            assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999, "{l:?}");
        }
        assert!(
            l.achieved.memcached > 0.0 && l.achieved.memkitd > 0.0,
            "{l:?}"
        );
    }

    let m = report.mem.as_ref().expect("memory part ran");
    for (items, ev, rss) in [
        (m.items.memcached, m.evictions.memcached, m.rss.memcached),
        (m.items.memkitd, m.evictions.memkitd, m.rss.memkitd),
    ] {
        assert!(items > 0.0 && items < m.sets as f64, "{m:?}");
        assert!(ev > 0.0, "the fill must overflow -m: {m:?}");
        assert!(rss > 0.0, "{m:?}");
    }

    let h = report.hit.as_ref().expect("hit-ratio part ran");
    for miss in [h.miss.memcached, h.miss.memkitd] {
        assert!(miss > 0.0 && miss < 1.0, "{h:?}");
    }

    if bins.memaslap.is_some() {
        // Text and --binary per thread count.
        assert_eq!(
            report.memaslap.len(),
            2 * cfg.threads.len(),
            "{:?}",
            report.memaslap_note
        );
        for r in &report.memaslap {
            assert!(r.tps.memcached > 0.0 && r.tps.memkitd > 0.0, "{r:?}");
        }
    }

    assert!(
        report.versions.memcached.starts_with("1.6"),
        "{:?}",
        report.versions
    );
    assert!(
        report.versions.memkitd.contains("memkit"),
        "{:?}",
        report.versions
    );
    check_markdown(&cfg, &report);
    let svg = report.to_svg();
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
}

/// The throughput cells: one of each kind per thread count, and sane figures in each.
fn check_throughput(cfg: &ServerBenchConfig, report: &ServerReport) {
    // depths x (fits, exceeds, fits in binary) + one multi-get + the wide depth-1 cell, per
    // thread count.
    assert!(cfg.binary);
    assert!(cfg.wide_conns > cfg.conns);
    assert_eq!(
        report.tp.len(),
        cfg.threads.len() * (3 * cfg.depths.len() + 2)
    );
    for &t in &cfg.threads {
        let fits = |depth: usize, conns: usize| {
            report.tp.iter().any(|r| {
                r.workload == TpWorkload::Fits
                    && r.threads == t
                    && r.depth == depth
                    && r.conns == conns
            })
        };
        assert!(fits(1, cfg.conns) && fits(1, cfg.wide_conns) && fits(16, cfg.conns));
    }
    for r in &report.tp {
        for v in [r.rate.memcached, r.rate.memkitd] {
            assert!(v > 0.0 && v.is_finite(), "{r:?}");
        }
        for v in [r.cpu_per_m.memcached, r.cpu_per_m.memkitd] {
            assert!(v >= 0.0 && v.is_finite(), "{r:?}");
        }
        assert!(r.user_per_m.memcached <= r.cpu_per_m.memcached, "{r:?}");
        assert!(r.user_per_m.memkitd <= r.cpu_per_m.memkitd, "{r:?}");
        assert_eq!(r.errors.memcached + r.errors.memkitd, 0.0, "{r:?}");
        for h in [r.hit.memcached, r.hit.memkitd] {
            match r.workload {
                // Every key was pre-loaded and fits.
                TpWorkload::Fits | TpWorkload::MultiGet | TpWorkload::Binary => {
                    assert!(h > 0.95, "{r:?}")
                }
                // Far more keys than memory: some hits, many misses.
                TpWorkload::Exceeds => assert!(h > 0.0 && h < 0.9, "{r:?}"),
            }
        }
    }
}

/// The report's tables and targets: the CPU table's rows, the CPU targets measured.
fn check_markdown(cfg: &ServerBenchConfig, report: &ServerReport) {
    let md = report.to_markdown();
    assert!(md.contains("| target | this run | status |"), "{md}");
    assert!(md.contains("Binary protocol against text"), "{md}");
    assert!(md.contains("CPU per request, user and system"), "{md}");
    // The caption names the split the run used (perf here when it can record, else /proc).
    assert!(md.contains(&report.cpu_split.describe()), "{md}");
    // One row per keys-fit cell: depth 1 at both connection counts, depth 16, per -t.
    let cpu_rows = md
        .split("CPU per request, user and system")
        .nth(1)
        .unwrap()
        .lines()
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .take_while(|l| l.starts_with("| "))
        .count();
    assert_eq!(cpu_rows, cfg.threads.len() * (cfg.depths.len() + 1), "{md}");
    assert!(
        md.contains(&format!("keys fit, {} connections", cfg.wide_conns)),
        "{md}"
    );
    let targets = report.targets();
    assert_eq!(targets.len(), 11);
    // The quick run has -t 1 and 2 and both depths: every CPU target is measured.
    assert!(cfg.threads.contains(&1) && cfg.depths.contains(&16));
    for t in &targets[7..] {
        assert!(t.met.is_some() && t.measured.starts_with("worst"), "{t:?}");
    }
}
