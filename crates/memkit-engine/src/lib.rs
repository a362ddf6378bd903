//! memkit-engine: memcached's semantics in-process — the store behind `memkitd` and the
//! embedded mode.
//!
//! Map:
//! - [`engine`]: [`Engine`] and [`EngineConfig`]: shards, time, the synchronous command API,
//!   the item size rule, statistics snapshots; `engine/crawl.rs`, dumps in bounded batches
//!   ([`Engine::crawl`], [`DumpCursor`]).
//! - `shard`: one lock's worth of store: links and unlinks items and writes their records;
//!   `shard/commands.rs` has every command's semantics (memcached 1.6's `do_store_item`,
//!   `do_add_delta`, the meta commands' N/R/I/W/X/Z rules), `shard/persist.rs` what a
//!   [`StoreHook`] needs, `shard/crawl.rs` a batch of a dump, in an order of keys that
//!   survives what happens between batches.
//! - `arena`: a shard's memory: segments (mapped, free, given back), out-of-line blocks of
//!   large values, the budget every byte counts against (plus three segments for the stubs of
//!   out-of-line values while a shard holds any), and item locations resolved to bytes.
//! - `index`: the hash index (key hash -> item location), a Robin Hood table that grows by
//!   eighths and deletes without tombstones, five bytes a bucket (location and tag share a
//!   word, split by the shard's `Layout`); the shard pays for its growth in its budget
//!   before it happens. Keys crowding one home grow it to at most 4 buckets a key; past
//!   that, the shard evicts the key left without a bucket.
//! - `policy`: eviction behind one trait and its contract (on insert, on access, next
//!   victim, keep or drop): [`EvictionPolicy::S3Fifo`] (with its ghost of 1-byte
//!   fingerprints) and [`EvictionPolicy::Sieve`], both over segments.
//! - `evict`: the mechanism under any policy: making room, compaction of dead bytes,
//!   emptying victims, proactive reclamation of expired items.
//! - `segment`: segment memory (anonymous mappings) and the compact item record.
//! - `numeric`: incr/decr's decimal parsing and rendering, as memcached does them.
//! - [`stats`]: counters with memcached's names, kept per shard (`ShardStats`: the
//!   snapshot, `stats reset`) and summed; size classes for `stats slabs`/`items`.
//! - [`hook`]: [`StoreHook`], the seam a persistent layer (memkit-persist) plugs into: it
//!   loads what RAM lost and records every change, under the engine's shard lock.
//! - [`embedded`]: [`Embedded`], the engine behind the [`memkit_types::Memcache`] trait.
//! - [`flash`]: the flash tier under RAM ([`FlashTier`], memcached's extstore): values
//!   eviction lets go written to a [`memkit_flash::FlashStore`] with their stubs kept in
//!   RAM, and what a read that finds a value there hands back ([`FlashRead`], [`Got`]);
//!   `engine/flash.rs` is the engine's side ([`Engine::get_or_flash`], the fetch of a
//!   value a command needs, compaction's questions), `shard/flash.rs` a shard's (the stub
//!   segments).
//! - `view`: [`ItemView`], what a read sees of an item while its shard is locked.
//! - `engine::restart`, `shard::restart`: warm restart ([`Engine::warm_save`],
//!   [`Engine::warm_restore`]): every live item written to a file and read back, CAS
//!   values included, by a new process with the same limits.
//!
//! Goals: exact memcached semantics; a real memory bound (every byte held counts); small
//! per-item overhead (4-10 B of record header plus 6-7 B of index per item); a better hit
//! ratio than LRU at equal memory; no global lock. Non-goals: persistence (memkit-persist),
//! the wire protocol (memkit-protocol), threads of its own (callers run
//! [`Engine::reclaim_expired`] on their own schedule; [`Embedded`] can spawn one).
//!
//! Locking rules are in `docs/locking.md`: one mutex per shard, held for one command, never
//! two at once.

mod arena;
pub mod embedded;
pub mod engine;
mod evict;
pub mod flash;
pub mod hook;
mod index;
mod numeric;
mod policy;
mod segment;
mod shard;
pub mod stats;
mod view;

pub use embedded::Embedded;
pub use engine::{
    CrawledItem, DumpCursor, Engine, EngineConfig, EvictHook, Evicted, Prefetch, WarmError,
    WarmRestored, WarmSaved,
};
pub use flash::{FlashRead, FlashTier, Got};
pub use hook::{Change, Flush, Loaded, Record, StoreHook};
pub use memkit_flash;
pub use policy::EvictionPolicy;
pub use stats::{ClassCounters, ClassStats, Counters, EngineStats};
pub use view::ItemView;
