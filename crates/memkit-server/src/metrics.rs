//! memkitd's Prometheus endpoint (`--metrics-addr HOST:PORT`, `GET /metrics`): its own
//! `stats`, `stats settings`, `stats items` and `stats slabs`, rendered by `memkit-metrics`
//! under the community memcached_exporter's names (the renderer `memkit stats --format
//! prometheus` uses too, so both print the same series), plus the figures of the memkitd
//! process itself ([`figures`]: `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_open_fds`, ...), which only the server can measure.

use std::sync::Arc;
use std::time::Duration;

use memkit_metrics::ServerStats;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::state::Shared;

pub mod figures;

pub use memkit_metrics::CONTENT_TYPE;

/// memkitd's own stats and process figures as an exposition (no extra labels: Prometheus
/// adds `instance`).
pub fn exposition(sh: &Shared) -> String {
    let fetch = |args: &[&[u8]]| -> Vec<(String, String)> {
        let mut buf = Vec::new();
        crate::stats::write_stats(sh, args, &mut buf);
        String::from_utf8_lossy(&buf)
            .lines()
            .filter_map(|l| l.strip_prefix("STAT "))
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let general = fetch(&[]);
    let settings = fetch(&[b"settings"]);
    let items = fetch(&[b"items"]);
    let slabs = fetch(&[b"slabs"]);
    let server = ServerStats {
        labels: &[],
        up: true,
        general: &general,
        settings: &settings,
        items: &items,
        slabs: &slabs,
    };
    memkit_metrics::render_own(&server, &figures::now(sh))
}

/// Binds the metrics listener (`--metrics-addr`).
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// What the metrics listener spends on its clients, so that they cannot take the
/// descriptors or the time the memcached listeners need: a scraper sends one request and
/// reads one reply, in well under a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Connections served at once (64). One more is answered `503 Service Unavailable` at
    /// once, without waiting for it, and closed.
    pub connections: usize,
    /// How long a client may take to send its request head, from its connection (5 s);
    /// then it is closed without a reply.
    pub head: Duration,
    /// How long it may take to read the reply (10 s); then it is closed.
    pub reply: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            connections: 64,
            head: Duration::from_secs(5),
            reply: Duration::from_secs(10),
        }
    }
}

/// The longest request head read; a longer one is answered `431`.
const MAX_HEAD: usize = 16 * 1024;
/// The pause after a failed accept (out of descriptors, say): the connection stays queued
/// and would fail again at once, so the loop waits instead of spinning.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
Content-Length: 5\r\nConnection: close\r\nRetry-After: 1\r\n\r\nbusy\n";

/// Serves `GET /metrics` on `listener` forever within the default [`Bounds`].
pub async fn serve(listener: TcpListener, sh: Arc<Shared>) {
    serve_with(listener, sh, Bounds::default()).await
}

/// Serves `GET /metrics` on `listener` forever: a minimal HTTP/1.1 responder, one request
/// per connection (`Connection: close`), which is how Prometheus scrapes, within `bounds`.
pub async fn serve_with(listener: TcpListener, sh: Arc<Shared>, bounds: Bounds) {
    let slots = Arc::new(Semaphore::new(bounds.connections));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("metrics: accept failed: {e}");
                tokio::time::sleep(ACCEPT_PAUSE).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refuse_busy(stream);
            continue;
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let _ = respond(stream, &sh, bounds).await;
            drop(slot);
        });
    }
}

/// Answers `503` on a connection past the limit and closes it, in the accept loop and
/// without waiting: the reply fits the empty send buffer of a new socket, and what the
/// client already sent is read first, so that the close does not reset the connection
/// before the client reads the reply.
fn refuse_busy(stream: TcpStream) {
    use std::io::{Read, Write};
    // A tokio socket knows no readiness before its first poll; the system calls go through
    // the non-blocking standard socket instead.
    let Ok(mut s) = stream.into_std() else {
        return;
    };
    let _ = s.read(&mut [0u8; 2048]);
    let _ = s.write(BUSY);
    let _ = s.shutdown(std::net::Shutdown::Write);
}

async fn respond(mut s: TcpStream, sh: &Shared, bounds: Bounds) -> std::io::Result<()> {
    let head = match tokio::time::timeout(bounds.head, read_head(&mut s)).await {
        Ok(head) => head?,
        // Too slow to ask: closed without a reply.
        Err(_) => return Ok(()),
    };
    let (status, ctype, body, head_only) = match head {
        None => return Ok(()),
        Some(head) => route(&head, sh),
    };
    let write = reply(&mut s, status, ctype, &body, head_only);
    tokio::time::timeout(bounds.reply, write)
        .await
        .unwrap_or(Ok(()))
}

/// The request head; `None` when the client left first. A body (none is expected) is not
/// read. An empty head stands for one past [`MAX_HEAD`].
async fn read_head(s: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_HEAD {
            return Ok(Some(Vec::new()));
        }
    }
    Ok(Some(buf))
}

/// The reply to a request head: status, content type, body, and whether the body is left
/// out (`HEAD`).
fn route(head: &[u8], sh: &Shared) -> (&'static str, &'static str, String, bool) {
    if head.is_empty() {
        return (
            "431 Request Header Fields Too Large",
            "text/plain",
            String::new(),
            false,
        );
    }
    let head = String::from_utf8_lossy(head);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", CONTENT_TYPE, exposition(sh), head_only),
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "memkitd: metrics at /metrics\n".into(),
            head_only,
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain",
            "not found\n".into(),
            head_only,
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n".into(),
            false,
        ),
    }
}

async fn reply(
    s: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    s.write_all(&out).await?;
    s.shutdown().await
}
