//! memkit-tools: operator commands over a pool of memcached-compatible servers.
//!
//! Map:
//! - [`cli`]: the `memkit` command — `get`/`set`/`delete`/`incr`/`decr`/`stats`/`flush`/
//!   `ping` over a pool (`--servers h:p[:w],...`, `--distribution ketama|modula`), and
//!   `--which KEY` to name the server a key maps to. The everyday verbs of
//!   libmemcached-tools (`memccat`, `memccp`, `memcrm`, `memcstat`, `memcflush`, `memcping`)
//!   with placement identical to libmemcached's.
//! - [`stats`]: fetching `stats`/`stats items`/`stats slabs` and the `text`, `table`, `json`
//!   and `prometheus` formats of `memkit stats`; the Prometheus text format (the community
//!   memcached_exporter's metric names) is rendered by `memkit_server::metrics`, the code
//!   behind `memkitd --metrics-addr`, so both print the same series.
//! - [`top`]: the live dashboard (on [`term`], a few termios calls).
//! - [`dump`] (`lru_crawler metadump all`), [`watch`] (the servers' `watch` streams) over
//!   [`raw`] text connections; [`trace`] renders the cookbook's `MLWUH` trace files.
//!
//! Goals: scripts and people can check where keys live and what servers hold, and watch a
//! pool live (see `docs/operations.md`). Only standard memcached commands are used, so every
//! tool works against real memcached as well as memkitd.

pub mod cli;
pub mod dump;
pub mod raw;
pub mod stats;
pub mod term;
pub mod top;
pub mod trace;
pub mod watch;
