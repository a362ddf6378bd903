//! The storage hook: how a persistent layer (memkit-persist) rides under the engine.
//!
//! Why a hook *under* the engine rather than a second backend beside it: every memcached
//! command is atomic because it runs under one shard lock (see `docs/locking.md`). A
//! persistent store must read the old version (from disk when RAM lost it), decide, and
//! write the new version with that same atomicity. Doing it under the shard lock the engine
//! already takes costs no extra lock and keeps the command semantics in one place: the
//! engine decides, the hook loads what RAM is missing and records what changed.
//!
//! With no hook installed (memcached mode) each command pays one predictable branch.
//!
//! Calls arrive with the key's shard locked: a hook must not call back into the engine.

use std::fmt::Debug;

use memkit_types::Result;

/// An item as the persistent layer stores it: what must survive a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value bytes.
    pub value: &'a [u8],
    /// Client flags.
    pub flags: u32,
    /// Absolute expiry (Unix seconds); `None` never expires.
    pub exptime_unix: Option<u64>,
    /// The item's CAS.
    pub cas: u64,
    /// Marked stale (`md ... I`, or a late `ms ... I`).
    pub stale: bool,
    /// A win token (`W`) was handed out for this version: later readers get `Z`. Kept on
    /// disk so an eviction or a restart does not hand out a second token.
    pub win_sent: bool,
}

/// An item loaded back into RAM (a RAM miss the disk can answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The value bytes.
    pub value: Vec<u8>,
    /// Client flags.
    pub flags: u32,
    /// Absolute expiry (Unix seconds); `None` never expires.
    pub exptime_unix: Option<u64>,
    /// The CAS the item had when written: kept, so tokens handed out before an eviction or
    /// a restart stay valid while the item is unchanged.
    pub cas: u64,
    /// Marked stale.
    pub stale: bool,
    /// A win token was handed out for this version.
    pub win_sent: bool,
}

/// What a command changed, told to the hook before the shard lock is released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<'a> {
    /// A new version of the item.
    Put {
        /// The item as it now is.
        record: Record<'a>,
        /// Only the metadata changed (TTL, stale mark): the item is not newer with respect
        /// to `flush_all`, so the hook keeps the write stamp of the version it replaces.
        meta_only: bool,
    },
    /// The key no longer exists (deleted, or a failed `set` removed it).
    Remove {
        /// The key.
        key: &'a [u8],
    },
}

/// A `flush_all`, as the hook must record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// Everything written so far is invalid now.
    Now,
    /// Items written up to and during Unix second `at` become invalid when it arrives.
    At(u64),
}

/// The persistent layer's side of the seam. All methods run with the key's shard locked
/// (`flush` with every shard locked), so per-key order on disk is the engine's order.
pub trait StoreHook: Send + Sync + Debug {
    /// A command found `key` missing from RAM: the stored item, if it is live at
    /// `now_unix`. An `Err` fails the command (the disk could not be read).
    fn load(&self, key: &[u8], now_unix: u64) -> Result<Option<Loaded>>;

    /// A command changed an item. `issued_cas` is the highest CAS the engine has handed out
    /// so far on this shard: the hook makes sure a restart never issues it again. An `Err`
    /// fails the command; the engine then drops the key from RAM so that the stored
    /// version, not the unrecorded one, is what the next command sees.
    fn changed(&self, change: &Change<'_>, issued_cas: u64) -> Result<()>;

    /// `flush_all`, called with every shard locked. An `Err` fails it and nothing is flushed.
    fn flush(&self, flush: Flush, now_unix: u64) -> Result<()>;
}
