//! memkit-client: memcached from Rust — one server or a cluster — over memkit's codec.
//!
//! Map:
//! - [`client`]: [`Client`], one server: a small pool of pipelined connections, connect and
//!   request timeouts, and the [`memkit_types::Memcache`] implementation.
//! - [`tls`]: [`TlsConnector`] (rustls, ring) and [`TlsOptions`] to build one from PEM: CA
//!   roots, optional client certificate, server name.
//! - [`auth`]: [`Credentials`], and ASCII authentication for `-Y` servers: a login `set`
//!   first on every new text connection.
//! - [`sasl`]: SASL PLAIN for `-S` servers: the first frames on every new binary connection
//!   (list mechanisms, `SASL_AUTH`, `SASL_STEP` on `AUTH_CONTINUE`).
//! - [`conn`]: one connection — a writer task that batches concurrent requests into one
//!   write, a reader task that fills a FIFO of reply slots, decoding text or binary
//!   ([`Protocol`]); the [`Connector`] seam for TLS.
//! - [`command`]: each `Memcache` call as text requests (classic where exact, meta where the
//!   options need it) and its replies as outcomes; the [`Dialect`] switch.
//! - [`binary`]: each `Memcache` call as binary frames (the protocol crate's client-side
//!   encoder) and its replies as outcomes; what binary cannot say.
//! - [`pipeline`]: [`Client::pipeline`], logical commands to one server in order on one
//!   connection, each with its [`Outcome`] (what a router forwards).
//! - [`reply`]: owned replies (text lines, binary frames), read through the protocol
//!   crate's response types, and their mapping to [`memkit_types::Error`].
//! - [`hash`]: libhashkit's key hashes (one_at_a_time, md5, crc, fnv1(a)_32/64), bit-exact;
//!   MD5 of many keys eight at a time where the CPU has AVX2 (`hash::md5_hashes`).
//! - [`distribution`]: [`ServerSpec`], modula, libmemcached's (weighted) ketama and PHP's
//!   pecl memcache (consistent and standard).
//! - [`cluster`]: [`Cluster`], a pool of servers: placement, per-server batched multi-get,
//!   failover and ejection, gutter pool, replicas, hot-key spreading.
//! - [`blocking`]: [`BlockingClient`], a synchronous facade with a private runtime.
//!
//! Goals: the same server for every key as libmemcached (ketama) and python-memcached
//! (modula); behaviour identical to the embedded store (the conformance suite runs through
//! this client against memkitd and real memcached); a dead server costs at most one timeout
//! and is then a miss; the binary protocol with SASL PLAIN for servers that serve nothing
//! else (`-S`), the text protocol's performance untouched by it. Non-goals: UDP; binary as
//! more than the way to `-S` servers (it works with any server, but uses no quiet opcodes
//! and carries nothing meta-only); SASL mechanisms other than PLAIN.
//!
//! See `docs/client.md` for configuration and compatibility.

pub mod auth;
pub mod binary;
pub mod blocking;
pub mod client;
pub mod cluster;
pub mod command;
pub mod conn;
pub mod distribution;
pub mod hash;
pub mod pipeline;
pub mod reply;
pub mod sasl;
pub mod tls;

pub use auth::Credentials;
pub use blocking::BlockingClient;
pub use client::{Client, ClientConfig};
pub use cluster::{Cluster, ClusterConfig, HotKeys, Replicas};
pub use command::Dialect;
pub use conn::{Connector, Protocol, Stream, TcpConnector};
pub use distribution::{Distribution, Placement, ServerSpec};
pub use hash::HashFn;
pub use pipeline::Outcome;
pub use tls::{TlsConnector, TlsOptions};

/// `docs/security.md`'s client examples, compiled as doctests so they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/security.md")]
pub struct SecurityDoc;
