//! The peer protocol and its client side.
//!
//! TCP, one request and one response at a time per connection, each a frame: 4 bytes of
//! length (big-endian), then the message in postcard (see [`crate::codec`]: a value's
//! bytes travel as they are, a snapshot chunk of 1 MiB is a frame of 1 MiB and a few
//! bytes). A request is an [`Envelope`]: the sender's node id and the [`Request`]
//! (openraft's three RPCs, plus a forwarded client write and a read-index question for the
//! leader). Every call has a deadline; a connection that fails in any way is dropped, and
//! the next call dials again.
//!
//! [`Network`] is openraft's factory: one [`PeerClient`] per target, each holding one
//! connection. [`Pool`] holds a few idle connections a peer for forwarded writes and reads,
//! which many callers make at once. The server side is [`crate::server`].

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
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
use openraft::{BasicNode, RaftNetwork, RaftNetworkFactory, Snapshot, Vote};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::codec;
use crate::error::ClusterError;
use crate::types::{NodeId, Reply, TypeConfig, Write};

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
    /// A client write a follower forwards to the leader.
    Write(Write),
    /// A follower's linearizable read asks the leader which log index to wait for.
    ReadIndex,
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
    /// To [`Request::Write`].
    Write(Result<Reply, ClusterError>),
    /// To [`Request::ReadIndex`]: the index to have applied before reading.
    ReadIndex(Result<u64, ClusterError>),
    /// The request was refused (unknown sender, or a sender claiming another's vote).
    Refused(String),
}

/// Writes one frame: the length and the message in one buffer, one write.
pub async fn write_frame<T: Serialize>(s: &mut TcpStream, msg: &T) -> std::io::Result<()> {
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
pub async fn read_frame<T: for<'de> Deserialize<'de>>(s: &mut TcpStream) -> std::io::Result<T> {
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

async fn dial(addr: &str, deadline: Duration) -> Result<TcpStream, CallError> {
    match tokio::time::timeout(deadline, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => Err(CallError::NotSent(e)),
        Err(_) => Err(CallError::NotSent(timed_out())),
    }
}

async fn exchange(
    s: &mut TcpStream,
    env: &Envelope,
    deadline: Duration,
) -> Result<Response, CallError> {
    let call = async {
        write_frame(s, env).await?;
        read_frame::<Response>(s).await
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
    conn: Option<TcpStream>,
}

impl PeerClient {
    /// A client from `me` to `target` at `addr`; nothing is dialed yet.
    pub fn new(me: NodeId, target: NodeId, addr: String) -> PeerClient {
        PeerClient {
            me,
            target,
            addr,
            conn: None,
        }
    }

    /// Sends `req` and waits for the answer, all within `deadline`.
    pub async fn call(&mut self, req: Request, deadline: Duration) -> Result<Response, CallError> {
        let started = tokio::time::Instant::now();
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => dial(&self.addr, deadline).await?,
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
        match self.call(Request::Append(rpc), option.hard_ttl()).await {
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
}

impl Network {
    /// The factory of node `me`.
    pub fn new(me: NodeId) -> Network {
        Network { me }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient::new(self.me, target, node.addr.clone())
    }
}

/// Idle connections kept a peer by [`Pool`].
const POOL_IDLE: usize = 4;

/// Connections for forwarded writes and reads: callers take an idle connection to the
/// peer (or dial one), make one call, and give it back if it worked.
#[derive(Debug)]
pub struct Pool {
    me: NodeId,
    addrs: BTreeMap<NodeId, String>,
    idle: Mutex<HashMap<NodeId, Vec<TcpStream>>>,
}

impl Pool {
    /// A pool from `me` to the peers at `addrs`.
    pub fn new(me: NodeId, addrs: BTreeMap<NodeId, String>) -> Arc<Pool> {
        Arc::new(Pool {
            me,
            addrs,
            idle: Mutex::default(),
        })
    }

    /// One call to `target` within `deadline`.
    pub async fn call(
        &self,
        target: NodeId,
        req: Request,
        deadline: Duration,
    ) -> Result<Response, CallError> {
        let started = tokio::time::Instant::now();
        let idle = self.idle.lock().get_mut(&target).and_then(Vec::pop);
        let mut conn = match idle {
            Some(c) => c,
            None => {
                let Some(addr) = self.addrs.get(&target) else {
                    let e = std::io::Error::other(format!("node {target} is not a peer"));
                    return Err(CallError::NotSent(e));
                };
                dial(addr, deadline).await?
            }
        };
        let env = Envelope { from: self.me, req };
        let left = deadline.saturating_sub(started.elapsed());
        let r = exchange(&mut conn, &env, left).await;
        if r.is_ok() {
            let mut idle = self.idle.lock();
            let list = idle.entry(target).or_default();
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
