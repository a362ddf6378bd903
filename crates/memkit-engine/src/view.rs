//! What a read sees of an item ([`ItemView`]), before the shard lock is released: shared by
//! the shard that fills it in, the engine that hands it out, and the flash tier that fills
//! in a value read later.

use memkit_types::Ttl;

/// A borrowed view of an item during a read, before the shard lock is released.
#[derive(Debug, Clone, Copy)]
pub struct ItemView<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value bytes.
    pub value: &'a [u8],
    /// Client flags.
    pub flags: u32,
    /// CAS token.
    pub cas: u64,
    /// Remaining TTL.
    pub ttl: Ttl,
    /// Remaining TTL before this read's `T` (for a vivified item: `Never`, as memcached's
    /// stub starts without one): what `mg` reports when its `t` comes before `T`/`N`.
    pub ttl_before: Ttl,
    /// This read created the item (`N` on a miss).
    pub created: bool,
    /// Fetched before this request (`h`).
    pub fetched: bool,
    /// Seconds since last access (`l`); see `docs/protocol-notes.md` for how it is derived.
    pub last_access: u32,
    /// `W`.
    pub win: bool,
    /// `X`.
    pub stale: bool,
    /// `Z`.
    pub win_taken: bool,
    /// The value is on flash (`value` is empty): where, its length, and whether this read
    /// recaches it.
    pub(crate) flash: Option<(memkit_flash::FlashLoc, usize, bool)>,
}

impl<'a> ItemView<'a> {
    /// A view of `item`, read from another server (memkitd's router renders a backend's
    /// item as it renders its own): what the item does not say (not asked for, or nothing
    /// a reply carries) reads as a fresh item's.
    pub fn of_item(key: &'a [u8], item: &'a memkit_types::Item) -> ItemView<'a> {
        let ttl = item.ttl.unwrap_or(Ttl::Never);
        ItemView {
            key,
            value: &item.value,
            flags: item.flags,
            cas: item.cas,
            ttl,
            ttl_before: ttl,
            created: false,
            fetched: item.fetched.unwrap_or(false),
            last_access: item.last_access.unwrap_or(0),
            win: item.win,
            stale: item.stale,
            win_taken: item.win_taken,
            flash: None,
        }
    }
}
