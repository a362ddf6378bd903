//! memkit-raft: memcached's writes replicated through a Raft log (openraft 0.9), so a
//! group of nodes keeps every acknowledged write while a majority of them is up, and
//! every command means the same on every node. memkitd's `--raft-*` run it
//! (`memkit_server::replica`; `docs/replication.md`).
//!
//! Map:
//! - [`types`]: the log's vocabulary: [`Write`] (a mutation with absolute times),
//!   [`Proposal`] (writes and the leader's time stamp: one entry), [`Reply`] (the
//!   engine's outcome), CAS values ([`cas_for`]), openraft's [`TypeConfig`].
//! - [`clock`]: [`LogClock`], the time the state machine runs at: the largest leader stamp
//!   applied, so expiry is judged alike on every node (and why reads use it too).
//! - [`log_store`]: the Raft log on fjall, synced before openraft counts on it.
//! - [`state_machine`]: committed writes applied to the engine over a persistent store
//!   (memkit-persist, batched: each entry's changes and the applied index in one fjall
//!   batch), each CAS from the entry's log index and the write's place in it; [`Store`],
//!   what reads share with it.
//! - [`snapshot`]: the store's items (CAS and absolute expiry kept), from a frozen view of
//!   it, as a snapshot file (versioned, checksummed, items streamed), kept in the node's
//!   directory and sent to peers as it is.
//! - [`codec`]: the binary encoding (postcard) of log entries, the log's metadata, peer
//!   frames and snapshot headers.
//! - [`status`]: [`Status`], the group as an operator sees it: roles, [`Membership`] with
//!   addresses, each follower's lag behind the leader.
//! - [`members`]: membership changes as the leader makes them ([`Change`]: add a learner,
//!   promote, remove), finishing an interrupted one when sent again, refusing one that
//!   would leave no majority able to commit.
//! - [`tls`]: [`PeerTls`], the peer protocol over TLS 1.3 with mutual certificates: the
//!   chain checked against the group's CA both ways, host names not.
//! - [`network`]: the peer protocol (length-prefixed postcard frames over TCP, or TLS over
//!   it) and its client side: openraft's network factory, a pool for forwarded requests
//!   (this node's own peer list first, then the current membership's addresses).
//! - [`server`]: the peer protocol's server side, refusing peers without a certificate
//!   from the CA (with TLS) and senders outside the group (a removed node once its removal
//!   is committed).
//! - [`lease`]: [`lease::Lease`], the leader's lease: while a majority's acknowledgement is
//!   recent, no other leader can exist, and reads need no heartbeat round.
//! - [`leader`]: what only the leader does: confirm a read index (by the lease, or a round).
//! - [`proposer`]: [`proposer::Proposer`], every write a node takes, with whatever others
//!   are waiting, as one entry: proposed with the leader's stamp, or forwarded to the
//!   leader in one call.
//! - [`node`]: [`Node`], the façade: start (bootstrap or rejoin), write (forwarded to the
//!   leader), linearizable reads, membership changes and status (forwarded too), metrics,
//!   snapshot, shutdown.
//! - [`error`]: [`ClusterError`]: why the group did not answer, and whether a retry is safe.
//!
//! Dependencies point one way: `types`, `error` and `codec` under everything; `clock` and
//! `snapshot` under `state_machine`; `status` under `members`, both under `network`, and
//! so is `tls`; `lease` under `leader`; `network` and `leader` under `proposer`; `proposer` and `members` under
//! `server`; `node` on top.
//!
//! Semantics in one sentence: a write is acknowledged once a majority has it in its log on
//! disk and the leader has applied it; its outcome and its CAS (from the log index) are the
//! same on every node, and its times are the leader's, absolute.

// openraft's `StorageError` (224 bytes) is the error its storage traits return; the helpers
// that feed them return it too, rather than a box every caller would unwrap again.
#![allow(clippy::result_large_err)]

pub mod clock;
pub mod codec;
pub mod error;
pub mod leader;
pub mod lease;
pub mod log_store;
pub mod members;
pub mod network;
pub mod node;
pub mod proposer;
pub mod server;
pub mod snapshot;
pub mod state_machine;
pub mod status;
pub mod tls;
pub mod types;

pub use clock::LogClock;
pub use error::{ClusterError, ReadError, WriteError};
pub use members::Change;
pub use memkit_persist::Durability;
pub use node::{Config, Metrics, Node, StartError};
pub use state_machine::{StateMachine, Store};
pub use status::{Follower, Membership, Replication, Role, Status, View};
pub use tls::PeerTls;
pub use types::{
    ArithResult, DeleteResult, ExptimeUnix, MAX_WRITES, Mode, NodeId, Outcomes, Proposal, Refusal,
    Reply, SetExptime, StoreResult, TypeConfig, Vivify, Write, cas_for, entry_of_cas, exptime_unix,
};
