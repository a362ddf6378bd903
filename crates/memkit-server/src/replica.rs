//! A memkitd that is one node of a replicated group (`--raft-node`, `--raft-listen`,
//! `--raft-peers`): the node (`memkit_raft::Node`) on a runtime of its own, what a parked
//! connection hands it ([`Job`]), and the figures `stats` and the exporter report.
//!
//! The engine connections read is the node's state machine's: committed writes reach it
//! through the log, on every node in the same order. A write never runs on it directly:
//! the executor turns it into a `memkit_raft::Write`, the connection parks, and a [`Job`]
//! carries it to the leader (forwarded when this node does not lead); the reply renders
//! the outcome the entry had. A linearizable read parks for a read barrier first
//! (`Barriers`): one barrier serves every connection that asked before it began, so a
//! busy node asks the leader once per round trip, not once per read.
//!
//! Why a runtime of its own: the worker threads are not tokio's, and the peer protocol,
//! elections and the log's fsyncs must not wait behind the accept loop or a busy worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use memkit_engine::Engine;
use memkit_raft::{Node, Replication, Reply, Role, Write};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::config::raft::{RaftSettings, ReadConsistency};
use crate::config::{EX_OSERR, Refusal};
use crate::state::gate::Completer;

/// How long the figures' refresher waits between two reads of the commit index.
const FIGURES_EVERY: Duration = Duration::from_millis(20);

/// How long the refresher waits for the leader's own status. It never leaves the node
/// while the node leads; one that stepped down in between asks the new leader over the
/// network, and the refresher must not stall on that.
const STATUS_WAIT: Duration = Duration::from_millis(500);

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
    /// While this node leads, its followers' progress as last read (for the exporter,
    /// which must not wait on the node).
    replication: Arc<Mutex<Option<Replication>>>,
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
    /// An operator's `cluster` command.
    pub admin: Option<Admin>,
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
    /// The `cluster` command's reply lines, or why it failed.
    pub admin: Option<Result<Vec<String>, String>>,
}

/// `cluster ...`: the group's membership, seen or changed from any node (a change is
/// carried out by the leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admin {
    /// `cluster status`.
    Status,
    /// `cluster add ID HOST:PORT`: joins as a learner, catches up, then votes.
    Add(u64, String),
    /// `cluster remove ID`.
    Remove(u64),
}

impl Admin {
    /// Parses `cluster`'s arguments.
    pub fn parse(args: &[&[u8]]) -> Option<Admin> {
        let s = |b: &[u8]| std::str::from_utf8(b).ok().map(str::to_string);
        let id = |b: &[u8]| s(b)?.parse::<u64>().ok().filter(|&n| n > 0);
        match args {
            [b"status"] => Some(Admin::Status),
            [b"add", i, addr] => Some(Admin::Add(id(i)?, s(addr).filter(|a| a.contains(':'))?)),
            [b"remove", i] => Some(Admin::Remove(id(i)?)),
            _ => None,
        }
    }

    async fn run(self, node: &Node) -> Result<Vec<String>, String> {
        let changed = match self {
            Admin::Status => return Ok(status_lines(&node.status().await)),
            Admin::Add(id, addr) => node.add(id, &addr).await,
            Admin::Remove(id) => node.remove(id).await,
        };
        let ids = |m: &std::collections::BTreeMap<u64, String>| {
            m.keys().map(u64::to_string).collect::<Vec<_>>().join(",")
        };
        changed
            .map(|m| {
                vec![format!(
                    "OK voters={} learners={}",
                    ids(&m.voters),
                    ids(&m.learners)
                )]
            })
            .map_err(|e| e.to_string())
    }
}

/// `cluster status` as `STAT` lines: this node's view, then a line a member.
fn status_lines(st: &memkit_raft::Status) -> Vec<String> {
    let n = |v: Option<u64>| v.unwrap_or(0);
    let mut out = vec![
        format!("STAT node {}", st.id),
        format!("STAT role {}", role_name(st.role)),
        format!("STAT leader {}", n(st.leader)),
        format!("STAT term {}", st.term),
        format!("STAT last_log_index {}", n(st.last_log_index)),
        format!("STAT commit_index {}", n(st.commit_index)),
        format!("STAT applied_index {}", n(st.applied_index)),
        format!(
            "STAT joint {}",
            if st.membership.is_joint() {
                "yes"
            } else {
                "no"
            }
        ),
    ];
    let repl = st.replication.as_ref();
    let members = st
        .membership
        .voters
        .iter()
        .map(|m| (m, "voter"))
        .chain(st.membership.learners.iter().map(|m| (m, "learner")));
    for ((id, addr), kind) in members {
        let f = repl.and_then(|r| r.followers.iter().find(|f| f.id == *id));
        let lag = match (f, repl) {
            (Some(f), _) => format!(" matched={} lag={}", n(f.matched), f.lag),
            (None, Some(r)) if r.leader == *id => " leader".to_string(),
            _ => String::new(),
        };
        out.push(format!("STAT member {id} {addr} {kind}{lag}"));
    }
    out.push("END".into());
    out
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Candidate => "candidate",
        Role::Learner => "learner",
        Role::Shutdown => "shutdown",
    }
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
    /// `dir`. On an empty `dir` the node with the lowest id bootstraps the group. Its log's
    /// appends are durable as `durability` (`--durability`) says. With `tls` (`-Z`:
    /// [`crate::tls::peer_tls`]) the peer protocol is TLS with mutual certificates.
    pub fn start(
        dir: &std::path::Path,
        s: &RaftSettings,
        memory_limit: usize,
        durability: memkit_persist::Durability,
        tls: Option<memkit_raft::PeerTls>,
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
            // election after lease + timeout, so (2x, 4x) is 6 to 8 heartbeats of silence,
            // which keeps failover under a second at the default 100 ms.
            election_timeout_ms: (s.heartbeat_ms * 2, s.heartbeat_ms * 4),
            request_timeout: s.timeout,
            snapshot_after: s.snapshot_after,
            keep_behind_snapshot: (s.snapshot_after / 10).min(1000),
            tls,
            durability,
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
        let started = match rx.recv() {
            Ok(r) => r.map_err(|e| refuse("node", &e)),
            Err(e) => Err(refuse("node", &e)),
        };
        let node = match started {
            Ok(node) => Arc::new(node),
            Err(refusal) => {
                // Dropped here it would wait for its tasks, which tokio forbids inside
                // memkitd's own runtime (a panic instead of the refusal).
                runtime.shutdown_background();
                return Err(refusal);
            }
        };
        let commit_index = Arc::new(AtomicU64::new(0));
        let replication = Arc::new(Mutex::new(None));
        runtime.spawn(refresh_figures(
            Arc::downgrade(&node),
            commit_index.clone(),
            replication.clone(),
        ));
        Ok(Replica {
            barriers: Arc::new(Barriers::new(node.clone())),
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
            node,
            read: s.read,
            commit_index,
            replication,
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

    /// Whether this node reads linearizably without a barrier now: it leads, and its lease
    /// holds (`memkit_raft::lease`).
    pub fn reads_by_lease(&self) -> bool {
        self.node.reads_by_lease()
    }

    /// Carries out `job`, then calls `done` (on the node's runtime). Its writes (a
    /// connection's pipelined writes, `session::gather`) go to the log together, in one
    /// entry, in the connection's order. Once they are committed, this node applies them too
    /// before the replies leave, so the connection's next read here sees them.
    pub fn submit(&self, job: &mut Job, done: Completer) {
        if job.writes.is_empty() && job.admin.is_none() && job.barrier {
            // A read alone: the connection waits on the next barrier itself.
            return self
                .barriers
                .enlist(Waiter::Conn(job.done.clone(), done), &self.handle);
        }
        let node = self.node.clone();
        let barriers = self.barriers.clone();
        // Taken, not copied: only `done` is read once the job is over.
        let writes = std::mem::take(&mut job.writes);
        let barrier = job.barrier;
        let admin = job.admin.take();
        let slot = job.done.clone();
        self.handle.spawn(async move {
            if let Some(a) = admin {
                let reply = a.run(&node).await;
                slot.lock().admin = Some(reply);
                return done.complete(Ok(()));
            }
            let (replies, last) = match writes.len() {
                0 => (Vec::new(), None),
                n => match node.write_all(writes).await {
                    Ok((rs, index)) => (rs.into_iter().map(Ok).collect(), Some(index)),
                    Err(e) => (vec![Err(e.to_string()); n], None),
                },
            };
            let mut read = Ok(());
            if let Some(index) = last
                && let Err(e) = node.applied(index).await
            {
                read = Err(format!("write not applied here: {e}"));
            }
            if barrier && read.is_ok() {
                read = barriers.wait(&tokio::runtime::Handle::current()).await;
            }
            *slot.lock() = Done {
                replies,
                barrier: barrier.then_some(read),
                admin: None,
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
            role: role_name(m.role),
            leader: m.leader.unwrap_or(0),
            term: m.term,
            // Read a moment ago: never shown below what is applied.
            commit_index: self.commit_index.load(Relaxed).max(applied),
            applied_index: applied,
            last_log_index: m.last_log_index.unwrap_or(0),
            node: self.node.id(),
        }
    }

    /// While this node leads: how far each follower is behind, as read a moment ago
    /// (`None` on any other node). Does not wait: [`Node::status`] may.
    pub fn replication(&self) -> Option<Replication> {
        if self.node.metrics_now().role != Role::Leader {
            return None;
        }
        self.replication.lock().clone()
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

/// Keeps [`Replica::commit_index`] near the node's and, while it leads,
/// [`Replica::replication`] too, while the node lives. A leader's status carries its
/// commit index, so each round asks the node's Raft task once either way.
async fn refresh_figures(
    node: std::sync::Weak<Node>,
    commit: Arc<AtomicU64>,
    replication: Arc<Mutex<Option<Replication>>>,
) {
    while let Some(n) = node.upgrade() {
        let (c, r) = if n.metrics_now().role == Role::Leader {
            match tokio::time::timeout(STATUS_WAIT, n.status()).await {
                // Another leader's view (this node stepped down meanwhile) is not ours.
                Ok(st) => (
                    st.commit_index,
                    st.replication.filter(|r| r.leader == n.id()),
                ),
                Err(_) => (None, None),
            }
        } else {
            (n.metrics().await.commit_index, None)
        };
        if let Some(c) = c {
            commit.store(c, Relaxed);
        }
        *replication.lock() = r;
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
    next: Vec<Waiter>,
}

/// Who waits for the next barrier.
enum Waiter {
    /// A task on the node's runtime (a read after writes).
    Task(oneshot::Sender<Result<(), String>>),
    /// A parked connection, completed by the barrier itself: a read alone costs no task.
    Conn(Arc<Mutex<Done>>, Completer),
}

impl Waiter {
    fn tell(self, r: &Result<(), String>) {
        match self {
            Waiter::Task(tx) => {
                let _ = tx.send(r.clone());
            }
            Waiter::Conn(slot, done) => {
                slot.lock().barrier = Some(r.clone());
                done.complete(Ok(()));
            }
        }
    }
}

impl Barriers {
    fn new(node: Arc<Node>) -> Barriers {
        Barriers {
            node,
            state: Mutex::new(Round::default()),
        }
    }

    /// Adds `w` to the next barrier, starting the rounds on `rt` if none runs.
    fn enlist(self: &Arc<Self>, w: Waiter, rt: &tokio::runtime::Handle) {
        let start = {
            let mut st = self.state.lock();
            st.next.push(w);
            !std::mem::replace(&mut st.running, true)
        };
        if start {
            rt.spawn(self.clone().rounds());
        }
    }

    /// Waits for a barrier that began after this call.
    async fn wait(self: &Arc<Self>, rt: &tokio::runtime::Handle) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        self.enlist(Waiter::Task(tx), rt);
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
                w.tell(&r);
            }
        }
    }
}
