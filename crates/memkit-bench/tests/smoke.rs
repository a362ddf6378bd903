//! Smoke test: the engine bench's every path on tiny sizes; sanity of values, never timing.

use memkit_bench::engine_bench::{self, EngineBenchConfig, Part};

#[test]
fn engine_bench_tiny_run_is_sane() {
    let cfg = EngineBenchConfig::tiny();
    let report = engine_bench::run(
        &cfg,
        &[Part::Throughput, Part::HitRatio, Part::Overhead],
        &mut |_| {},
    );

    assert_eq!(report.throughput.len(), 2 * 2 * cfg.threads.len());
    for r in &report.throughput {
        assert!(r.memkit_ops > 0.0 && r.memkit_ops.is_finite(), "{r:?}");
        assert!(r.moka_ops > 0.0 && r.moka_ops.is_finite(), "{r:?}");
        assert!((0.0..=1.0).contains(&r.memkit_get_hit), "{r:?}");
        assert!((0.0..=1.0).contains(&r.moka_get_hit), "{r:?}");
    }
    // Get-heavy over a key space that fits: nearly every get hits in both caches.
    for r in report.throughput.iter().filter(|r| r.mix.get_pct == 90) {
        assert!(r.memkit_get_hit > 0.9 && r.moka_get_hit > 0.9, "{r:?}");
    }

    let h = report.hit_ratio.as_ref().expect("hit ratio ran");
    assert_eq!(
        h.memkit.len(),
        engine_bench::POLICIES.len(),
        "every policy ran"
    );
    let engine = h.memkit.iter().map(|m| m.miss);
    for m in engine.chain([h.lru_a_miss, h.lru_b_miss, h.moka_miss]) {
        assert!(m > 0.0 && m < 1.0, "{h:?}");
    }
    assert!(h.lru_a_items > 0 && h.lru_b_items > 0);
    for m in &h.memkit {
        assert!(m.items > 0, "{h:?}");
        assert!(m.evictions > 0, "the trace must overflow the cache: {h:?}");
    }

    let o = report.overhead.as_ref().expect("overhead ran");
    assert!(o.memcached_items > 0, "{o:?}");
    assert_eq!(o.memcached_chunk, 192);
    for s in [&o.first, &o.steady] {
        assert!(s.items > 0, "{o:?}");
        assert!(s.mapped_bytes <= o.memory as u64, "{o:?}");
        assert!(
            s.mapped_bytes >= s.record_bytes && s.record_bytes >= s.kv_bytes,
            "{o:?}"
        );
        let per_item = s.per_item_overhead();
        assert!(per_item.is_finite() && per_item > 0.0, "{per_item}");
        assert!(
            s.record_overhead() > 0.0 && s.index_per_item() > 0.0,
            "{o:?}"
        );
    }

    let md = report.to_markdown();
    for heading in ["### Throughput", "### Hit ratio", "### Per-item overhead"] {
        assert!(md.contains(heading), "{md}");
    }
}
