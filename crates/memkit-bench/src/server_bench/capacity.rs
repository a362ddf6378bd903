//! The parts that measure what a memory budget holds: the memory part (fill `-m`, count
//! items, read RSS) and the hit-ratio part (a Zipf trace replayed as get-then-set-on-miss).

use std::io;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::{Ctx, HitRow, KINDS, MemRow, Pair};
use crate::loadgen::{Closed, Proto, Source};
use crate::procs::{Server, Spec};
use crate::workload::Zipf;

impl Ctx<'_> {
    pub(super) fn memory(&mut self) -> io::Result<MemRow> {
        let cfg = self.cfg;
        let mean_key = cfg.keys.mean_len().round() as usize;
        let slab_items =
            crate::slab::items_that_fit(cfg.fill_memory_mb << 20, mean_key, cfg.value_len) as u64;
        let sets = (slab_items as f64 * cfg.fill_factor) as u64;
        let spec = Spec {
            threads: *cfg.threads.iter().max().unwrap_or(&1),
            memory_mb: cfg.fill_memory_mb,
        };
        let mut row = MemRow {
            memory_mb: cfg.fill_memory_mb,
            sets,
            items: Pair::default(),
            rss: Pair::default(),
            hwm: Pair::default(),
            evictions: Pair::default(),
            slab_math_items: slab_items,
        };
        for kind in KINDS {
            let s = Server::start(kind, self.bins.of(kind), spec)?;
            // A second 1M past the fill's keys: the fill is written in order, so after it the
            // newest items are retained; count whatever the server holds.
            let t = self.fill(&s, 1 << 40, (1 << 40) + sets)?;
            std::thread::sleep(Duration::from_millis(300));
            let st = s.stats()?;
            let num = |k: &str| st.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            let (rss, hwm) = s.rss()?;
            (self.log)(&format!(
                "memory: {} after {} sets ({} errors): curr_items {}, evictions {}, RSS {:.1} MiB, peak {:.1} MiB",
                kind.name(),
                t.sets,
                t.errors,
                num("curr_items"),
                num("evictions"),
                rss as f64 / 1048576.0,
                hwm as f64 / 1048576.0
            ));
            row.items.set(kind, num("curr_items"));
            row.evictions.set(kind, num("evictions"));
            row.rss.set(kind, rss as f64);
            row.hwm.set(kind, hwm as f64);
        }
        Ok(row)
    }

    pub(super) fn hit_ratio(&mut self) -> io::Result<HitRow> {
        let cfg = self.cfg;
        let mean_key = cfg.keys.mean_len().round() as usize;
        let fit = crate::slab::items_that_fit(cfg.hit_memory_mb << 20, mean_key, cfg.value_len);
        let keys = (fit as f64 * cfg.hit_keys_factor) as u64;
        let requests = (keys as f64 * cfg.hit_requests_factor) as usize;
        let zipf = Zipf::new(keys, cfg.zipf_s);
        let mut rng = SmallRng::seed_from_u64(cfg.seed ^ 0x2195);
        // Key numbers scattered over a large range, so the hot keys are not neighbours.
        let trace: std::sync::Arc<Vec<u32>> = std::sync::Arc::new(
            (0..requests)
                .map(|_| (zipf.sample(&mut rng) - 1) as u32)
                .collect(),
        );
        let spec = Spec {
            threads: *cfg.threads.iter().max().unwrap_or(&1),
            memory_mb: cfg.hit_memory_mb,
        };
        let mut row = HitRow {
            memory_mb: cfg.hit_memory_mb,
            keys,
            requests: requests as u64,
            miss: Pair::default(),
            items: Pair::default(),
            secs: Pair::default(),
        };
        // Few connections and a shallow pipeline keep the replay close to trace order.
        let conns = 8;
        for kind in KINDS {
            let s = Server::start(kind, self.bins.of(kind), spec)?;
            let closed = Closed {
                conns,
                depth: 8,
                duration: Duration::from_secs(3600),
                max_requests: u64::MAX / 2,
                seed: cfg.seed,
                proto: Proto::Text,
            };
            let tr = trace.clone();
            let (t, _) = self.closed(&s, closed, |i| Source::Trace {
                trace: tr.clone(),
                next: i,
                step: conns,
            })?;
            let items = s.stat_u64("curr_items")?;
            (self.log)(&format!(
                "hit ratio: {} miss {:.4} over {} gets ({} errors), {} items, {:.1} s",
                kind.name(),
                t.miss_ratio(),
                t.gets,
                t.errors,
                items,
                t.secs
            ));
            row.miss.set(kind, t.miss_ratio());
            row.items.set(kind, items as f64);
            row.secs.set(kind, t.secs);
        }
        Ok(row)
    }
}
