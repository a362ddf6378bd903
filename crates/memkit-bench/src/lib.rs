//! memkit-bench: memkit's benchmarks, printed as markdown tables (`docs/BENCHMARKS.md`).
//!
//! Map:
//! - [`engine_bench`]: `memkit-bench engine`: the embedded engine against moka and LRU
//!   baselines: throughput, hit ratio on a Zipf trace, per-item memory overhead.
//! - [`workload`]: keys, values, and uniform / Zipf request distributions (deterministic
//!   from a seed).
//! - [`lru`]: a plain byte-budget LRU, the eviction baseline.
//! - [`slab`]: memcached 1.6's item size and slab-class arithmetic (what `-m N` holds).
//! - [`report`]: markdown rendering of the results.
//!
//! Room for later: a `server` module driving memkitd and memcached over the network, side by
//! side in one process tree, reported the same way (ratios first).
//!
//! Numbers never appear in assertions: the tests check that every path runs and yields
//! sane values, never how fast.

pub mod engine_bench;
pub mod lru;
pub mod report;
pub mod slab;
pub mod workload;
