//! `memkit-bench engine`: the engine in-process, next to moka and LRU baselines.
//!
//! Three parts, each bounded in time:
//! 1. [`throughput`]: ops/s of get-heavy and set-heavy mixes on 1..N threads, memkit's
//!    [`Engine`] (reads through `get_view` into a reused buffer, as a server does) against
//!    `moka::sync::Cache` with a byte weigher at the same capacity.
//! 2. [`hit_ratio`]: one Zipf trace replayed get-then-set-on-miss against memkit under each
//!    eviction policy (S3-FIFO, SIEVE), LRU with memcached's slab footprint, LRU with
//!    memkit's measured footprint, and moka.
//! 3. [`overhead`]: fill an engine until it first evicts and account for every byte.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use memkit_engine::{Engine, EngineConfig, EvictionPolicy};
use memkit_types::{Exptime, GetOptions, StoreMode, StoreOptions};
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::slab;
use crate::workload::{Dist, KeyGen, MAX_GEN_KEY, Zipf, value_bytes};

mod hit_ratio;
pub use hit_ratio::{EngineReplay, HitRatioResult, POLICIES, hit_ratio, replay_engine, zipf_trace};

/// Everything the engine bench is parameterised by.
#[derive(Debug, Clone)]
pub struct EngineBenchConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Value length everywhere.
    pub value_len: usize,
    /// Zipf exponent (throughput's Zipf cells and the hit-ratio trace).
    pub zipf_s: f64,
    /// Throughput: time per cell.
    pub cell: Duration,
    /// Throughput: thread counts.
    pub threads: Vec<usize>,
    /// Throughput: rounds per cell, memkit and moka alternating (each reports its best).
    pub rounds: usize,
    /// Throughput: distinct keys (all fit in memory).
    pub tp_keys: usize,
    /// Throughput: memory limit of both caches.
    pub tp_memory: usize,
    /// Throughput: length of each thread's pre-generated op stream (a power of two).
    pub tp_stream: usize,
    /// Throughput and hit ratio: key lengths.
    pub keys: KeyGen,
    /// Hit ratio: distinct keys in the trace.
    pub hr_keys: usize,
    /// Hit ratio: requests in the trace.
    pub hr_requests: usize,
    /// Hit ratio: memory of every cache.
    pub hr_memory: usize,
    /// Overhead: memory limit of the engine filled.
    pub fill_memory: usize,
    /// Overhead: key length of the fill.
    pub fill_key_len: usize,
}

impl EngineBenchConfig {
    /// The default run: 3 s per throughput cell, 5M keys / 15M requests at 64 MiB.
    pub fn full() -> Self {
        EngineBenchConfig {
            seed: 0x6d65_6d6b_6974,
            value_len: 100,
            zipf_s: 0.99,
            cell: Duration::from_secs(3),
            threads: vec![1, 2],
            rounds: 3,
            tp_keys: 100_000,
            tp_memory: 64 << 20,
            tp_stream: 1 << 20,
            keys: KeyGen::new(16, 32),
            hr_keys: 5_000_000,
            hr_requests: 15_000_000,
            hr_memory: 64 << 20,
            fill_memory: 64 << 20,
            fill_key_len: 20,
        }
    }

    /// `--quick`: 0.5 s per cell, the trace scaled down 10x in keys and memory.
    pub fn quick() -> Self {
        EngineBenchConfig {
            cell: Duration::from_millis(500),
            hr_keys: 500_000,
            hr_requests: 2_000_000,
            hr_memory: 64 << 20 >> 3,
            ..Self::full()
        }
    }

    /// Tiny sizes for tests: every code path, a fraction of a second.
    pub fn tiny() -> Self {
        EngineBenchConfig {
            cell: Duration::from_millis(40),
            tp_keys: 2_000,
            tp_memory: 4 << 20,
            tp_stream: 1 << 12,
            hr_keys: 60_000,
            hr_requests: 200_000,
            hr_memory: 1 << 20,
            fill_memory: 1 << 20,
            ..Self::full()
        }
    }
}

/// Which parts to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Part {
    /// Ops/s, memkit vs moka.
    Throughput,
    /// Miss ratios on a Zipf trace.
    HitRatio,
    /// Bytes per item at the first eviction.
    Overhead,
}

/// An op mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Percentage of gets (the rest are sets).
    pub get_pct: u32,
}

impl Mix {
    /// 90% get / 10% set.
    pub const GET_HEAVY: Mix = Mix { get_pct: 90 };
    /// 10% get / 90% set.
    pub const SET_HEAVY: Mix = Mix { get_pct: 10 };
}

/// One throughput cell, both caches.
#[derive(Debug, Clone)]
pub struct ThroughputRow {
    /// The op mix.
    pub mix: Mix,
    /// "uniform" or "zipf".
    pub dist: &'static str,
    /// Threads.
    pub threads: usize,
    /// memkit ops/s.
    pub memkit_ops: f64,
    /// moka ops/s.
    pub moka_ops: f64,
    /// Share of memkit's gets that hit.
    pub memkit_get_hit: f64,
    /// Share of moka's gets that hit.
    pub moka_get_hit: f64,
}

/// One accounting snapshot of a filled engine.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Items held (`curr_items`).
    pub items: u64,
    /// Their key + value bytes (exact for fixed-length keys, else items x mean written).
    pub kv_bytes: u64,
    /// `stats.bytes`: records as stored (header + key + value).
    pub record_bytes: u64,
    /// Bytes held from the OS (segments + index).
    pub mapped_bytes: u64,
    /// Hash index bytes.
    pub index_bytes: u64,
    /// Segments mapped.
    pub segments: u64,
}

impl Snapshot {
    /// `(mapped - key - value) / items`.
    pub fn per_item_overhead(&self) -> f64 {
        (self.mapped_bytes as f64 - self.kv_bytes as f64) / self.items as f64
    }
    /// `(stats.bytes - key - value) / items`.
    pub fn record_overhead(&self) -> f64 {
        (self.record_bytes as f64 - self.kv_bytes as f64) / self.items as f64
    }
    /// `index_bytes / items`.
    pub fn index_per_item(&self) -> f64 {
        self.index_bytes as f64 / self.items as f64
    }
    /// What is neither record nor index: free space in segments, per item.
    pub fn slack_per_item(&self) -> f64 {
        self.per_item_overhead() - self.record_overhead() - self.index_per_item()
    }
    /// `(limit - key - value) / items`: the whole budget charged to the items.
    pub fn budget_per_item(&self, limit: usize) -> f64 {
        (limit as f64 - self.kv_bytes as f64) / self.items as f64
    }
}

/// Bytes per item of a filled engine: at the first eviction, and in steady state.
#[derive(Debug, Clone)]
pub struct OverheadResult {
    /// Memory limit.
    pub memory: usize,
    /// Mean key length.
    pub key_len: f64,
    /// Value length.
    pub value_len: usize,
    /// The last snapshot before the first eviction.
    pub first: Snapshot,
    /// After writing [`STEADY_FACTOR`] times as many items as `first` holds.
    pub steady: Snapshot,
    /// Segment size.
    pub segment_size: u64,
    /// Shards.
    pub shards: u64,
    /// Items memcached's slab math fits in `memory` (fixed key length only, else 0).
    pub memcached_items: u64,
    /// memcached's chunk for this item (for the longest key).
    pub memcached_chunk: usize,
}

/// How many times the first-eviction item count the fill writes in all before the
/// steady-state snapshot.
pub const STEADY_FACTOR: u64 = 3;

impl OverheadResult {
    /// What memcached spends per item beyond key + value at the same shape.
    pub fn memcached_overhead(&self) -> f64 {
        self.memcached_chunk as f64 - self.key_len - self.value_len as f64
    }
}

/// All results of one `engine` run.
#[derive(Debug, Clone)]
pub struct EngineReport {
    /// The configuration run.
    pub config: EngineBenchConfig,
    /// Throughput cells.
    pub throughput: Vec<ThroughputRow>,
    /// Hit-ratio results.
    pub hit_ratio: Option<HitRatioResult>,
    /// Per-item overhead with the fixed key length.
    pub overhead: Option<OverheadResult>,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// `/proc/loadavg` at the start (other work on the machine skews the 2-thread cells).
    pub loadavg: Option<String>,
}

/// Runs the selected parts; `log` gets one progress line per step.
pub fn run(cfg: &EngineBenchConfig, parts: &[Part], log: &mut dyn FnMut(&str)) -> EngineReport {
    let start = Instant::now();
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    let throughput = if parts.contains(&Part::Throughput) {
        throughput(cfg, log)
    } else {
        Vec::new()
    };
    let hit_ratio = parts.contains(&Part::HitRatio).then(|| hit_ratio(cfg, log));
    let overhead = parts.contains(&Part::Overhead).then(|| {
        let keys = KeyGen::new(cfg.fill_key_len, cfg.fill_key_len);
        let r = overhead(cfg.fill_memory, keys, cfg.value_len);
        log(&format!(
            "overhead: {} items at first eviction, {:.1} B/item over key+value; steady {} items, {:.1} B/item",
            r.first.items,
            r.first.per_item_overhead(),
            r.steady.items,
            r.steady.per_item_overhead()
        ));
        r
    });
    EngineReport {
        config: cfg.clone(),
        throughput,
        hit_ratio,
        overhead,
        elapsed: start.elapsed(),
        loadavg,
    }
}

fn new_engine(memory: usize) -> Engine {
    new_engine_with(memory, EvictionPolicy::default())
}

/// memcached's defaults (1 MiB items, evict when full), the system clock, `policy`.
fn new_engine_with(memory: usize, policy: EvictionPolicy) -> Engine {
    Engine::new(EngineConfig::with_memory(memory).eviction(policy))
}

fn set_opts() -> StoreOptions {
    StoreOptions::new(StoreMode::Set, 0, Exptime::NEVER)
}

/// What the throughput loop needs of a cache.
trait BenchCache: Sync {
    /// Reads `key`, copying the value into `buf`; whether it hit.
    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> bool;
    /// Stores `value` under `key`.
    fn set(&self, key: &[u8], value: &[u8]);
}

struct MemkitCache {
    engine: Engine,
    get: GetOptions,
    set: StoreOptions,
}

impl BenchCache for MemkitCache {
    #[inline]
    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> bool {
        matches!(
            self.engine.get_view(key, &self.get, |v| {
                buf.clear();
                buf.extend_from_slice(v.value);
            }),
            Ok(Some(()))
        )
    }
    #[inline]
    fn set(&self, key: &[u8], value: &[u8]) {
        let _ = self.engine.store(key, value, &self.set);
    }
}

type MokaBytes = moka::sync::Cache<Box<[u8]>, Arc<[u8]>>;

struct MokaCache(MokaBytes);

impl MokaCache {
    fn new(memory: usize) -> Self {
        MokaCache(
            MokaBytes::builder()
                .max_capacity(memory as u64)
                .weigher(|k, v| (k.len() + v.len()) as u32)
                .build(),
        )
    }
}

impl BenchCache for MokaCache {
    #[inline]
    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> bool {
        match self.0.get(key) {
            Some(v) => {
                buf.clear();
                buf.extend_from_slice(&v);
                true
            }
            None => false,
        }
    }
    #[inline]
    fn set(&self, key: &[u8], value: &[u8]) {
        self.0.insert(key.into(), value.into());
    }
}

const SET_BIT: u32 = 1 << 31;

/// Each thread's op stream: key index, top bit set for a set.
fn op_streams(cfg: &EngineBenchConfig, mix: Mix, dist: &Dist, threads: usize) -> Vec<Vec<u32>> {
    use rand::Rng;
    (0..threads)
        .map(|t| {
            let mut rng = SmallRng::seed_from_u64(cfg.seed ^ ((t as u64 + 1) * 0x9e37));
            (0..cfg.tp_stream)
                .map(|_| {
                    let k = dist.sample(&mut rng) as u32;
                    if rng.random_range(0..100) < mix.get_pct {
                        k
                    } else {
                        k | SET_BIT
                    }
                })
                .collect()
        })
        .collect()
}

/// Pre-generated keys in one flat buffer, one fixed-size slot each, so that picking a key
/// costs the harness one cache line rather than a pointer chase to a separate allocation.
struct KeyTable {
    flat: Vec<u8>,
    lens: Vec<u8>,
}

impl KeyTable {
    const SLOT: usize = MAX_GEN_KEY;

    fn new(keys: KeyGen, n: usize) -> Self {
        let mut flat = vec![0u8; n * Self::SLOT];
        let mut lens = Vec::with_capacity(n);
        let mut buf = [0u8; MAX_GEN_KEY];
        for (i, slot) in flat.chunks_exact_mut(Self::SLOT).enumerate() {
            let k = keys.write(i as u64, &mut buf);
            slot[..k.len()].copy_from_slice(k);
            lens.push(k.len() as u8);
        }
        KeyTable { flat, lens }
    }

    #[inline]
    fn get(&self, i: usize) -> &[u8] {
        &self.flat[i * Self::SLOT..i * Self::SLOT + self.lens[i] as usize]
    }

    fn len(&self) -> usize {
        self.lens.len()
    }
}

/// Runs one cell: every thread replays its stream (cycling) until `dur` is up.
/// Returns (ops/s, share of gets that hit).
fn run_cell<C: BenchCache>(
    cache: &C,
    keys: &KeyTable,
    value: &[u8],
    streams: &[Vec<u32>],
    dur: Duration,
) -> (f64, f64) {
    let barrier = Barrier::new(streams.len());
    let results: Vec<(u64, u64, u64, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = streams
            .iter()
            .map(|stream| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mask = stream.len() - 1;
                    let mut buf = Vec::with_capacity(value.len() * 2);
                    let (mut ops, mut gets, mut hits) = (0u64, 0u64, 0u64);
                    let mut i = 0usize;
                    barrier.wait();
                    let start = Instant::now();
                    loop {
                        for _ in 0..1024 {
                            let op = stream[i & mask];
                            i += 1;
                            let key = keys.get((op & !SET_BIT) as usize);
                            if op & SET_BIT != 0 {
                                cache.set(key, value);
                            } else {
                                gets += 1;
                                hits += u64::from(cache.get(key, &mut buf));
                            }
                        }
                        ops += 1024;
                        let el = start.elapsed();
                        if el >= dur {
                            std::hint::black_box(&buf);
                            return (ops, gets, hits, el);
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ops: u64 = results.iter().map(|r| r.0).sum();
    let gets: u64 = results.iter().map(|r| r.1).sum();
    let hits: u64 = results.iter().map(|r| r.2).sum();
    let secs = results
        .iter()
        .map(|r| r.3.as_secs_f64())
        .fold(0.0, f64::max);
    (ops as f64 / secs, hits as f64 / gets.max(1) as f64)
}

/// Part 1: throughput, memkit vs moka, fresh and pre-filled caches per cell.
pub fn throughput(cfg: &EngineBenchConfig, log: &mut dyn FnMut(&str)) -> Vec<ThroughputRow> {
    assert!(cfg.tp_stream.is_power_of_two() && cfg.tp_keys < SET_BIT as usize);
    let keys = KeyTable::new(cfg.keys, cfg.tp_keys);
    let value = value_bytes(0, cfg.value_len);
    let dists: [(&'static str, Dist); 2] = [
        ("uniform", Dist::Uniform(cfg.tp_keys as u64)),
        (
            "zipf",
            Dist::Zipf(Zipf::new(cfg.tp_keys as u64, cfg.zipf_s)),
        ),
    ];
    let mut rows = Vec::new();
    for mix in [Mix::GET_HEAVY, Mix::SET_HEAVY] {
        for (dname, dist) in &dists {
            for &threads in &cfg.threads {
                let streams = op_streams(cfg, mix, dist, threads);
                let memkit = MemkitCache {
                    engine: new_engine(cfg.tp_memory),
                    get: GetOptions::default(),
                    set: set_opts(),
                };
                let moka = MokaCache::new(cfg.tp_memory);
                for i in 0..keys.len() {
                    memkit.set(keys.get(i), &value);
                    moka.set(keys.get(i), &value);
                }
                moka.0.run_pending_tasks();
                // Alternate the two caches in short rounds and keep each one's best round, so
                // a burst of other work on the machine hits both alike or neither.
                let round = cfg.cell / cfg.rounds.max(1) as u32;
                let (mut memkit_ops, mut moka_ops) = (0.0f64, 0.0f64);
                let (mut memkit_get_hit, mut moka_get_hit) = (0.0, 0.0);
                for _ in 0..cfg.rounds.max(1) {
                    let (ops, hit) = run_cell(&memkit, &keys, &value, &streams, round);
                    memkit_ops = memkit_ops.max(ops);
                    memkit_get_hit = hit;
                    let (ops, hit) = run_cell(&moka, &keys, &value, &streams, round);
                    moka_ops = moka_ops.max(ops);
                    moka_get_hit = hit;
                }
                drop((memkit, moka));
                log(&format!(
                    "throughput {}% get {dname} {threads}t: memkit {:.2} Mops/s, moka {:.2} Mops/s",
                    mix.get_pct,
                    memkit_ops / 1e6,
                    moka_ops / 1e6
                ));
                rows.push(ThroughputRow {
                    mix,
                    dist: dname,
                    threads,
                    memkit_ops,
                    moka_ops,
                    memkit_get_hit,
                    moka_get_hit,
                });
            }
        }
    }
    rows
}

/// Fills a fresh engine of `memory` bytes with `value_len`-byte values under keys from
/// `keys`: snapshots just before its first eviction and after [`STEADY_FACTOR`] times as
/// many writes (the index has then grown to its steady size).
pub fn overhead(memory: usize, keys: KeyGen, value_len: usize) -> OverheadResult {
    let engine = new_engine(memory);
    let opts = set_opts();
    let value = value_bytes(0, value_len);
    let mut buf = [0u8; MAX_GEN_KEY];
    let mut key_total = 0u64; // key bytes written since the start
    let mut id = 0u64;
    let mut write_batch = |id: &mut u64, key_total: &mut u64| {
        for _ in 0..256 {
            let key = keys.write(*id, &mut buf);
            engine.store(key, &value, &opts).expect("store");
            *key_total += key.len() as u64;
            *id += 1;
        }
    };
    let snap = |s: &memkit_engine::EngineStats, mean_key: f64| Snapshot {
        items: s.counters.curr_items,
        kv_bytes: (s.counters.curr_items as f64 * (mean_key + value_len as f64)).round() as u64,
        record_bytes: s.counters.bytes,
        mapped_bytes: s.mapped_bytes,
        index_bytes: s.index_bytes,
        segments: s.segments,
    };
    // A guard against an engine that never evicts: four times what could ever fit.
    let max_items = (4 * memory / (keys.min_len + value_len) + 1024) as u64;
    let mut first = Snapshot::default();
    let mut first_mean_key = keys.mean_len();
    while id < max_items {
        write_batch(&mut id, &mut key_total);
        let s = engine.stats();
        if s.counters.evictions > 0 || s.counters.curr_items < id {
            break;
        }
        first_mean_key = key_total as f64 / id as f64;
        first = snap(&s, first_mean_key);
    }
    let target = (first.items * STEADY_FACTOR).max(id);
    while id < target {
        write_batch(&mut id, &mut key_total);
    }
    let s = engine.stats();
    let steady = snap(&s, key_total as f64 / id.max(1) as f64);
    let fixed = keys.min_len == keys.max_len;
    OverheadResult {
        memory,
        key_len: first_mean_key,
        value_len,
        first,
        steady,
        segment_size: s.segment_size,
        shards: s.shards,
        memcached_items: if fixed {
            slab::items_that_fit(memory, keys.min_len, value_len) as u64
        } else {
            0
        },
        memcached_chunk: slab::chunk_size(keys.max_len, value_len),
    }
}
