//! The leader's lease: linearizable reads without a round of heartbeats.
//!
//! A follower that accepted the leader's request at time `t` refuses to vote for anyone
//! else until `t` plus the lease (openraft 0.9: `Engine::handle_vote_req`, the lease being
//! the election timeout's top). So once a majority has acknowledged a request the leader
//! sent at `t`, no other leader can be elected before `t + lease`: until then this node
//! is the only leader and decides what is committed. [`Lease`] tracks `t` (openraft
//! reports it as `millis_since_quorum_ack` in its metrics; [`Lease::watch`] turns that into
//! an instant as each report arrives); while `now < t + lease / 2` (half the lease is left
//! for clocks that run at slightly different rates and for the report's delay), the read
//! index is the larger of this node's applied index and the highest commit index it has
//! told a follower (`Network::new`'s `sent_commit`): no node can have applied past that, so a
//! read that waits until it is applied here or on a follower sees every write any earlier
//! read saw. A follower may apply an entry before the leader does (the leader tells the
//! commit, then applies in its own time), which is why this node's applied index alone is
//! not enough. Past the lease, and until the leader has applied an entry of its own term
//! (its first entry commits everything before it), the read index takes a heartbeat round.
//!
//! A node that restarts forgets when it last accepted a leader's request, and could vote or
//! campaign at once: so a node that restarts waits a lease before its Raft starts (see
//! `Node::start_with`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::ServerState;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::state_machine::Store;
use crate::types::{NodeId, Raft};

/// When a majority last acknowledged this node as leader, and in which term.
#[derive(Debug)]
pub struct Lease {
    me: NodeId,
    /// How long after a quorum's acknowledgement reads may rely on it: half the lease.
    usable: Duration,
    acked: Mutex<Option<(u64, Instant)>>,
    store: Arc<Store>,
    /// The term of the last entry applied here (see [`Store::applied`]).
    applied_term: AtomicU64,
    /// The highest commit index this node has told a follower.
    sent_commit: Arc<AtomicU64>,
}

impl Lease {
    /// The lease of node `me`, whose followers keep it for `lease` (the election timeout's
    /// top); `sent_commit` is its network's (see the module notes).
    pub fn new(
        me: NodeId,
        lease: Duration,
        store: Arc<Store>,
        sent_commit: Arc<AtomicU64>,
    ) -> Arc<Lease> {
        Arc::new(Lease {
            me,
            usable: lease / 2,
            acked: Mutex::new(None),
            store,
            applied_term: AtomicU64::new(0),
            sent_commit,
        })
    }

    /// Follows `raft`'s metrics until it shuts down, noting each quorum acknowledgement.
    pub async fn watch(self: Arc<Self>, raft: Raft) {
        let mut rx = raft.metrics();
        loop {
            {
                let m = rx.borrow_and_update();
                let now = Instant::now();
                let mut acked = self.acked.lock();
                match (m.state, m.millis_since_quorum_ack) {
                    (ServerState::Leader, Some(ms)) if m.current_leader == Some(self.me) => {
                        let at = now.checked_sub(Duration::from_millis(ms)).unwrap_or(now);
                        let newer = acked.is_none_or(|(t, a)| t != m.current_term || at > a);
                        if newer {
                            *acked = Some((m.current_term, at));
                        }
                    }
                    _ => *acked = None,
                }
                if let Some(l) = m.last_applied {
                    self.applied_term.store(l.leader_id.term, Ordering::Relaxed);
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The index a linearizable read must have applied, if the lease answers for it now
    /// (see the module notes). `None`: ask a majority.
    pub fn read_index(&self, raft: &Raft) -> Option<u64> {
        let term = raft.metrics().borrow().current_term;
        let (t, at) = (*self.acked.lock())?;
        let fresh = t == term && at.elapsed() < self.usable;
        let own = self.applied_term.load(Ordering::Relaxed) == term;
        // The told commit first: an entry applied after it was read is at or below it.
        let told = self.sent_commit.load(Ordering::SeqCst);
        (fresh && own).then(|| told.max(self.store.applied()))
    }

    /// Whether a read of this node's state, now, is linearizable with no wait: the lease
    /// answers, and this node has applied its read index.
    pub fn reads_now(&self, raft: &Raft) -> bool {
        self.read_index(raft)
            .is_some_and(|index| self.store.applied() >= index)
    }
}
