//! The engine's side of the flash tier (`crate::flash`): reads that find a value on flash,
//! their completion, the fetch of a value a command needs, and compaction's questions.

use std::sync::Arc;

use memkit_flash::{FlashLoc, FlashStore, ReadError};
use memkit_types::{GetOptions, Result};

use super::Engine;
use crate::flash::{FlashRead, Got};
use crate::view::ItemView;

impl Engine {
    /// The flash tier's store, if the engine has one.
    pub fn flash_store(&self) -> Option<&Arc<FlashStore>> {
        self.flash.as_ref().map(|t| &t.store)
    }

    /// Lets the flash store's compaction ask this engine about the records it moves.
    pub fn attach_flash(self: &Arc<Self>) {
        if let Some(tier) = &self.flash {
            let me: Arc<dyn memkit_flash::Owner> = self.clone();
            tier.store.set_owner(Arc::downgrade(&me));
        }
    }

    /// [`Engine::get_view`] that does not wait for flash: an item whose value is on flash
    /// comes back as [`Got::Flash`], for the caller to read ([`FlashStore::submit`] or
    /// [`FlashStore::read`]) and finish with [`Engine::finish_flash_read`].
    pub fn get_or_flash<R>(
        &self,
        key: &[u8],
        opts: &GetOptions,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<Option<Got<R>>> {
        self.get_view_locked(key, opts, |v| match v.flash {
            None => Got::Now(f(v)),
            Some((loc, len, recache)) => Got::Flash(FlashRead::new(&v, loc, len, recache)),
        })
    }

    /// The location of `key`'s value if it is live and on flash, for a command that needs
    /// the value itself (`append`, `incr`...): read it, bring it back to RAM with
    /// [`Engine::finish_flash_read`] (the read returned recaches), then run the command.
    /// Counts nothing and changes nothing.
    pub fn flash_value(&self, key: &[u8]) -> Option<FlashRead> {
        self.flash.as_ref()?;
        let now = self.now();
        let (h, shard) = self.shard(key);
        let (loc, len) = shard.flash_value(h, key, now)?;
        Some(FlashRead::for_fetch(loc, len))
    }

    /// Reports how a flash read of `key` ended: counted; a failed one (the value gone or
    /// corrupt) unlinks the item's stub if it still points there, so later reads miss
    /// without reading; a good one may bring the value back to RAM. Returns the value if
    /// the read got it.
    pub fn finish_flash_read(
        &self,
        key: &[u8],
        read: &FlashRead,
        result: std::result::Result<Vec<u8>, ReadError>,
    ) -> Option<Vec<u8>> {
        let now = self.now();
        let (h, mut shard) = self.shard(key);
        match result {
            Ok(value) => {
                if read.recache {
                    shard.recache(h, key, read.loc, &value, now);
                }
                Some(value)
            }
            Err(e) => {
                shard.flash_read_failed(h, key, read.loc, matches!(e, ReadError::BadCrc));
                None
            }
        }
    }

    /// Brings `key`'s value back to RAM now, on this thread, if it is on flash: what the
    /// embedded engine does before a command that needs the value (`append`, `incr`...);
    /// memkitd reads it while the connection is parked instead (`Engine::flash_value`).
    /// A value that cannot be brought back leaves the command to answer as memcached does
    /// for its extstore items (`NOT_STORED`, non-numeric).
    pub(crate) fn fetch_from_flash(&self, key: &[u8]) {
        if let Some(read) = self.flash_value(key) {
            self.read_flash_now(key, &read);
        }
    }

    /// Reads a flash value now, on this thread (the embedded engine's reads).
    pub(crate) fn read_flash_now(&self, key: &[u8], read: &FlashRead) -> Option<Vec<u8>> {
        let store = self.flash_store()?;
        let result = store.read(read.loc, key);
        self.finish_flash_read(key, read, result)
    }
}

impl memkit_flash::Owner for Engine {
    fn wanted(&self, key: &[u8], at: FlashLoc) -> Option<bool> {
        let (h, shard) = self.shard(key);
        shard.flash_wanted(h, key, at)
    }

    fn moved(&self, key: &[u8], from: FlashLoc, to: FlashLoc) -> bool {
        let (h, mut shard) = self.shard(key);
        shard.flash_moved(h, key, from, to)
    }
}
