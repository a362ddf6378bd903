//! Part 2 of `memkit-bench engine`: one Zipf trace replayed get-then-set-on-miss against the
//! engine under each eviction policy, LRU with memcached's slab footprint, LRU with the
//! engine's measured footprint, and moka.

use std::time::Instant;

use memkit_engine::EvictionPolicy;
use memkit_types::GetOptions;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::{EngineBenchConfig, new_engine_with, overhead, set_opts};
use crate::lru::ByteLru;
use crate::slab;
use crate::workload::{KeyGen, MAX_GEN_KEY, Zipf, value_bytes};

/// The engine's eviction policies the hit-ratio part compares, the default first.
pub const POLICIES: [EvictionPolicy; 2] = [EvictionPolicy::S3Fifo, EvictionPolicy::Sieve];

/// One replay of the hit-ratio trace on the engine under one eviction policy.
#[derive(Debug, Clone, Copy)]
pub struct EngineReplay {
    /// The policy.
    pub policy: EvictionPolicy,
    /// Share of requests that missed.
    pub miss: f64,
    /// Items held at the end of the trace.
    pub items: u64,
    /// Items evicted.
    pub evictions: u64,
    /// Items evictions kept (promoted or reinserted).
    pub retained: u64,
    /// Seconds the replay took.
    pub secs: f64,
}

/// The hit-ratio part's outcome.
#[derive(Debug, Clone)]
pub struct HitRatioResult {
    /// Distinct keys.
    pub keys: usize,
    /// Requests replayed.
    pub requests: usize,
    /// Memory of each cache.
    pub memory: usize,
    /// Items memcached's slab math fits (LRU(a)'s capacity).
    pub lru_a_capacity: u64,
    /// memkit's measured per-item overhead used for LRU(b).
    pub lru_b_overhead: u32,
    /// The engine under each of [`POLICIES`], in that order.
    pub memkit: Vec<EngineReplay>,
    /// LRU with memcached's footprint: miss ratio.
    pub lru_a_miss: f64,
    /// LRU with memkit's footprint: miss ratio.
    pub lru_b_miss: f64,
    /// moka (W-TinyLFU) at the same bytes of key + value: miss ratio.
    pub moka_miss: f64,
    /// LRU(a) items at the end.
    pub lru_a_items: u64,
    /// LRU(b) items at the end.
    pub lru_b_items: u64,
    /// moka items at the end.
    pub moka_items: u64,
    /// Seconds each baseline's replay took: LRU(a), LRU(b) (footprint fill included), moka.
    pub secs: [f64; 3],
}

impl HitRatioResult {
    /// The engine under its default policy.
    pub fn memkit_default(&self) -> &EngineReplay {
        &self.memkit[0]
    }
}

/// The hit-ratio trace: `cfg.hr_requests` key ids drawn from Zipf(`cfg.zipf_s`) over
/// `cfg.hr_keys` keys.
pub fn zipf_trace(cfg: &EngineBenchConfig) -> Vec<u32> {
    let zipf = Zipf::new(cfg.hr_keys as u64, cfg.zipf_s);
    let mut rng = SmallRng::seed_from_u64(cfg.seed ^ 0x0074_7261_6365);
    (0..cfg.hr_requests)
        .map(|_| (zipf.sample(&mut rng) - 1) as u32)
        .collect()
}

/// Replays `trace` on a fresh engine of `memory` bytes under `policy`: a get, then a set
/// of a `value_len`-byte value on a miss.
pub fn replay_engine(
    trace: &[u32],
    keys: KeyGen,
    value_len: usize,
    memory: usize,
    policy: EvictionPolicy,
) -> EngineReplay {
    let t = Instant::now();
    let engine = new_engine_with(memory, policy);
    let value = value_bytes(0, value_len);
    let (get, set) = (GetOptions::default(), set_opts());
    let mut buf = [0u8; MAX_GEN_KEY];
    let mut misses = 0u64;
    for &id in trace {
        let key = keys.write(u64::from(id), &mut buf);
        let hit = engine
            .get_view(key, &get, |v| std::hint::black_box(v.value.len()))
            .expect("get");
        if hit.is_none() {
            misses += 1;
            engine.store(key, &value, &set).expect("store");
        }
    }
    let st = engine.stats();
    drop(engine);
    EngineReplay {
        policy,
        miss: misses as f64 / trace.len().max(1) as f64,
        items: st.counters.curr_items,
        evictions: st.counters.evictions,
        retained: st.counters.evict_retained,
        secs: t.elapsed().as_secs_f64(),
    }
}

/// Replays `trace` on moka, weighed by key + value bytes: (miss ratio, items at the end).
fn replay_moka(trace: &[u32], keys: KeyGen, value_len: usize, memory: usize) -> (f64, u64) {
    let moka: moka::sync::Cache<u32, ()> = moka::sync::Cache::builder()
        .max_capacity(memory as u64)
        .weigher(move |k: &u32, _: &()| (keys.len_of(u64::from(*k)) + value_len) as u32)
        .build();
    let mut misses = 0u64;
    for &id in trace {
        if moka.get(&id).is_none() {
            misses += 1;
            moka.insert(id, ());
        }
    }
    moka.run_pending_tasks();
    (
        misses as f64 / trace.len().max(1) as f64,
        moka.entry_count(),
    )
}

/// Part 2: one Zipf trace, get-then-set-on-miss: the engine under each policy, then the
/// baselines.
pub fn hit_ratio(cfg: &EngineBenchConfig, log: &mut dyn FnMut(&str)) -> HitRatioResult {
    let t = Instant::now();
    let trace = zipf_trace(cfg);
    log(&format!(
        "hit ratio: trace of {} requests over {} keys in {:.1} s",
        cfg.hr_requests,
        cfg.hr_keys,
        t.elapsed().as_secs_f64()
    ));
    let keys = cfg.keys;
    let vlen = cfg.value_len;
    let n = trace.len() as f64;
    let mut secs = [0.0; 3];
    let memkit: Vec<EngineReplay> = (POLICIES.iter())
        .map(|&p| {
            let r = replay_engine(&trace, keys, vlen, cfg.hr_memory, p);
            log(&format!(
                "hit ratio: memkit ({p:?}) miss {:.4} in {:.1} s",
                r.miss, r.secs
            ));
            r
        })
        .collect();

    let replay_lru = |lru: &mut ByteLru, charge: &dyn Fn(u64) -> u32| {
        let mut misses = 0u64;
        for &id in &trace {
            let id = u64::from(id);
            if !lru.get(id) {
                misses += 1;
                lru.insert(id, charge(id));
            }
        }
        misses as f64 / n
    };

    // LRU(a): memcached's slab footprint. All key lengths of one class is the common case
    // (16..32-byte keys with 100-byte values are all in the 192-byte class); then the budget
    // is whole pages of that class, else plain bytes.
    let t = Instant::now();
    let chunks: Vec<usize> = (keys.min_len..=keys.max_len)
        .map(|k| slab::chunk_size(k, vlen))
        .collect();
    let single_class = chunks.iter().all(|&c| c == chunks[0]);
    let budget_a = if single_class {
        (slab::items_that_fit(cfg.hr_memory, keys.min_len, vlen) * chunks[0]) as u64
    } else {
        cfg.hr_memory as u64
    };
    let mut lru_a = ByteLru::new(budget_a);
    let lru_a_miss = replay_lru(&mut lru_a, &|id| {
        slab::chunk_size(keys.len_of(id), vlen) as u32
    });
    secs[0] = t.elapsed().as_secs_f64();
    log(&format!("hit ratio: LRU(a) miss {lru_a_miss:.4}"));

    // LRU(b): memkit's own footprint, measured by filling an engine with the same keys.
    let t = Instant::now();
    let fp = overhead(cfg.hr_memory, keys, vlen);
    let ovh = fp.steady.per_item_overhead().round().max(0.0) as u32;
    let mut lru_b = ByteLru::new(cfg.hr_memory as u64);
    let lru_b_miss = replay_lru(&mut lru_b, &|id| (keys.len_of(id) + vlen) as u32 + ovh);
    secs[1] = t.elapsed().as_secs_f64();
    log(&format!(
        "hit ratio: LRU(b) (+{ovh} B/item) miss {lru_b_miss:.4}"
    ));

    let t = Instant::now();
    let (moka_miss, moka_items) = replay_moka(&trace, keys, vlen, cfg.hr_memory);
    secs[2] = t.elapsed().as_secs_f64();
    log(&format!(
        "hit ratio: moka miss {moka_miss:.4} in {:.1} s",
        secs[2]
    ));

    HitRatioResult {
        keys: cfg.hr_keys,
        requests: cfg.hr_requests,
        memory: cfg.hr_memory,
        lru_a_capacity: budget_a / u64::from(chunks[0] as u32),
        lru_b_overhead: ovh,
        memkit,
        lru_a_miss,
        lru_b_miss,
        moka_miss,
        lru_a_items: lru_a.len() as u64,
        lru_b_items: lru_b.len() as u64,
        moka_items,
        secs,
    }
}
