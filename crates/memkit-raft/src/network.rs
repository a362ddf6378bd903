//! The peer protocol and its client side.
//!
//! TCP, or TLS over it when the node has a [`PeerTls`] (`crate::tls`: mutual
//! certificates, a peer without one is refused in the handshake), one request and one
//! response at a time per connection, each a frame: 4 bytes of
//! length (big-endian), then the message in postcard (see [`crate::codec`]: a value's
//! bytes travel as they are, a snapshot chunk of 1 MiB is a frame of 1 MiB and a few
//! bytes). A request is an [`Envelope`]: the sender's node id and the [`Request`]
//! (openraft's three RPCs, plus what a node asks the leader: a forwarded client write, a
//! read-index question, a membership change, its status). Every call has a deadline; a
//! connection that fails in any way is dropped, and the next call dials again.
//!
//! [`Network`] is openraft's factory: one [`PeerClient`] per target, each holding one
//! connection. [`Pool`] holds a few idle connections a peer for forwarded writes and reads,
//! which many callers make at once; it dials a peer where this node's own list says, else
//! at the current membership's address, so nodes added after the start are reached too. The server side is [`crate::server`].

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed,
    StreamingError, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftMetrics, RaftNetwork, RaftNetworkFactory, Snapshot, Vote};
use parking_lot::Mutex;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::codec;
use crate::error::ClusterError;
use crate::members::Change;
use crate::status::{Membership, Status};
use crate::tls::{PEER_SERVER_NAME, PeerTls};
use crate::types::{NodeId, Outcomes, TypeConfig, Write};

/// The largest frame either side accepts: bounds what a garbled length can make a node
/// allocate. An append carries at most `max_payload_entries` (16, see `node.rs`) entries of
/// at most an item (1 MiB by default, more if the engine allows larger) each, a snapshot
/// chunk `snapshot_max_chunk_size` (1 MiB): room to spare.
pub const MAX_FRAME: usize = 256 << 20;

/// What a peer asks.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    /// openraft's append-entries.
    Append(AppendEntriesRequest<TypeConfig>),
    /// openraft's vote.
    Vote(VoteRequest<NodeId>),
    /// openraft's install-snapshot (one chunk).
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// Client writes a follower forwards to the leader, to be proposed in one entry
    /// (`crate::proposer`).
    Writes(Vec<Write>),
    /// A follower's linearizable read asks the leader which log index to wait for.
    ReadIndex,
    /// A membership change a node forwards to the leader, with the time the leader has for
    /// it (a little less than the caller waits, so that even "unfinished" comes back).
    Change {
        /// The change.
        change: Change,
        /// Milliseconds the leader may spend on it.
        timeout_ms: u64,
    },
    /// A node asks the leader for its view of the group (membership, replication).
    Status,
    /// Whether the peer answers at all (the leader's check before a change of voters).
    Ping,
}

/// A request and who sends it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    /// The sender's node id: checked against the group's nodes.
    pub from: NodeId,
    /// The request.
    pub req: Request,
}

/// What a peer answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    /// To [`Request::Append`].
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// To [`Request::Vote`].
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// To [`Request::Snapshot`].
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    /// To [`Request::Writes`]: each write's outcome and the entry's log index.
    Writes(Result<Outcomes, ClusterError>),
    /// To [`Request::ReadIndex`]: the index to have applied before reading.
    ReadIndex(Result<u64, ClusterError>),
    /// To [`Request::Change`]: the membership after it.
    Change(Result<Membership, ClusterError>),
    /// To [`Request::Status`]: the leader's own status.
    Status(Result<Box<Status>, ClusterError>),
    /// To [`Request::Ping`].
    Pong,
    /// The request was refused (unknown sender, or a sender claiming another's vote).
    Refused(String),
}

/// What a peer connection is, plain or TLS: boxed, so that the framing, the clients and
/// the server are one implementation whatever the transport (a virtual call per read or
/// write is nothing next to a frame's syscalls). `Sync` because openraft wants its network
/// clients shareable.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + Sync + std::fmt::Debug {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + std::fmt::Debug> Stream for T {}

/// A peer connection.
pub type Conn = Box<dyn Stream>;

/// Writes one frame: the length and the message in one buffer, one write.
pub async fn write_frame<T: Serialize, S: AsyncWrite + Unpin + ?Sized>(
    s: &mut S,
    msg: &T,
) -> std::io::Result<()> {
    let mut buf = codec::to_vec_after(msg, 4).map_err(std::io::Error::other)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME {
        return Err(std::io::Error::other("frame too large"));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    s.write_all(&buf).await
}

/// Reads one frame; a bad length or a message that does not decode (or leaves bytes over)
/// is an error, never a panic.
pub async fn read_frame<T: for<'de> Deserialize<'de>, S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
) -> std::io::Result<T> {
    let len = s.read_u32().await? as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other("frame too large"));
    }
    let mut body = vec![0; len];
    s.read_exact(&mut body).await?;
    codec::from_slice(&body).map_err(std::io::Error::other)
}

/// How a call failed: whether the request may have reached the peer matters to a caller
/// that would retry a write (an `incr` sent twice counts twice).
#[derive(Debug)]
pub enum CallError {
    /// Nothing was sent: no connection could be made in time.
    NotSent(std::io::Error),
    /// Sent, or perhaps sent, and no answer came back.
    Lost(std::io::Error),
}

impl CallError {
    fn io(&self) -> &std::io::Error {
        match self {
            CallError::NotSent(e) | CallError::Lost(e) => e,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NotSent(e) => write!(f, "not sent: {e}"),
            CallError::Lost(e) => write!(f, "no answer: {e}"),
        }
    }
}

fn timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "peer call timed out")
}

/// Connects to `addr`, with the TLS handshake when `tls` is given, all within `deadline`.
/// A handshake that fails (the peer refused this node's certificate, or presented one the
/// CA did not sign) fails the dial: nothing was sent.
async fn dial(
    addr: &str,
    tls: Option<&Arc<ClientConfig>>,
    deadline: Duration,
) -> Result<Conn, CallError> {
    let connect = async {
        let s = TcpStream::connect(addr).await?;
        let _ = s.set_nodelay(true);
        let Some(tls) = tls else {
            return Ok(Box::new(s) as Conn);
        };
        let name = ServerName::try_from(PEER_SERVER_NAME).map_err(std::io::Error::other)?;
        let s = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, s)
            .await?;
        Ok(Box::new(s) as Conn)
    };
    match tokio::time::timeout(deadline, connect).await {
        Ok(r) => r.map_err(CallError::NotSent),
        Err(_) => Err(CallError::NotSent(timed_out())),
    }
}

async fn exchange(s: &mut Conn, env: &Envelope, deadline: Duration) -> Result<Response, CallError> {
    let call = async {
        write_frame(s, env).await?;
        read_frame::<Response, _>(s).await
    };
    match tokio::time::timeout(deadline, call).await {
        Ok(r) => r.map_err(CallError::Lost),
        Err(_) => Err(CallError::Lost(timed_out())),
    }
}

/// One connection to one peer, dialed on demand.
#[derive(Debug)]
pub struct PeerClient {
    me: NodeId,
    target: NodeId,
    addr: String,
    tls: Option<Arc<ClientConfig>>,
    conn: Option<Conn>,
    /// Raised to every commit index this client tells its target (see
    /// [`Network::new`]); `None` for clients that send no appends.
    sent_commit: Option<Arc<AtomicU64>>,
}

impl PeerClient {
    /// A client from `me` to `target` at `addr`, over TLS when `tls` is given; nothing is
    /// dialed yet.
    pub fn new(
        me: NodeId,
        target: NodeId,
        addr: String,
        tls: Option<Arc<ClientConfig>>,
    ) -> PeerClient {
        PeerClient {
            me,
            target,
            addr,
            tls,
            conn: None,
            sent_commit: None,
        }
    }

    /// Sends `req` and waits for the answer, all within `deadline`.
    pub async fn call(&mut self, req: Request, deadline: Duration) -> Result<Response, CallError> {
        let started = tokio::time::Instant::now();
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => dial(&self.addr, self.tls.as_ref(), deadline).await?,
        };
        let env = Envelope { from: self.me, req };
        let left = deadline.saturating_sub(started.elapsed());
        let r = exchange(&mut conn, &env, left).await;
        if r.is_ok() {
            self.conn = Some(conn);
        }
        r
    }

    fn rpc_err<E: std::error::Error>(
        &self,
        e: CallError,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        match e {
            CallError::NotSent(_) => RPCError::Unreachable(Unreachable::new(e.io())),
            CallError::Lost(_) => RPCError::Network(NetworkError::new(e.io())),
        }
    }

    fn unexpected<E: std::error::Error>(
        &self,
        r: Response,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        let msg = match r {
            Response::Refused(m) => format!("refused by node {}: {m}", self.target),
            other => format!("unexpected answer from node {}: {other:?}", self.target),
        };
        RPCError::Network(NetworkError::new(&std::io::Error::other(msg)))
    }

    fn remote<E: std::error::Error>(
        &self,
        e: RaftError<NodeId, E>,
    ) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
        RPCError::RemoteError(RemoteError::new(self.target, e))
    }
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        // Recorded before the target can learn it: see `Network::new`.
        if let (Some(sent), Some(c)) = (&self.sent_commit, &rpc.leader_commit) {
            sent.fetch_max(c.index, Ordering::SeqCst);
        }
        let (rpc, cut) = within_budget(rpc);
        match self.call(Request::Append(rpc), option.hard_ttl()).await {
            Ok(Response::Append(Ok(AppendEntriesResponse::Success))) if cut.is_some() => {
                Ok(AppendEntriesResponse::PartialSuccess(cut))
            }
            Ok(Response::Append(r)) => r.map_err(|e| self.remote(e)),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_err(e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.call(Request::Snapshot(rpc), option.hard_ttl()).await {
            Ok(Response::Snapshot(r)) => r.map_err(|e| self.remote(e)),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_err(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self.call(Request::Vote(rpc), option.hard_ttl()).await {
            Ok(Response::Vote(r)) => r.map_err(|e| self.remote(e)),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_err(e)),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        // openraft 0.9's chunked transport over `install_snapshot` above: each chunk is one
        // call with its own deadline.
        use openraft::network::snapshot_transport::{Chunked, SnapshotTransport};
        Chunked::send_snapshot(self, vote, snapshot, cancel, option).await
    }
}

/// openraft's network factory: a [`PeerClient`] to the address in the target's
/// [`BasicNode`].
#[derive(Debug, Clone)]
pub struct Network {
    me: NodeId,
    /// This node's own peer list: the address it dials a node at, when it lists that node.
    dial: BTreeMap<NodeId, String>,
    tls: Option<Arc<ClientConfig>>,
    sent_commit: Arc<AtomicU64>,
}

impl Network {
    /// The factory of node `me`, which dials the nodes `dial` lists at its addresses and
    /// any other at the address the membership holds for it. Each node's own list wins
    /// because the membership holds one address a node, the one the bootstrapping node
    /// was given, while the way from one host to another may differ (a relay, a NAT).
    /// With `tls`, every connection is TLS ([`PeerTls::client`]).
    ///
    /// `sent_commit` is raised to every commit index an append tells a follower, before it
    /// goes: a follower applies only what it was told is committed, so no node has applied
    /// past it (or past what this node applied, whose snapshots it sends). The leader's
    /// lease reads by it (`crate::lease`).
    pub fn new(
        me: NodeId,
        dial: BTreeMap<NodeId, String>,
        tls: Option<&PeerTls>,
        sent_commit: Arc<AtomicU64>,
    ) -> Network {
        let tls = tls.map(|t| t.client.clone());
        Network {
            me,
            dial,
            tls,
            sent_commit,
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        let addr = self.dial.get(&target).unwrap_or(&node.addr);
        let mut c = PeerClient::new(self.me, target, addr.clone(), self.tls.clone());
        c.sent_commit = Some(self.sent_commit.clone());
        c
    }
}

/// The value bytes one append carries at most (beyond its first entry, which always
/// goes). openraft gives an append one heartbeat interval to be answered, the follower's
/// fsync included, and counts its batches in entries, not bytes: a follower catching up
/// on sixteen large values at a time would miss that deadline again and again, and never
/// catch up. 64 KiB a round trip still moves tens of MB/s on a LAN.
const APPEND_BUDGET: usize = 64 << 10;

/// `rpc` cut to [`APPEND_BUDGET`], and the id of its last entry if it was cut: the
/// follower then holds a prefix, which openraft hears as a partial success and goes on
/// from.
fn within_budget(
    mut rpc: AppendEntriesRequest<TypeConfig>,
) -> (
    AppendEntriesRequest<TypeConfig>,
    Option<crate::types::LogId>,
) {
    let mut bytes = 0;
    let keep = rpc
        .entries
        .iter()
        .position(|e| {
            bytes += match &e.payload {
                openraft::EntryPayload::Normal(p) => p.size(),
                _ => 64,
            };
            bytes > APPEND_BUDGET
        })
        .map_or(rpc.entries.len(), |i| i.max(1));
    if keep == rpc.entries.len() {
        return (rpc, None);
    }
    rpc.entries.truncate(keep);
    let last = rpc.entries.last().map(|e| e.log_id);
    (rpc, last)
}

/// Idle connections kept a peer by [`Pool`].
const POOL_IDLE: usize = 4;

/// Connections for forwarded writes and reads: callers take an idle connection to the
/// peer (or dial one), make one call, and give it back if it worked.
#[derive(Debug)]
pub struct Pool {
    me: NodeId,
    /// The configured peers: where this node dials them (as [`Network`] does), whatever
    /// address the membership holds.
    addrs: BTreeMap<NodeId, String>,
    /// This node's Raft metrics: the current membership, with every member's address.
    metrics: watch::Receiver<RaftMetrics<NodeId, BasicNode>>,
    /// Keyed by address too: an id removed and added again elsewhere is another peer.
    idle: Mutex<HashMap<(NodeId, String), Vec<Conn>>>,
    tls: Option<Arc<ClientConfig>>,
}

impl Pool {
    /// A pool from `me` to the peers at `addrs`, and to the other members its Raft's
    /// `metrics` name at the membership's addresses; over TLS with `tls`.
    pub fn new(
        me: NodeId,
        addrs: BTreeMap<NodeId, String>,
        metrics: watch::Receiver<RaftMetrics<NodeId, BasicNode>>,
        tls: Option<&PeerTls>,
    ) -> Arc<Pool> {
        Arc::new(Pool {
            me,
            addrs,
            metrics,
            idle: Mutex::default(),
            tls: tls.map(|t| t.client.clone()),
        })
    }

    /// Where to dial `target`: the configured address, else the current membership's.
    fn addr(&self, target: NodeId) -> Option<String> {
        if let Some(a) = self.addrs.get(&target) {
            return Some(a.clone());
        }
        let m = self.metrics.borrow();
        let member = m.membership_config.membership().get_node(&target);
        member.map(|n| n.addr.clone())
    }

    /// Whether `target` answers a ping within `deadline`.
    pub async fn ping(&self, target: NodeId, deadline: Duration) -> bool {
        matches!(
            self.call(target, Request::Ping, deadline).await,
            Ok(Response::Pong)
        )
    }

    /// One call to `target` within `deadline`.
    pub async fn call(
        &self,
        target: NodeId,
        req: Request,
        deadline: Duration,
    ) -> Result<Response, CallError> {
        let started = tokio::time::Instant::now();
        let Some(addr) = self.addr(target) else {
            let e = std::io::Error::other(format!("node {target} is not a peer"));
            return Err(CallError::NotSent(e));
        };
        let key = (target, addr);
        let idle = self.idle.lock().get_mut(&key).and_then(Vec::pop);
        let mut conn = match idle {
            Some(c) => c,
            None => dial(&key.1, self.tls.as_ref(), deadline).await?,
        };
        let env = Envelope { from: self.me, req };
        let left = deadline.saturating_sub(started.elapsed());
        let r = exchange(&mut conn, &env, left).await;
        if r.is_ok() {
            let mut idle = self.idle.lock();
            let list = idle.entry(key).or_default();
            if list.len() < POOL_IDLE {
                list.push(conn);
            }
        }
        r
    }

    /// Drops every idle connection (shutdown).
    pub fn clear(&self) {
        self.idle.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Entry, Proposal};
    use openraft::{CommittedLeaderId, EntryPayload, LogId};

    fn entry(index: u64, value_len: usize) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Proposal {
                stamp_ms: 0,
                writes: vec![Write::set(b"k".as_slice(), vec![0; value_len])],
            }),
        }
    }

    fn append(sizes: &[usize]) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            leader_commit: None,
            entries: sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| entry(i as u64 + 1, n))
                .collect(),
        }
    }

    #[test]
    fn an_append_is_cut_to_the_budget_but_always_carries_one_entry() {
        let (rpc, cut) = within_budget(append(&[100, 100, 100]));
        assert_eq!((rpc.entries.len(), cut), (3, None));
        let mb = 1 << 20;
        let (rpc, cut) = within_budget(append(&[mb, mb, 10]));
        assert_eq!(rpc.entries.len(), 1, "one entry even over the budget");
        assert_eq!(cut.map(|l| l.index), Some(1));
        let (rpc, cut) = within_budget(append(&[40 << 10, 40 << 10, 10]));
        assert_eq!(rpc.entries.len(), 1);
        assert_eq!(cut.map(|l| l.index), Some(1));
        let (rpc, cut) = within_budget(append(&[100, 100, mb]));
        assert_eq!(rpc.entries.len(), 2);
        assert_eq!(cut.map(|l| l.index), Some(2));
    }
}
