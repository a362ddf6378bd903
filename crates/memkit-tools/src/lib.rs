//! memkit-tools: operator commands over a pool of memcached-compatible servers.
//!
//! Map:
//! - [`cli`]: the `memkit` command — `get`/`set`/`delete`/`incr`/`decr`/`stats`/`flush`/
//!   `ping` over a pool (`--servers h:p[:w],...`, `--distribution ketama|modula`), and
//!   `--which KEY` to name the server a key maps to. The everyday verbs of
//!   libmemcached-tools (`memccat`, `memccp`, `memcrm`, `memcstat`, `memcflush`, `memcping`)
//!   with placement identical to libmemcached's.
//!
//! Goals: scripts and people can check where keys live and what servers hold. Non-goals
//! (yet): the live dashboard (a later issue extends this crate).

pub mod cli;
