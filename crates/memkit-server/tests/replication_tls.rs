//! memkitd's peer traffic over TLS (`-Z` with `--raft-*`): three processes started with
//! the testkit's throwaway PKI elect, replicate and forward over TLS with mutual
//! certificates (the client port's certificate, key and CA); the peer port refuses a
//! caller without TLS or with another CA's certificate; and `-Z` with `--raft-node` but
//! no `ssl_ca_cert` is refused at start-up with exit status 64. Also here, with the other
//! start-up refusal: a node whose peer port is taken exits with 71 and says why.

use std::time::Duration;

use memkit_raft::PeerTls;
use memkit_raft::network::{PeerClient, Request, Response};
use memkit_testkit::certs::TestPki;
use memkit_testkit::server::{Group, GroupOptions, memkitd_bin};
use memkit_testkit::wire::Until;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

const ELECTION: Duration = Duration::from_secs(15);

fn ask(g: &Group, id: u64, req: &str, until: Until) -> String {
    let mut w = g.wire(id);
    w.ask(req.as_bytes(), until).trim_end().to_string()
}

/// Peer TLS presenting `cert_pem`/`key_pem`, trusting the PKI's CA.
fn peer_tls(pki: &TestPki, cert_pem: &str, key_pem: &str) -> PeerTls {
    let der = |p: &str| vec![CertificateDer::from_pem_slice(p.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    PeerTls::new(der(cert_pem), key, der(&pki.ca_pem)).unwrap()
}

/// A ping to `addr` under member id 2, over `tls` (or plain TCP): whether it is answered.
fn pinged(addr: &str, tls: Option<PeerTls>) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = PeerClient::new(2, 1, addr.to_string(), tls.map(|t| t.client));
        let r = c.call(Request::Ping, Duration::from_secs(2)).await;
        matches!(r, Ok(Response::Pong))
    })
}

#[test]
fn a_group_started_with_tls_elects_replicates_and_refuses_outsiders() {
    let pki = TestPki::generate();
    let g = Group::start_with(GroupOptions {
        args: vec!["-Z".into(), "-o".into(), pki.server_opts(2)],
        ..Default::default()
    });
    let leader = g.leader(ELECTION);
    let follower = g.ids().into_iter().find(|&i| i != leader).unwrap();
    // A follower forwards its write to the leader; every node reads it, the followers'
    // linearizable reads asking the leader for a read index: all over TLS.
    let stored = ask(&g, follower, "set k 0 0 2\r\nhi\r\n", Until::LINE);
    assert_eq!(stored, "STORED");
    for id in g.ids() {
        assert_eq!(
            ask(&g, id, "get k\r\n", Until::END),
            "VALUE k 0 2\r\nhi\r\nEND",
            "node {id}"
        );
    }
    let addr = g.raft_addr(leader);
    let good = peer_tls(&pki, &pki.server_cert_pem, &pki.server_key_pem);
    assert!(
        pinged(&addr, Some(good)),
        "the group's certificate is answered"
    );
    let rogue = peer_tls(&pki, &pki.rogue_cert_pem, &pki.rogue_key_pem);
    assert!(
        !pinged(&addr, Some(rogue)),
        "another CA's certificate is answered"
    );
    assert!(!pinged(&addr, None), "plain TCP is answered");
}

#[test]
fn tls_for_peers_without_a_ca_is_refused_at_start() {
    let pki = TestPki::generate();
    let dir = memkit_testkit::tempdir("raft-tls-no-ca");
    let opts = format!(
        "ssl_chain_cert={},ssl_key={}",
        pki.path("server.pem"),
        pki.path("server.key")
    );
    let out = std::process::Command::new(memkitd_bin())
        .args(["-Z", "-o", &opts, "-p", "1", "--persist"])
        .arg(dir.path())
        .args(["--raft-node", "1", "--raft-listen", "127.0.0.1:1"])
        .args(["--raft-peers", "1=127.0.0.1:1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("ssl_ca_cert"), "{err}");
}

/// A node that cannot start (here its peer port is taken) says why and exits with
/// EX_OSERR (71), as memkitd does for any start failure, rather than panicking while its Raft
/// runtime is dropped inside memkitd's own.
#[test]
fn a_node_that_cannot_start_says_why_and_exits() {
    let dir = memkit_testkit::tempdir("raft-taken-port");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut cmd = std::process::Command::new(memkitd_bin());
    if memkit_testkit::server::is_root() {
        cmd.args(["-u", "root"]);
    }
    let out = cmd
        .args(["-p", "0", "--persist"])
        .arg(dir.path())
        .args(["--raft-node", "1", "--raft-listen", &addr])
        .args(["--raft-peers", &format!("1={addr}")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(71), "{err}");
    assert!(
        err.contains("replication: node") && err.contains("listen"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
