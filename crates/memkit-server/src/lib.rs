//! memkit-server: `memkitd`, a memcached 1.6 drop-in server on the memkit engine.
//!
//! Map, from the modules every other stands on up (no module imports one listed after it;
//! `docs/architecture.md` draws it):
//! - [`config`]: memcached's command-line flags, applied with the same meanings, refused
//!   with its messages and exit statuses; `--io` and what this kernel allows.
//! - [`log`]: `tracing` to standard error (`RUST_LOG`, `-v`, `--log-format`);
//!   [`notify`]: `READY=1` to systemd once the listeners accept.
//! - [`process`]: `-u`, `-d`, `-r`, `-k`, `-P`, with memcached's system calls; [`bind`]:
//!   the `-l` TCP listeners and the `-s` UNIX socket, bound early, listening when ready.
//! - [`auth`] and [`tls`]: what `-Y` and `-Z` load (the password file; the rustls context).
//! - [`watch`]: the `watch` event stream and the page's hot-keys sampler; [`detail`]:
//!   per-prefix statistics.
//! - [`state`]: what every connection shares ([`Shared`]: engine, persistent store,
//!   settings, counters), the connection registry, and the [`state::gate`] a request's
//!   replies may wait on. Nothing in it knows how bytes move.
//! - [`replica`] (beside [`state`], which holds it; it knows only the gate's completer):
//!   the replicated group's node (`--raft-*`) on a runtime of its own, what a
//!   parked connection hands it (writes, a read barrier, a `cluster` command), and `stats`'
//!   `raft_*` figures.
//! - [`router`] (beside [`replica`], likewise known to [`state`]): router mode
//!   (`--route FILE`): the TOML file, the backend pools (memkit-client's connections and
//!   placements, health and TKO), the routes a job of requests goes through.
//! - [`exec`]: THE place where a request meets the storage backend: one executor for the
//!   logical commands every encoding decodes into, and the [`exec::Reply`] trait each
//!   encoding's renderer implements; in a group, [`exec::replicate`] turns writes into log
//!   entries; in router mode, [`exec::route`] turns commands into a job for the backends.
//! - [`dispatch`]: text and meta requests into logical commands, their renderers, and the
//!   operator commands; [`binary`]: the same for binary frames; [`sasl`]: SASL PLAIN;
//!   [`stats`]: `stats` and its subcommands with memcached's names, and the dumps' lines.
//! - [`session`]: the request lifecycle: one connection's requests and replies without its
//!   I/O, its named states, and what it asks its driver to do next ([`session::Next`]:
//!   write, read, give way, park on a gate, close).
//! - The drivers, which carry out what a session asks: [`evloop`], memcached's worker
//!   threads (one io_uring or epoll per thread, its connections' sessions driven
//!   directly), and [`task`], a tokio task per connection (TLS, router, embedders, `watch`).
//! - [`server`]: the accept loop and connection limit, the worker threads
//!   ([`server::Workers`]), the housekeeping tick (`-o idle_timeout`), graceful shutdown;
//!   [`server::run`] takes a bound listener and a shutdown future.
//! - [`metrics`]: Prometheus metrics (memcached_exporter's names) and `--metrics-addr`;
//!   [`metrics::page`]: the live page for operators on the same address; [`warm`]: warm
//!   restart (`-e FILE`); [`flash`]: the flash tier's store (`-o ext_path`) opened, saved
//!   beside `-e`'s file and stopped; [`backend`]: the engine (over the flash tier), or the
//!   persistent store under it, that the settings ask for.
//!
//! Non-goals: UDP, SASL mechanisms other than PLAIN (see `docs/protocol-notes.md`). Security
//! (auth, TLS, the defaults): `docs/security.md`.

pub mod auth;
pub mod backend;
pub mod binary;
pub mod bind;
pub mod config;
pub mod detail;
pub mod dispatch;
pub mod evloop;
pub mod exec;
pub mod flash;
pub mod log;
pub mod metrics;
pub mod notify;
pub mod process;
pub mod replica;
pub mod router;
pub mod sasl;
pub mod server;
pub mod session;
pub mod state;
pub mod stats;
pub mod task;
pub mod tls;
pub mod warm;
pub mod watch;

pub use backend::{backend_for, engine_for};
pub use config::{Args, Settings, VERSION, VERSION_LINE};
pub use server::run;
pub use state::Shared;
