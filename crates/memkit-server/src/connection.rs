//! One client connection as a tokio task: read, answer every complete request
//! ([`crate::session`]), write the replies in one batch, repeat. The driver for connections
//! that need the runtime: TLS, the `-Y` login, `-o idle_timeout`, `--persist` `sync` mode's
//! durability wait, and an embedder's server without worker threads. Other connections on
//! memkitd's workers run in [`crate::evloop`].
//!
//! With `-o idle_timeout`, the timeout counts from the last complete request, as memcached's
//! `last_cmd_time` does, so a request trickled in for longer is cut off (slow-loris); a write
//! that cannot finish within it closes the connection too.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::auth::Prefixed;
use crate::exec::Action;
use crate::session::{Pump, Session};
use crate::state::{ConnLive, ConnState, Shared};

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
                return Box::pin(watch_stream(conn.stream, &conn.sh, mask, &[])).await;
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
    session: Session,
    /// Persistent `sync` mode: replies to writes wait until the writes are durable.
    durable: Option<Box<Durable>>,
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
            session: Session::new(sh.settings.protocol),
            durable,
            idle,
            live,
            sh,
        }
    }

    /// Answers every complete request in the input, writing replies out when the session
    /// asks and when the input is used up. Returns what the last request asks the
    /// connection to do, or `None` when the connection is done (a write failed or timed
    /// out, or the journal could not be flushed).
    async fn answer(&mut self) -> Option<Action> {
        let before = self.session.requests;
        loop {
            let pumped = self.session.pump(&self.sh, self.id);
            if !self.flush().await {
                return None;
            }
            if let Pump::Done(action) = pumped {
                if self.session.requests != before
                    && let Some(idle) = self.idle.as_mut()
                {
                    idle.last_request = Instant::now();
                }
                return Some(action);
            }
        }
    }

    /// Writes what is pending, after the durability wait in `sync` mode. `false` when the
    /// connection is done.
    async fn flush(&mut self) -> bool {
        let must_sync = std::mem::take(&mut self.session.mutated) && self.durable.is_some();
        if must_sync && !await_durable(&mut self.durable).await {
            return false;
        }
        if self.session.out.is_empty() {
            return true;
        }
        self.live.set(ConnState::Write);
        let stall = self.idle.as_mut().map(|i| (&mut i.timer, i.timeout));
        let written = write_out(&mut self.stream, &mut self.session.out, stall).await;
        if written.is_ok() {
            self.session.written(&self.sh);
        }
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
            self.session.room_to_read();
            match self.stream.read_now(&mut self.session.rbuf) {
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
            self.live.set(self.session.waiting_state());
            self.session.release();
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
        }
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

/// Writes `out` (the caller empties it). With an idle timeout (`stall`: the connection's
/// timer and the timeout) a write that cannot finish within it fails: a client that stopped
/// reading is closed rather than held open with its output.
async fn write_out<S: AsyncWrite + Unpin>(
    stream: &mut S,
    out: &mut [u8],
    stall: Option<(&mut Pin<Box<tokio::time::Sleep>>, Duration)>,
) -> std::io::Result<()> {
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
                r = write => r,
                () = timer.as_mut() => Err(std::io::ErrorKind::TimedOut.into()),
            }
        }
        None => write.await,
    }
}

/// After `watch`: subscribe, send `pending` (a loop connection's replies up to the `watch`
/// command's OK), then stream log lines until the client goes away; input is ignored.
pub(crate) async fn watch_stream<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    sh: &Shared,
    mask: u8,
    pending: &[u8],
) {
    let mut sub = sh.watchers.subscribe(mask);
    // Subscribed before the OK leaves (memcached's order).
    if !pending.is_empty()
        && (stream.write_all(pending).await.is_err() || stream.flush().await.is_err())
    {
        return;
    }
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
