//! The binary protocol and SASL PLAIN through the client: against memkitd `-S` (in-process,
//! users in a `MEMCACHED_SASL_PWDB`-format file) and real memcached 1.6.18 `-S` (users in a
//! Cyrus sasldb written by `saslpasswd2`; skipped with a note when memcached, `saslpasswd2`
//! or the PLAIN plugin is missing, a failure under CI), and binary without SASL against
//! both servers started plainly.
//!
//! Every call the client makes over binary is checked for its outcome; a wrong password and
//! missing credentials must fail with a clear error that a cluster does not take for an
//! unreachable server.

mod common;

use common::{Memcached, Memkitd, config};
use memkit_client::{
    Client, ClientConfig, Cluster, ClusterConfig, Credentials, Distribution, Protocol, ServerSpec,
};
use memkit_testkit::tempdir::{TempDir, tempdir};
use memkit_types::{Error, Exptime, GetOptions, Memcache, StoreOutcome};

const USER: &str = "alice";
const PASSWORD: &str = "s3cret pw";

/// A private directory with the users: a pwdb file for memkitd, and the sasldb the harness
/// writes for real memcached (`memcached::spawn_sasl`).
struct Users {
    dir: TempDir,
}

impl Users {
    fn new() -> Users {
        let dir = tempdir("client-sasl");
        // A line with extra fields and CRLF, as memcached's pwdb reader takes them.
        std::fs::write(
            dir.path().join("pwdb"),
            format!("bob:hunter2:extra\r\n{USER}:{PASSWORD}\n"),
        )
        .unwrap();
        Users { dir }
    }

    fn pwdb(&self) -> String {
        self.dir.path().join("pwdb").to_string_lossy().into_owned()
    }
}

/// Real memcached `-S` with the same users as the pwdb, through the harness.
fn sasl_memcached(users: &Users) -> Option<memkit_testkit::memcached::Memcached> {
    memkit_testkit::memcached::spawn_sasl(users.dir.path(), &[(USER, PASSWORD), ("bob", "hunter2")])
}

fn spec_of(m: &memkit_testkit::memcached::Memcached) -> ServerSpec {
    ServerSpec::new("127.0.0.1", m.port)
}

fn binary() -> ClientConfig {
    config().binary()
}

fn with_password(password: &str) -> ClientConfig {
    binary().with_auth(Credentials::sasl(USER, password).unwrap())
}

/// Every call the client makes, over binary, with the outcome memcached gives.
async fn every_call(c: &Client, name: &str) {
    let p = |s: &str| format!("{name}:{s}");
    let (k, n, fresh, gone) = (p("k"), p("n"), p("fresh"), p("gone"));
    let (k, n, fresh, gone) = (
        k.as_bytes(),
        n.as_bytes(),
        fresh.as_bytes(),
        gone.as_bytes(),
    );
    assert!(!c.version().await.unwrap().is_empty(), "{name}");
    let cas = c.set(k, b"v", 5, Exptime(0)).await.unwrap();
    assert_ne!(cas, 0, "{name}: set returns the CAS");
    let got = c
        .get_multi(&[k, gone, k], &GetOptions::default())
        .await
        .unwrap();
    let item = got[0].clone().unwrap();
    assert_eq!(
        (&item.value[..], item.flags, item.cas),
        (&b"v"[..], 5, cas),
        "{name}"
    );
    assert_eq!((got[1].is_none(), got[2].is_some()), (true, true), "{name}");
    assert_eq!(
        c.gat(k, Exptime(100)).await.unwrap().unwrap().value,
        &b"v"[..]
    );
    assert!(c.touch(k, Exptime(100)).await.unwrap(), "{name}");
    assert!(!c.touch(gone, Exptime(100)).await.unwrap(), "{name}");
    assert!(
        !c.add(k, b"x", 0, Exptime(0)).await.unwrap(),
        "{name}: add on a present key"
    );
    assert!(c.add(fresh, b"1", 0, Exptime(0)).await.unwrap(), "{name}");
    assert!(c.replace(k, b"v2", 5, Exptime(0)).await.unwrap(), "{name}");
    assert!(
        !c.replace(gone, b"x", 0, Exptime(0)).await.unwrap(),
        "{name}"
    );
    assert!(c.append(k, b"+").await.unwrap(), "{name}");
    assert!(c.prepend(k, b"-").await.unwrap(), "{name}");
    assert!(!c.append(gone, b"+").await.unwrap(), "{name}");
    let item = c.get(k).await.unwrap().unwrap();
    assert_eq!(
        (&item.value[..], item.flags),
        (&b"-v2+"[..], 5),
        "{name}: flags kept"
    );
    let outcome = c
        .cas(k, b"c", 0, Exptime(0), item.cas + 1000)
        .await
        .unwrap();
    assert_eq!(outcome, StoreOutcome::Exists, "{name}");
    let outcome = c.cas(k, b"c", 0, Exptime(0), item.cas).await.unwrap();
    assert_eq!(outcome, StoreOutcome::Stored, "{name}");
    let outcome = c.cas(gone, b"c", 0, Exptime(0), 1).await.unwrap();
    assert_eq!(outcome, StoreOutcome::NotFound, "{name}");
    assert_eq!(
        c.incr(n, 1).await.unwrap(),
        None,
        "{name}: no-create on a miss"
    );
    c.set(n, b"41", 0, Exptime(0)).await.unwrap();
    assert_eq!(c.incr(n, 1).await.unwrap(), Some(42), "{name}");
    assert_eq!(
        c.decr(n, 50).await.unwrap(),
        Some(0),
        "{name}: decr stops at 0"
    );
    assert!(
        matches!(c.incr(k, 1).await, Err(Error::Client(_))),
        "{name}: non-numeric"
    );
    let big = vec![b'b'; 300_000];
    c.set(fresh, &big, 0, Exptime(0)).await.unwrap();
    assert_eq!(c.get(fresh).await.unwrap().unwrap().value, big, "{name}");
    assert!(c.delete(k).await.unwrap(), "{name}");
    assert!(!c.delete(k).await.unwrap(), "{name}");
    for group in ["", "items", "slabs", "settings"] {
        let st = c.stats(group).await.unwrap();
        assert!(!st.is_empty(), "{name}: stats {group:?}");
    }
    let st = c.stats("").await.unwrap();
    assert!(st.iter().any(|(k, _)| k == "pid"), "{name}: {st:?}");
    // Concurrent calls on every pooled connection, each of which logs in on its own.
    c.disconnect().await;
    let calls = (0..16).map(|i| {
        let c = c.clone();
        let key = format!("{name}:p{i}");
        async move {
            c.set(key.as_bytes(), b"x", 0, Exptime(0)).await.unwrap();
            c.get(key.as_bytes()).await.unwrap().unwrap()
        }
    });
    for item in futures_join(calls).await {
        assert_eq!(item.value, &b"x"[..], "{name}");
    }
    c.flush_all(0).await.unwrap();
    assert_eq!(c.get(fresh).await.unwrap(), None, "{name}: flushed");
}

/// Runs futures concurrently on the test's runtime.
async fn futures_join<F: std::future::Future + Send + 'static>(
    fs: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

/// A wrong password, missing credentials: clear errors that are not "unavailable".
async fn refused(spec: ServerSpec, name: &str) {
    let wrong = Client::new(spec.clone(), with_password("wrong"));
    let e = wrong.set(b"k", b"v", 0, Exptime(0)).await.unwrap_err();
    assert!(
        matches!(&e, Error::Client(m) if m.contains("SASL authentication failed")),
        "{name}: {e:?}"
    );
    assert!(!e.is_unavailable(), "{name}");
    let e = wrong.version().await.unwrap_err();
    assert!(matches!(e, Error::Client(_)), "{name}: every connect fails");
    let none = Client::new(spec.clone(), binary());
    let e = none.get(b"k").await.unwrap_err();
    assert!(
        matches!(&e, Error::Client(m) if m.contains("SASL")),
        "{name}: {e:?}"
    );
    assert!(!e.is_unavailable(), "{name}");
    // A cluster surfaces the wrong password instead of reading it as a miss.
    let cfg = ClusterConfig {
        client: with_password("wrong"),
        ..ClusterConfig::new(Distribution::Ketama)
    };
    let pool = Cluster::new(vec![spec], cfg);
    let e = pool.get(b"k").await.unwrap_err();
    assert!(matches!(e, Error::Client(_)), "{name}: {e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memkitd_sasl_every_call_and_refusals() {
    let users = Users::new();
    let d = Memkitd::start_with(&["-S", "--sasl-pwdb", &users.pwdb()]);
    let c = Client::new(d.spec(), with_password(PASSWORD));
    assert_eq!(c.config().protocol, Protocol::Binary);
    every_call(&c, "memkitd").await;
    // The other user, whose line has extra fields and ends in CRLF.
    let bob = Client::new(
        d.spec(),
        binary().with_auth(Credentials::sasl("bob", "hunter2").unwrap()),
    );
    bob.set(b"b", b"1", 0, Exptime(0)).await.unwrap();
    refused(d.spec(), "memkitd").await;
    // The server counted the logins and the failures.
    let st = c.stats("").await.unwrap();
    let stat = |n: &str| st.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let (cmds, errors): (u64, u64) = (
        stat("auth_cmds").unwrap().parse().unwrap(),
        stat("auth_errors").unwrap().parse().unwrap(),
    );
    assert!(
        cmds > errors && errors >= 3,
        "auth_cmds {cmds}, auth_errors {errors}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memkitd_sasl_through_a_cluster() {
    let users = Users::new();
    let servers: Vec<Memkitd> = (0..3)
        .map(|_| Memkitd::start_with(&["-S", "--sasl-pwdb", &users.pwdb()]))
        .collect();
    let cfg = ClusterConfig {
        client: with_password(PASSWORD),
        ..ClusterConfig::new(Distribution::Ketama)
    };
    let pool = Cluster::new(servers.iter().map(Memkitd::spec).collect(), cfg);
    for i in 0..60 {
        let k = format!("c{i}");
        pool.set(k.as_bytes(), k.as_bytes(), 0, Exptime(0))
            .await
            .unwrap();
    }
    let keys: Vec<String> = (0..60).map(|i| format!("c{i}")).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let got = pool.get_multi(&refs, &GetOptions::default()).await.unwrap();
    for (k, item) in keys.iter().zip(got) {
        assert_eq!(item.unwrap().value, k.as_bytes());
    }
    let stats = pool.stats("").await;
    assert_eq!(stats.len(), 3);
    assert!(stats.iter().all(|(_, r)| r.is_ok()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_without_sasl() {
    // memkitd and memcached without -S serve binary to anyone (memcached's -B auto).
    let d = Memkitd::start();
    every_call(&Client::new(d.spec(), binary()), "memkitd-plain").await;
    // Credentials for a server without SASL: it answers UNKNOWN_COMMAND to the mechanism
    // list and there is nothing to log in to (libmemcached reads it the same way).
    let c = Client::new(d.spec(), with_password("anything"));
    c.set(b"k", b"v", 0, Exptime(0)).await.unwrap();
    if let Some(m) = Memcached::start() {
        every_call(&Client::new(m.spec(), binary()), "memcached-plain").await;
        let c = Client::new(m.spec(), with_password("anything"));
        c.set(b"k", b"v", 0, Exptime(0)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_binary_cannot_say_fails_before_sending() {
    let d = Memkitd::start();
    let c = Client::new(d.spec(), binary());
    let meta = GetOptions {
        meta: true,
        ..Default::default()
    };
    assert!(matches!(
        c.get_with(b"k", &meta).await,
        Err(Error::Protocol(_))
    ));
    assert!(matches!(
        c.set(b"k", b"v", 0, Exptime(-1)).await,
        Err(Error::Protocol(_))
    ));
    // The connection is still good.
    c.set(b"k", b"v", 0, Exptime(0)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_memcached_sasl() {
    let users = Users::new();
    let Some(m) = sasl_memcached(&users) else {
        return;
    };
    let c = Client::new(spec_of(&m), with_password(PASSWORD));
    every_call(&c, "memcached").await;
    refused(spec_of(&m), "memcached").await;
    let bob = Client::new(
        spec_of(&m),
        binary().with_auth(Credentials::sasl("bob", "hunter2").unwrap()),
    );
    bob.set(b"b", b"1", 0, Exptime(0)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_binary_frame_closes_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A server announcing a 2 GiB reply: refused from its header, never buffered.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut req = [0u8; 24];
        s.read_exact(&mut req).await.unwrap();
        let mut h = [0u8; 24];
        h[0] = 0x81;
        h[1] = req[1];
        h[8..12].copy_from_slice(&(1u32 << 31).to_be_bytes());
        s.write_all(&h).await.unwrap();
        s.write_all(&[0u8; 4096]).await.unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
    });
    let c = Client::new(ServerSpec::new("127.0.0.1", port), binary());
    let e = c.version().await.unwrap_err();
    assert!(
        matches!(&e, Error::Io(m) if m.contains("too long")),
        "{e:?}"
    );
}
