//! memkit-cookbook's integration tests, one binary (fewer links on small machines):
//! - `units`: each structure on the embedded store with a manual clock;
//! - `concurrency`: many tokio tasks hammer one structure; results are exact;
//! - `faults`: keys evicted, deleted or flushed mid-way; each structure degrades as its doc
//!   page says;
//! - `seed_bugs`: one test per pseudocode flaw of the seeds (SPEC.md), pinning the fix;
//! - `multiprocess`: several OS processes (this binary, re-run as workers) against memkitd
//!   and, when installed, real memcached, through the test-only text client in `textclient`.

mod concurrency;
mod faults;
mod multiprocess;
mod seed_bugs;
mod support;
mod textclient;
mod units;
