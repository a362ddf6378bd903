//! memkit-cookbook's integration tests, one binary (fewer links on small machines):
//! - `units`: each structure on the embedded store with a manual clock;
//! - `concurrency`: many tokio tasks hammer one structure; results are exact;
//! - `faults`: keys evicted, deleted or flushed mid-way; each structure degrades as its doc
//!   page says;
//! - `seed_bugs`: one test per pseudocode flaw of the seeds (`docs/sources.md`), pinning the fix;
//! - `multiprocess`: several OS processes (this binary, re-run as workers) against memkitd
//!   and, when installed, real memcached, through memkit-client;
//! - `network`: the structures' unit scenarios through memkit-client against memkitd and
//!   real memcached, and a three-server cluster losing a server;
//! - `races`: lost counters, expired tombstones and racing writers, each scenario against
//!   the embedded store, memkitd and real memcached;
//! - `staged`: races staged step by step (memkit-cookbook's `testing::Scripted` stops each
//!   caller at a chosen command), one per fixed race, on the embedded store;
//! - `skew`: the time-keyed structures with producers' clocks up to 2 s ahead and behind, on
//!   real time, against the embedded store, memkitd and real memcached.

mod concurrency;
mod faults;
mod multiprocess;
mod network;
mod races;
mod seed_bugs;
mod servers;
mod skew;
mod staged;
mod support;
mod units;
