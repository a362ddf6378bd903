//! What the client puts on the wire: concurrent calls share connections and writes, a
//! multi-get is one batch per server, and a connect that hangs ends at the connect timeout.
//!
//! A recording [`Connector`] (plain TCP underneath) logs every write per server and can hold
//! writes back, so that batching is observed rather than inferred from timing.

mod common;

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use common::{Memkitd, config};
use memkit_client::conn::BoxFuture;
use memkit_client::{
    Client, ClientConfig, Cluster, ClusterConfig, Connector, Distribution, ServerSpec, Stream,
};
use memkit_types::{Error, Exptime, GetOptions, Memcache};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Writes seen, per server port, and a switch that holds writes back.
#[derive(Debug, Default)]
struct Recorder {
    connects: AtomicUsize,
    writes: Mutex<Vec<(u16, Vec<u8>)>>,
    held: AtomicBool,
    waiting: Mutex<Vec<Waker>>,
}

impl Recorder {
    fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
        for w in self.waiting.lock().unwrap().drain(..) {
            w.wake();
        }
    }

    /// The writes to `port` so far, forgetting them.
    fn take(&self, port: u16) -> Vec<Vec<u8>> {
        let mut all = self.writes.lock().unwrap();
        let (mine, rest) = all.drain(..).partition(|(p, _)| *p == port);
        *all = rest;
        mine.into_iter().map(|(_, w)| w).collect()
    }
}

#[derive(Debug, Clone)]
struct Recording(Arc<Recorder>);

impl Connector for Recording {
    fn connect<'a>(&'a self, server: &'a ServerSpec) -> BoxFuture<'a, io::Result<Box<dyn Stream>>> {
        Box::pin(async move {
            let inner = TcpStream::connect((server.host.as_str(), server.port)).await?;
            inner.set_nodelay(true)?;
            self.0.connects.fetch_add(1, Ordering::SeqCst);
            let s = Recorded {
                inner,
                port: server.port,
                rec: self.0.clone(),
            };
            Ok(Box::new(s) as Box<dyn Stream>)
        })
    }
}

struct Recorded {
    inner: TcpStream,
    port: u16,
    rec: Arc<Recorder>,
}

impl AsyncRead for Recorded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Recorded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.rec.held.load(Ordering::SeqCst) {
            self.rec.waiting.lock().unwrap().push(cx.waker().clone());
            // Released between the check and the registration: go on now.
            if self.rec.held.load(Ordering::SeqCst) {
                return Poll::Pending;
            }
        }
        let port = self.port;
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.rec
                .writes
                .lock()
                .unwrap()
                .push((port, buf[..n].to_vec()));
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn recording() -> (Arc<Recorder>, ClientConfig) {
    let rec = Arc::new(Recorder::default());
    let cfg = ClientConfig {
        pool_size: 1,
        ..config()
    }
    .with_connector(Arc::new(Recording(rec.clone())));
    (rec, cfg)
}

fn count(writes: &[Vec<u8>], needle: &[u8]) -> usize {
    writes
        .iter()
        .map(|w| w.windows(needle.len()).filter(|x| *x == needle).count())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_waiting_behind_a_write_go_out_together_on_one_connection() {
    let d = Memkitd::start();
    let (rec, cfg) = recording();
    let c = Client::new(d.spec(), cfg);
    c.set(b"w", b"value", 0, Exptime::NEVER).await.unwrap();
    assert_eq!(rec.take(d.port).len(), 1);

    // The first call's write is held; the other 63 queue behind it meanwhile.
    rec.hold();
    let started = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (c, started) = (c.clone(), started.clone());
            tokio::spawn(async move {
                let absent = format!("absent:{i}");
                started.fetch_add(1, Ordering::SeqCst);
                c.get_multi(&[b"w", absent.as_bytes()], &GetOptions::default())
                    .await
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.load(Ordering::SeqCst) < 64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Long enough for every started task to reach the connection's queue.
    tokio::time::sleep(Duration::from_millis(300)).await;
    rec.release();
    for t in tasks {
        let got = t.await.expect("no panic").unwrap();
        assert_eq!(got[0].as_ref().unwrap().value, &b"value"[..]);
        assert!(got[1].is_none());
    }

    let writes = rec.take(d.port);
    assert_eq!(count(&writes, b"absent:"), 64, "every request sent once");
    // One write for the first call, one for the 63 queued behind it (a straggler that
    // reached the queue late would add one more).
    assert!(
        writes.len() <= 3,
        "{} writes for 64 calls: {:?}",
        writes.len(),
        writes.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert_eq!(rec.connects.load(Ordering::SeqCst), 1, "one connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_multi_get_is_one_write_per_server() {
    let servers: Vec<Memkitd> = (0..3).map(|_| Memkitd::start()).collect();
    let (rec, client) = recording();
    let cfg = ClusterConfig {
        client,
        ..ClusterConfig::new(Distribution::Ketama)
    };
    let c = Cluster::new(servers.iter().map(Memkitd::spec).collect(), cfg);
    let keys: Vec<String> = (0..100).map(|i| format!("mget-{i}")).collect();
    for k in &keys {
        c.set(k.as_bytes(), k.as_bytes(), 0, Exptime::NEVER)
            .await
            .unwrap();
    }
    for s in &servers {
        rec.take(s.port);
    }

    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let got = c.get_multi(&refs, &GetOptions::default()).await.unwrap();
    for (k, item) in keys.iter().zip(&got) {
        assert_eq!(item.as_ref().map(|i| &i.value[..]), Some(k.as_bytes()));
    }
    let mut total = 0;
    for (i, s) in servers.iter().enumerate() {
        let mine = keys
            .iter()
            .filter(|k| c.server_for(k.as_bytes()) == Some(i))
            .count();
        let writes = rec.take(s.port);
        let sent = count(&writes, b"mget-");
        assert_eq!(sent, mine, "server {i} is asked for its keys only");
        assert_eq!(writes.len(), usize::from(mine > 0), "server {i}: one write");
        total += sent;
    }
    assert_eq!(total, 100);
    assert_eq!(rec.connects.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_that_hangs_ends_at_the_connect_timeout() {
    // A listener that never accepts, with the smallest backlog: once its accept queue is
    // full, Linux drops further SYNs and a connect waits for retransmissions.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = sock.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(addr)).await {
            Ok(Ok(s)) => held.push(s),
            Ok(Err(e)) => panic!("connect: {e}"),
            Err(_) => break,
        }
        assert!(held.len() < 64, "the accept queue never filled");
    }

    let c = Client::new(
        ServerSpec::new("127.0.0.1", addr.port()),
        ClientConfig {
            connect_timeout: Duration::from_millis(300),
            request_timeout: Duration::from_secs(60),
            ..ClientConfig::default()
        },
    );
    let t = Instant::now();
    assert_eq!(c.get(b"k").await, Err(Error::Timeout));
    // The connect timeout ended it, not the minute-long request timeout.
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    drop(listener);
}

/// Callers write their requests themselves while the socket takes them; what it does not
/// take waits for the writer task. Big stores and big multi-get replies cross on one
/// connection: nothing is lost, reordered or stuck while the server writes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_requests_and_replies_cross_on_one_connection() {
    big_requests_and_replies_cross().await;
}

/// On a current-thread runtime every write is the writer task's: the same crossing.
#[tokio::test(flavor = "current_thread")]
async fn big_requests_and_replies_cross_on_a_current_thread_runtime() {
    big_requests_and_replies_cross().await;
}

async fn big_requests_and_replies_cross() {
    let d = Memkitd::start_with(&["-m", "256"]);
    let c = Client::new(
        d.spec(),
        ClientConfig {
            pool_size: 1,
            request_timeout: Duration::from_secs(30),
            ..config()
        },
    );
    let value = |i: usize| vec![b'a' + i as u8; 1000 * 1000 - i];
    let keys: Vec<String> = (0..16).map(|i| format!("big:{i}")).collect();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (c, keys) = (c.clone(), keys.clone());
            tokio::spawn(async move {
                c.set(keys[i].as_bytes(), &value(i), 0, Exptime::NEVER)
                    .await
                    .unwrap();
                let all: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
                c.get_multi(&all, &GetOptions::default()).await.unwrap()
            })
        })
        .collect();
    for t in tasks {
        for (i, item) in t.await.expect("no panic").into_iter().enumerate() {
            // Stores of other tasks may not have landed yet; a value read is whole.
            if let Some(item) = item {
                assert_eq!(item.value, value(i), "{}", keys[i]);
            }
        }
    }
    let all: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let got = c.get_multi(&all, &GetOptions::default()).await.unwrap();
    for (i, item) in got.into_iter().enumerate() {
        assert_eq!(item.expect("every store landed").value, value(i));
    }
}

/// The request timeout is a watchdog's, one timer a connection: a connection idle for many
/// timeouts is still the one used afterwards (nothing closed it), and a request the server
/// never answers fails with `Timeout` once its own timeout is over, not before.
#[tokio::test(flavor = "current_thread")]
async fn the_timeout_ends_unanswered_requests_and_leaves_idle_connections_alone() {
    let d = Memkitd::start();
    let timeout = Duration::from_millis(150);
    let c = Client::new(
        d.spec(),
        ClientConfig {
            pool_size: 1,
            request_timeout: timeout,
            ..config()
        },
    );
    let opened = |stats: Vec<(String, String)>| -> u64 {
        let v = stats.iter().find(|(k, _)| k == "total_connections");
        v.expect("total_connections").1.parse().unwrap()
    };
    c.set(b"k", b"v", 0, Exptime::NEVER).await.unwrap();
    let before = opened(c.stats("").await.unwrap());
    tokio::time::sleep(timeout * 4).await;
    assert_eq!(c.get(b"k").await.unwrap().unwrap().value, &b"v"[..]);
    assert_eq!(
        opened(c.stats("").await.unwrap()),
        before,
        "the idle connection was closed"
    );

    let (port, hold) = common::black_hole().await;
    let hung = Client::new(
        ServerSpec::new("127.0.0.1", port),
        ClientConfig {
            request_timeout: timeout,
            ..config()
        },
    );
    let t = Instant::now();
    assert_eq!(hung.get(b"k").await, Err(Error::Timeout));
    let took = t.elapsed();
    assert!(took >= timeout, "timed out after {took:?}");
    assert!(took < timeout * 10, "timed out after {took:?}");
    hold.abort();
}
