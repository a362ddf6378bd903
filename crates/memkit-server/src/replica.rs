//! A memkitd that is one node of a replicated group (`--raft-node`, `--raft-listen`,
//! `--raft-peers`): the node (`memkit_raft::Node`) on a runtime of its own, what a parked
//! connection hands it ([`Job`]), and the figures `stats` reports.
//!
//! The engine connections read is the node's state machine's: committed writes reach it
//! through the log, on every node in the same order. A write never runs on it directly:
//! the executor turns it into a `memkit_raft::Write`, the connection parks, and a [`Job`]
//! carries it to the leader (forwarded when this node does not lead); the reply renders
//! the outcome the entry had. A linearizable read parks for a read barrier first
//! ([`Barriers`]): one barrier serves every connection that asked before it began, so a
//! busy node asks the leader once per round trip, not once per read.
//!
//! Why a runtime of its own: the worker threads are not tokio's, and the peer protocol,
//! elections and the log's fsyncs must not wait behind the accept loop or a busy worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use memkit_engine::Engine;
use memkit_raft::{Node, Reply, Role, Write};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::config::raft::{RaftSettings, ReadConsistency};
use crate::config::{EX_OSERR, Refusal};
use crate::state::gate::Completer;

/// How long the figures' refresher waits between two reads of the commit index.
const FIGURES_EVERY: Duration = Duration::from_millis(20);

/// How long a stop waits for Raft to shut down before the runtime is dropped under it.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// One node of the group, serving a memkitd.
pub struct Replica {
    node: Arc<Node>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    handle: tokio::runtime::Handle,
    read: ReadConsistency,
    barriers: Arc<Barriers>,
    /// The last commit index read (openraft's metrics do not carry it).
    commit_index: Arc<AtomicU64>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("node", &self.node.id())
            .field("read", &self.read)
            .finish_non_exhaustive()
    }
}

/// What one parked connection asks of the group: its writes, in order, then (for reads) a
/// barrier. What came of them lands in [`Job::done`].
#[derive(Debug, Default)]
pub struct Job {
    /// The writes, in the order the connection made them.
    pub writes: Vec<Write>,
    /// A read waits for a barrier after them.
    pub barrier: bool,
    /// Filled in before the connection's completer fires.
    pub done: Arc<Mutex<Done>>,
}

/// What came of a [`Job`].
#[derive(Debug, Default)]
pub struct Done {
    /// Each write's outcome, or the error to answer it with.
    pub replies: Vec<Result<Reply, String>>,
    /// The barrier: `Some(Err)` when the reads must be answered with an error.
    pub barrier: Option<Result<(), String>>,
}

/// `stats`' replication lines, read now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figures {
    pub role: &'static str,
    pub leader: u64,
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub last_log_index: u64,
    pub node: u64,
}

impl Replica {
    /// Starts this node of the group the settings describe, its log and snapshots in
    /// `dir`. On an empty `dir` the node with the lowest id bootstraps the group.
    pub fn start(
        dir: &std::path::Path,
        s: &RaftSettings,
        memory_limit: usize,
    ) -> Result<Replica, Refusal> {
        let refuse = |what: &str, e: &dyn std::fmt::Display| {
            Refusal::new(EX_OSERR, format!("replication: {what}: {e}"))
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("memkit-raft")
            .enable_all()
            .build()
            .map_err(|e| refuse("runtime", &e))?;
        let cfg = memkit_raft::Config {
            memory_limit,
            heartbeat_ms: s.heartbeat_ms,
            // openraft 0.9 adds a leader lease of the range's top to a follower's wait
            // while it has a leader (`RaftCore::handle_tick_election`): a follower starts an
            // election after lease + timeout, so (2x, 4x) is 6 to 8 heartbeats of silence.
            // (5x, 10x) made that 15 to 20: 1.5-2.0 s at the default 100 ms before a
            // leader's SIGKILL even began an election (`memkit-bench raft`, failover).
            election_timeout_ms: (s.heartbeat_ms * 2, s.heartbeat_ms * 4),
            request_timeout: s.timeout,
            snapshot_after: s.snapshot_after,
            keep_behind_snapshot: (s.snapshot_after / 10).min(1000),
            ..Default::default()
        };
        // Started on its runtime and waited for from here: memkitd calls this from within
        // its own runtime, where `block_on` is not allowed.
        let (tx, rx) = std::sync::mpsc::channel();
        let (id, dir, listen, peers) =
            (s.node, dir.join("raft"), s.listen.clone(), s.peers.clone());
        runtime.spawn(async move {
            let _ = tx.send(Node::start_with(id, &dir, &listen, peers, cfg).await);
        });
        let node = rx
            .recv()
            .map_err(|e| refuse("node", &e))?
            .map_err(|e| refuse("node", &e))?;
        let node = Arc::new(node);
        let commit_index = Arc::new(AtomicU64::new(0));
        runtime.spawn(refresh_commit_index(
            Arc::downgrade(&node),
            commit_index.clone(),
        ));
        Ok(Replica {
            barriers: Arc::new(Barriers::new(node.clone())),
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
            node,
            read: s.read,
            commit_index,
        })
    }

    /// The engine connections read: the node's state machine's.
    pub fn engine(&self) -> Arc<Engine> {
        self.node.store().engine()
    }

    /// Whether reads wait for a barrier (`--read-consistency linearizable`).
    pub fn linearizable(&self) -> bool {
        self.read == ReadConsistency::Linearizable
    }

    /// Carries out `job`, then calls `done` (on the node's runtime). Each write waits for
    /// the one before it: a connection's writes reach the log in its order. Once they are
    /// committed, this node applies them too before the replies leave, so the connection's
    /// next read here sees them.
    pub fn submit(&self, job: &Job, done: Completer) {
        let node = self.node.clone();
        let barriers = self.barriers.clone();
        let writes = job.writes.clone();
        let barrier = job.barrier;
        let slot = job.done.clone();
        self.handle.spawn(async move {
            let mut replies = Vec::with_capacity(writes.len());
            let mut last = None;
            for w in writes {
                match node.write_indexed(w).await {
                    Ok((r, index)) => {
                        last = Some(index);
                        replies.push(Ok(r));
                    }
                    Err(e) => replies.push(Err(e.to_string())),
                }
            }
            let mut read = Ok(());
            if let Some(index) = last
                && let Err(e) = node.applied(index).await
            {
                read = Err(format!("write not applied here: {e}"));
            }
            if barrier && read.is_ok() {
                read = barriers.wait().await;
            }
            *slot.lock() = Done {
                replies,
                barrier: barrier.then_some(read),
            };
            // Failures are answered request by request (SERVER_ERROR), not by closing.
            done.complete(Ok(()));
        });
    }

    /// The replication lines of `stats`.
    pub fn figures(&self) -> Figures {
        let m = self.node.metrics_now();
        let applied = m.applied_index.unwrap_or(0);
        Figures {
            role: match m.role {
                Role::Leader => "leader",
                Role::Follower => "follower",
                Role::Candidate => "candidate",
                Role::Learner => "learner",
                Role::Shutdown => "shutdown",
            },
            leader: m.leader.unwrap_or(0),
            term: m.term,
            // Read a moment ago: never shown below what is applied.
            commit_index: self.commit_index.load(Relaxed).max(applied),
            applied_index: applied,
            last_log_index: m.last_log_index.unwrap_or(0),
            node: self.node.id(),
        }
    }

    /// Stops the node (its Raft, then its runtime, which closes its peer port and
    /// connections). The log stays on disk. Callable from within another runtime.
    pub fn stop(&self) {
        let Some(rt) = self.runtime.lock().take() else {
            return;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let raft = self.node.raft().clone();
        rt.spawn(async move {
            let _ = raft.shutdown().await;
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(STOP_WAIT);
        rt.shutdown_background();
    }
}

/// Keeps [`Replica::commit_index`] near the node's, while the node lives.
async fn refresh_commit_index(node: std::sync::Weak<Node>, into: Arc<AtomicU64>) {
    while let Some(n) = node.upgrade() {
        if let Some(c) = n.metrics().await.commit_index {
            into.store(c, Relaxed);
        }
        drop(n);
        tokio::time::sleep(FIGURES_EVERY).await;
    }
}

/// Read barriers shared by every connection: while one is under way, those who ask wait
/// for the next, which starts when it ends (a barrier begun before a read arrived does not
/// cover it).
struct Barriers {
    node: Arc<Node>,
    state: Mutex<Round>,
}

#[derive(Default)]
struct Round {
    running: bool,
    next: Vec<oneshot::Sender<Result<(), String>>>,
}

impl Barriers {
    fn new(node: Arc<Node>) -> Barriers {
        Barriers {
            node,
            state: Mutex::new(Round::default()),
        }
    }

    /// Waits for a barrier that began after this call.
    async fn wait(self: &Arc<Self>) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut st = self.state.lock();
            st.next.push(tx);
            !std::mem::replace(&mut st.running, true)
        };
        if start {
            tokio::spawn(self.clone().rounds());
        }
        rx.await
            .unwrap_or_else(|_| Err("the barrier was abandoned".into()))
    }

    /// Runs barriers until nobody waits.
    async fn rounds(self: Arc<Self>) {
        loop {
            let waiting = {
                let mut st = self.state.lock();
                if st.next.is_empty() {
                    st.running = false;
                    return;
                }
                std::mem::take(&mut st.next)
            };
            let r = self
                .node
                .read_barrier()
                .await
                .map(|_| ())
                .map_err(|e| e.to_string());
            for w in waiting {
                let _ = w.send(r.clone());
            }
        }
    }
}
