//! memkit-tools: operator commands over a pool of memcached-compatible servers.
//!
//! Map:
//! - [`cli`]: the `memkit` command line and its dispatch; `--which KEY` names the server a
//!   key maps to (placement identical to libmemcached's, python-memcached's or PHP's).
//! - [`connect`]: servers, placement, timeouts, TLS, the protocol (`--binary`) and
//!   authentication (ASCII for `-Y`, SASL PLAIN with `--binary` for `-S`), for every
//!   subcommand; [`connect::ConnArgs::refuse_binary`] for those without a binary form.
//! - [`verbs`], the verbs: `get`/`gat`/`touch`/`set`/`add`/`replace`/`append`/`prepend`/`cas`/
//!   `delete`/`incr`/`decr`, and `stats`/`flush`/`ping`/`version`/`verbosity` on every
//!   server — libmemcached-tools' everyday verbs (`memccat`, `memccp`, `memcrm`,
//!   `memcstat`, `memcflush`, `memcping`) — with the exit statuses ([`status`]).
//! - [`json`]: JSON output through serde.
//! - [`stats`]: fetching `stats`/`stats items`/`stats slabs` and the `text`, `table`, `json`
//!   and `prometheus` formats of `memkit stats`; the Prometheus text format (the community
//!   memcached_exporter's metric names) is rendered by `memkit_metrics`, the renderer
//!   behind `memkitd --metrics-addr` too, so both print the same series.
//! - [`top`]: the live dashboard (on [`term`], a few termios calls); [`top_group`], its
//!   sections for the nodes of a replicated memkitd group and for a router's backends.
//! - [`dump`] (`lru_crawler metadump all`), [`watch`] (the servers' `watch` streams) and
//!   [`cluster`] (a replicated memkitd group's `cluster status|add|remove`) over [`raw`]
//!   text connections (so not with `--binary`); [`trace`] renders the cookbook's `MLWUH`
//!   trace files.
//!
//! Goals: scripts and people can check where keys live and what servers hold, and watch a
//! pool live (see `docs/operations.md`). Only standard memcached commands are used, so every
//! tool works against real memcached as well as memkitd, but for `cluster`, which only a
//! memkitd in a replicated group answers.

pub mod cli;
pub mod cluster;
pub mod connect;
pub mod dump;
pub mod json;
pub mod raw;
pub mod stats;
pub mod status;
pub mod term;
pub mod top;
pub mod top_group;
pub mod trace;
pub mod verbs;
pub mod watch;
