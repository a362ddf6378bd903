//! TLS and ASCII authentication through the client, against real memcached 1.6.18 (`-Z`,
//! `-Y`; skipped with a note when it is not installed) and against memkitd in-process, with
//! a throwaway PKI from rcgen.

mod common;

use common::{Memcached, Memkitd, config};
use memkit_client::{
    Client, ClientConfig, Cluster, ClusterConfig, Credentials, Distribution, ServerSpec, TlsOptions,
};
use memkit_testkit::certs::TestPki;
use memkit_testkit::suite::{self, Needs, SuiteOptions, WallClock};
use memkit_types::{Error, Memcache, StoreOptions};

/// memcached or memkitd, started with the same flags.
enum Server {
    Memcached(Memcached),
    Memkitd(Memkitd),
}

impl Server {
    fn spec(&self) -> ServerSpec {
        match self {
            Server::Memcached(m) => m.spec(),
            Server::Memkitd(m) => m.spec(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Server::Memcached(_) => "memcached",
            Server::Memkitd(_) => "memkitd",
        }
    }
}

/// memkitd, and memcached when installed, both started with `args`.
fn both(args: &[&str]) -> Vec<Server> {
    let mut v = vec![Server::Memkitd(Memkitd::start_with(args))];
    v.extend(Memcached::start_with(args).map(Server::Memcached));
    v
}

fn tls(pki: &TestPki, with_client_cert: bool) -> ClientConfig {
    let mut o = TlsOptions::new().ca_pem(pki.ca_pem.clone());
    if with_client_cert {
        o = o.client_cert_pem_files(pki.path("client.pem"), pki.path("client.key"));
    }
    config().with_tls(o.connector().expect("TLS options"))
}

async fn set_get(c: &impl Memcache, key: &[u8], value: &[u8]) -> Result<Vec<u8>, Error> {
    c.store(key, value, &StoreOptions::default()).await?;
    let item = c.get(key).await?;
    Ok(item.map(|i| i.value.to_vec()).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_get_and_set_against_both_servers() {
    let pki = TestPki::generate();
    let opts = pki.server_opts(0);
    let big = vec![b'v'; 300_000];
    for s in both(&["-Z", "-o", &opts]) {
        let c = Client::new(s.spec(), tls(&pki, false));
        assert_eq!(
            set_get(&c, b"k", b"hello").await.unwrap(),
            b"hello",
            "{}",
            s.name()
        );
        assert_eq!(
            set_get(&c, b"big", &big).await.unwrap(),
            big,
            "{}",
            s.name()
        );
        // The same server by name, the certificate checked for `localhost`.
        let spec = ServerSpec::new("localhost", s.spec().port);
        let by_name = Client::new(spec, tls(&pki, false));
        assert!(by_name.version().await.is_ok(), "{}", s.name());
        // A client that does not trust this CA cannot connect.
        let other = TestPki::generate();
        let c = Client::new(s.spec(), tls(&other, false));
        let err = c.version().await.unwrap_err();
        assert!(matches!(err, Error::Io(_)), "{}: {err:?}", s.name());
        // Plain TCP to a TLS port gets no answer it could take for one.
        let plain = Client::new(s.spec(), config());
        assert!(plain.version().await.is_err(), "{}", s.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_when_the_server_requires_them() {
    let pki = TestPki::generate();
    let opts = pki.server_opts(2);
    for s in both(&["-Z", "-o", &opts]) {
        let with = Client::new(s.spec(), tls(&pki, true));
        assert_eq!(
            set_get(&with, b"k", b"v").await.unwrap(),
            b"v",
            "{}",
            s.name()
        );
        // Every connection of the pool handshakes in full (memcached refuses resumption
        // when it verifies clients).
        with.disconnect().await;
        for _ in 0..4 {
            assert!(with.version().await.is_ok(), "{}", s.name());
        }
        let without = Client::new(s.spec(), tls(&pki, false));
        assert!(
            without.version().await.is_err(),
            "{}: no certificate",
            s.name()
        );
        let rogue = TlsOptions::new()
            .ca_pem(pki.ca_pem.clone())
            .client_cert_pem(pki.rogue_cert_pem.clone(), pki.rogue_key_pem.clone());
        let rogue = Client::new(s.spec(), config().with_tls(rogue.connector().unwrap()));
        assert!(rogue.version().await.is_err(), "{}: another CA", s.name());
    }
}

fn users(pki: &TestPki) -> String {
    let path = pki.dir().join("users");
    std::fs::write(&path, "alice:secret\nbob:hunter2\n").unwrap();
    path.to_string_lossy().into_owned()
}

fn creds(u: &str, p: &str) -> Credentials {
    Credentials::new(u, p).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_against_both_servers() {
    let pki = TestPki::generate();
    let file = users(&pki);
    for s in both(&["-Y", &file]) {
        let ok = Client::new(s.spec(), config().with_auth(creds("bob", "hunter2")));
        assert_eq!(
            set_get(&ok, b"k", b"v").await.unwrap(),
            b"v",
            "{}",
            s.name()
        );
        // Every pooled connection logs in (the pool has 2; use both).
        for _ in 0..4 {
            assert!(ok.version().await.is_ok(), "{}", s.name());
        }
        let wrong = Client::new(s.spec(), config().with_auth(creds("bob", "nope")));
        let err = wrong.version().await.unwrap_err();
        assert_eq!(
            err,
            Error::Client("authentication failure".into()),
            "{}",
            s.name()
        );
        assert!(!err.is_unavailable());
        let none = Client::new(s.spec(), config());
        let err = none.version().await.unwrap_err();
        assert_eq!(err, Error::Client("unauthenticated".into()), "{}", s.name());
        let stats = ok.stats("").await.unwrap();
        let stat = |n: &str| stats.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(stat("auth_errors").as_deref(), Some("1"), "{}", s.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_over_tls_and_a_cluster_of_both_servers() {
    let pki = TestPki::generate();
    let file = users(&pki);
    let opts = pki.server_opts(0);
    let servers = both(&["-Z", "-o", &opts, "-Y", &file]);
    let cfg = ClusterConfig {
        client: tls(&pki, false).with_auth(creds("alice", "secret")),
        ..ClusterConfig::new(Distribution::Ketama)
    };
    let cluster = Cluster::new(servers.iter().map(Server::spec).collect(), cfg);
    for i in 0..50 {
        let key = format!("key{i}");
        let got = set_get(&cluster, key.as_bytes(), key.as_bytes()).await;
        assert_eq!(got.unwrap(), key.as_bytes());
    }
    for (spec, v) in cluster.versions().await {
        assert!(v.is_ok(), "{spec}: {v:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logging_in_to_a_server_without_auth_leaves_no_password_in_it() {
    for s in both(&[]) {
        let c = Client::new(s.spec(), config().with_auth(creds("alice", "secret")));
        assert!(c.version().await.is_ok(), "{}", s.name());
        let key = memkit_client::auth::AUTH_KEY.as_bytes();
        let item = c.get(key).await.unwrap();
        assert!(item.is_none(), "{}: the login was kept", s.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_over_tls_with_auth() {
    let pki = TestPki::generate();
    let file = users(&pki);
    let opts = pki.server_opts(0);
    for s in both(&["-Z", "-o", &opts, "-Y", &file]) {
        let c = Client::new(
            s.spec(),
            tls(&pki, false).with_auth(creds("alice", "secret")),
        );
        let o = SuiteOptions {
            // Debian's memcached 1.6.18 lacks a few newer meta flags.
            max_needs: match s {
                Server::Memcached(_) => Needs::Base,
                Server::Memkitd(_) => SuiteOptions::default().max_needs,
            },
            ..Default::default()
        };
        let report = suite::run_with(&c, &WallClock, &o).await;
        eprintln!("{} over TLS with auth: {report}", s.name());
        report.assert_all_passed();
    }
}
