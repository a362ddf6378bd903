//! Markdown rendering of [`EngineReport`]: the tables `docs/BENCHMARKS.md` carries.

use std::fmt::Write as _;

use memkit_engine::EvictionPolicy;

use crate::engine_bench::{EngineReport, HitRatioResult, OverheadResult, Snapshot};

fn policy_name(p: EvictionPolicy) -> &'static str {
    match p {
        EvictionPolicy::S3Fifo => "S3-FIFO",
        EvictionPolicy::Sieve => "SIEVE",
    }
}

fn mib(bytes: usize) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    }
}

fn millions(n: usize) -> String {
    if n >= 1_000_000 && n.is_multiple_of(100_000) {
        format!("{}M", n as f64 / 1e6)
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

impl EngineReport {
    /// The report as markdown sections with tables.
    pub fn to_markdown(&self) -> String {
        let mut o = String::new();
        if !self.throughput.is_empty() {
            self.throughput_markdown(&mut o);
        }
        if let Some(h) = &self.hit_ratio {
            self.hit_ratio_markdown(h, &mut o);
        }
        if let Some(r) = &self.overhead {
            self.overhead_markdown(r, &mut o);
        }
        let _ = writeln!(
            o,
            "_Run took {:.0} s; load average at start: {}._",
            self.elapsed.as_secs_f64(),
            self.loadavg.as_deref().unwrap_or("unknown")
        );
        o
    }

    fn throughput_markdown(&self, o: &mut String) {
        let c = &self.config;
        let _ = writeln!(
            o,
            "### Throughput\n\n{} keys of {}-{} bytes, {}-byte values, -m {}, every key \
             pre-loaded; {:.1} s per cell per cache, run as {} alternating rounds memkit / moka, \
             best round reported; each thread replays its own pre-generated \
             stream of {} ops (key picks uniform, or Zipf s={}). memkit: `Engine::get_view` \
             copying into a reused buffer, `Engine::store`. moka: `sync::Cache<Box<[u8]>, \
             Arc<[u8]>>`, weigher key+value, same byte capacity.\n",
            millions(c.tp_keys),
            c.keys.min_len,
            c.keys.max_len,
            c.value_len,
            mib(c.tp_memory),
            c.cell.as_secs_f64(),
            c.rounds,
            millions(c.tp_stream),
            c.zipf_s,
        );
        o.push_str(
            "| mix | keys | threads | memkit Mops/s | moka Mops/s | memkit/moka | \
             memkit get hits | moka get hits |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in &self.throughput {
            let _ = writeln!(
                o,
                "| {}% get / {}% set | {} | {} | {:.2} | {:.2} | **{:.2}x** | {:.1}% | {:.1}% |",
                r.mix.get_pct,
                100 - r.mix.get_pct,
                r.dist,
                r.threads,
                r.memkit_ops / 1e6,
                r.moka_ops / 1e6,
                r.memkit_ops / r.moka_ops,
                r.memkit_get_hit * 100.0,
                r.moka_get_hit * 100.0,
            );
        }
        o.push('\n');
    }

    fn hit_ratio_markdown(&self, h: &HitRatioResult, o: &mut String) {
        let c = &self.config;
        let _ = writeln!(
            o,
            "### Hit ratio\n\nOne Zipf(s={}) trace: {} requests over {} distinct keys of \
             {}-{} bytes, {}-byte values, replayed single-threaded as get, then set on a \
             miss. Every cache has {}. Miss ratios count every request, cold misses \
             included.\n",
            c.zipf_s,
            millions(h.requests),
            millions(h.keys),
            c.keys.min_len,
            c.keys.max_len,
            c.value_len,
            mib(h.memory),
        );
        o.push_str(
            "| cache | sized as | items held at end | miss ratio | memkit (S3-FIFO) / this |\n\
             |---|---|---:|---:|---:|\n",
        );
        let base = h.memkit_default().miss;
        let mut rows: Vec<(String, String, u64, f64)> = (h.memkit.iter())
            .map(|m| {
                (
                    format!("memkit engine ({} over segments)", policy_name(m.policy)),
                    format!("-m {}, all bytes counted", mib(h.memory)),
                    m.items,
                    m.miss,
                )
            })
            .collect();
        rows.extend([
            (
                "LRU(a): memcached's footprint".to_string(),
                format!(
                    "{} items: memcached -m {} slab math (192-byte chunks)",
                    h.lru_a_capacity,
                    mib(h.memory)
                ),
                h.lru_a_items,
                h.lru_a_miss,
            ),
            (
                "LRU(b): memkit's footprint".to_string(),
                format!(
                    "{}, key + value + {} B/item (memkit measured)",
                    mib(h.memory),
                    h.lru_b_overhead
                ),
                h.lru_b_items,
                h.lru_b_miss,
            ),
            (
                "moka 0.12 (W-TinyLFU)".to_string(),
                format!("{} of key + value, no overhead counted", mib(h.memory)),
                h.moka_items,
                h.moka_miss,
            ),
        ]);
        for (name, sized, items, miss) in rows {
            let _ = writeln!(
                o,
                "| {name} | {sized} | {items} | {miss:.4} | {:.3} |",
                base / miss
            );
        }
        o.push_str("\nmemkit evictions:");
        for m in &h.memkit {
            let _ = write!(
                o,
                " {}: {} items dropped, {} retained (promoted or reinserted), replay {:.1} s;",
                policy_name(m.policy),
                m.evictions,
                m.retained,
                m.secs
            );
        }
        let _ = writeln!(
            o,
            " replay seconds of the baselines: LRU(a) {:.1}, LRU(b) {:.1} (incl. footprint \
             fill), moka {:.1}.\n",
            h.secs[0], h.secs[1], h.secs[2],
        );
    }

    fn overhead_markdown(&self, r: &OverheadResult, o: &mut String) {
        let _ = writeln!(
            o,
            "### Per-item overhead\n\nAn engine of -m {} ({} shards, {} KiB segments) \
             filled with {:.0}-byte keys and {}-byte values (set only, no TTL, flags 0): \
             the last snapshot before the first eviction, and the steady state after \
             writing {}x as many items.\n",
            mib(r.memory),
            r.shards,
            r.segment_size >> 10,
            r.key_len,
            r.value_len,
            crate::engine_bench::STEADY_FACTOR,
        );
        o.push_str("| measure | at first eviction | steady state |\n|---|---:|---:|\n");
        let (a, b) = (&r.first, &r.steady);
        let mc = r.memcached_items.max(1) as f64;
        let row = |o: &mut String, k: &str, f: &dyn Fn(&Snapshot) -> String| {
            let _ = writeln!(o, "| {k} | {} | {} |", f(a), f(b));
        };
        row(o, "items held", &|s| s.items.to_string());
        row(o, "key + value bytes", &|s| s.kv_bytes.to_string());
        row(o, "records as stored (`stats.bytes`)", &|s| {
            s.record_bytes.to_string()
        });
        row(o, "mapped bytes (segments + index)", &|s| {
            format!("{} ({} segs)", s.mapped_bytes, s.segments)
        });
        row(o, "index bytes", &|s| s.index_bytes.to_string());
        row(
            o,
            "**per-item overhead** (mapped - key - value) / items",
            &|s| format!("**{:.1} B**", s.per_item_overhead()),
        );
        row(
            o,
            "of which record header (stats.bytes - key - value) / items",
            &|s| format!("{:.1} B", s.record_overhead()),
        );
        row(o, "of which index (index_bytes / items)", &|s| {
            format!("{:.1} B", s.index_per_item())
        });
        row(o, "of which free space in mapped segments", &|s| {
            format!("{:.1} B", s.slack_per_item())
        });
        row(
            o,
            "whole budget per item: (limit - key - value) / items",
            &|s| format!("{:.1} B", s.budget_per_item(r.memory)),
        );
        row(o, "**memkit items / memcached items**", &|s| {
            format!("**{:.2}x**", s.items as f64 / mc)
        });
        let _ = writeln!(
            o,
            "\nmemcached -m {} at the same shape: {:.0} + {} bytes need {} bytes (48 header + \
             8 CAS + key + 1 + value + 2), class chunk {} B ({:.0} B over key + value); \
             {} pages x {} chunks = **{} items**.\n",
            mib(r.memory),
            r.key_len,
            r.value_len,
            crate::slab::item_size(r.key_len.round() as usize, r.value_len),
            r.memcached_chunk,
            r.memcached_overhead(),
            r.memory / crate::slab::PAGE,
            crate::slab::PAGE / r.memcached_chunk,
            r.memcached_items,
        );
    }
}
