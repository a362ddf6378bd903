//! Eviction policies: which segment an eviction empties, and what happens to each live item
//! in it.
//!
//! The shard's memory is log-structured (see `segment.rs`): records are appended to open
//! *head* segments and memory comes back one whole segment at a time. A policy therefore
//! orders segments, not items, and decides per item only when the segment holding it is
//! emptied: keep it (the shard copies it into the policy's keep head, with the bits the
//! policy returns) or drop it. Two implementations:
//! - [`S3Fifo`] (Yang et al., SOSP'23): a small probation queue, a main queue and a ghost
//!   of recently dropped keys — the default;
//! - [`Sieve`] (Zhang et al., NSDI'24): one queue and a hand, survivors kept in place.
//!
//! [`ShardPolicy`] dispatches between them with a `match`: the engine's public types stay
//! free of a type parameter, and the two calls on the hot path (`on_access` on a hit,
//! `on_insert` and `write_head` on a store) cost a predictable branch each.

mod ghost;
mod s3fifo;
mod sieve;

pub(crate) use s3fifo::S3Fifo;
pub(crate) use sieve::Sieve;

/// The eviction policy of an engine's shards ([`crate::EngineConfig::eviction`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EvictionPolicy {
    /// S3-FIFO over segments: new items on probation in a small queue, items read there
    /// promoted to a main queue (a CLOCK with a 2-bit counter), a ghost of the keys probation
    /// dropped. The default.
    #[default]
    S3Fifo,
    /// SIEVE over segments: one FIFO queue and a hand that sweeps it oldest to newest,
    /// keeping visited items in place (bit cleared) and dropping the rest.
    Sieve,
}

/// A segment an eviction empties, as the policy handed it out. `queue` is the policy's own
/// tag (S3-FIFO: which queue it came from); the shard only passes it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Victim {
    pub seg: u32,
    pub queue: u8,
}

/// The contract between a shard and its eviction policy.
///
/// **What the policy owns.** The order of the shard's segments: its queues of *sealed*
/// segments (full, no longer written) and its two open *heads*: the write head, where new
/// records are appended, and the keep head, where items an eviction keeps are copied. It
/// also owns any metadata of its own (S3-FIFO's ghost), whose bytes the shard charges to its
/// budget. It sees segments as ids and items as their key hash and policy bits (the
/// `VISITED` and `HOT` bits of the record header); it never reads or writes segment memory,
/// the index, the budget or the statistics, and it never allocates a segment: the shard maps
/// one and hands it over with [`Self::open_write_head`] or [`Self::open_keep_head`].
///
/// **When each hook is called** (always under the shard lock, never re-entrantly):
/// - *on write*: [`Self::on_insert`] when a key with no live version is stored (new, or
///   evicted, expired or deleted since); its result is OR-ed into the new record's bits. An
///   overwrite keeps nothing of the old record's bits and does not call it. The record goes
///   to [`Self::write_head`]; when that is full the shard seals it into a queue
///   ([`Self::seal_write_head`], so the eviction that follows may take it), maps a segment
///   (which may evict) and installs it with [`Self::open_write_head`].
/// - *on access*: [`Self::on_access`] on a read hit (`get`, `gat`, `mg` without its `u`
///   flag); the bits it returns are written into the record in place. The shard
///   also sets `VISITED` on its own, never `HOT`, for memcached's bumps (a `touch`, a
///   failed `add`) and on an item it is about to rewrite, so that the eviction making room
///   for the rewrite keeps it: a policy must treat `VISITED` as "used since last decided".
/// - *next victim*: [`Self::next_victim`] when the shard must free a segment and has no
///   sparse segment to compact. It removes the victim from the policy's queues; when none
///   is sealed it seals its heads first, and it answers `None` only when it holds no
///   segment at all.
/// - *keep/promote/drop*: [`Self::decide`] once for every live, unexpired item of the
///   victim, oldest first: `Some(bits)` keeps the item (the shard copies it to
///   [`Self::keep_head`], opening a fresh one with [`Self::open_keep_head`] when needed, and
///   writes `bits`), `None` drops it. Then exactly one of: the item was copied, or
///   [`Self::on_evicted`] is called (also for an item the policy kept but no segment could
///   take). In no-evict mode (`-M`) the shard keeps what the policy would drop, with its
///   bits unchanged.
/// - *after the victim*: [`Self::emptied`] once the victim holds nothing live (the shard
///   frees it), or [`Self::put_back`] when the eviction stopped part way (the write it made
///   room for fits) or could not move an item in no-evict mode: the segment returns where
///   it was taken from and the next eviction resumes it.
/// - *compaction and expiry*: the shard walks the sealed segments by index
///   ([`Self::sealed_len`], [`Self::sealed_at`]) and takes one out with
///   [`Self::take_sealed`]: to compact it (every live item kept, bits unchanged, copied to
///   the keep head, no `decide`, then [`Self::emptied`]), or to free it once nothing live
///   is left in it.
///
/// **Invariants.** Every mapped segment that holds records is in exactly one place: a queue,
/// a head, or out as the one victim being emptied. A decision never depends on the item's
/// bytes beyond its bits. A policy never asks for memory: an eviction's copies may overdraw
/// the budget by two segments, which the shard repays by unmapping the emptied victim.
pub(crate) trait Policy {
    /// Policy bits for a record of a key with no live version (hash `h`).
    fn on_insert(&mut self, h: u64) -> u8;
    /// The record's bits after a read hit.
    fn on_access(&self, bits: u8) -> u8;
    /// The open segment new records are appended to.
    fn write_head(&self) -> Option<u32>;
    /// Seals the write head into a queue, if there is one.
    fn seal_write_head(&mut self);
    /// Makes the empty segment `fresh` the write head, sealing the old one if still open.
    fn open_write_head(&mut self, fresh: u32);
    /// The open segment kept items are copied to.
    fn keep_head(&self) -> Option<u32>;
    /// Makes the empty segment `fresh` the keep head, sealing the old one.
    fn open_keep_head(&mut self, fresh: u32);
    /// The next segment to empty, taken out of the queues.
    fn next_victim(&mut self) -> Option<Victim>;
    /// Keep (`Some(new bits)`) or drop (`None`) a live item of `victim`.
    fn decide(&mut self, victim: &Victim, bits: u8) -> Option<u8>;
    /// An item of `victim` (hash `h`) was dropped.
    fn on_evicted(&mut self, victim: &Victim, h: u64);
    /// `victim` holds nothing live any more and leaves the policy.
    fn emptied(&mut self, victim: &Victim);
    /// `victim` still holds live items: back where it came from.
    fn put_back(&mut self, victim: Victim);
    /// Sealed segments.
    fn sealed_len(&self) -> usize;
    /// The `i`th sealed segment, in the policy's order (oldest first within a queue).
    fn sealed_at(&self, i: usize) -> u32;
    /// Every sealed segment in the order of [`Self::sealed_at`], as up to four slices: a
    /// walk over all of them without a lookup each.
    fn sealed_slices(&self) -> [&[u32]; 4];
    /// Takes the `i`th sealed segment out of its queue.
    fn take_sealed(&mut self, i: usize) -> Victim;
    /// The open heads.
    fn heads(&self) -> [Option<u32>; 2];
    /// The oldest sealed segment of each queue (for the age `stats` reports).
    fn tails(&self) -> [Option<u32>; 2];
    /// Bytes of the policy's own metadata.
    fn bytes(&self) -> usize;
    /// Bytes [`Self::resize`] will hold for an index of `capacity` entries.
    fn bytes_for(&self, capacity: usize) -> usize;
    /// Sizes the metadata for an index of `capacity` entries.
    fn resize(&mut self, capacity: usize);
}

/// The policy a shard runs, picked by [`EvictionPolicy`].
#[derive(Debug)]
pub(crate) enum ShardPolicy {
    S3Fifo(S3Fifo),
    Sieve(Sieve),
}

impl ShardPolicy {
    pub fn new(which: EvictionPolicy) -> ShardPolicy {
        match which {
            EvictionPolicy::S3Fifo => ShardPolicy::S3Fifo(S3Fifo::default()),
            EvictionPolicy::Sieve => ShardPolicy::Sieve(Sieve::default()),
        }
    }
}

/// Forwards each trait method to the variant's implementation.
macro_rules! dispatch {
    () => {};
    (fn $name:ident(&mut self $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?; $($rest:tt)*) => {
        #[inline]
        fn $name(&mut self $(, $arg: $ty)*) $(-> $ret)? {
            match self {
                ShardPolicy::S3Fifo(p) => p.$name($($arg),*),
                ShardPolicy::Sieve(p) => p.$name($($arg),*),
            }
        }
        dispatch!($($rest)*);
    };
    (fn $name:ident(&self $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?; $($rest:tt)*) => {
        #[inline]
        fn $name(&self $(, $arg: $ty)*) $(-> $ret)? {
            match self {
                ShardPolicy::S3Fifo(p) => p.$name($($arg),*),
                ShardPolicy::Sieve(p) => p.$name($($arg),*),
            }
        }
        dispatch!($($rest)*);
    };
}

impl Policy for ShardPolicy {
    dispatch! {
        fn on_insert(&mut self, h: u64) -> u8;
        fn on_access(&self, bits: u8) -> u8;
        fn write_head(&self) -> Option<u32>;
        fn seal_write_head(&mut self);
        fn open_write_head(&mut self, fresh: u32);
        fn keep_head(&self) -> Option<u32>;
        fn open_keep_head(&mut self, fresh: u32);
        fn next_victim(&mut self) -> Option<Victim>;
        fn decide(&mut self, victim: &Victim, bits: u8) -> Option<u8>;
        fn on_evicted(&mut self, victim: &Victim, h: u64);
        fn emptied(&mut self, victim: &Victim);
        fn put_back(&mut self, victim: Victim);
        fn sealed_len(&self) -> usize;
        fn sealed_at(&self, i: usize) -> u32;
        fn sealed_slices(&self) -> [&[u32]; 4];
        fn take_sealed(&mut self, i: usize) -> Victim;
        fn heads(&self) -> [Option<u32>; 2];
        fn tails(&self) -> [Option<u32>; 2];
        fn bytes(&self) -> usize;
        fn bytes_for(&self, capacity: usize) -> usize;
        fn resize(&mut self, capacity: usize);
    }
}
