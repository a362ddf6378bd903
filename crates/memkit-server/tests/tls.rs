//! TLS (`-Z`) end to end: memkitd in-process on port 0 with a throwaway PKI (rcgen), talked
//! to by a rustls client. Client-certificate modes: 0 (none), 1 (request), 2 (require).
//! The client crate's tests run the same conversations against real memcached `-Z`.

use std::sync::Arc;
use std::time::Duration;

use memkit_server::{Args, Settings, Shared};
use memkit_testkit::TestServer;
use memkit_testkit::certs::TestPki;
use memkit_testkit::wire::{Until, Wire};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio::time::timeout;

type TlsWire = Wire<tokio_rustls::client::TlsStream<TcpStream>>;

fn settings(args: &[&str]) -> Settings {
    let mut argv = vec!["memkitd"];
    argv.extend_from_slice(args);
    Settings::from_args(<Args as clap::Parser>::parse_from(argv)).0
}

/// Which certificate the test client presents.
#[derive(Clone, Copy, Debug)]
enum ClientCert {
    None,
    Good,
    Rogue,
}

fn client_config(pki: &TestPki, cert: ClientCert) -> Arc<rustls::ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let pair = |c: &str, k: &str| {
        (
            vec![CertificateDer::from_pem_slice(c.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(k.as_bytes()).unwrap(),
        )
    };
    Arc::new(match cert {
        ClientCert::None => b.with_no_client_auth(),
        ClientCert::Good => {
            let (c, k) = pair(&pki.client_cert_pem, &pki.client_key_pem);
            b.with_client_auth_cert(c, k).unwrap()
        }
        ClientCert::Rogue => {
            let (c, k) = pair(&pki.rogue_cert_pem, &pki.rogue_key_pem);
            b.with_client_auth_cert(c, k).unwrap()
        }
    })
}

async fn tls_connect(
    addr: std::net::SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsWire> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    let tls = timeout(
        Duration::from_secs(5),
        tokio_rustls::TlsConnector::from(cfg).connect(name, tcp),
    )
    .await
    .expect("handshake within 5 s")?;
    Ok(Wire::new(tls))
}

/// `r`, which must be an answer or a failure of the stream, not a wait for one.
fn not_timed_out<T: std::fmt::Debug>(r: std::io::Result<T>) -> std::io::Result<T> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => panic!("{e}"),
        r => r,
    }
}

/// Whether a client presenting `cert` can set and get over TLS (a refused client
/// certificate surfaces as a failed read under TLS 1.3).
async fn works(addr: std::net::SocketAddr, pki: &TestPki, cert: ClientCert) -> bool {
    let Ok(mut s) = tls_connect(addr, client_config(pki, cert)).await else {
        return false;
    };
    let r = s
        .try_ask(b"set k 0 0 2\r\nhi\r\nget k\r\n", Until::END)
        .await;
    not_timed_out(r).is_ok_and(|r| r == "STORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n")
}

#[tokio::test]
async fn get_and_set_over_tls() {
    let pki = TestPki::generate();
    let opts = pki.server_opts(0);
    let s = TestServer::start(&["-Z", "-o", &opts]);
    let mut c = tls_connect(s.tcp_addr(), client_config(&pki, ClientCert::None))
        .await
        .unwrap();
    // A value larger than one TLS record, pipelined with its get.
    let big = "x".repeat(100_000);
    let req = format!("set big 0 0 {}\r\n{big}\r\nget big\r\n", big.len());
    let r = c.ask(req.as_bytes(), Until::END).await;
    assert_eq!(
        r,
        format!("STORED\r\nVALUE big 0 {}\r\n{big}\r\nEND\r\n", big.len())
    );
    let st = c.ask(b"stats settings\r\n", Until::END).await;
    assert!(st.contains("STAT ssl_enabled yes\r\n"), "{st}");
    assert!(st.contains("STAT ssl_verify_mode 0\r\n"), "{st}");
    // quit: the server closes with close_notify, which the client reads as a clean EOF.
    c.send(b"quit\r\n").await;
    let rest = c.try_read(Until::Closed).await;
    assert!(rest.is_ok(), "clean close: {rest:?}");
    assert!(
        works(s.tcp_addr(), &pki, ClientCert::Good).await,
        "a certificate nobody asked for"
    );
    s.stop().await;
}

/// The binary protocol over TLS: the first decrypted byte picks it, as on plain TCP.
#[tokio::test]
async fn binary_protocol_over_tls() {
    use memkit_protocol::binary::{Status, decode_response, encode_request, op};
    let pki = TestPki::generate();
    let opts = pki.server_opts(0);
    let s = TestServer::start(&["-Z", "-o", &opts]);
    let mut c = tls_connect(s.tcp_addr(), client_config(&pki, ClientCert::None))
        .await
        .unwrap();
    let big = vec![b'y'; 100_000];
    let mut req = Vec::new();
    encode_request(
        &mut req,
        op::SETQ,
        1,
        0,
        &[0, 0, 0, 9, 0, 0, 0, 0],
        b"b",
        &big,
    );
    encode_request(&mut req, op::GETK, 2, 0, &[], b"b", &[]);
    encode_request(&mut req, op::GETQ, 3, 0, &[], b"nothing", &[]);
    encode_request(&mut req, op::NOOP, 4, 0, &[], &[], &[]);
    c.send(&req).await;
    let mut replies: Vec<(u32, u16, Vec<u8>, usize)> = Vec::new();
    while replies.last().is_none_or(|&(o, ..)| o != 4) {
        let frame = c.read(Until::Frame).await;
        let Ok(Some((r, _))) = decode_response(&frame) else {
            panic!("not a response frame: {frame:?}");
        };
        let h = r.header;
        replies.push((h.opaque, h.status, r.key.to_vec(), r.value.len()));
    }
    // SETQ's success and GETQ's miss are silent: only the GETK hit and the NOOP answer.
    let ok = Status::Ok as u16;
    assert_eq!(
        replies,
        vec![(2, ok, b"b".to_vec(), big.len()), (4, ok, Vec::new(), 0)]
    );
    s.stop().await;
}

#[tokio::test]
async fn plaintext_clients_get_nothing_from_a_tls_port() {
    let pki = TestPki::generate();
    let opts = pki.server_opts(0);
    let s = TestServer::start(&["-Z", "-o", &opts]);
    let mut c = Wire::tcp(s.tcp_addr()).await.unwrap();
    let r = c
        .try_ask(b"set k 0 0 1\r\nv\r\nget k\r\n", Until::END)
        .await;
    let r = not_timed_out(r);
    assert!(r.is_err(), "plaintext got an answer: {r:?}");
    let st = tls_connect(s.tcp_addr(), client_config(&pki, ClientCert::None))
        .await
        .unwrap()
        .ask(b"stats\r\n", Until::END)
        .await;
    assert!(st.contains("STAT ssl_handshake_errors 1\r\n"), "{st}");
    assert!(
        st.contains("STAT curr_items 0\r\n"),
        "nothing was stored: {st}"
    );
    s.stop().await;
}

#[tokio::test]
async fn verify_mode_2_requires_a_client_certificate_from_the_ca() {
    let pki = TestPki::generate();
    let opts = pki.server_opts(2);
    let s = TestServer::start(&["-Z", "-o", &opts]);
    assert!(
        !works(s.tcp_addr(), &pki, ClientCert::None).await,
        "no certificate"
    );
    assert!(
        !works(s.tcp_addr(), &pki, ClientCert::Rogue).await,
        "another CA's certificate"
    );
    assert!(works(s.tcp_addr(), &pki, ClientCert::Good).await);
    let tls = s.shared().tls.as_ref().unwrap();
    assert_eq!(
        tls.handshake_errors
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    s.stop().await;
}

#[tokio::test]
async fn verify_mode_1_checks_a_certificate_only_when_one_is_sent() {
    let pki = TestPki::generate();
    let opts = pki.server_opts(1);
    let s = TestServer::start(&["-Z", "-o", &opts]);
    assert!(works(s.tcp_addr(), &pki, ClientCert::None).await);
    assert!(works(s.tcp_addr(), &pki, ClientCert::Good).await);
    assert!(!works(s.tcp_addr(), &pki, ClientCert::Rogue).await);
    s.stop().await;
}

#[tokio::test]
async fn tls_and_auth_together() {
    let pki = TestPki::generate();
    let users = pki.dir().join("users");
    std::fs::write(&users, "alice:secret\n").unwrap();
    let opts = pki.server_opts(0);
    let s = TestServer::start(&["-Z", "-o", &opts, "-Y", users.to_str().unwrap()]);
    let mut c = tls_connect(s.tcp_addr(), client_config(&pki, ClientCert::None))
        .await
        .unwrap();
    let r = c.ask(b"get k\r\n", Until::LINE).await;
    assert_eq!(r, "CLIENT_ERROR unauthenticated\r\n");
    let r = c
        .ask(
            b"set auth 0 0 12\r\nalice secret\r\nversion\r\n",
            Until::Lines(2),
        )
        .await;
    assert!(r.starts_with("STORED\r\nVERSION "), "{r}");
    s.stop().await;
}

#[test]
fn bad_tls_settings_refuse_to_start() {
    let pki = TestPki::generate();
    let start = |args: &[&str]| {
        let st = settings(args);
        st.check()?;
        Shared::try_with_persist(Arc::new(memkit_server::engine_for(&st)), None, st)
            .map(|_| ())
            .map_err(|(code, msg)| format!("{code}: {msg}"))
    };
    let err = start(&["-Z"]).unwrap_err();
    assert!(
        err.starts_with("64: Error loading the certificate chain: (null)"),
        "{err}"
    );
    let missing = format!("ssl_chain_cert={}", pki.path("nope.pem"));
    let err = start(&["-Z", "-o", &missing]).unwrap_err();
    assert!(err.contains("Error loading the certificate chain"), "{err}");
    // The key of another certificate.
    let wrong_key = format!(
        "ssl_chain_cert={},ssl_key={}",
        pki.path("server.pem"),
        pki.path("client.key")
    );
    let err = start(&["-Z", "-o", &wrong_key]).unwrap_err();
    assert!(err.contains("Error validating the certificate"), "{err}");
    let no_ca = format!(
        "ssl_chain_cert={},ssl_key={},ssl_verify_mode=2",
        pki.path("server.pem"),
        pki.path("server.key")
    );
    let err = start(&["-Z", "-o", &no_ca]).unwrap_err();
    assert!(err.contains("needs ssl_ca_cert"), "{err}");
    let err = start(&["-Z", "-o", "ssl_verify_mode=7"]).unwrap_err();
    assert_eq!(
        err,
        "Invalid ssl_verify_mode. Use help to see valid options."
    );
    // A key in the chain file works when ssl_key is not given.
    let both = pki.dir().join("both.pem");
    std::fs::write(
        &both,
        format!("{}{}", pki.server_cert_pem, pki.server_key_pem),
    )
    .unwrap();
    let opt = format!("ssl_chain_cert={},ssl_min_version=3", both.display());
    start(&["-Z", "-o", &opt]).unwrap();
}
