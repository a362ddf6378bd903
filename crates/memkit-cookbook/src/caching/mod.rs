//! Caching done right (seeds 003 and 004): canonical keys, cache-aside with dog-pile
//! protection, XFetch, leases, TTL jitter, background refresh and warm-up, tag invalidation
//! with replica-lag routing, and the per-key debug trace.
//!
//! # Map
//! - [`key`]: [`cache_key`] — readable prefix + SHA-256 of the canonically serialized options.
//! - [`policy`]: [`Policy`] (freshness TTL, jitter, grace, tags, replica lag, XFetch beta),
//!   [`Protection`] (`None`, `Lock` = soft expiry + rebuild lock, `Lease` = `mg N/R` with
//!   `W/X/Z`), [`OnBusy`] (wait or serve stale), [`WaitOptions`], [`Copies`] (hot-key
//!   duplication and replicated keys: copies `<key>#<i>`, see [`copy_key`]).
//! - [`cache`]: [`Cache`] — [`Cache::get_or_compute`] / [`Cache::fetch`], the stored record
//!   format, [`LoadContext`] (why the loader runs, whether to read the DB master), counters,
//!   [`CacheBuilder::placement`] (the backend's key placement, so copies land on distinct
//!   servers).
//! - [`tags`]: [`Tags`] — millisecond tag versions, one multi-get per read, invalidation,
//!   [`Tags::must_read_master`].
//! - [`refresh`]: background refresh of registered keys, warm-up from a key list.
//! - [`stampede`]: a harness that sends N concurrent callers at one key and reports loads,
//!   sources and latencies (the tests and `examples/stampede.rs` use it).
//! - [`trace`]: the `MLWUH` trace letters, [`FileTrace`] for `tail -f`, [`MemoryTrace`],
//!   [`TracingTrace`]; the file format is documented there.
//!
//! One page per technique lives in `docs/cookbook/caching-*.md`; the stampede numbers are in
//! `docs/cookbook/caching-stampede.md` (printed by `cargo run --example stampede`).
//!
//! # Guarantees and limits
//! - With [`Protection::Lock`] or [`Protection::Lease`] and one store, the loader of an
//!   expired key runs once per rebuild while the lock (lease) lives, whatever the number of
//!   callers; losers get the stale value at once or after at most [`WaitOptions::max_wait`].
//!   With no stale value, by default ([`OnTimeout::Contend`]) they keep contending for up to
//!   `lock_ttl` + 1 s more, so a slow winner's value reaches them and a dead winner's lock
//!   expires into exactly one new winner: one load per lock period, never a herd.
//!   Like the part-1 [`Lock`](crate::Lock), this is an *efficiency*
//!   lock: if the lock key is evicted or its TTL runs out during a slow load, a second
//!   rebuild may run. The data is still a cache: a duplicate rebuild is wasted work, not
//!   corruption.
//! - Tag checks cost one multi-get per read (none with the process-local version cache).
//!   A value is never validated by a missing tag key.
//! - Time comes from an injected [`Clock`](memkit_types::Clock); soft expiry and tag
//!   versions have millisecond precision, memcached's own TTLs whole seconds.

pub mod cache;
pub mod key;
pub mod policy;
pub mod refresh;
pub mod stampede;
pub mod tags;
pub mod trace;

pub use cache::{
    Cache, CacheBuilder, CacheStats, FLAG_RECORD, Fetched, LoadContext, Reason, ServerOf, Source,
    StatsSnapshot,
};
pub use key::{Unordered, cache_key, canonical, unordered};
pub use policy::{
    Copies, MAX_COPIES, OnBusy, OnTimeout, Policy, Protection, WaitOptions, copy_key,
};
pub use refresh::{RefreshReport, WarmUpReport};
pub use tags::{TagVersion, Tags, must_read_master_at, tag_key};
pub use trace::{FileTrace, Letter, MemoryTrace, Tee, TraceSink, TracingTrace};

#[cfg(test)]
mod tests;

/// The `docs/cookbook/caching-*.md` pages, compiled as doctests so their examples stay true.
#[cfg(doctest)]
mod doc_pages {
    #[doc = include_str!("../../../../docs/cookbook/caching-keys.md")]
    struct Keys;
    #[doc = include_str!("../../../../docs/cookbook/caching-get-or-compute.md")]
    struct GetOrCompute;
    #[doc = include_str!("../../../../docs/cookbook/caching-xfetch.md")]
    struct XFetch;
    #[doc = include_str!("../../../../docs/cookbook/caching-leases.md")]
    struct Leases;
    #[doc = include_str!("../../../../docs/cookbook/caching-refresh.md")]
    struct Refresh;
    #[doc = include_str!("../../../../docs/cookbook/caching-tags.md")]
    struct Tags;
    #[doc = include_str!("../../../../docs/cookbook/caching-trace.md")]
    struct Trace;
    #[doc = include_str!("../../../../docs/cookbook/caching-stampede.md")]
    struct Stampede;
    #[doc = include_str!("../../../../docs/cookbook/caching-hot-keys.md")]
    struct HotKeys;
}
