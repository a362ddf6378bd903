//! The flash tier under RAM (memcached's extstore; memkitd's `-o ext_path`).
//!
//! When eviction is about to drop an item whose value is out of line and longer than
//! `ext_item_size`, the value is written to a [`FlashStore`] instead and only its RAM block
//! is freed: the item's record stays as a stub (key, flags, TTL, CAS, policy bits), moved to
//! the segments of stubs beside the eviction policy (`shard/flash.rs`), and its value slot
//! holds the value's location on flash (`arena::Large::Flash`). Every command finds and
//! judges the item in RAM exactly as before; only the value bytes are elsewhere. So:
//! - deletes, overwrites, expiry and flushes never touch the disk: the stub goes, and its
//!   bytes on flash are counted dead for compaction;
//! - a read of such an item does not block: [`crate::Engine::get_or_flash`] hands back a
//!   [`FlashRead`] (everything the reply needs but the value), the caller reads the value
//!   where it likes (memkitd: a reader thread, while the connection is parked) and reports
//!   with [`crate::Engine::finish_flash_read`]. [`crate::Engine::get_view`] reads
//!   synchronously, for the embedded engine;
//! - a read that finds the value gone (its page evicted or reclaimed) or corrupt is a miss
//!   and a counter (`miss_from_extstore`, `badcrc_from_extstore`), and its stub is unlinked;
//! - one read in `ext_recache_rate` brings the value back to RAM, and its stub back into the
//!   policy's segments;
//! - `append`, `prepend`, `incr` and `decr` need the value itself: one on flash is brought
//!   back to RAM first ([`crate::Engine::flash_value`]; memkitd reads it while the
//!   connection is parked, the embedded engine on the caller's thread). memcached refuses
//!   them for its extstore items (`NOT_STORED`, non-numeric), which is what they answer here
//!   only when the value cannot be brought back;
//! - stubs are paid for in the budget: a segment of them left half dead is compacted, and
//!   the oldest segment is dropped (its values with it) when stubs hold more than half the
//!   budget or nothing else is left to evict.
//!
//! Compaction (in the store's thread) asks the engine, through [`memkit_flash::Owner`],
//! whether a record it found is still wanted and tells it where a rescued one went.

use std::fmt;
use std::sync::Arc;

use memkit_flash::{FlashLoc, FlashStore};
use memkit_types::Ttl;

use crate::view::ItemView;

/// The flash tier and the `ext_*` settings the engine applies.
#[derive(Clone)]
pub struct FlashTier {
    /// Where values go.
    pub store: Arc<FlashStore>,
    /// `ext_item_size`: values longer than this may go to flash (shorter ones are dropped
    /// from RAM as without a tier).
    pub item_size: usize,
    /// `ext_item_age`: values idle this many seconds go to flash without memory pressure
    /// ([`crate::Engine::flash_walk`]); `u32::MAX` (memcached's default): only when eviction
    /// would drop them.
    pub item_age: u32,
    /// `ext_low_ttl`: items with less TTL left than this are not worth the write.
    pub low_ttl: u32,
    /// `ext_recache_rate`: one flash read in this many brings its value back to RAM (0:
    /// never).
    pub recache_rate: u32,
}

impl FlashTier {
    /// The tier over `store` with memcached's defaults (`ext_item_size` 512, no age limit,
    /// no low-TTL rule, recache one read in 2000).
    pub fn new(store: Arc<FlashStore>) -> FlashTier {
        FlashTier {
            store,
            item_size: 512,
            item_age: u32::MAX,
            low_ttl: 0,
            recache_rate: 2000,
        }
    }
}

impl fmt::Debug for FlashTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlashTier")
            .field("item_size", &self.item_size)
            .field("item_age", &self.item_age)
            .field("low_ttl", &self.low_ttl)
            .field("recache_rate", &self.recache_rate)
            .finish_non_exhaustive()
    }
}

/// A read whose value is on flash: the item as the read saw it (under the shard lock,
/// with the read's touches, bumps and win tokens applied), and where its value is.
#[derive(Debug, Clone)]
pub struct FlashRead {
    /// Where the value is.
    pub loc: FlashLoc,
    /// The value's length.
    pub len: usize,
    flags: u32,
    cas: u64,
    ttl: Ttl,
    ttl_before: Ttl,
    fetched: bool,
    last_access: u32,
    win: bool,
    stale: bool,
    win_taken: bool,
    /// This read brings the value back to RAM.
    pub(crate) recache: bool,
}

impl FlashRead {
    pub(crate) fn new(v: &ItemView<'_>, loc: FlashLoc, len: usize, recache: bool) -> FlashRead {
        FlashRead {
            loc,
            len,
            flags: v.flags,
            cas: v.cas,
            ttl: v.ttl,
            ttl_before: v.ttl_before,
            fetched: v.fetched,
            last_access: v.last_access,
            win: v.win,
            stale: v.stale,
            win_taken: v.win_taken,
            recache,
        }
    }

    /// A read of the value alone, brought back to RAM for a command that needs it
    /// (`Engine::flash_value`): the item's metadata is not reported.
    pub(crate) fn for_fetch(loc: FlashLoc, len: usize) -> FlashRead {
        FlashRead {
            loc,
            len,
            flags: 0,
            cas: 0,
            ttl: Ttl::Never,
            ttl_before: Ttl::Never,
            fetched: false,
            last_access: 0,
            win: false,
            stale: false,
            win_taken: false,
            recache: true,
        }
    }

    /// The view the read would have had with the value in RAM.
    pub fn view<'a>(&self, key: &'a [u8], value: &'a [u8]) -> ItemView<'a> {
        ItemView {
            key,
            value,
            flags: self.flags,
            cas: self.cas,
            ttl: self.ttl,
            ttl_before: self.ttl_before,
            created: false,
            fetched: self.fetched,
            last_access: self.last_access,
            win: self.win,
            stale: self.stale,
            win_taken: self.win_taken,
            flash: None,
        }
    }
}

/// What [`crate::Engine::get_or_flash`] found.
#[derive(Debug)]
pub enum Got<R> {
    /// The item, handed to the caller's function while the shard was locked.
    Now(R),
    /// The item, whose value must be read from flash first.
    Flash(FlashRead),
}
