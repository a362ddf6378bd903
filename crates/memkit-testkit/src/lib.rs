//! memkit's test kit: a reference model, one conformance suite, and model-based property
//! testing, shared by every backend (embedded engine, memkitd, client, cluster).
//!
//! Map:
//! - [`model`]: [`Model`], the simplest obviously-correct [`memkit_types::Memcache`]: a
//!   mutex around a `BTreeMap`, an injected clock, memcached 1.6's rules written out plainly.
//! - [`clock`]: [`clock::SkewedClock`], a clock running ahead of or behind another by a
//!   chosen offset, for recipes that must hold while hosts' clocks disagree.
//! - `certs` (feature `tls`): a throwaway PKI for TLS tests, written to a temp dir.
//! - `generated` (feature `docs`): man pages and shell completions generated from clap,
//!   checked against the copies in `packaging/`.
//! - [`suite`]: the behavioural conformance suite, a table of named async cases.
//! - [`ops`]: an [`ops::Op`] language over the trait, proptest strategies for op sequences,
//!   and [`ops::compare`], which runs a sequence on a backend and on the model and reports
//!   the first divergence; [`ops::compare_with`] lets the backend evict and lets the test
//!   disturb the backend between ops (evict RAM, reopen a persistent store).
//! - [`fuzz`]: op sequences decoded from raw bytes, for the engine-vs-model fuzz target and
//!   its stable corpus replay; [`fuzz::corpus`] and [`fuzz::Rng`], the checked-in seeds and
//!   the mutation source every crate's replay test uses.
//! - [`interop`]: whether a test may skip for want of a real memcached (or tmux, or a Python
//!   package): not under CI.
//! - [`server`]: [`TestServer`], memkitd for a test, in-process (feature `server`: any
//!   flags, its state inspectable) or as a child process (any argv; signals, stderr), on a
//!   free loopback port or a UNIX socket, shut down on drop. The one way tests start memkitd.
//! - [`memcached`]: [`memcached::spawn`], real memcached on a free loopback port, killed on
//!   drop, under the interop policy. The one way tests start memcached.
//! - [`mod@tempdir`]: [`tempdir()`], a scratch directory removed on drop, and
//!   [`tempdir::in_memory`] in `/dev/shm`. The one way tests make a scratch directory.
//! - [`wire`]: [`wire::Wire`], a raw connection that sends bytes and reads a reply up to a
//!   terminator, a count of lines or bytes, a binary frame or the close, every read bounded
//!   in time ([`TestServer::wire`] opens one); [`wire::BlockingWire`] for synchronous
//!   tests. The one way tests talk to a server byte for byte.
//! - [`relay`]: [`relay::Relay`], a TCP relay on 127.0.0.1 between two peers that cuts
//!   them off (both ways or one way, new connections held or refused), delays them or
//!   resets their connections at the test's word, on threads of its own joined on drop.
//!   The one way tests put a network fault between peers.
//! - [`linear`]: linearizability checking: [`linear::Recorder`], a thread-safe history of
//!   concurrent clients' memcached operations (an unanswered one may or may not have taken
//!   effect), and [`linear::check`], which searches it for an order memcached's sequential
//!   semantics allow and otherwise reports the first answer nothing explains.
//!
//! Entry points for a backend's own tests:
//!
//! ```ignore
//! // Conformance (embedded: time is a ManualClock shared with the backend).
//! let clock = ManualClock::default();
//! let store = Engine::new(config, clock.clone());
//! memkit_testkit::suite::run(&store, &clock).await.assert_all_passed();
//!
//! // Conformance against a server through a client: time really passes, cases interleave
//! // (about 10 s in all). Debian's memcached 1.6.18 lacks a few newer meta flags:
//! let opts = SuiteOptions { max_needs: Needs::Base, ..Default::default() };
//! memkit_testkit::suite::run_with(&client, &WallClock, &opts).await.assert_all_passed();
//!
//! // Against a model, op sequence by op sequence.
//! proptest!(|(ops in memkit_testkit::ops::ops(1..60))| {
//!     let clock = ManualClock::default();
//!     let store = Engine::new(config, clock.clone());
//!     block_on(memkit_testkit::ops::compare(&store, &clock, &ops)).map_err(TestCaseError::fail)?;
//! });
//! ```
//!
//! `tests/real_memcached.rs` runs the suite against a real memcached through a throwaway
//! meta-protocol client, so every expectation in it is memcached's own.
//!
//! Goals: one statement of the semantics, checked against real memcached where it can be
//! (see the comments in [`model`]). Non-goals: memory limits and eviction (the model never
//! evicts; [`ops::compare_with`] drops from it what the backend reports evicted), speed.

#[cfg(feature = "tls")]
pub mod certs;
pub mod clock;
pub mod fuzz;
#[cfg(feature = "docs")]
pub mod generated;
pub mod interop;
pub mod linear;
pub mod memcached;
pub mod model;
pub mod ops;
pub mod relay;
pub mod server;
pub mod suite;
pub mod tempdir;
pub mod wire;

pub use model::Model;
pub use server::{Addr, TestServer};
pub use suite::{Needs, Report, SuiteOptions, TimeControl, WallClock};
pub use tempdir::tempdir;
