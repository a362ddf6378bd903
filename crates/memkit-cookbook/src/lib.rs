//! memkit-cookbook: data structures that many processes on many servers update at once, built
//! only on memcached's atomic primitives (`add`, `incr`, `append`, `cas`, expiry).
//!
//! Every structure is generic over [`Memcache`](memkit_types::Memcache), so the same code
//! runs on the embedded store, on one memkitd or memcached server, or on a cluster (seed 000:
//! "if the in-process storage repeats memcached semantics, scaling out only means replacing
//! calls to it with calls to a server cluster").
//!
//! # Map
//! - [`structures::lock`]: [`Lock`] — `add` + TTL, owner token, checked unlock and extend,
//!   bounded wait with linear back-off, [`LockGuard`]. An *efficiency* lock, not a fencing lock.
//! - [`structures::counter`]: [`Counter`] (atomic, create-on-miss without lost increments) and
//!   [`ViewCounter`] (seeded from a source of truth on a miss).
//! - [`structures::visitors`]: [`VisitorCounter`] — current and shadow keys, period `T`.
//! - [`structures::online`]: [`OnlineCounter`] (N per-period keys, sliding sum) and
//!   [`OnlineUsers`] (per-user keys, user ids sharded into bucket lists).
//! - [`structures::event_log`]: [`EventLog`] — ring buffer of time-chunk keys, typed events,
//!   [`Poller`] for the `lastSeen` pattern.
//! - [`structures::array`]: [`Array`] (read-mostly, one key, gets/cas or lock) and
//!   [`AppendArray`] (`+x`/`-x` operations appended, folded on read, compacted, sharded).
//! - [`structures::table`]: [`Set`] (the seeds' "table") and [`Hash`](struct@Hash) — per-element keys for
//!   membership plus a key-list key.
//! - [`structures::queue`]: [`Queue`] (FIFO) and [`Stack`] (LIFO) over counters and slot keys.
//! - [`caching`]: part 2, caching (seeds 003–004) — [`caching::cache_key`], [`caching::Cache`]
//!   (`get_or_compute` with lock/lease/XFetch/jitter), tags, refresh and warm-up, the trace.
//! - [`codec`]: the value encodings (JSON records, decimal counters) and key naming.
//! - [`error`]: the [`Error`] type.
//! - `testing` (feature `testing`, and the crate's own tests): `Scripted`, a store wrapper
//!   that stops a caller at its n-th command of a kind until the test releases it, for
//!   staging races step by step.
//!
//! Each structure has a page in `docs/cookbook/` (the idea, its keys, its cost in round
//! trips, how it degrades when a key is evicted or a server dies).
//!
//! # Goals
//! - Correct under concurrency: no lost increments, no lost or duplicated events or queue
//!   elements while the keys survive; the seeds' pseudocode bugs are fixed and pinned by
//!   tests (`tests/cookbook/seed_bugs.rs`; the seeds are listed in `docs/sources.md`).
//! - Time is injected ([`Clock`](memkit_types::Clock)) wherever a structure depends on it, so
//!   tests advance a manual clock instead of sleeping.
//! - Honest degradation: every page says what is lost when memcached forgets a key.
//!
//! # Non-goals
//! - Durability. memcached may evict any key; these structures are as durable as the store
//!   under them (use memkit's persistent mode or MemcacheDB for data that must survive).
//! - Fencing. The lock cannot stop a paused process whose lock expired from writing.
//! - Runtime independence for waiting: the back-off sleeps use tokio's timer, so `Lock::lock`
//!   and the queue/stack waits must run inside a tokio runtime. Everything else is
//!   runtime-agnostic.

pub mod caching;
pub mod codec;
pub mod error;
pub mod structures;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use error::{Error, Result};
pub use structures::MAX_CLOCK_SKEW_SECS;
pub use structures::array::{AppendArray, Array};
pub use structures::counter::{Counter, ViewCounter};
pub use structures::event_log::{Event, EventLog, Poller};
pub use structures::lock::{Lock, LockGuard, LockOptions};
pub use structures::online::{OnlineCounter, OnlineUsers};
pub use structures::queue::{Queue, QueueOptions, Stack};
pub use structures::table::{Hash, Set};
pub use structures::visitors::VisitorCounter;
