//! [`Node`]: one member of a replicated group, ready to take writes and reads.
//!
//! A node's directory holds its log (`DIR/log`, fjall), its state machine's store
//! (`DIR/state`, fjall) and its last snapshot (`DIR/snapshot`). The group starts as a list of `id -> HOST:PORT` given to every node,
//! itself included. A node started on an empty directory with the lowest id bootstraps the
//! group (openraft's `initialize`); every other start rejoins: the leader brings it up to
//! date from its log, or with a snapshot when the log no longer reaches back far enough.
//! A wiped node with the lowest id must not bootstrap a second group: start it with
//! [`Config::bootstrap`] off.
//!
//! From then on the membership is in the log, and changes through it: [`Node::add`],
//! [`Node::add_learner`], [`Node::promote`], [`Node::remove`], from any node. A node that
//! joins later starts on an empty directory with [`Config::bootstrap`] off and, as its
//! `peers`, itself and the group's current members: until the leader's first message
//! reaches it, it admits only those (see `server.rs`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use memkit_types::Item;
use openraft::{BasicNode, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{ClusterError, ReadError, WriteError};
use crate::leader;
use crate::lease::Lease;
use crate::log_store::LogStore;
use crate::members::{self, Change};
use crate::network::{CallError, Network, Pool, Request, Response};
use crate::proposer::Proposer;
use crate::server::{PING_TIMEOUT, Service, serve};
use crate::state_machine::{StateMachine, Store};
pub use crate::status::Role;
use crate::status::{Membership, Status, View};
use crate::tls::PeerTls;
use crate::types::{ExptimeUnix, NodeId, Outcomes, Raft, Reply, Write};

/// The longest pause between two tries of a request (see `retry`).
const RETRY_PAUSE_MAX: Duration = Duration::from_millis(40);

/// How long [`Node::snapshot`] waits for a snapshot before triggering one again (a
/// trigger that meets a build under way is dropped).
const SNAPSHOT_RETRIGGER: Duration = Duration::from_millis(200);

/// How a node runs. `Default` suits a LAN; tests shorten the timeouts.
#[derive(Debug, Clone)]
pub struct Config {
    /// The memory budget in bytes: the engine's RAM cache and fjall's caches of the store
    /// (`memkit_persist::split_budget`).
    pub memory_limit: usize,
    /// Heartbeat period, milliseconds.
    pub heartbeat_ms: u64,
    /// Election timeout range, milliseconds.
    pub election_timeout_ms: (u64, u64),
    /// A snapshot is taken after this many entries since the last one.
    pub snapshot_after: u64,
    /// Entries kept in the log behind a snapshot (for followers slightly behind).
    pub keep_behind_snapshot: u64,
    /// How long [`Node::write`] and the reads keep trying (retrying only what surely was
    /// not proposed) before they give up.
    pub request_timeout: Duration,
    /// Whether a fresh directory and the lowest id bootstrap the group.
    pub bootstrap: bool,
    /// How long a membership change keeps trying, a new learner's catching up included
    /// (a snapshot of the whole engine may have to travel).
    pub change_timeout: Duration,
    /// The peer protocol over TLS with mutual certificates (`crate::tls`); `None`: plain
    /// TCP. Every node of a group must agree: a TLS node and a plain one cannot talk.
    pub tls: Option<PeerTls>,
    /// When an appended entry counts as saved: synced (`Sync`, the default), written to
    /// the OS and synced within a period, or written to the OS (see `log_store.rs`).
    pub durability: memkit_persist::Durability,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            memory_limit: 64 << 20,
            heartbeat_ms: 100,
            election_timeout_ms: (500, 1000),
            snapshot_after: 10_000,
            keep_behind_snapshot: 1_000,
            request_timeout: Duration::from_secs(5),
            bootstrap: true,
            change_timeout: Duration::from_secs(60),
            tls: None,
            durability: memkit_persist::Durability::Sync,
        }
    }
}

/// Why a node could not start.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot start the node: {}", self.0)
    }
}

impl std::error::Error for StartError {}

fn start_err(what: &str) -> impl FnOnce(&dyn std::fmt::Display) -> StartError + '_ {
    move |e| StartError(format!("{what}: {e}"))
}

/// What [`Node::metrics`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    /// This node.
    pub id: NodeId,
    /// Its role.
    pub role: Role,
    /// The leader it knows of.
    pub leader: Option<NodeId>,
    /// The current term.
    pub term: u64,
    /// The last index in its log.
    pub last_log_index: Option<u64>,
    /// The last index it knows committed.
    pub commit_index: Option<u64>,
    /// The last index its state machine applied. openraft publishes it after answering the
    /// entries' clients: right after [`Node::write`] returns, even on the leader, it may
    /// still name an earlier entry. To wait for a write's own entry, use its index (a stored
    /// item's CAS is that index).
    pub applied_index: Option<u64>,
    /// The last index its latest snapshot covers.
    pub snapshot_index: Option<u64>,
    /// How many times its log synced appended entries (see [`Config::durability`]).
    pub log_syncs: u64,
}

/// One running member of a group.
pub struct Node {
    id: NodeId,
    raft: Raft,
    store: Arc<Store>,
    /// The log openraft writes, for its counters.
    log: LogStore,
    pool: Arc<Pool>,
    proposer: Proposer,
    proposing: JoinHandle<()>,
    lease: Arc<Lease>,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
    addr: std::net::SocketAddr,
    request_timeout: Duration,
    change_timeout: Duration,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Starts node `id` with its data in `dir`, listening for peers on `listen_addr`, in
    /// the group `peers` (every node's id and `HOST:PORT`, this one's included), with the
    /// default [`Config`].
    pub async fn start(
        id: NodeId,
        dir: &Path,
        listen_addr: &str,
        peers: BTreeMap<NodeId, String>,
    ) -> Result<Node, StartError> {
        Node::start_with(id, dir, listen_addr, peers, Config::default()).await
    }

    /// [`Node::start`] with a [`Config`].
    pub async fn start_with(
        id: NodeId,
        dir: &Path,
        listen_addr: &str,
        peers: BTreeMap<NodeId, String>,
        cfg: Config,
    ) -> Result<Node, StartError> {
        let log_dir = dir.join("log");
        let fresh = !log_dir.exists();
        std::fs::create_dir_all(dir).map_err(|e| start_err("directory")(&e))?;
        let log = LogStore::open(&log_dir, cfg.durability).map_err(|e| start_err("log")(&e))?;
        let sm = StateMachine::open(dir, cfg.memory_limit)
            .map_err(|e| start_err("state machine")(&e))?;
        let store = sm.store();
        let raft_cfg = openraft::Config {
            cluster_name: "memkit".into(),
            heartbeat_interval: cfg.heartbeat_ms,
            election_timeout_min: cfg.election_timeout_ms.0,
            election_timeout_max: cfg.election_timeout_ms.1,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_after),
            max_in_snapshot_log_to_keep: cfg.keep_behind_snapshot,
            // Bounds a frame (see `network::MAX_FRAME`).
            max_payload_entries: 16,
            snapshot_max_chunk_size: 1 << 20,
            // A snapshot's last chunk is answered once the follower has installed it: a
            // million items take seconds. openraft's 200 ms timed that call out every time,
            // and the leader sent the whole snapshot again.
            install_snapshot_timeout: 30_000,
            ..Default::default()
        }
        .validate()
        .map_err(|e| start_err("config")(&e))?;
        // A node that restarts may have accepted a leader's request just before it went down
        // and forgotten when: voting (or campaigning) now could elect a second leader while
        // the first still reads by its lease (`crate::lease`). So it waits a lease first.
        let lease_time = Duration::from_millis(cfg.election_timeout_ms.1);
        if !fresh {
            tokio::time::sleep(lease_time).await;
        }
        // The highest commit index this node told a follower (its lease reads by it).
        let sent_commit = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let raft = Raft::new(
            id,
            Arc::new(raft_cfg),
            Network::new(id, peers.clone(), cfg.tls.as_ref(), sent_commit.clone()),
            log.clone(),
            sm,
        )
        .await
        .map_err(|e| start_err("raft")(&e))?;
        let listener = TcpListener::bind(listen_addr)
            .await
            .map_err(|e| start_err("listen")(&e))?;
        let addr = listener.local_addr().map_err(|e| start_err("listen")(&e))?;
        let (stop, stop_rx) = watch::channel(false);
        let pool = Pool::new(id, peers.clone(), raft.metrics(), cfg.tls.as_ref());
        let (proposer, proposing) =
            Proposer::start(id, raft.clone(), pool.clone(), cfg.request_timeout);
        let lease = Lease::new(id, lease_time, store.clone(), sent_commit);
        tokio::spawn(lease.clone().watch(raft.clone()));
        let svc = Arc::new(Service {
            raft: raft.clone(),
            peers: peers.clone(),
            request_timeout: cfg.request_timeout,
            pool: pool.clone(),
            proposer: proposer.clone(),
            lease: lease.clone(),
            tls: cfg.tls.as_ref().map(|t| t.server.clone()),
        });
        let server = tokio::spawn(serve(listener, svc, stop_rx));
        if fresh && cfg.bootstrap && peers.keys().next() == Some(&id) {
            let members: BTreeMap<NodeId, BasicNode> = peers
                .iter()
                .map(|(id, addr)| (*id, BasicNode::new(addr)))
                .collect();
            raft.initialize(members)
                .await
                .map_err(|e| start_err("initialize")(&e))?;
        }
        Ok(Node {
            id,
            raft,
            store,
            log,
            pool,
            proposer,
            proposing,
            lease,
            stop,
            server,
            addr,
            request_timeout: cfg.request_timeout,
            change_timeout: cfg.change_timeout,
        })
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The address the peer protocol listens on.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// openraft's handle, for what this façade does not cover (membership changes,
    /// triggering a snapshot, waiting on metrics).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// The local state: the engine and the log clock (for local, non-linearizable reads).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The leader this node knows of.
    /// Whether this node's Raft still runs. One stopped by a storage failure (a full disk, a
    /// failed fsync) still names the last leader it knew: forwarding a write there would
    /// have it acknowledged by a node that can no longer apply it, so the node refuses.
    fn running(&self) -> Result<(), ClusterError> {
        let m = self.raft.metrics().borrow().clone();
        match (&m.running_state, m.state) {
            (Err(e), _) => Err(ClusterError::Stopped(e.to_string())),
            (Ok(()), openraft::ServerState::Shutdown) => {
                Err(ClusterError::Stopped("shut down".into()))
            }
            _ => Ok(()),
        }
    }

    fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Applies `write` through the group: proposed here if this node leads, else forwarded
    /// to the leader, in an entry with whatever other writes are waiting
    /// (`crate::proposer`). Answers once a majority holds it durably and it is applied (on
    /// the leader). Retries, until the request timeout, only what surely was not proposed.
    pub async fn write(&self, write: Write) -> Result<Reply, WriteError> {
        Ok(self.write_indexed(write).await?.0)
    }

    /// [`Node::write`], with the log index of the entry that carried the write: a reader on
    /// this node that waits until it has applied that far sees the write.
    pub async fn write_indexed(&self, write: Write) -> Result<(Reply, u64), WriteError> {
        let (mut replies, index) = self.write_all(vec![write]).await?;
        match replies.pop() {
            Some(r) => Ok((r, index)),
            None => Err(ClusterError::Indeterminate("no outcome".into())),
        }
    }

    /// Applies `writes` through the group in one entry, in their order (at most
    /// [`crate::MAX_WRITES`]): one client's pipelined writes. Returns each one's outcome
    /// and the entry's log index; fails as a whole.
    pub async fn write_all(&self, writes: Vec<Write>) -> Result<Outcomes, WriteError> {
        let deadline = Instant::now() + self.request_timeout;
        retry(deadline, Duration::ZERO, || {
            self.write_once(writes.clone(), deadline)
        })
        .await
    }

    /// Waits (up to the request timeout) until this node has applied the entry at `index`.
    pub async fn applied(&self, index: u64) -> Result<(), ReadError> {
        self.raft
            .wait(Some(self.request_timeout))
            .applied_index_at_least(Some(index), "applied")
            .await
            .map(|_| ())
            .map_err(|_| ClusterError::Timeout)
    }

    async fn write_once(
        &self,
        writes: Vec<Write>,
        deadline: Instant,
    ) -> Result<Outcomes, WriteError> {
        self.running()?;
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::timeout(left, self.proposer.submit(writes, false))
            .await
            .unwrap_or_else(|_| Err(ClusterError::Indeterminate("timed out".into())))
    }

    /// Reads `key` linearizably: the leader confirms it still leads and names the last
    /// committed index; this node waits until it has applied that far, then reads its own
    /// engine. So a read anywhere sees every write acknowledged before it began.
    pub async fn read_linearizable(&self, key: &[u8]) -> Result<Option<Item>, ReadError> {
        Ok(self.read_with_expiry(key).await?.map(|(item, _)| item))
    }

    /// [`Node::read_linearizable`], with the item's absolute expiry.
    pub async fn read_with_expiry(
        &self,
        key: &[u8],
    ) -> Result<Option<(Item, ExptimeUnix)>, ReadError> {
        self.read_barrier().await?;
        self.store
            .read(key)
            .map_err(|e| ClusterError::Engine(e.into()))
    }

    /// What a linearizable read waits for before it reads this node's engine: the leader
    /// confirms it still leads and names the last committed index, and this node applies
    /// that far. Every read that began before the call may then read locally (one barrier
    /// serves many reads). Returns the index.
    pub async fn read_barrier(&self) -> Result<u64, ReadError> {
        let deadline = Instant::now() + self.request_timeout;
        let index = retry(deadline, Duration::ZERO, || self.read_index_once(deadline)).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        self.raft
            .wait(Some(left))
            .applied_index_at_least(Some(index), "linearizable read")
            .await
            .map_err(|_| ClusterError::Timeout)?;
        Ok(index)
    }

    async fn read_index_once(&self, deadline: Instant) -> Result<u64, ReadError> {
        self.running()?;
        let left = deadline.saturating_duration_since(Instant::now());
        match self.leader() {
            None => Err(ClusterError::NoLeader),
            Some(l) if l == self.id => {
                tokio::time::timeout(left, leader::read_index(&self.raft, &self.lease))
                    .await
                    .unwrap_or(Err(ClusterError::Timeout))
            }
            Some(l) => match self.pool.call(l, Request::ReadIndex, left).await {
                Ok(Response::ReadIndex(r)) => r,
                Ok(other) => Err(ClusterError::Unreachable(format!("{other:?}"))),
                // A read changes nothing: asking again is always safe.
                Err(e) => Err(ClusterError::Unreachable(e.to_string())),
            },
        }
    }

    /// Whether a read of this node's engine, now, is linearizable without asking anyone:
    /// this node leads and its lease holds (`crate::lease`).
    pub fn reads_by_lease(&self) -> bool {
        self.lease.reads_now(&self.raft)
    }

    /// Reads `key` from this node's engine as it stands, without asking the leader (may
    /// miss the latest writes).
    pub fn read_local(&self, key: &[u8]) -> Result<Option<(Item, ExptimeUnix)>, ReadError> {
        self.store
            .read(key)
            .map_err(|e| ClusterError::Engine(e.into()))
    }

    /// Role, leader, term, log, commit and applied indexes.
    pub async fn metrics(&self) -> Metrics {
        let commit_index = self
            .raft
            .with_raft_state(|st| st.committed.map(|l| l.index))
            .await
            .unwrap_or(None);
        Metrics {
            commit_index,
            ..self.metrics_now()
        }
    }

    /// [`Node::metrics`] without waiting: all but the commit index (`None`), which only
    /// Raft's own task can read.
    pub fn metrics_now(&self) -> Metrics {
        let m = self.raft.metrics().borrow().clone();
        Metrics {
            id: self.id,
            role: m.state.into(),
            leader: m.current_leader,
            term: m.current_term,
            last_log_index: m.last_log_index,
            commit_index: None,
            applied_index: m.last_applied.map(|l| l.index),
            snapshot_index: m.snapshot.map(|l| l.index),
            log_syncs: self.log.syncs(),
        }
    }

    /// Takes a snapshot now and waits (up to `timeout`) until one covering at least what
    /// was applied when it was called is saved. Returns the last index the snapshot covers.
    ///
    /// Two things make "the snapshot at exactly the index read here" the wrong thing to wait
    /// for. openraft builds the snapshot at whatever the state machine has applied when it
    /// gets to it: later than the `applied_index` metric read here whenever entries are
    /// applied meanwhile (or the metric lags, see [`Metrics::applied_index`]). And it drops a
    /// trigger that arrives while a build is under way, whose snapshot may stop short of
    /// that index: so the trigger is sent again until a snapshot covers it.
    pub async fn snapshot(&self, timeout: Duration) -> Result<u64, ClusterError> {
        let applied = self.raft.metrics().borrow().last_applied;
        let Some(applied) = applied else {
            return Err(ClusterError::Stopped("nothing applied yet".into()));
        };
        let deadline = Instant::now() + timeout;
        loop {
            self.raft
                .trigger()
                .snapshot()
                .await
                .map_err(|e| ClusterError::Stopped(e.to_string()))?;
            let left = deadline.saturating_duration_since(Instant::now());
            let covered = self
                .raft
                .wait(Some(left.min(SNAPSHOT_RETRIGGER)))
                .metrics(
                    |m| m.snapshot.is_some_and(|s| s.index >= applied.index),
                    "snapshot",
                )
                .await;
            match covered {
                Ok(m) => return Ok(m.snapshot.map_or(applied.index, |s| s.index)),
                Err(_) if Instant::now() >= deadline => return Err(ClusterError::Timeout),
                Err(_) => {}
            }
        }
    }

    /// Makes node `id` a learner at `addr` (`HOST:PORT` of its peer port) and waits until it
    /// has caught up with the log, by entries or by a snapshot. A learner gets every write
    /// and does not vote: a new node joins this way before it is promoted.
    ///
    /// Every membership change, from any node (forwarded to the leader), names a target
    /// state, so sending it again after any error finishes rather than repeats it; the
    /// errors say which are worth retrying ([`ClusterError::is_retryable`]) and
    /// [`ClusterError::Rejected`] ones are not. Each keeps trying until
    /// [`Config::change_timeout`].
    pub async fn add_learner(&self, id: NodeId, addr: &str) -> Result<Membership, ClusterError> {
        let deadline = Instant::now() + self.change_timeout;
        let add = Change::AddLearner {
            id,
            addr: addr.into(),
        };
        self.change(add, deadline).await
    }

    /// Makes the learner `id` a voter, once it has caught up, and if a majority of the
    /// voters it makes answers (a change that would leave no majority able to commit is
    /// refused). Waits until the change is committed (openraft's joint consensus: two log
    /// entries).
    pub async fn promote(&self, id: NodeId) -> Result<Membership, ClusterError> {
        let deadline = Instant::now() + self.change_timeout;
        self.change(Change::Promote(id), deadline).await
    }

    /// Takes node `id`, voter or learner, out of the membership, and waits until that is
    /// committed. The others then refuse its peer traffic. A voter is removed only if a
    /// majority of the voters left answers. The leader may remove itself: it steps down once
    /// the change is committed. A node not in the membership is already removed: `Ok`.
    pub async fn remove(&self, id: NodeId) -> Result<Membership, ClusterError> {
        let deadline = Instant::now() + self.change_timeout;
        self.change(Change::Remove(id), deadline).await
    }

    /// Adds node `id` at `addr` as a voter: [`Node::add_learner`], then [`Node::promote`],
    /// within one [`Config::change_timeout`]. A node that does not catch up in time stays
    /// a learner (the error says so): calling `add` again goes on from there.
    pub async fn add(&self, id: NodeId, addr: &str) -> Result<Membership, ClusterError> {
        let deadline = Instant::now() + self.change_timeout;
        let add = Change::AddLearner {
            id,
            addr: addr.into(),
        };
        self.change(add, deadline).await?;
        self.change(Change::Promote(id), deadline).await
    }

    async fn change(&self, change: Change, deadline: Instant) -> Result<Membership, ClusterError> {
        // Leave time for one more try to do something, rather than replace an informative
        // error (a learner not caught up) with a bare timeout.
        let reserve = Duration::from_millis(200);
        retry(deadline, reserve, || {
            self.change_once(change.clone(), deadline)
        })
        .await
    }

    async fn change_once(
        &self,
        change: Change,
        deadline: Instant,
    ) -> Result<Membership, ClusterError> {
        match self.leader() {
            None => Err(ClusterError::NoLeader),
            Some(l) if l == self.id => {
                let live = |id| self.pool.ping(id, PING_TIMEOUT);
                members::apply(&self.raft, change, deadline, live).await
            }
            Some(l) => {
                let left = deadline.saturating_duration_since(Instant::now());
                // The leader's share: its answer, even "unfinished", must come back in time.
                let leader_left = left.saturating_sub(left / 10 + Duration::from_millis(100));
                let req = Request::Change {
                    change,
                    timeout_ms: leader_left.as_millis() as u64,
                };
                match self.pool.call(l, req, left).await {
                    Ok(Response::Change(r)) => r,
                    Ok(other) => Err(ClusterError::Unreachable(format!("{other:?}"))),
                    Err(CallError::NotSent(e)) => Err(ClusterError::Unreachable(e.to_string())),
                    // The leader may have proposed it, or be gone midway: sending the
                    // change again (to the next leader) finishes it.
                    Err(e @ CallError::Lost(_)) => Err(ClusterError::Unfinished(format!(
                        "no answer from the leader {l}: {e}"
                    ))),
                }
            }
        }
    }

    /// This node's role and indexes, and the group's membership and each follower's lag as
    /// the leader sees them (asked over the peer protocol if another node leads). With no
    /// leader to ask, the membership is this node's own view and there is no replication:
    /// [`Status::view`] says which.
    pub async fn status(&self) -> Status {
        let local = Status::local(&self.raft).await;
        let leader = match (local.view, local.leader) {
            (View::Local, Some(l)) if l != self.id => l,
            _ => return local,
        };
        match self
            .pool
            .call(leader, Request::Status, self.request_timeout)
            .await
        {
            Ok(Response::Status(Ok(s))) => local.with_leader_view(*s),
            _ => local,
        }
    }

    /// Stops the node: its Raft, its port and every connection to it. The directory keeps
    /// what it held; [`Node::start`] on it rejoins.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        self.proposing.abort();
        let _ = self.raft.shutdown().await;
        let _ = self.server.await;
        self.pool.clear();
    }
}

/// Runs `once` until it succeeds, fails with an error that is not safe to retry, or the
/// deadline passes (or leaves less than `reserve` for one more try), pausing briefly
/// between tries. The pause stops growing at [`RETRY_PAUSE_MAX`]: a write waiting out an
/// election goes through within that of the new leader's arrival, and a try while there is
/// no leader costs nothing but a look at this node's metrics.
async fn retry<T, F, Fut>(
    deadline: Instant,
    reserve: Duration,
    mut once: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClusterError>>,
{
    let mut pause = Duration::from_millis(10);
    loop {
        match once().await {
            Err(e) if e.is_retryable() => {
                if Instant::now() + pause + reserve >= deadline {
                    return Err(e);
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_PAUSE_MAX);
            }
            r => return r,
        }
    }
}
