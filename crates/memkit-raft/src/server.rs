//! The peer protocol's server side ([`serve`]): answers openraft's RPCs, forwarded writes,
//! read-index questions, membership changes and status questions, one request at a time
//! per connection.
//!
//! A sender must be one of the group's nodes: a member of the latest membership this node's
//! log holds or of the last committed one, or, before this node has learned one (a fresh or
//! wiped node), in the configured peer list. So a node added later is admitted as soon as
//! the entry adding it reaches this node, and a node removed keeps being admitted until its
//! removal is committed (it may be the leader that proposed it, and must still tell the
//! others that it committed), then is refused. Openraft's RPCs must also carry the sender's
//! own vote (a node may not speak for another). Over plain TCP this is a sanity check
//! against misdirected traffic, not authentication: the peer port belongs on a private
//! network. With TLS ([`Service::tls`]) a peer must first present a certificate the group's
//! CA signed, or the handshake fails and not one frame of it is read (`crate::tls`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::error::ClusterError;
use crate::leader;
use crate::lease::Lease;
use crate::members;
use crate::network::{Conn, Envelope, Pool, Request, Response, read_frame, write_frame};
use crate::proposer::Proposer;
use crate::status::{Status, View};
use crate::types::{NodeId, Raft};

/// How long the leader waits for each voter-to-be's ping before a change of voters.
pub const PING_TIMEOUT: Duration = Duration::from_millis(500);

/// How long a peer has to finish the TLS handshake: one that connects and never speaks
/// must not keep its task (and socket) forever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a node's server needs.
pub struct Service {
    /// This node's Raft.
    pub raft: Raft,
    /// The configured group: id -> peer address.
    pub peers: BTreeMap<NodeId, String>,
    /// How long a forwarded write or a read-index question may take here.
    pub request_timeout: Duration,
    /// Connections to the peers (the leader pings voters-to-be before a change of voters).
    pub pool: Arc<Pool>,
    /// Where forwarded writes go (proposed here, or refused if this node no longer leads).
    pub proposer: Proposer,
    /// Answers read-index questions while it holds.
    pub lease: Arc<Lease>,
    /// TLS: every connection must complete this handshake (a client certificate the CA
    /// signed) before it is read. `None`: plain TCP.
    pub tls: Option<Arc<ServerConfig>>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("peers", &self.peers)
            .finish_non_exhaustive()
    }
}

impl Service {
    async fn admits(&self, from: NodeId) -> bool {
        let m = self.raft.metrics().borrow().membership_config.clone();
        if m.membership().get_node(&from).is_some() {
            return true;
        }
        if m.membership().nodes().next().is_none() {
            return self.peers.contains_key(&from);
        }
        // Rarely here (a node just added, or one removed): ask the Raft state itself, whose
        // effective membership the metrics may not show yet, and whose committed one is
        // not in the metrics at all.
        self.raft
            .with_raft_state(move |st| {
                let ms = &st.membership_state;
                ms.effective().get_node(&from).is_some() || ms.committed().get_node(&from).is_some()
            })
            .await
            .unwrap_or(false)
    }

    /// The sender named in an RPC's vote, if the request is one of openraft's.
    fn claimed(req: &Request) -> Option<Option<NodeId>> {
        match req {
            Request::Append(r) => Some(r.vote.leader_id().voted_for()),
            Request::Vote(r) => Some(r.vote.leader_id().voted_for()),
            Request::Snapshot(r) => Some(r.vote.leader_id().voted_for()),
            Request::Writes(_)
            | Request::ReadIndex
            | Request::Change { .. }
            | Request::Status
            | Request::Ping => None,
        }
    }

    /// Answers one request.
    pub async fn handle(&self, env: Envelope) -> Response {
        if !self.admits(env.from).await {
            return Response::Refused(format!("node {} is not in the group", env.from));
        }
        if Self::claimed(&env.req).is_some_and(|v| v != Some(env.from)) {
            return Response::Refused(format!("node {} sent another node's vote", env.from));
        }
        let timeout = self.request_timeout;
        match env.req {
            Request::Append(r) => Response::Append(self.raft.append_entries(r).await),
            Request::Vote(r) => Response::Vote(self.raft.vote(r).await),
            Request::Snapshot(r) => Response::Snapshot(self.raft.install_snapshot(r).await),
            Request::Writes(w) => Response::Writes(
                tokio::time::timeout(timeout, self.proposer.submit(w, true))
                    .await
                    .unwrap_or_else(|_| Err(ClusterError::Indeterminate("timed out".into()))),
            ),
            Request::ReadIndex => Response::ReadIndex(
                tokio::time::timeout(timeout, leader::read_index(&self.raft, &self.lease))
                    .await
                    .unwrap_or(Err(ClusterError::Timeout)),
            ),
            Request::Change { change, timeout_ms } => {
                let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
                let live = |id| self.pool.ping(id, PING_TIMEOUT);
                Response::Change(members::apply(&self.raft, change, deadline, live).await)
            }
            Request::Status => Response::Status(self.status().await),
            Request::Ping => Response::Pong,
        }
    }

    /// The leader's status; another node says who leads.
    async fn status(&self) -> Result<Box<Status>, ClusterError> {
        let st = Status::local(&self.raft).await;
        match st.view {
            View::Leader(_) => Ok(Box::new(st)),
            View::Local => Err(match st.leader {
                Some(l) if l != st.id => ClusterError::NotLeader(Some(l)),
                _ => ClusterError::NoLeader,
            }),
        }
    }
}

/// Accepts peers on `listener` until `stop` turns true; each connection is served by its
/// own task, which also ends then (so a node that shuts down closes its port and every
/// connection to it).
pub async fn serve(listener: TcpListener, svc: Arc<Service>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => {
                    let _ = s.set_nodelay(true);
                    tokio::spawn(connection(s, svc.clone(), stop.clone()));
                }
                // Out of descriptors and the like: wait rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
            _ = stop.changed() => return,
        }
    }
}

/// `s` as a peer connection: as it is, or after the TLS handshake. `None` when the
/// handshake fails (no certificate, another CA's, not TLS at all) or takes too long.
async fn accept(s: TcpStream, tls: Option<&Arc<ServerConfig>>) -> Option<Conn> {
    let Some(tls) = tls else {
        return Some(Box::new(s));
    };
    let peer = s.peer_addr().ok();
    let handshake = tokio_rustls::TlsAcceptor::from(tls.clone()).accept(s);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(s)) => Some(Box::new(s)),
        // Debug, not warn: a misconfigured peer redials every heartbeat, and says why on
        // its own side too.
        Ok(Err(e)) => {
            tracing::debug!("peer {peer:?}: TLS handshake refused: {e}");
            None
        }
        Err(_) => None,
    }
}

async fn connection(s: TcpStream, svc: Arc<Service>, mut stop: watch::Receiver<bool>) {
    let accepted = tokio::select! {
        s = accept(s, svc.tls.as_ref()) => s,
        _ = stop.changed() => return,
    };
    let Some(mut s) = accepted else {
        return;
    };
    loop {
        let env = tokio::select! {
            r = read_frame::<Envelope, _>(&mut s) => match r {
                Ok(env) => env,
                // Closed, or a frame that does not parse: nothing to answer on.
                Err(_) => return,
            },
            _ = stop.changed() => return,
        };
        let resp = tokio::select! {
            r = svc.handle(env) => r,
            _ = stop.changed() => return,
        };
        if write_frame(&mut s, &resp).await.is_err() {
            return;
        }
    }
}
