//! One client connection: read, decode every complete request, dispatch, write the replies
//! in one batch, repeat.
//!
//! Pipelined requests are answered in order with one write per batch of whatever arrived
//! together. The data block of a refused store is swallowed as it arrives, never buffered.
//!
//! Memory per connection (the limits are listed in `docs/limits.md`):
//! - An idle connection holds no buffer. Buffers are taken from a small per-thread pool when
//!   bytes arrive and given back when nothing is left to read (memcached's `rbuf_release`);
//!   one grown for a large request or reply is freed instead (its `conn_shrink`). Under load
//!   a connection keeps its buffers from batch to batch.
//! - Input holds at most one request: a value is bounded by `-I`, a line by the codec.
//! - Output is written out once it passes [`FLUSH_AT`], a multi-get's reply in pieces
//!   ([`Action::More`]), and nothing is read while a write is pending: a client that sends
//!   but never reads stops being read, and holds at most `FLUSH_AT` plus one value.
//! - With `-o idle_timeout`, the timeout counts from the last complete request, as
//!   memcached's `last_cmd_time` does, so a request trickled in for longer is cut off
//!   (slow-loris); a write that cannot finish within it closes the connection too.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use memkit_protocol::binary::REQUEST_MAGIC;
use memkit_protocol::{DecodeError, ErrorReply, Request, decode_request, meta_key};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::auth::Prefixed;
use crate::config::Protocol;
use crate::dispatch::{Action, REPLY_CHUNK, Step, dispatch, resume};
use crate::server::{ConnLive, ConnState, Shared};

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Text,
    Binary,
}

/// Write out pending replies once they reach this many bytes.
const FLUSH_AT: usize = REPLY_CHUNK;

/// Serves one connection until the client leaves, sends `quit`, goes idle for longer than
/// `-o idle_timeout`, or the server stops ([`Shared::stopping`]: requests already read are
/// answered first). Generic over the stream (TCP, TLS, [`crate::auth::Prefixed`]) so each
/// kind gets its own compiled loop: plain TCP pays nothing for the others.
pub async fn serve<S: Transport>(stream: S, sh: Arc<Shared>, id: u64) {
    let mut conn = Conn::new(stream, sh, id);
    loop {
        let Some(action) = conn.answer().await else {
            return;
        };
        match action {
            Action::Continue | Action::More(_) => {}
            Action::Close => return,
            Action::Shutdown => {
                conn.sh.shutdown.notify_one();
                return;
            }
            // Boxed, as every rare path: an idle connection's future is its memory.
            Action::Watch(mask) => {
                conn.live.set(ConnState::Watch);
                return Box::pin(watch_stream(conn.stream, &conn.sh, mask)).await;
            }
        }
        if !conn.read().await {
            return;
        }
    }
}

/// A connection's state from request to request.
struct Conn<S> {
    stream: S,
    sh: Arc<Shared>,
    id: u64,
    rbuf: BytesMut,
    out: Vec<u8>,
    /// Input bytes still to discard as they arrive (a refused store's data block).
    swallow: u64,
    /// `-B auto` decides on the first byte, as memcached's `try_read_command_negotiate`.
    wire: Option<Wire>,
    /// SASL (`-S`): this binary connection's authentication.
    sasl: crate::sasl::Session,
    /// Persistent `sync` mode: replies to writes wait until the writes are durable.
    durable: Option<Box<Durable>>,
    /// A write was answered since the last durability wait.
    must_sync: bool,
    /// `-o idle_timeout`.
    idle: Option<Box<Idle>>,
    /// `stats conns`' figures for this connection, shared with the connection registry.
    live: Arc<ConnLive>,
}

/// What a connection needs for `--persist` `sync` mode, boxed with it: most servers do not
/// run it, and an idle connection's memory is its state.
struct Durable {
    store: Arc<memkit_persist::DiskStore>,
    rx: watch::Receiver<memkit_persist::DurableState>,
}

/// What a connection needs for `-o idle_timeout`, boxed with it for the same reason (most
/// servers set no timeout).
struct Idle {
    timeout: Duration,
    /// One timer per connection, re-armed for each wait and each write.
    timer: Pin<Box<tokio::time::Sleep>>,
    /// When the last complete request arrived.
    last_request: Instant,
}

impl<S: Transport> Conn<S> {
    fn new(stream: S, sh: Arc<Shared>, id: u64) -> Self {
        let wire = match sh.settings.protocol {
            Protocol::Auto => None,
            Protocol::Ascii => Some(Wire::Text),
            Protocol::Binary => Some(Wire::Binary),
        };
        let durable = sh.persist.clone().filter(|p| p.acks_wait()).map(|store| {
            Box::new(Durable {
                rx: store.subscribe(),
                store,
            })
        });
        let idle = (sh.settings.idle_timeout > 0).then(|| {
            let timeout = Duration::from_secs(sh.settings.idle_timeout);
            Box::new(Idle {
                timeout,
                timer: Box::pin(tokio::time::sleep(timeout)),
                last_request: Instant::now(),
            })
        });
        let live = sh
            .conns
            .lock()
            .get(&id)
            .cloned()
            .unwrap_or_else(|| Arc::new(ConnLive::new(0, None, false)));
        Conn {
            stream,
            id,
            rbuf: BytesMut::new(),
            out: Vec::new(),
            swallow: 0,
            wire,
            sasl: crate::sasl::Session::default(),
            durable,
            must_sync: false,
            idle,
            live,
            sh,
        }
    }

    /// Answers every complete request in the input, writing replies out once they pass
    /// [`FLUSH_AT`] and when the input is used up. Returns what the last request asks the
    /// connection to do, or `None` when the connection is done (a write failed or timed
    /// out, or the journal could not be flushed).
    async fn answer(&mut self) -> Option<Action> {
        if !self.rbuf.is_empty() && self.out.capacity() == 0 {
            self.out = pool::take_out();
        }
        let mut action = Action::Continue;
        let mut answered = false;
        while action == Action::Continue {
            if self.swallow > 0 {
                let n = self.swallow.min(self.rbuf.len() as u64);
                self.rbuf.advance(n as usize);
                self.swallow -= n;
                if self.swallow > 0 {
                    break;
                }
            }
            if self.rbuf.is_empty() {
                break;
            }
            let Step::Done {
                used,
                swallow,
                action: a,
                mutates,
            } = self.step()
            else {
                break;
            };
            self.must_sync |= self.durable.is_some() && mutates;
            action = a;
            // A multi-get's reply is written out in parts. The request is decoded again for
            // each part rather than kept: a `Request` held across the write would size every
            // connection's future (its memory while idle) for two of them.
            let mut done = 0;
            while let Action::More(at) = action {
                if !self.flush().await {
                    return None;
                }
                done += at;
                action = dispatch_rest(&self.rbuf, done, &self.sh, self.id, &mut self.out);
            }
            self.rbuf.advance(used);
            (self.swallow, answered) = (swallow, true);
            if self.out.len() >= FLUSH_AT && !self.flush().await {
                return None;
            }
        }
        if !self.flush().await {
            return None;
        }
        if answered && let Some(idle) = self.idle.as_mut() {
            idle.last_request = Instant::now();
        }
        Some(action)
    }

    /// Handles the request at the start of the input, in the connection's protocol.
    fn step(&mut self) -> Step {
        let first = self.rbuf[0];
        let wire = self.wire.get_or_insert(if first == REQUEST_MAGIC {
            Wire::Binary
        } else {
            Wire::Text
        });
        match wire {
            Wire::Binary => {
                crate::binary::step(&self.rbuf, &self.sh, self.id, &mut self.sasl, &mut self.out)
            }
            Wire::Text => text_step(&self.rbuf, &self.sh, self.id, &mut self.out),
        }
    }

    /// Writes what is pending, after the durability wait in `sync` mode. `false` when the
    /// connection is done.
    async fn flush(&mut self) -> bool {
        if self.must_sync && !await_durable(&mut self.durable).await {
            return false;
        }
        self.must_sync = false;
        if self.out.is_empty() {
            return true;
        }
        self.live.set(ConnState::Write);
        let stall = self.idle.as_mut().map(|i| (&mut i.timer, i.timeout));
        let written = write_out(&mut self.stream, &self.sh, &mut self.out, stall).await;
        self.live.set(ConnState::ParseCmd);
        written.is_ok()
    }

    /// Reads what has arrived; when nothing has, gives the buffers back and waits. `false`
    /// when the connection is done: the client left, the socket failed, it stayed idle past
    /// `-o idle_timeout`, or the server is stopping.
    async fn read(&mut self) -> bool {
        loop {
            // Checked before every read: a client that keeps sending must not keep a
            // stopping server waiting. A connection waiting below is woken by the stop
            // shutting its socket's reading side.
            if self.sh.stopping() {
                return false;
            }
            if self.rbuf.capacity() - self.rbuf.len() < pool::MIN_ROOM {
                // Reclaims consumed space in place, or grows for a large request.
                self.rbuf.reserve(pool::READ_CHUNK);
            }
            match self.stream.read_now(&mut self.rbuf) {
                Ok(0) => return false,
                Ok(n) => {
                    self.sh.counters.bytes_read.fetch_add(n as u64, Relaxed);
                    let now = self.sh.uptime_secs.load(Relaxed);
                    self.live.last_cmd.store(now, Relaxed);
                    self.live.set(ConnState::ParseCmd);
                    return true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => return false,
            }
            self.live.set(if self.swallow > 0 {
                ConnState::Swallow
            } else if self.rbuf.is_empty() {
                ConnState::Waiting
            } else {
                ConnState::Read
            });
            pool::release(&mut self.rbuf, &mut self.out);
            if let Some(i) = self.idle.as_mut() {
                i.timer.as_mut().reset(i.last_request + i.timeout);
            }
            let ready = match self.idle.as_mut().map(|i| &mut i.timer) {
                None => self.stream.readable().await,
                Some(timer) => tokio::select! {
                    biased;
                    r = self.stream.readable() => r,
                    () = timer.as_mut() => {
                        self.sh.counters.idle_kicks.fetch_add(1, Relaxed);
                        return false;
                    }
                },
            };
            if ready.is_err() {
                return false;
            }
            if self.rbuf.is_empty() {
                self.rbuf = pool::take_read();
            }
        }
    }
}

/// Handles the text or meta request at the start of `buf`, appending its reply to `out`.
fn text_step(buf: &[u8], sh: &Shared, id: u64, out: &mut Vec<u8>) -> Step {
    match decode_request(buf, &sh.limits) {
        Ok((req, used)) => {
            trace_request(sh, id, &req, &buf[..used]);
            Step::Done {
                used,
                swallow: 0,
                action: dispatch(&req, sh, id, out),
                mutates: req.mutates(),
            }
        }
        Err(DecodeError::Incomplete) => Step::Incomplete,
        Err(DecodeError::Reject(r)) => {
            r.encode(out);
            let mut mutates = false;
            if r.reply == ErrorReply::TooLarge {
                let key = r.unlink.and_then(|(k, b64)| meta_key(k, b64));
                mutates = key.is_some();
                sh.engine.refuse_too_large(key.as_deref());
            }
            Step::Done {
                used: r.consumed,
                swallow: r.swallow,
                action: Action::Continue,
                mutates,
            }
        }
        Err(DecodeError::Close | DecodeError::Malformed) => Step::Done {
            used: 0,
            swallow: 0,
            action: Action::Close,
            mutates: false,
        },
    }
}

/// The rest of the multi-get at the start of `buf`, from byte `skip` of its key list on
/// (the parts before it were answered). The request decoded before, so it decodes again.
fn dispatch_rest(buf: &[u8], skip: usize, sh: &Shared, id: u64, out: &mut Vec<u8>) -> Action {
    match decode_request(buf, &sh.limits) {
        Ok((req, _)) => dispatch(&resume(&req, skip), sh, id, out),
        Err(_) => Action::Close,
    }
}

/// What the request loop needs of a stream beyond reading and writing: a read that does not
/// wait and a wait that does not read, so that a connection with nothing to read can give
/// its buffers back in between. Implemented for TCP, UNIX sockets, TLS over TCP, and the auth phase's
/// [`Prefixed`] over either.
pub trait Transport: AsyncRead + AsyncWrite + Unpin {
    /// Reads what has arrived into `buf`; `WouldBlock` when nothing has, `Ok(0)` at the end.
    fn read_now(&mut self, buf: &mut BytesMut) -> io::Result<usize>;
    /// Waits until [`Transport::read_now`] may have something (data, the end, an error).
    fn readable(&mut self) -> impl Future<Output = io::Result<()>>;
}

/// [`Transport`] for a tokio socket type (TCP, UNIX: their readiness works alike).
///
/// A short read means the socket is drained: its readiness is cleared then, as tokio's own
/// `poll_read` does, so that the next read waits for the poller instead of trying a `recv`
/// that would only say EAGAIN (one system call per request saved in request/response
/// traffic).
macro_rules! socket_transport {
    ($t:ty) => {
        impl Transport for $t {
            fn read_now(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
                let spare = buf.capacity() - buf.len();
                let mut got = 0;
                let r = self.try_io(tokio::io::Interest::READABLE, || {
                    got = self.try_read_buf(buf)?;
                    if got > 0 && got < spare {
                        Err(io::ErrorKind::WouldBlock.into())
                    } else {
                        Ok(got)
                    }
                });
                match r {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok(got),
                    r => r,
                }
            }

            fn readable(&mut self) -> impl Future<Output = io::Result<()>> {
                <$t>::readable(self)
            }
        }
    };
}

socket_transport!(TcpStream);
socket_transport!(UnixStream);

impl Transport for tokio_rustls::server::TlsStream<TcpStream> {
    /// One poll with a waker that does nothing: rustls hands out plaintext it holds, else
    /// reads the socket until it would block.
    fn read_now(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        if buf.capacity() == buf.len() {
            buf.reserve(1);
        }
        let mut rb = ReadBuf::uninit(buf.spare_capacity_mut());
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(self).poll_read(&mut cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                // SAFETY: `poll_read` initialised the first `n` bytes of the spare capacity.
                unsafe { buf.advance_mut(n) };
                Ok(n)
            }
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Waits until rustls has plaintext, the end or an error, polling it with the task's
    /// waker. The socket's readiness is not enough: tokio-rustls can answer `Pending`
    /// without reading the socket and ask to be woken again (a wake that `read_now`'s no-op
    /// waker drops), and a wait on the socket's readiness can then return at once forever,
    /// spinning the worker thread and starving its other connections (seen under
    /// concurrent requests after `-Y` login over TLS).
    fn readable(&mut self) -> impl Future<Output = io::Result<()>> {
        use tokio::io::AsyncBufRead;
        std::future::poll_fn(move |cx| match Pin::new(&mut *self).poll_fill_buf(cx) {
            Poll::Ready(r) => Poll::Ready(r.map(|_| ())),
            Poll::Pending => Poll::Pending,
        })
    }
}

impl<T: Transport> Transport for &mut T {
    fn read_now(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        (**self).read_now(buf)
    }

    fn readable(&mut self) -> impl Future<Output = io::Result<()>> {
        (**self).readable()
    }
}

impl<T: Transport> Transport for Prefixed<T> {
    fn read_now(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        match self.take_prefix() {
            Some(p) => {
                buf.extend_from_slice(&p);
                Ok(p.len())
            }
            None => self.inner_mut().read_now(buf),
        }
    }

    async fn readable(&mut self) -> io::Result<()> {
        if self.has_prefix() {
            return Ok(());
        }
        self.inner_mut().readable().await
    }
}

/// Waits until every write so far is durable (one group commit serves all connections).
/// `false` if the journal could not be flushed: the connection then closes without
/// replying, so no client is told STORED for a write that may not survive.
async fn await_durable(durable: &mut Option<Box<Durable>>) -> bool {
    match durable {
        // Boxed: the wait is rare next to the request loop, and keeping its state out of
        // `serve`'s own future keeps every connection's future (and debug stacks) small.
        Some(d) => Box::pin(d.store.wait_durable(&mut d.rx)).await.is_ok(),
        None => true,
    }
}

/// Writes `out` and empties it. With an idle timeout (`stall`: the connection's timer and
/// the timeout) a write that cannot finish within it fails: a client that stopped reading is
/// closed rather than held open with its output.
async fn write_out<S: AsyncWrite + Unpin>(
    stream: &mut S,
    sh: &Shared,
    out: &mut Vec<u8>,
    stall: Option<(&mut Pin<Box<tokio::time::Sleep>>, Duration)>,
) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    // TLS keeps records it could not send yet: flush, a no-op on TCP.
    let write = async {
        stream.write_all(out).await?;
        stream.flush().await
    };
    match stall {
        Some((timer, d)) => {
            timer.as_mut().reset(Instant::now() + d);
            tokio::select! {
                biased;
                r = write => r?,
                () = timer.as_mut() => return Err(std::io::ErrorKind::TimedOut.into()),
            }
        }
        None => write.await?,
    }
    sh.counters
        .bytes_written
        .fetch_add(out.len() as u64, Relaxed);
    // Keep a modest buffer around; give back what one huge reply needed.
    out.clear();
    if out.capacity() > 4 * FLUSH_AT {
        out.shrink_to(pool::READ_CHUNK);
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
    // `-vv`'s request line; the filter (`-vv`, `verbosity 2` or `RUST_LOG`) decides.
    if tracing::enabled!(target: crate::log::REQUESTS, tracing::Level::DEBUG) {
        let line = raw.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        tracing::debug!(target: crate::log::REQUESTS, "<{id} {}", line.trim_end());
    }
}

/// After `watch`: stream log lines until the client goes away; input is ignored.
async fn watch_stream<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, sh: &Shared, mask: u8) {
    let mut sub = sh.watchers.subscribe(mask);
    let mut scratch = [0u8; 512];
    loop {
        tokio::select! {
            ev = sub.next() => {
                let note;
                let line = match ev {
                    crate::watch::Next::Line(ref line) => line.as_bytes(),
                    crate::watch::Next::Skipped(n) => {
                        note = format!("ts=0 gid=0 type=skipped count={n}\n");
                        note.as_bytes()
                    }
                    crate::watch::Next::Closed => return,
                };
                if stream.write_all(line).await.is_err() || stream.flush().await.is_err() {
                    return;
                }
            },
            r = stream.read(&mut scratch) => {
                if matches!(r, Ok(0) | Err(_)) {
                    return;
                }
            }
        }
    }
}

/// Per-thread caches of connection buffers, so that connections going idle and busy again
/// do not allocate per batch, and idle ones hold nothing (memcached's per-thread rbuf cache).
/// A connection stays on its worker thread (`server::Workers`), so its buffers come and go
/// from that thread's pool; the embedded server's multi-thread runtime (no workers) may move
/// a task, and a buffer then lands in another thread's pool, which only changes where it is
/// cached.
mod pool {
    use std::cell::RefCell;

    use bytes::BytesMut;

    /// A fresh buffer's size, memcached's `READ_BUFFER_SIZE`.
    pub const READ_CHUNK: usize = 16 * 1024;
    /// A read first makes room for another `READ_CHUNK` when less than this is free.
    pub const MIN_ROOM: usize = 4096;
    /// Buffers grown past this for one large request or reply are freed, not kept.
    const KEEP_MAX: usize = 4 * READ_CHUNK;
    /// Buffers of each kind a worker thread keeps.
    const POOLED: usize = 64;

    thread_local! {
        static READ: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
        static OUT: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    }

    pub fn take_read() -> BytesMut {
        READ.with_borrow_mut(|p| p.pop())
            .unwrap_or_else(|| BytesMut::with_capacity(READ_CHUNK))
    }

    pub fn take_out() -> Vec<u8> {
        OUT.with_borrow_mut(|p| p.pop())
            .unwrap_or_else(|| Vec::with_capacity(READ_CHUNK))
    }

    /// The connection has nothing to read: give back its (empty) output buffer, and its
    /// input buffer unless it holds the start of a request, in which case a large one is
    /// swapped for a small one (memcached's `conn_shrink`).
    pub fn release(rbuf: &mut BytesMut, out: &mut Vec<u8>) {
        if rbuf.is_empty() {
            // Always an allocated buffer here: `serve` reserves before every read.
            let mut b = std::mem::take(rbuf);
            // Reclaims the space `advance` consumed, in place: nothing is copied.
            b.clear();
            b.reserve(READ_CHUNK);
            if b.capacity() <= KEEP_MAX {
                READ.with_borrow_mut(|p| (p.len() < POOLED).then(|| p.push(b)));
            }
        } else if rbuf.capacity() > KEEP_MAX && rbuf.len() < READ_CHUNK / 2 {
            let mut small = take_read();
            small.extend_from_slice(rbuf);
            *rbuf = small;
        }
        if out.capacity() > 0 {
            let mut b = std::mem::take(out);
            b.clear();
            if (READ_CHUNK..=KEEP_MAX).contains(&b.capacity()) {
                OUT.with_borrow_mut(|p| (p.len() < POOLED).then(|| p.push(b)));
            }
        }
    }
}
