//! The shared vocabulary of memkit.
//!
//! Every face of memkit — the embedded engine, memkitd, the client, the cluster and the
//! cookbook — speaks in these types, so that code written against one backend moves to another
//! by changing one constructor (seed 000: "if the in-process storage repeats memcached
//! semantics, scaling out only means replacing calls to it").
//!
//! Map:
//! - [`key`]: key validation with memcached's text-protocol rules (1–250 bytes, no whitespace
//!   or control bytes).
//! - [`item`]: what a read returns ([`Item`]), expiry ([`Exptime`]), and the option structs
//!   that mirror the meta protocol (`mg`/`ms`/`md`/`ma` flags).
//! - [`outcome`]: outcome enums; storage reports, the protocol renders.
//! - [`size`]: memcached's item size rule ([`item_fits`]), which the decoder and the engine
//!   both apply.
//! - [`error`]: [`Error`], for what is not an outcome (bad input, out of memory, I/O).
//! - [`clock`]: the injectable [`Clock`], with [`SystemClock`] and [`ManualClock`] for tests.
//! - [`memcache`]: THE trait [`Memcache`], six required methods and the classic commands
//!   built on them.
//! - [`blocking`]: [`Blocking`], a synchronous facade over any backend.
//!
//! Non-goals: no I/O, no runtime, no allocation policy. Those belong to the backends.

pub mod blocking;
pub mod clock;
pub mod error;
pub mod item;
pub mod key;
pub mod memcache;
pub mod outcome;
pub mod size;

pub use blocking::Blocking;
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Error, Result};
pub use item::{
    ArithMode, ArithOptions, DeleteOptions, Exptime, GetOptions, Item, ReplicaRead, StoreMode,
    StoreOptions, Ttl,
};
pub use key::{MAX_KEY_LEN, validate_key};
pub use memcache::Memcache;
pub use outcome::{ArithOutcome, DeleteOutcome, StoreOutcome, Stored};
pub use size::{ITEM_HEADER, item_fits, item_total};

/// Client flags: 32 opaque bits stored with each item.
pub type Flags = u32;
/// A CAS token: 64 bits, unique per modification.
pub type Cas = u64;

/// Relative expiry times above this many seconds (30 days) are absolute Unix times.
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;
/// memcached's default maximum item size (`-I`).
pub const DEFAULT_ITEM_SIZE_MAX: usize = 1024 * 1024;
