//! memkit-server: `memkitd`, a memcached 1.6 drop-in server on the memkit engine.
//!
//! Map:
//! - [`config`]: memcached's command-line flags, applied with the same meanings, refused
//!   with its messages and exit statuses.
//! - [`bind`]: the `-l` TCP listeners and the `-s` UNIX socket; [`process`]: `-u`, `-d`,
//!   `-r`, `-k`, `-P`, with memcached's system calls.
//! - [`server`]: shared state, the accept loop and connection limit, the worker threads
//!   ([`server::Workers`]), graceful shutdown;
//!   [`server::run`] takes a bound listener and a shutdown future.
//! - [`tls`]: TLS (`-Z`, `-o ssl_*`) on rustls/ring: certificates, client verification,
//!   the handshake before everything else.
//! - [`auth`]: ASCII authentication (`-Y`), the unauthenticated phase before the request
//!   loop.
//! - [`session`]: one client's requests and replies without its I/O: pick the protocol
//!   (`-B`), decode, dispatch, batch the replies, swallow refused data; its buffer policy
//!   (pooled, released when idle, bounded in and out; see `docs/limits.md`).
//! - [`evloop`]: memcached's worker threads: one io_uring (or epoll poller) per thread
//!   drives its connections' sessions, no runtime in between. [`connection`]: a session as a tokio task, for what
//!   needs the runtime (TLS, `-Y`, idle timeouts, `sync` durability, embedders).
//! - [`exec`]: THE place where a request meets the storage backend: one executor for the
//!   logical commands every encoding decodes into, and the [`exec::Reply`] trait each
//!   encoding's renderer implements.
//! - [`dispatch`]: text and meta requests into logical commands, their renderers, and the
//!   operator commands.
//! - [`binary`]: the same for binary frames, with memcached's binary replies.
//! - [`sasl`]: SASL PLAIN against a `MEMCACHED_SASL_PWDB` file (`-S`).
//! - [`stats`]: `stats` and its subcommands with memcached's names; `lru_crawler metadump`
//!   and `mgdump`. [`detail`]: per-prefix statistics (`stats detail`).
//! - [`watch`]: the `watch` event stream, and the page's hot-keys sampler.
//! - [`metrics`]: Prometheus metrics (memcached_exporter's names) and `--metrics-addr`;
//!   [`metrics::page`]: the live page for operators on the same address.
//! - [`log`]: `tracing` to standard error (`RUST_LOG`, `-v`, `--log-format`);
//!   [`notify`]: `READY=1` to systemd once the listeners accept.
//! - [`warm`]: warm restart (`-e FILE`): the cache saved at a graceful stop, restored at
//!   the next start.
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
pub mod log;
pub mod metrics;
pub mod notify;
pub mod process;
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
