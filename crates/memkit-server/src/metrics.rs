//! memkitd's Prometheus endpoint (`--metrics-addr HOST:PORT`, `GET /metrics`): its own
//! `stats`, `stats settings`, `stats items` and `stats slabs`, rendered by `memkit-metrics`
//! under the community memcached_exporter's names (the renderer `memkit stats --format
//! prometheus` uses too, so both print the same series), plus the figures of the memkitd
//! process itself ([`figures`]: `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_open_fds`, ...), which only the server can measure, and, on the leader of a
//! replicated group, each follower's lag ([`followers`]), which `stats` does not carry. The
//! same listener serves the live page for operators ([`page`]: `GET /` and its JSON).
//!
//! Every response carries [`SECURITY_HEADERS`]: a Content-Security-Policy that lets a page
//! load only its own scripts and styles and be framed by nobody.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use memkit_metrics::ServerStats;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::state::Shared;

pub mod figures;
pub mod page;

pub use memkit_metrics::CONTENT_TYPE;

/// memkitd's own stats and process figures as an exposition (no extra labels: Prometheus
/// adds `instance`).
pub fn exposition(sh: &Shared) -> String {
    let fetch = |args: &[&[u8]]| stat_rows(sh, args);
    let general = fetch(&[]);
    let settings = fetch(&[b"settings"]);
    let items = fetch(&[b"items"]);
    let slabs = fetch(&[b"slabs"]);
    let followers = followers(sh);
    let router = match sh.router() {
        Some(_) => fetch(&[b"router"]),
        None => Vec::new(),
    };
    let server = ServerStats {
        labels: &[],
        up: true,
        general: &general,
        settings: &settings,
        items: &items,
        slabs: &slabs,
        followers: &followers,
        router: &router,
    };
    memkit_metrics::render_own(&server, &figures::now(sh))
}

/// On the leader of a replicated group, how far each follower is behind (as the node read it
/// a moment ago: a scrape never waits on the group); none on any other server.
pub fn followers(sh: &Shared) -> Vec<memkit_metrics::RaftFollower> {
    let Some(r) = sh.replica().and_then(|r| r.replication()) else {
        return Vec::new();
    };
    r.followers
        .iter()
        .map(|f| memkit_metrics::RaftFollower {
            node: f.id,
            matched: f.matched,
            lag: f.lag,
        })
        .collect()
}

/// The rows of `stats [args]` as the protocol would answer them, name and value.
pub fn stat_rows(sh: &Shared, args: &[&[u8]]) -> Vec<(String, String)> {
    let mut buf = Vec::new();
    crate::stats::write_stats(sh, args, &mut buf);
    String::from_utf8_lossy(&buf)
        .lines()
        .filter_map(|l| l.strip_prefix("STAT "))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
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

/// The headers on every response (see [`SECURITY_HEADERS`]), as a literal for `concat!`.
macro_rules! security_headers {
    () => {
        "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; \
         img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
         form-action 'none'\r\nX-Content-Type-Options: nosniff\r\n\
         Referrer-Policy: no-referrer\r\n"
    };
}

/// The headers on every response: what a browser may load for a page of this origin (its
/// own scripts, styles and JSON; no inline code, no frames, no forms), no content sniffing,
/// no referrer.
pub const SECURITY_HEADERS: &str = security_headers!();

const BUSY: &[u8] = concat!(
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n",
    "Content-Length: 5\r\nConnection: close\r\nRetry-After: 1\r\n",
    security_headers!(),
    "\r\nbusy\n"
)
.as_bytes();

/// One reply of the listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status line's code and reason, `200 OK`.
    pub status: &'static str,
    /// `Content-Type`.
    pub ctype: &'static str,
    /// The body (left out for `HEAD`).
    pub body: Cow<'static, [u8]>,
    /// Further header lines, each ending in CRLF.
    pub headers: &'static str,
}

impl Response {
    /// A reply of `status` with `body`.
    pub fn new(
        status: &'static str,
        ctype: &'static str,
        body: impl Into<Cow<'static, [u8]>>,
    ) -> Self {
        Response {
            status,
            ctype,
            body: body.into(),
            headers: "",
        }
    }

    /// `404 Not Found`.
    pub fn not_found() -> Response {
        Response::new("404 Not Found", "text/plain", &b"not found\n"[..])
    }
}

/// Serves `GET /metrics` and the page on `listener` forever within the default [`Bounds`].
pub async fn serve(listener: TcpListener, sh: Arc<Shared>) {
    serve_with(listener, sh, Bounds::default()).await
}

/// Serves `GET /metrics` and the page ([`page`]) on `listener` forever: a minimal HTTP/1.1
/// responder, one request per connection (`Connection: close`), which is how Prometheus
/// scrapes, within `bounds`; beside it, the page's sampler, once a second.
pub async fn serve_with(listener: TcpListener, sh: Arc<Shared>, bounds: Bounds) {
    let dash = Arc::new(page::Dashboard::new());
    let sampler = page::sample_every_second(dash.clone(), sh.clone());
    tokio::select! {
        () = sampler => {}
        () = accept_loop(listener, sh, dash, bounds) => {}
    }
}

async fn accept_loop(
    listener: TcpListener,
    sh: Arc<Shared>,
    dash: Arc<page::Dashboard>,
    bounds: Bounds,
) {
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
        let (sh, dash) = (sh.clone(), dash.clone());
        tokio::spawn(async move {
            let _ = respond(stream, &sh, &dash, bounds).await;
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

async fn respond(
    mut s: TcpStream,
    sh: &Arc<Shared>,
    dash: &Arc<page::Dashboard>,
    bounds: Bounds,
) -> std::io::Result<()> {
    let head = match tokio::time::timeout(bounds.head, read_head(&mut s)).await {
        Ok(head) => head?,
        // Too slow to ask: closed without a reply.
        Err(_) => return Ok(()),
    };
    let (response, head_only) = match head {
        None => return Ok(()),
        Some(head) => route(&head, sh, dash).await,
    };
    let write = reply(&mut s, &response, head_only);
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

/// The reply to a request head, and whether its body is left out (`HEAD`).
async fn route(head: &[u8], sh: &Arc<Shared>, dash: &Arc<page::Dashboard>) -> (Response, bool) {
    if head.is_empty() {
        let r = Response::new(
            "431 Request Header Fields Too Large",
            "text/plain",
            &b""[..],
        );
        return (r, false);
    }
    let head = String::from_utf8_lossy(head);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if !matches!(method, "GET" | "HEAD") {
        let r = Response::new("405 Method Not Allowed", "text/plain", &b"GET only\n"[..]);
        return (r, false);
    }
    let response = match path {
        "/metrics" => Response::new("200 OK", CONTENT_TYPE, exposition(sh).into_bytes()),
        _ => page::route(dash, sh, path, query, &head).await,
    };
    (response, method == "HEAD")
}

async fn reply(s: &mut TcpStream, r: &Response, head_only: bool) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         {SECURITY_HEADERS}{}\r\n",
        r.status,
        r.ctype,
        r.body.len(),
        r.headers,
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(&r.body);
    }
    s.write_all(&out).await?;
    s.shutdown().await
}
