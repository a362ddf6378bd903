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
//! - [`server_bench`]: `memkit-bench server`: memkitd against memcached over loopback, same
//!   settings and load: throughput, CPU per request, latency, memory, Zipf miss ratio,
//!   memcaslap, in the text protocol and (get/set cells, memcaslap) the binary protocol;
//!   [`server_report`] renders the ratio table, binary against text, CPU per request in
//!   user and system time, and the SVG chart.
//! - [`persist_bench`]: `memkit-bench persist`: memkitd's persistent mode: durable sets/s
//!   (group commit) and gets/s over a data set 4x the memory budget.
//! - [`fill`]: `memkit-bench fill`: warm-up fills (10 B to 1 MB values) and a Zipf trace
//!   with log-normal value sizes, memkitd against memcached.
//! - [`flash_bench`]: `memkit-bench flash`: memcached's extstore against memkitd's flash tier
//!   (`-o ext_path`): a fill of 4 KB values read back and checked (hits, RAM per item, write
//!   amplification), and a cache-aside Zipf trace over 10x the memory.
//! - [`soak`]: `memkit-bench soak`: a bounded mixed run against memkitd (random requests,
//!   malformed ones, random sizes, clients leaving mid-request), checking every reply, the
//!   server's memory bound, that no connection is stuck, and that `stats` adds up.
//! - [`restart_bench`]: `memkit-bench restart`: warm restart (`-e FILE`) of a full cache,
//!   memkitd and memcached: stop and start times, items kept.
//! - [`raft_snapshot`]: `memkit-bench raft-snapshot`: a three-node `memkit-raft` group in
//!   process: replicated writes/s with concurrent writers through the leader, a snapshot of
//!   every item, and how long a wiped follower takes to install it (peak RSS per phase).
//! - [`raft_bench`]: `memkit-bench raft`: a replicated group of three memkitd nodes on
//!   loopback against one unreplicated `--persist --durability sync` memkitd: replicated
//!   sets, linearizable and local gets, and failover after a SIGKILL of the leader;
//!   [`raft_group`] runs the group's processes, [`raft_failover`] the kills.
//! - [`router_bench`]: `memkit-bench router`: memkitd's router mode (`--route`) against
//!   twemproxy (`nutcracker`) in front of the same three memcached backends: get/set
//!   throughput at depth 1 and 16, multi-gets, CPU per request, latency over direct access.
//! - [`loadgen`]: the async (tokio) load generator, text or binary protocol (the binary side
//!   on `memkit_protocol::binary`'s client codec); [`procs`]: the server processes and their
//!   `/proc` figures; [`cpu_sample`]: a server's user/kernel split sampled by `perf record`
//!   (the CPU table's split when perf can record; `/proc`'s tick-sampled one otherwise).
//!
//! Numbers never appear in assertions: the tests check that every path runs and yields
//! sane values, never how fast.

pub mod cpu_sample;
pub mod engine_bench;
pub mod fill;
pub mod flash_bench;
pub mod loadgen;
pub mod lru;
pub mod persist_bench;
pub mod procs;
pub mod raft_bench;
pub mod raft_failover;
pub mod raft_group;
pub mod raft_snapshot;
pub mod report;
pub mod restart_bench;
pub mod router_bench;
pub mod server_bench;
pub mod server_report;
pub mod slab;
pub mod soak;
pub mod workload;
