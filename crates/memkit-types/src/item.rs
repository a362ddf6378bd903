//! Items and the per-command options.
//!
//! The option structs mirror the flags of memcached 1.6's meta commands (`doc/protocol.txt`):
//! each field names the flag it stands for, so a backend that speaks the meta protocol maps
//! them one to one and the embedded engine implements the same semantics in-process.

use bytes::Bytes;

use crate::{Cas, Flags, REALTIME_MAXDELTA};

/// An expiry time with memcached's exact meaning.
///
/// - `0` never expires;
/// - `1..=2_592_000` (30 days) is relative: that many seconds from now;
/// - anything larger is an absolute Unix time (in the past: already expired);
/// - a negative value expires at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Exptime(pub i64);

impl Exptime {
    /// Never expires.
    pub const NEVER: Exptime = Exptime(0);
    /// Already expired: the item is invisible as soon as it is stored.
    pub const EXPIRED: Exptime = Exptime(-1);

    /// `secs` seconds from now. Values above 30 days are clamped to 30 days, because memcached
    /// would read a larger number as an absolute Unix time.
    pub fn secs(secs: u32) -> Exptime {
        Exptime(i64::from(secs).min(REALTIME_MAXDELTA))
    }

    /// At the absolute Unix time `unix_secs`.
    pub fn at_unix(unix_secs: u64) -> Exptime {
        Exptime(unix_secs.min(i64::MAX as u64) as i64)
    }

    /// The absolute Unix second at which an item stored at `now_unix` expires; `None` for
    /// never. An already-expired time yields a deadline at or before `now_unix`.
    pub fn deadline(self, now_unix: u64) -> Option<u64> {
        match self.0 {
            0 => None,
            t if t < 0 => Some(now_unix.saturating_sub(1)),
            t if t <= REALTIME_MAXDELTA => Some(now_unix + t as u64),
            t => Some(t as u64),
        }
    }

    /// `flush_all <arg>`'s argument as seconds from `now_unix` (0: flush now). The argument
    /// reads like an expiry time: up to 30 days relative, above that an absolute Unix time.
    /// An absolute time already past flushes now, as memcached 1.6 does (its `oldest_cas`
    /// catches every item stored so far). memcached alone turns a time before its own start
    /// into no flush at all; memkit, which keeps no start time in this API, flushes then too.
    pub fn flush_delay(arg: u32, now_unix: u64) -> u32 {
        match Exptime(i64::from(arg)).deadline(now_unix) {
            Some(at) if arg > 0 => at.saturating_sub(now_unix).min(u64::from(u32::MAX)) as u32,
            _ => 0,
        }
    }
}

impl From<u32> for Exptime {
    fn from(secs: u32) -> Self {
        Exptime(i64::from(secs))
    }
}

/// Remaining time to live, as `mg ... t` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ttl {
    /// The item has no expiry (`t-1`).
    Never,
    /// Seconds until expiry.
    Secs(u32),
}

/// An item as a read returns it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Item {
    /// The value bytes.
    pub value: Bytes,
    /// Client flags.
    pub flags: Flags,
    /// The CAS token of this version of the item.
    pub cas: Cas,
    /// Remaining TTL (`t`); `None` when the backend was not asked for metadata.
    pub ttl: Option<Ttl>,
    /// Whether the item had been fetched before this request (`h`); `None` when not asked.
    pub fetched: Option<bool>,
    /// Seconds since the item was last accessed (`l`); `None` when not asked.
    pub last_access: Option<u32>,
    /// `W`: this caller won the right to recompute the item (vivify, recache or stale).
    pub win: bool,
    /// `X`: the item was marked stale (`md ... I`, or a stale `ms ... I`).
    pub stale: bool,
    /// `Z`: another caller already holds the win token for this item.
    pub win_taken: bool,
}

/// Options of a read: `get`, `gets`, `gat`, `gats`, `touch` and `mg` in one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetOptions {
    /// `T`: update the TTL on a hit (`gat`).
    pub touch: Option<Exptime>,
    /// `N`: on a miss, create an empty item with this TTL and hand this caller the win.
    pub vivify: Option<Exptime>,
    /// `R`: on a hit whose remaining TTL is below this many seconds, hand out the win once.
    pub recache_below: Option<u32>,
    /// `t`, `h`, `l`: fill in [`Item::ttl`], [`Item::fetched`] and [`Item::last_access`].
    pub meta: bool,
    /// With `meta` and `touch`: `t` came before `T` in the request, so [`Item::ttl`] is the
    /// TTL the item had before this read's touch (meta flags act in their order); otherwise
    /// the TTL after it.
    pub ttl_before_touch: bool,
    /// With `meta` and `vivify`: `t` came before `N`, so an item this read creates reports
    /// the TTL it had before `N` gave it one (none).
    pub ttl_before_vivify: bool,
    /// `u`: do not count this read as an access (no eviction-policy bump, no fetched mark).
    pub no_bump: bool,
    /// `E`: the CAS value to give an item this read creates (with `vivify`).
    pub new_cas: Option<Cas>,
    /// A classic text-protocol read (`get`/`gets`/`gat`/`gats`): memcached hands out win
    /// tokens only to meta reads, so a classic read of a stale item neither wins nor takes
    /// the token from the next `mg`.
    pub classic: bool,
    /// A replicated node's read of its state machine's engine (see [`ReplicaRead`]).
    pub replica: Option<ReplicaRead>,
}

/// How a node of a replicated group reads: its engine runs on the log's clock, which stands
/// still between writes and must not be moved by a read (see memkit-raft's `clock`), and
/// what changes the engine comes through the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaRead {
    /// Judge expiry and a pending delayed `flush_all` at this Unix second when it is later
    /// than the engine's clock, and report TTLs against it, without removing what is dead
    /// only then.
    pub at_unix: u64,
    /// `Some`: the read comes after its own touch (`gat`, `mg T`), applied through the log,
    /// which counted it as memcached counts such a read: this read counts nothing, and
    /// reports as the TTL before the touch the item's absolute expiry then (`Some(None)`:
    /// it had none).
    pub touched_from: Option<Option<u64>>,
}

impl GetOptions {
    /// A read that also sets the TTL, as `gat` does.
    pub fn touch(exptime: Exptime) -> Self {
        GetOptions {
            touch: Some(exptime),
            ..Default::default()
        }
    }
}

/// Which storage command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StoreMode {
    /// Store unconditionally (`set`, `ms MS`).
    #[default]
    Set,
    /// Store only if absent (`add`, `ms ME`).
    Add,
    /// Store only if present (`replace`, `ms MR`).
    Replace,
    /// Add the data after the existing value (`append`, `ms MA`); keeps flags and TTL.
    Append,
    /// Add the data before the existing value (`prepend`, `ms MP`); keeps flags and TTL.
    Prepend,
}

/// Options of a store (`set`/`add`/`replace`/`append`/`prepend`/`cas`/`ms`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// The storage command.
    pub mode: StoreMode,
    /// Client flags (`F`); ignored by append/prepend, which keep the item's flags.
    pub flags: Flags,
    /// Expiry (`T`); ignored by append/prepend, which keep the item's expiry.
    pub exptime: Exptime,
    /// `C`: store only if the item's CAS equals this (`cas` command).
    pub cas: Option<Cas>,
    /// `I`: with `cas`, a token *older* than the item's is accepted but the stored item is
    /// marked stale.
    pub invalidate: bool,
    /// `N`: in append/prepend mode, create the item from the data on a miss, with this TTL.
    pub vivify: Option<Exptime>,
    /// `E`: use this CAS value for the new item instead of the next counter value.
    pub new_cas: Option<Cas>,
}

impl StoreOptions {
    /// Options for `mode` with `flags` and `exptime`.
    pub fn new(mode: StoreMode, flags: Flags, exptime: Exptime) -> Self {
        StoreOptions {
            mode,
            flags,
            exptime,
            ..Default::default()
        }
    }
}

/// Options of a delete (`delete`, `md`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `C`: delete only if the item's CAS equals this.
    pub cas: Option<Cas>,
    /// `I`: do not remove; mark stale, bump the CAS and release the win token, so the next
    /// reader wins the recompute and others may be served the stale value.
    pub invalidate: bool,
    /// `T` (with `invalidate`): the new TTL of the stale item.
    pub stale_ttl: Option<Exptime>,
    /// `x`: replace the value with an empty one, keeping the item (a tombstone).
    pub remove_value: bool,
    /// `E`: CAS value to set when the item is marked stale.
    pub new_cas: Option<Cas>,
}

/// Increment or decrement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ArithMode {
    /// Add, wrapping at 2^64.
    #[default]
    Incr,
    /// Subtract, stopping at 0.
    Decr,
}

/// Options of an arithmetic command (`incr`, `decr`, `ma`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArithOptions {
    /// `M`: incr or decr.
    pub mode: ArithMode,
    /// `D`: the delta (default 1).
    pub delta: u64,
    /// `N` + `J`: on a miss, create the item holding `initial` with this TTL.
    pub vivify: Option<(u64, Exptime)>,
    /// `C`: apply only if the item's CAS equals this.
    pub cas: Option<Cas>,
    /// `T`: on success, set the TTL.
    pub update_ttl: Option<Exptime>,
    /// `E`: CAS value for the modified item.
    pub new_cas: Option<Cas>,
}

impl Default for ArithOptions {
    fn default() -> Self {
        ArithOptions {
            mode: ArithMode::Incr,
            delta: 1,
            vivify: None,
            cas: None,
            update_ttl: None,
            new_cas: None,
        }
    }
}

impl ArithOptions {
    /// `incr key delta`.
    pub fn incr(delta: u64) -> Self {
        ArithOptions {
            mode: ArithMode::Incr,
            delta,
            ..Default::default()
        }
    }

    /// `decr key delta`.
    pub fn decr(delta: u64) -> Self {
        ArithOptions {
            mode: ArithMode::Decr,
            delta,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exptime_meanings() {
        let now = 1_700_000_000;
        assert_eq!(Exptime::NEVER.deadline(now), None);
        assert_eq!(Exptime(10).deadline(now), Some(now + 10));
        assert_eq!(Exptime(2_592_000).deadline(now), Some(now + 2_592_000));
        assert_eq!(
            Exptime(2_592_001).deadline(now),
            Some(2_592_001),
            "absolute, long past"
        );
        assert_eq!(Exptime(now as i64 + 5).deadline(now), Some(now + 5));
        assert!(Exptime(-1).deadline(now).unwrap() < now);
        assert_eq!(Exptime::secs(u32::MAX), Exptime(2_592_000));
    }
}
