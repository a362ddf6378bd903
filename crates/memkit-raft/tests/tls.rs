//! The peer protocol over TLS with mutual certificates, with the testkit's throwaway PKI:
//! a group of TLS nodes elects and commits, forwarded writes and read-index questions
//! included; a caller without a certificate, with another CA's, or without TLS at all is
//! refused at the connection although it claims a member's id; and a node with another
//! CA's certificate, or a plain-TCP node, listed as the group's third member, never gets
//! an entry and never lends its vote: with one good node down, the other good node and it
//! elect no one.

mod common;

use std::time::Duration;

use common::{Group, bounded, set, stored_cas};
use memkit_raft::network::{PeerClient, Request, Response};
use memkit_raft::tls::{client_config, roots};
use memkit_raft::{Config, NodeId, PeerTls, Role};
use memkit_testkit::certs::TestPki;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::time::{Instant, sleep};

/// How long a group without a usable majority is watched for a leader: two elections'
/// worth of the longest timeout below.
const NO_LEADER_FOR: Duration = Duration::from_secs(4);

/// As every group here (`common::config`): room for a loaded two-core machine.
fn config(tls: Option<PeerTls>) -> Config {
    Config {
        request_timeout: Duration::from_secs(2),
        tls,
        ..common::config()
    }
}

fn cert(pem: &str) -> Vec<CertificateDer<'static>> {
    vec![CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()]
}

fn key(pem: &str) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// What a node, or a caller, brings to the peer port.
#[derive(Debug, Clone, Copy)]
enum Peer {
    /// The group's: a certificate the CA signed (the PKI's server certificate, which has
    /// both usages).
    Good,
    /// A certificate from another CA; it trusts the group's CA (which is public).
    OtherCa,
    /// No client certificate, the group's server certificate (a caller only).
    NoCert,
    /// No TLS at all.
    Plain,
}

fn tls(pki: &TestPki, peer: Peer) -> Option<PeerTls> {
    let ca = || cert(&pki.ca_pem);
    let good = || PeerTls::new(cert(&pki.server_cert_pem), key(&pki.server_key_pem), ca());
    match peer {
        Peer::Good => Some(good().unwrap()),
        Peer::OtherCa => {
            Some(PeerTls::new(cert(&pki.rogue_cert_pem), key(&pki.rogue_key_pem), ca()).unwrap())
        }
        Peer::NoCert => Some(PeerTls {
            client: client_config(roots(ca()).unwrap(), None).unwrap(),
            ..good().unwrap()
        }),
        Peer::Plain => None,
    }
}

/// Nodes 1, 2, 3 of one group, node `i` bringing `kinds[i - 1]`.
async fn start(name: &str, pki: &TestPki, kinds: [Peer; 3]) -> Group {
    Group::start_each(name, |id| config(tls(pki, kinds[id as usize - 1]))).await
}

/// Calls node `target` of `g` as node `from` would, bringing `peer`: `Pong`, or why not.
async fn ping(
    g: &Group,
    pki: &TestPki,
    from: NodeId,
    target: NodeId,
    peer: Peer,
) -> Result<(), String> {
    let client = tls(pki, peer).map(|t| t.client);
    let mut c = PeerClient::new(from, target, g.addrs[&target].clone(), client);
    match c.call(Request::Ping, Duration::from_secs(2)).await {
        Ok(Response::Pong) => Ok(()),
        Ok(other) => Err(format!("{other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_group_elects_and_commits_through_every_node() {
    bounded(async {
        let pki = TestPki::generate();
        let g = start("tls-group", &pki, [Peer::Good; 3]).await;
        g.leader_of(&[1, 2, 3]).await;
        // Followers forward their writes to the leader through the pool: TLS too.
        let mut last = 0;
        for id in 1..=3 {
            let r = g.node(id).write(set(&format!("k{id}"), "v")).await.unwrap();
            last = last.max(memkit_raft::entry_of_cas(stored_cas(r)));
        }
        for id in 1..=3 {
            // A linearizable read on a follower asks the leader for its read index.
            let item = g.node(id).read_linearizable(b"k3").await.unwrap().unwrap();
            assert_eq!(item.value.as_ref(), b"v");
            g.node(id).applied(last).await.unwrap();
            for k in ["k1", "k2", "k3"] {
                assert!(g.node(id).read_local(k.as_bytes()).unwrap().is_some());
            }
        }
        // The same call with the group's certificate is answered; under the same member id,
        // none of the others even reaches the id check.
        assert_eq!(ping(&g, &pki, 2, 1, Peer::Good).await, Ok(()));
        for peer in [Peer::NoCert, Peer::OtherCa, Peer::Plain] {
            let r = ping(&g, &pki, 2, 1, peer).await;
            assert!(r.is_err(), "{peer:?} was answered");
        }
    })
    .await;
}

/// Nodes 1 and 2 good, node 3 bringing `outsider`: 1 and 2 elect and commit without it, it
/// never gets an entry; then, the leader stopped, the other good node and node 3 are two
/// of three voters, a majority if node 3 could vote, and elect no one. The leader back,
/// the group goes on with the write it had.
async fn an_outsider_cannot_join_or_vote(name: &str, outsider: Peer) {
    let pki = TestPki::generate();
    let mut g = start(name, &pki, [Peer::Good, Peer::Good, outsider]).await;
    let leader = g.leader_of(&[1, 2]).await;
    let cas = stored_cas(g.node(leader).write(set("k", "v")).await.unwrap());
    let other = 3 - leader;
    g.node(other)
        .applied(memkit_raft::entry_of_cas(cas))
        .await
        .unwrap();
    assert!(
        g.node(3).read_local(b"k").unwrap().is_none(),
        "node 3 got the entry"
    );
    assert_eq!(g.node(3).metrics_now().leader, None);
    assert!(g.node(3).write(set("k3", "v")).await.is_err());
    // Its own calls fail too, under its member id: it is refused, not unknown.
    assert!(ping(&g, &pki, 3, leader, outsider).await.is_err());

    g.kill(leader).await;
    let until = Instant::now() + NO_LEADER_FOR;
    while Instant::now() < until {
        for id in [other, 3] {
            let m = g.node(id).metrics_now();
            assert!(m.role != Role::Leader, "node {id} was elected: {m:?}");
        }
        sleep(Duration::from_millis(50)).await;
    }
    assert!(g.node(other).write(set("k2", "v")).await.is_err());

    g.boot(leader, config(tls(&pki, Peer::Good))).await;
    g.leader_of(&[1, 2]).await;
    let item = g
        .node(other)
        .read_linearizable(b"k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(item.cas, cas);
    assert!(g.node(3).read_local(b"k").unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_another_cas_certificate_cannot_join_or_vote() {
    bounded(an_outsider_cannot_join_or_vote(
        "tls-other-ca",
        Peer::OtherCa,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_tcp_node_cannot_talk_to_tls_nodes() {
    bounded(an_outsider_cannot_join_or_vote("tls-plain", Peer::Plain)).await;
}
