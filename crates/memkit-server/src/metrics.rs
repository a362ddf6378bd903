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

/// Serves `GET /metrics` on `listener` forever: a minimal HTTP/1.1 responder, one request
/// per connection (`Connection: close`), which is how Prometheus scrapes.
pub async fn serve(listener: TcpListener, sh: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), respond(stream, &sh)).await;
        });
    }
}

async fn respond(mut s: TcpStream, sh: &Shared) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    // The request head; a body (none is expected) is ignored.
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 16 * 1024 {
            return reply(
                &mut s,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
                false,
            )
            .await;
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = exposition(sh);
            reply(&mut s, "200 OK", CONTENT_TYPE, &body, head_only).await
        }
        ("GET" | "HEAD", "/") => {
            let body = "memkitd: metrics at /metrics\n";
            reply(
                &mut s,
                "200 OK",
                "text/plain; charset=utf-8",
                body,
                head_only,
            )
            .await
        }
        ("GET" | "HEAD", _) => {
            reply(
                &mut s,
                "404 Not Found",
                "text/plain",
                "not found\n",
                head_only,
            )
            .await
        }
        _ => {
            reply(
                &mut s,
                "405 Method Not Allowed",
                "text/plain",
                "GET only\n",
                false,
            )
            .await
        }
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
