//! Smoke test of `memkit-bench router --quick`: three real memcached backends, a spawned
//! memkitd `--route` (the build of this test's profile, built first with the cargo running
//! the test) and nutcracker. Checks sanity of what comes back, never timings or ratios.
//! memcached must be installed. nutcracker is installed by `scripts/install-test-deps.sh`;
//! without it this test says so and passes, unless `MEMKIT_REQUIRE_INTEROP=1` (as
//! `scripts/test-all.sh` sets), where it fails.

use memkit_bench::router_bench::{self, Binaries, CellLoad, RouterBenchConfig};
use memkit_bench::{procs, router_bench::PATHS};

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

#[test]
fn quick_router_bench_is_sane() {
    if procs::find_on_path("nutcracker").is_none() {
        let required = std::env::var("MEMKIT_REQUIRE_INTEROP").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "nutcracker not found (Debian: apt-get install nutcracker)"
        );
        eprintln!("SKIPPED: nutcracker not found (Debian: apt-get install nutcracker)");
        return;
    }
    let memkitd = procs::locate_memkitd(profile(), true)
        .unwrap_or_else(|e| panic!("the router bench needs memkitd: {e}"));
    let bins = Binaries::find(Some(memkitd), None, false)
        .unwrap_or_else(|e| panic!("the router bench needs memcached and nutcracker: {e}"));
    let cfg = RouterBenchConfig::quick();
    let report = router_bench::run(&cfg, &bins, &mut |l| eprintln!("# {l}"))
        .unwrap_or_else(|e| panic!("router bench failed: {e}"));

    let loads: Vec<CellLoad> = report.cells.iter().map(|c| c.load).collect();
    assert_eq!(
        loads,
        [
            CellLoad::Mix { depth: 1 },
            CellLoad::Mix { depth: 16 },
            CellLoad::MultiGet { keys: 100 }
        ]
    );
    for c in &report.cells {
        for runs in &c.runs {
            assert_eq!(runs.len(), cfg.rounds, "{c:?}");
            for r in runs {
                assert!(r.requests > 0 && r.rate > 0.0, "{c:?}");
                assert_eq!(r.errors, 0, "{c:?}");
                // Every key was loaded through each proxy before the cells.
                assert!(r.hit > 0.99, "{c:?}");
                assert!(r.proxy_cpu >= 0.0 && r.backend_cpu >= 0.0, "{c:?}");
            }
        }
    }
    let lat = report.lat.as_ref().expect("latency part ran");
    for (i, runs) in lat.runs.iter().enumerate() {
        for l in runs {
            assert!(l.p50 > 0.0 && l.p50 <= l.p99, "{}: {l:?}", PATHS[i]);
            assert_eq!(l.tally.errors, 0, "{}: {l:?}", PATHS[i]);
        }
    }
    assert!(report.versions.iter().all(|v| !v.is_empty()), "{report:?}");
    let md = report.to_markdown();
    for want in [
        "## Router",
        "multi-get of 100 keys",
        "nutcracker",
        "Targets:",
    ] {
        assert!(md.contains(want), "{want} missing from\n{md}");
    }
}
