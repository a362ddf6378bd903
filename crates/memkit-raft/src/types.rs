//! The vocabulary the log speaks: [`Write`] (a mutation as the leader decided it),
//! [`Proposal`] (a write with the leader's time stamp: one log entry's payload), [`Reply`]
//! (the engine's outcome, the same on every node) and the openraft type configuration.
//!
//! Why mirrors of `memkit_types`' enums rather than those enums: the log and the wire need
//! serde, and `memkit-types` stays free of it. Each mirror converts both ways here, once.

use memkit_types::{
    ArithOutcome, DeleteOutcome, Error as EngineError, Exptime, REALTIME_MAXDELTA, StoreOutcome,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};

/// A node's id in the group.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// memkit's openraft types: `u64` ids, [`BasicNode`] (its `addr` is the peer's
    /// `HOST:PORT`), [`Proposal`] in, a [`Reply`] for each of its writes out, snapshots as
    /// files (see [`crate::snapshot`]), streamed to and from peers, never whole in memory.
    pub TypeConfig:
        D = Proposal,
        R = Vec<Reply>,
        NodeId = NodeId,
        Node = BasicNode,
        SnapshotData = tokio::fs::File,
);

/// openraft's Raft of this configuration.
pub type Raft = openraft::Raft<TypeConfig>;
/// A log id of this configuration.
pub type LogId = openraft::LogId<NodeId>;
/// A log entry of this configuration.
pub type Entry = openraft::Entry<TypeConfig>;
/// The group's membership as stored with the state machine.
pub type StoredMembership = openraft::StoredMembership<NodeId, BasicNode>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, BasicNode>;
/// Storage failures as openraft wants them.
pub type StorageError = openraft::StorageError<NodeId>;

/// An absolute expiry: `None` never expires, `Some(t)` at Unix second `t` (a time in the
/// past means already expired).
pub type ExptimeUnix = Option<u64>;

/// The storage command of a [`Write::Store`] (mirrors [`memkit_types::StoreMode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Mode {
    /// `set`.
    #[default]
    Set,
    /// `add`: only if absent.
    Add,
    /// `replace`: only if present.
    Replace,
    /// `append`: keeps flags and expiry.
    Append,
    /// `prepend`: keeps flags and expiry.
    Prepend,
}

impl From<Mode> for memkit_types::StoreMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Set => memkit_types::StoreMode::Set,
            Mode::Add => memkit_types::StoreMode::Add,
            Mode::Replace => memkit_types::StoreMode::Replace,
            Mode::Append => memkit_types::StoreMode::Append,
            Mode::Prepend => memkit_types::StoreMode::Prepend,
        }
    }
}

/// `ma`'s auto-create (`N` + `J`): the initial value and its expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vivify {
    /// The value a missing key is created with.
    pub initial: u64,
    /// Its absolute expiry.
    pub exptime_unix: ExptimeUnix,
}

/// A new expiry to set (`ma ... T`, `md ... I T`). A struct rather than
/// `Option<Option<u64>>`, which JSON cannot tell from `None` once serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetExptime {
    /// The absolute expiry to set.
    pub exptime_unix: ExptimeUnix,
}

/// A memcached mutation as the leader decided it: every time in it is absolute, so that
/// applying it means the same on every node whenever it is applied. The CAS of what it
/// creates is not in it: the state machine derives it from the entry's log index and the
/// write's place in the entry ([`cas_for`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Write {
    /// `set`/`add`/`replace`/`append`/`prepend`/`cas`/`ms`.
    Store {
        /// The key.
        key: Vec<u8>,
        /// The value (one byte string on the wire: see `Cargo.toml`).
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// Client flags (append/prepend keep the item's).
        flags: u32,
        /// Absolute expiry (append/prepend keep the item's).
        exptime_unix: ExptimeUnix,
        /// Which storage command.
        mode: Mode,
        /// `cas`: store only if the item's CAS is this.
        cas: Option<u64>,
        /// `ms ... I`: with `cas`, an older token is accepted and the item marked stale.
        #[serde(default)]
        invalidate: bool,
        /// `ms MA N`: append/prepend on a miss creates the item with this expiry.
        #[serde(default)]
        vivify: Option<SetExptime>,
    },
    /// `delete`/`md`.
    Delete {
        /// The key.
        key: Vec<u8>,
        /// Delete only if the item's CAS is this.
        cas: Option<u64>,
        /// `md ... I`: mark stale instead of removing.
        #[serde(default)]
        invalidate: bool,
        /// `md ... I T`: the stale item's new expiry.
        #[serde(default)]
        stale_exptime: Option<SetExptime>,
        /// `md ... x`: keep the item with an empty value.
        #[serde(default)]
        remove_value: bool,
    },
    /// `incr`/`decr`/`ma`.
    Arith {
        /// The key.
        key: Vec<u8>,
        /// Increment (true) or decrement.
        incr: bool,
        /// The delta.
        delta: u64,
        /// Apply only if the item's CAS is this.
        #[serde(default)]
        cas: Option<u64>,
        /// Create a missing key.
        #[serde(default)]
        vivify: Option<Vivify>,
        /// On success, set this expiry.
        #[serde(default)]
        set_exptime: Option<SetExptime>,
    },
    /// `touch`.
    Touch {
        /// The key.
        key: Vec<u8>,
        /// The new absolute expiry.
        exptime_unix: ExptimeUnix,
    },
    /// The touch of a read that touches (`gat`, `gats`, `mg T`): counted in `stats` as
    /// memcached counts that read (a hit as a touch; a miss as a touch for the classic
    /// commands, as a get for `mg`), and answered with the expiry it found.
    TouchRead {
        /// The key.
        key: Vec<u8>,
        /// The new absolute expiry.
        exptime_unix: ExptimeUnix,
        /// `gat`/`gats` (and binary GAT), not `mg`.
        classic: bool,
    },
    /// `flush_all [delay]`.
    Flush {
        /// `None`: now; `Some(t)`: items written up to Unix second `t - 1` (memcached's
        /// `now + delay - 1`, so `t = leader's now + delay`) become invalid at that time.
        at_unix: Option<u64>,
    },
}

impl Write {
    /// A plain `set` of `key` to `value`: flags 0, no expiry, no CAS to compare.
    pub fn set(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Write {
        Write::Store {
            key: key.into(),
            value: value.into(),
            flags: 0,
            exptime_unix: None,
            mode: Mode::Set,
            cas: None,
            invalidate: false,
            vivify: None,
        }
    }

    /// About how many bytes it carries (key and value).
    pub fn size(&self) -> usize {
        match self {
            Write::Store { key, value, .. } => key.len() + value.len(),
            Write::Flush { .. } => 8,
            w => w.key().map_or(0, <[u8]>::len),
        }
    }

    /// The key this write changes (`None` for a flush).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Write::Store { key, .. }
            | Write::Delete { key, .. }
            | Write::Arith { key, .. }
            | Write::Touch { key, .. }
            | Write::TouchRead { key, .. } => Some(key),
            Write::Flush { .. } => None,
        }
    }
}

/// A memcached expiry time (relative up to 30 days, absolute above, negative for "already
/// expired") as the absolute time a [`Write`] carries, read at `now_unix`: what a leader
/// (or the node a client reached) does once, so replicas never see a relative time.
pub fn exptime_unix(e: Exptime, now_unix: u64) -> ExptimeUnix {
    e.deadline(now_unix)
}

/// The engine's [`Exptime`] for an absolute expiry. A time that memcached would read as
/// relative (30 days or less after the epoch) is long past: already expired.
pub(crate) fn to_exptime(t: ExptimeUnix) -> Exptime {
    match t {
        None => Exptime::NEVER,
        Some(t) if t <= REALTIME_MAXDELTA as u64 => Exptime::EXPIRED,
        Some(t) => Exptime::at_unix(t),
    }
}

/// The most writes one entry carries: a CAS leaves [`WRITE_BITS`] low bits for a write's
/// place in its entry.
pub const MAX_WRITES: usize = 1 << WRITE_BITS;

/// See [`MAX_WRITES`].
pub const WRITE_BITS: u32 = 8;

/// The CAS of what the write at `pos` of the entry at `index` creates: the same on every
/// node, growing with the log, never 0 (index 0 is the group's first membership entry).
pub fn cas_for(index: u64, pos: usize) -> u64 {
    debug_assert!(pos < MAX_WRITES);
    (index.max(1) << WRITE_BITS) | pos as u64
}

/// The log index of the entry that gave an item `cas` ([`cas_for`]'s inverse): a reader
/// that waits until its node has applied it sees the write.
pub fn entry_of_cas(cas: u64) -> u64 {
    cas >> WRITE_BITS
}

/// One log entry's payload: writes, applied in order, and the leader's clock when it
/// proposed them, in Unix milliseconds. Applying the entry runs the engine at that time
/// (see [`crate::clock::LogClock`]). Writes from many clients share an entry (see
/// [`crate::proposer`]): one append, one fsync and one round of replication for all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The leader's time, Unix milliseconds.
    pub stamp_ms: u64,
    /// The mutations, at most [`MAX_WRITES`].
    pub writes: Vec<Write>,
}

impl Proposal {
    /// About how many bytes its writes carry.
    pub fn size(&self) -> usize {
        self.writes.iter().map(Write::size).sum()
    }
}

impl std::fmt::Display for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} writes@{}", self.writes.len(), self.stamp_ms)
    }
}

/// A store's outcome (mirrors [`StoreOutcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoreResult {
    /// `STORED`.
    Stored,
    /// `NOT_STORED`.
    NotStored,
    /// `EXISTS`.
    Exists,
    /// `NOT_FOUND`.
    NotFound,
}

impl From<StoreOutcome> for StoreResult {
    fn from(o: StoreOutcome) -> Self {
        match o {
            StoreOutcome::Stored => StoreResult::Stored,
            StoreOutcome::NotStored => StoreResult::NotStored,
            StoreOutcome::Exists => StoreResult::Exists,
            StoreOutcome::NotFound => StoreResult::NotFound,
        }
    }
}

/// A delete's outcome (mirrors [`DeleteOutcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeleteResult {
    /// `DELETED`.
    Deleted,
    /// `NOT_FOUND`.
    NotFound,
    /// `EXISTS`.
    Exists,
}

impl From<DeleteOutcome> for DeleteResult {
    fn from(o: DeleteOutcome) -> Self {
        match o {
            DeleteOutcome::Deleted => DeleteResult::Deleted,
            DeleteOutcome::NotFound => DeleteResult::NotFound,
            DeleteOutcome::Exists => DeleteResult::Exists,
        }
    }
}

/// incr/decr's outcome (mirrors [`ArithOutcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArithResult {
    /// The new value and CAS; the absolute expiry after it.
    Value {
        /// The value after the operation.
        value: u64,
        /// The item's new CAS.
        cas: u64,
        /// Its remaining time to live when applied (`None`: never expires), for `ma ... t`.
        #[serde(default)]
        ttl: Option<u32>,
    },
    /// `NOT_FOUND`.
    NotFound,
    /// Not a decimal number below 2^64.
    NonNumeric,
    /// The CAS token did not match.
    Exists,
    /// Vivify could not create the item.
    NotStored,
}

impl From<ArithOutcome> for ArithResult {
    fn from(o: ArithOutcome) -> Self {
        match o {
            ArithOutcome::Value { value, cas, ttl } => ArithResult::Value { value, cas, ttl },
            ArithOutcome::NotFound => ArithResult::NotFound,
            ArithOutcome::NonNumeric => ArithResult::NonNumeric,
            ArithOutcome::Exists => ArithResult::Exists,
            ArithOutcome::NotStored => ArithResult::NotStored,
        }
    }
}

impl From<StoreResult> for StoreOutcome {
    fn from(o: StoreResult) -> Self {
        match o {
            StoreResult::Stored => StoreOutcome::Stored,
            StoreResult::NotStored => StoreOutcome::NotStored,
            StoreResult::Exists => StoreOutcome::Exists,
            StoreResult::NotFound => StoreOutcome::NotFound,
        }
    }
}

impl From<DeleteResult> for DeleteOutcome {
    fn from(o: DeleteResult) -> Self {
        match o {
            DeleteResult::Deleted => DeleteOutcome::Deleted,
            DeleteResult::NotFound => DeleteOutcome::NotFound,
            DeleteResult::Exists => DeleteOutcome::Exists,
        }
    }
}

impl From<ArithResult> for ArithOutcome {
    fn from(o: ArithResult) -> Self {
        match o {
            ArithResult::Value { value, cas, ttl } => ArithOutcome::Value { value, cas, ttl },
            ArithResult::NotFound => ArithOutcome::NotFound,
            ArithResult::NonNumeric => ArithOutcome::NonNumeric,
            ArithResult::Exists => ArithOutcome::Exists,
            ArithResult::NotStored => ArithOutcome::NotStored,
        }
    }
}

/// Why the engine refused a write (mirrors the [`EngineError`]s a write can meet). It is an
/// outcome like the others: decided once, by the entry, the same on every node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// Bad key.
    InvalidKey,
    /// Over the item size limit.
    TooLarge,
    /// The engine found no room (over a persistent store it evicts from RAM instead, so
    /// this is kept for the log's format).
    OutOfMemory,
    /// Anything else, as its message.
    Other(String),
}

impl From<EngineError> for Refusal {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidKey => Refusal::InvalidKey,
            EngineError::TooLarge => Refusal::TooLarge,
            EngineError::OutOfMemory => Refusal::OutOfMemory,
            other => Refusal::Other(other.to_string()),
        }
    }
}

impl From<Refusal> for EngineError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::InvalidKey => EngineError::InvalidKey,
            Refusal::TooLarge => EngineError::TooLarge,
            Refusal::OutOfMemory => EngineError::OutOfMemory,
            Refusal::Other(m) => EngineError::Server(m),
        }
    }
}

/// The outcome of writes proposed together: a reply for each, in order, and the index of
/// the entry that carried them.
pub type Outcomes = (Vec<Reply>, u64);

/// What applying one of a [`Proposal`]'s writes answered: the same on every node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// A store's outcome and the new item's CAS (0 unless stored).
    Stored {
        /// What happened.
        outcome: StoreResult,
        /// The new CAS.
        cas: u64,
    },
    /// A delete's outcome.
    Deleted(DeleteResult),
    /// incr/decr's outcome.
    Arith(ArithResult),
    /// Whether `touch` found the item.
    Touched(bool),
    /// A [`Write::TouchRead`]: `None` if it missed, else the item's absolute expiry before
    /// the touch (`Some(None)`: it had none).
    TouchedRead(Option<ExptimeUnix>),
    /// `flush_all` done.
    Flushed,
    /// The engine refused the write.
    Refused(Refusal),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exptimes_become_absolute_once() {
        let now = 1_700_000_000;
        assert_eq!(exptime_unix(Exptime::NEVER, now), None);
        assert_eq!(exptime_unix(Exptime(10), now), Some(now + 10));
        assert_eq!(exptime_unix(Exptime(now as i64 + 99), now), Some(now + 99));
        assert!(exptime_unix(Exptime::EXPIRED, now).is_some_and(|t| t < now));
        assert_eq!(to_exptime(Some(now + 10)), Exptime(now as i64 + 10));
        assert_eq!(
            to_exptime(Some(5)),
            Exptime::EXPIRED,
            "long past, not relative"
        );
        assert_eq!(to_exptime(None), Exptime::NEVER);
    }

    #[test]
    fn a_proposal_survives_the_codec() {
        let p = Proposal {
            stamp_ms: 42,
            writes: vec![Write::Arith {
                key: b"k".to_vec(),
                incr: true,
                delta: 3,
                cas: None,
                vivify: Some(Vivify {
                    initial: 1,
                    exptime_unix: None,
                }),
                set_exptime: Some(SetExptime { exptime_unix: None }),
            }],
        };
        let back: Proposal = crate::codec::from_slice(&crate::codec::to_vec(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn cas_values_name_their_entry_and_grow() {
        let a = cas_for(7, 0);
        let b = cas_for(7, MAX_WRITES - 1);
        let c = cas_for(8, 0);
        assert!(0 < a && a < b && b < c);
        assert_eq!(
            (entry_of_cas(a), entry_of_cas(b), entry_of_cas(c)),
            (7, 7, 8)
        );
        assert_ne!(cas_for(0, 0), 0);
    }
}
