//! The soak's two abusive clients, beside the well-behaved ones: a slow reader of dumps
//! (`lru_crawler metadump`, `stats cachedump`), which reads a few KiB at a time and now and
//! then leaves in the middle, and a storm of connections reset at once or mid-request.
//! Neither may disturb the server: the dumps read whole must end where they should, and the
//! soak's end checks (connections back to the start, RSS within its bound, `stats` adding up
//! with what the well-behaved clients sent) hold with them running.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{Errors, Tally};

/// Dumps asked for one after another until `deadline`, each read at about 400 KB/s; every
/// third is left after 64 KiB.
pub(super) async fn slow_dumps(
    addr: SocketAddr,
    deadline: Instant,
    tally: Arc<Tally>,
    errors: Arc<Errors>,
) {
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let Ok(mut c) = TcpStream::connect(addr).await else {
            continue;
        };
        tally.extra_conns.fetch_add(1, Ordering::Relaxed);
        let (ask, end): (&[u8], &[u8]) = match n % 2 {
            0 => (b"lru_crawler metadump all\r\n", b"END\r\n"),
            _ => (b"stats cachedump 1 0\r\n", b"END\r\n"),
        };
        if c.write_all(ask).await.is_err() {
            continue;
        }
        let leave_at = if n.is_multiple_of(3) {
            64 << 10
        } else {
            usize::MAX
        };
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let whole = loop {
            if got.len() >= leave_at {
                break false;
            }
            match tokio::time::timeout(super::OP_TIMEOUT, c.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break false,
                Ok(Ok(k)) => got.extend_from_slice(&buf[..k]),
                Err(_) => {
                    errors
                        .lock()
                        .unwrap()
                        .push(format!("a dump stalled after {} bytes", got.len()));
                    return;
                }
            }
            if got.ends_with(end) {
                break true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        if whole {
            tally.dumps.fetch_add(1, Ordering::Relaxed);
        } else if got.len() < leave_at {
            errors.lock().unwrap().push(format!(
                "a dump ended without its END after {} bytes",
                got.len()
            ));
        }
    }
}

/// Connections opened and reset (linger 0) until `deadline`, about 200 a second: half at
/// once, half after part of a request.
pub(super) async fn storm(addr: SocketAddr, deadline: Instant, tally: Arc<Tally>) {
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        if let Ok(mut c) = TcpStream::connect(addr).await {
            tally.extra_conns.fetch_add(1, Ordering::Relaxed);
            let _ = c.set_zero_linger();
            if n.is_multiple_of(2) {
                let _ = c.write_all(b"set storm 0 0 100\r\npart").await;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
