//! What the storage hook needs of a shard: is a key live in RAM, install an item loaded
//! from disk, and a view of the item a command just wrote. Kept apart from the command
//! logic in `shard.rs`; used only when a hook is installed.

use memkit_types::Result;

use super::{Found, Shard};
use crate::hook::Loaded;
use crate::segment::{Header, STALE, WIN_SENT};

/// The state of an item right after a command, for the hook.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Snapshot<'a> {
    pub value: &'a [u8],
    pub flags: u32,
    /// Engine-relative expiry; 0 = never.
    pub exptime: u32,
    pub cas: u64,
    pub stale: bool,
    pub win_sent: bool,
}

impl Shard {
    /// Whether `key` is live in RAM; unlinks it if it is there but dead.
    pub(crate) fn is_live(&mut self, h: u64, key: &[u8], now: u32) -> bool {
        matches!(self.lookup(h, key, now), Found::Live(..))
    }

    /// Puts an item loaded from disk back into RAM, with its own CAS.
    pub(crate) fn install(
        &mut self,
        h: u64,
        key: &[u8],
        item: &Loaded,
        exptime: u32,
        now: u32,
    ) -> Result<()> {
        let hdr = Header {
            bits: if item.stale { STALE } else { 0 } | if item.win_sent { WIN_SENT } else { 0 },
            flags: item.flags,
            exptime,
            ext_cas: Some(item.cas),
            ..Header::default()
        };
        self.write_new(h, key, hdr, [&item.value, &[]], now)?;
        // A load is not a write: `total_items` counts stores, as memcached's does.
        self.stats.counters.total_items -= 1;
        Ok(())
    }

    /// The item under `key` as the last command left it: `Ok(Some)` if live, `Ok(None)` if
    /// absent, `Err(())` if it is there but dead (written or touched into the past).
    pub(crate) fn snapshot(
        &mut self,
        h: u64,
        key: &[u8],
        now: u32,
    ) -> std::result::Result<Option<Snapshot<'_>>, ()> {
        match self.lookup(h, key, now) {
            Found::Live(e, at) => Ok(Some(Snapshot {
                // An engine under a persistent layer has no flash tier (`Engine::with_hook`).
                value: match self.arena.value_of(e, &at) {
                    crate::arena::Value::Bytes(b) => b,
                    crate::arena::Value::Flash(_) => &[],
                },
                flags: at.header.flags,
                exptime: at.header.exptime,
                cas: self.cas_of(&at.header),
                stale: at.header.bits & STALE != 0,
                win_sent: at.header.bits & WIN_SENT != 0,
            })),
            Found::Dead(_) => Err(()),
            Found::Miss => Ok(None),
        }
    }

    /// The highest CAS this shard has derived from its write sequence so far.
    pub(crate) fn issued_cas(&self) -> u64 {
        (self.seq << self.shard_bits) | self.id
    }

    /// Makes every CAS this shard derives from now on greater than `floor` (after a
    /// restart: greater than anything issued before it).
    pub(crate) fn raise_cas_floor(&mut self, floor: u64) {
        let min_seq = (floor >> self.shard_bits) + 1;
        if self.seq < min_seq {
            self.seq = min_seq;
        }
    }
}
