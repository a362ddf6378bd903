//! One client connection: read, decode every complete request, dispatch, write the replies
//! in one batch, repeat.
//!
//! Pipelined requests are answered in order with one write per batch of whatever arrived
//! together. The data block of a refused store is swallowed as it arrives, never buffered.
//! The input buffer only grows to hold one request (a value is bounded by `-I`, a multi-get
//! line by the codec); the output is flushed once it passes [`FLUSH_AT`], so one request
//! cannot make the server buffer without limit on a client that sends but never reads.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use memkit_protocol::{DecodeError, ErrorReply, Request, decode_request, meta_key};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{broadcast, watch};

use crate::dispatch::{Action, dispatch};
use crate::server::Shared;

/// Write out pending replies once they reach this many bytes.
const FLUSH_AT: usize = 256 * 1024;

/// Serves one connection until the client leaves, sends `quit`, goes idle for longer than
/// `-o idle_timeout`, or the server stops (`stop` turns true: requests already read are
/// answered first). Generic over the stream (TCP, TLS, [`crate::auth::Prefixed`]) so each
/// kind gets its own compiled loop: plain TCP pays nothing for the others.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    sh: Arc<Shared>,
    id: u64,
    mut stop: watch::Receiver<bool>,
) {
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut swallow: u64 = 0;
    // Persistent `sync` mode: replies to writes wait until the writes are durable.
    let durable = sh.persist.clone().filter(|p| p.acks_wait());
    let mut durable_rx = durable.as_ref().map(|p| p.subscribe());
    let mut must_sync = false;
    let idle =
        (sh.settings.idle_timeout > 0).then(|| Duration::from_secs(sh.settings.idle_timeout));
    // Built once and polled first at every read: re-creating `changed()` per read would
    // register and drop a waiter on a channel every connection shares.
    let stopped = async move {
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::pin!(stopped);
    let last_cmd = sh
        .conns
        .lock()
        .get(&id)
        .map(|c| c.last_cmd.clone())
        .unwrap_or_default();
    loop {
        let mut action = Action::Continue;
        while action == Action::Continue {
            if swallow > 0 {
                let n = swallow.min(rbuf.len() as u64);
                rbuf.advance(n as usize);
                swallow -= n;
                if swallow > 0 {
                    break;
                }
            }
            if rbuf.is_empty() {
                break;
            }
            match decode_request(&rbuf, &sh.limits) {
                Ok((req, used)) => {
                    trace_request(&sh, id, &req, &rbuf[..used]);
                    must_sync |= durable.is_some() && crate::dispatch::mutates(&req);
                    action = dispatch(&req, &sh, id, &mut out);
                    rbuf.advance(used);
                }
                Err(DecodeError::Incomplete) => break,
                Err(DecodeError::Reject(r)) => {
                    r.encode(&mut out);
                    if r.reply == ErrorReply::TooLarge {
                        let key = r.unlink.and_then(|(k, b64)| meta_key(k, b64));
                        must_sync |= durable.is_some() && key.is_some();
                        sh.engine.refuse_too_large(key.as_deref());
                    }
                    swallow = r.swallow;
                    rbuf.advance(r.consumed);
                }
                Err(DecodeError::Close | DecodeError::Malformed) => action = Action::Close,
            }
            if out.len() >= FLUSH_AT {
                if must_sync && !await_durable(&durable, &mut durable_rx).await {
                    return;
                }
                must_sync = false;
                if write_out(&mut stream, &sh, &mut out).await.is_err() {
                    return;
                }
            }
        }
        if must_sync && !await_durable(&durable, &mut durable_rx).await {
            return;
        }
        must_sync = false;
        if write_out(&mut stream, &sh, &mut out).await.is_err() {
            return;
        }
        match action {
            Action::Continue => {}
            Action::Close => return,
            Action::Shutdown => {
                sh.shutdown.notify_one();
                return;
            }
            Action::Watch(mask) => return watch_stream(stream, &sh, mask).await,
        }
        if rbuf.capacity() - rbuf.len() < 4096 {
            rbuf.reserve(16 * 1024);
        }
        // The idle timer only when one is configured: a timer per read costs more than
        // the rest of a small request's handling.
        let read = async {
            match idle {
                Some(d) => tokio::time::timeout(d, stream.read_buf(&mut rbuf)).await,
                None => Ok(stream.read_buf(&mut rbuf).await),
            }
        };
        let read = tokio::select! {
            biased;
            _ = &mut stopped => return,
            r = read => r,
        };
        match read {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return,
            Ok(Ok(n)) => {
                sh.counters.bytes_read.fetch_add(n as u64, Relaxed);
                last_cmd.store(sh.started.elapsed().as_secs(), Relaxed);
            }
        }
    }
}

/// Waits until every write so far is durable (one group commit serves all connections).
/// `false` if the journal could not be flushed: the connection then closes without
/// replying, so no client is told STORED for a write that may not survive.
async fn await_durable(
    store: &Option<Arc<memkit_persist::DiskStore>>,
    rx: &mut Option<tokio::sync::watch::Receiver<memkit_persist::DurableState>>,
) -> bool {
    match (store, rx) {
        // Boxed: the wait is rare next to the request loop, and keeping its state out of
        // `serve`'s own future keeps every connection's future (and debug stacks) small.
        (Some(s), Some(rx)) => Box::pin(s.wait_durable(rx)).await.is_ok(),
        _ => true,
    }
}

async fn write_out<S: AsyncWrite + Unpin>(
    stream: &mut S,
    sh: &Shared,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    stream.write_all(out).await?;
    // TLS keeps records it could not send yet; a no-op on TCP.
    stream.flush().await?;
    sh.counters
        .bytes_written
        .fetch_add(out.len() as u64, Relaxed);
    // Keep a modest buffer around; give back what one huge reply needed.
    out.clear();
    if out.capacity() > 4 * FLUSH_AT {
        out.shrink_to(16 * 1024);
    }
    Ok(())
}

fn trace_request(sh: &Shared, id: u64, req: &Request<'_>, raw: &[u8]) {
    if matches!(
        req,
        Request::MetaGet { .. }
            | Request::MetaSet { .. }
            | Request::MetaDelete { .. }
            | Request::MetaArith { .. }
            | Request::MetaNoop
            | Request::MetaDebug { .. }
    ) {
        sh.counters.cmd_meta.fetch_add(1, Relaxed);
    }
    if sh.verbosity.load(Relaxed) >= 2 {
        let line = raw.split(|&b| b == b'\n').next().unwrap_or_default();
        eprintln!("<{id} {}", String::from_utf8_lossy(line).trim_end());
    }
}

/// After `watch`: stream log lines until the client goes away; input is ignored.
async fn watch_stream<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, sh: &Shared, mask: u8) {
    let mut sub = sh.watchers.subscribe(mask);
    let mut scratch = [0u8; 512];
    loop {
        tokio::select! {
            ev = sub.rx.recv() => match ev {
                Ok((kind, line)) => {
                    if sub.wants(kind)
                        && (stream.write_all(line.as_bytes()).await.is_err()
                            || stream.flush().await.is_err())
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let note = format!("ts=0 gid=0 type=skipped count={n}\n");
                    if stream.write_all(note.as_bytes()).await.is_err()
                        || stream.flush().await.is_err()
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            r = stream.read(&mut scratch) => {
                if matches!(r, Ok(0) | Err(_)) {
                    return;
                }
            }
        }
    }
}
