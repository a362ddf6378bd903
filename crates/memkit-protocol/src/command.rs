//! Logical commands: what a request asks of the store, whichever of the three encodings
//! (text, meta, binary) carried it.
//!
//! Each encoding decodes into [`Command`]s, the server runs them with one executor, and a
//! renderer per encoding writes the outcome (pelikan keeps logical requests apart from their
//! encodings the same way). The options are `memkit-types`' own, so the embedded engine,
//! the server and the client share one vocabulary; the mapping from each encoding's flags
//! to those options is written once, beside its inverse, which the client uses to encode:
//! - text: [`get_options`], [`StoreCmd::options`] and [`StoreCmd::for_options`], here;
//! - meta: `MetaFlags::{get,store,delete,arith}_options` and `MetaFlags::for_*` in
//!   [`crate::meta`];
//! - binary: [`crate::binary::Request::command`] and [`crate::binary::encode_command`].
//!
//! `tests/logical.rs` checks that a command survives encode → decode in every encoding.
//!
//! Whether a store is too large is not a property of a [`Command`]: it must be decided from
//! the request's header, before its value arrives, so each decoder asks the one rule,
//! [`crate::Limits::item_fits`], and swallows the refused value as it comes.

use memkit_types::{ArithOptions, DeleteOptions, Exptime, GetOptions, StoreMode, StoreOptions};

use crate::StoreCmd;

/// One logical command. A text multi-get is one [`Command::Get`] per key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// Read one key (`get`, `gat`, `mg`, binary `GET`/`GAT`/`TOUCH`).
    Get {
        /// The storage key.
        key: &'a [u8],
        /// What the read does besides reading.
        opts: GetOptions,
    },
    /// Store a value (`set`...`cas`, `ms`, binary `SET`...`PREPEND`).
    Store {
        /// The storage key.
        key: &'a [u8],
        /// The value.
        data: &'a [u8],
        /// Mode, flags, expiry, CAS and the meta extras.
        opts: StoreOptions,
    },
    /// Delete (`delete`, `md`, binary `DELETE`).
    Delete {
        /// The storage key.
        key: &'a [u8],
        /// CAS and the meta extras.
        opts: DeleteOptions,
    },
    /// Increment or decrement (`incr`/`decr`, `ma`, binary `INCREMENT`/`DECREMENT`).
    Arith {
        /// The storage key.
        key: &'a [u8],
        /// Mode, delta, vivify, CAS, TTL.
        opts: ArithOptions,
    },
    /// Set the expiry without reading (`touch`).
    Touch {
        /// The storage key.
        key: &'a [u8],
        /// The new expiry.
        exptime: Exptime,
    },
    /// Invalidate everything now or after a delay (`flush_all`, binary `FLUSH`).
    Flush {
        /// memcached's argument: seconds from now or an absolute Unix time; 0 is now.
        delay: u32,
    },
}

impl Command<'_> {
    /// The key a command addresses, if any.
    pub fn key(&self) -> Option<&[u8]> {
        match *self {
            Command::Get { key, .. }
            | Command::Store { key, .. }
            | Command::Delete { key, .. }
            | Command::Arith { key, .. }
            | Command::Touch { key, .. } => Some(key),
            Command::Flush { .. } => None,
        }
    }

    /// Whether the command may change stored data: in persistent `sync` mode its reply
    /// waits until the change is durable. A read that only bumps access bits does not
    /// count; one that sets a TTL or creates an item does.
    pub fn mutates(&self) -> bool {
        match self {
            Command::Get { opts, .. } => opts.touch.is_some() || opts.vivify.is_some(),
            _ => true,
        }
    }
}

impl<'a> crate::Request<'a> {
    /// The logical command of a single-key text or meta request, `key` being its storage
    /// key (for a meta key sent with `b`, the decoded one). `None` for a multi-get (one
    /// [`Command::Get`] per key, with [`get_options`]) and for commands without a storage
    /// meaning (`stats`, `verbosity`, `mn`...).
    pub fn command<'k>(&self, key: &'k [u8]) -> Option<Command<'k>>
    where
        'a: 'k,
    {
        use crate::Request as R;
        Some(match *self {
            R::Store {
                cmd,
                flags,
                exptime,
                data,
                ..
            } => Command::Store {
                key,
                data,
                opts: cmd.options(flags, exptime),
            },
            R::Arith { incr, delta, .. } => Command::Arith {
                key,
                opts: arith_options(incr, delta),
            },
            R::Touch { exptime, .. } => Command::Touch {
                key,
                exptime: Exptime(exptime.into()),
            },
            R::Delete { .. } => Command::Delete {
                key,
                opts: DeleteOptions::default(),
            },
            R::FlushAll { delay, .. } => Command::Flush {
                delay: flush_delay(delay),
            },
            R::MetaGet { ref flags, .. } => Command::Get {
                key,
                opts: flags.get_options(),
            },
            R::MetaSet {
                ref flags, data, ..
            } => Command::Store {
                key,
                data,
                opts: flags.store_options(),
            },
            R::MetaDelete { ref flags, .. } => Command::Delete {
                key,
                opts: flags.delete_options(),
            },
            R::MetaArith { ref flags, .. } => Command::Arith {
                key,
                opts: flags.arith_options(),
            },
            _ => return None,
        })
    }

    /// Whether the request may change stored data (persistent `sync` mode holds its reply
    /// until the change is durable): its logical command's [`Command::mutates`]. A
    /// multi-get mutates when it touches.
    pub fn mutates(&self) -> bool {
        match *self {
            crate::Request::Get { touch, .. } => Command::Get {
                key: &[],
                opts: get_options(touch),
            }
            .mutates(),
            _ => self.command(&[]).is_some_and(|c| c.mutates()),
        }
    }
}

/// The options of a text `get`/`gets`/`gat`/`gats`: the exptime of `gat`, and the mark
/// that makes a stale item's win token go to meta readers only.
pub fn get_options(touch: Option<i32>) -> GetOptions {
    GetOptions {
        touch: touch.map(|t| Exptime(t.into())),
        classic: true,
        ..Default::default()
    }
}

impl StoreCmd {
    /// This text command's options: `cas` is a set with a CAS to compare.
    pub fn options(self, flags: u32, exptime: i32) -> StoreOptions {
        let (mode, cas) = match self {
            StoreCmd::Set => (StoreMode::Set, None),
            StoreCmd::Add => (StoreMode::Add, None),
            StoreCmd::Replace => (StoreMode::Replace, None),
            StoreCmd::Append => (StoreMode::Append, None),
            StoreCmd::Prepend => (StoreMode::Prepend, None),
            StoreCmd::Cas(c) => (StoreMode::Set, Some(c)),
        };
        StoreOptions {
            cas,
            ..StoreOptions::new(mode, flags, Exptime(exptime.into()))
        }
    }

    /// The text command that carries `o`, if one can: not invalidate, vivify or an explicit
    /// new CAS, and a CAS only with a plain set.
    pub fn for_options(o: &StoreOptions) -> Option<StoreCmd> {
        if o.invalidate || o.vivify.is_some() || o.new_cas.is_some() {
            return None;
        }
        Some(match (o.cas, o.mode) {
            (Some(c), StoreMode::Set) => StoreCmd::Cas(c),
            (Some(_), _) => return None,
            (None, StoreMode::Set) => StoreCmd::Set,
            (None, StoreMode::Add) => StoreCmd::Add,
            (None, StoreMode::Replace) => StoreCmd::Replace,
            (None, StoreMode::Append) => StoreCmd::Append,
            (None, StoreMode::Prepend) => StoreCmd::Prepend,
        })
    }
}

/// memcached reads exptimes as `int32_t`: a wider one is clamped to what it can say.
pub fn exp32(e: Exptime) -> i32 {
    e.0.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// A text `flush_all`'s delay as memcached reads it: negative means now.
pub fn flush_delay(delay: Option<i32>) -> u32 {
    delay.unwrap_or(0).max(0) as u32
}

/// The options of a plain text `incr`/`decr`.
pub fn arith_options(incr: bool, delta: u64) -> ArithOptions {
    if incr {
        ArithOptions::incr(delta)
    } else {
        ArithOptions::decr(delta)
    }
}
