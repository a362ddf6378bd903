//! The connection task: one client connection as a tokio task that carries out what its
//! [`Session`] decides: read, answer, write the replies in one batch, wait when a request
//! parks. The driver for connections that need the runtime (TLS: rustls' streams are
//! tokio's; a router's: its backend connections are tokio's, on the same runtime) and for
//! an embedder's server without worker threads; every other connection of
//! memkitd is served by [`crate::evloop`]. A loop connection that becomes a `watch` stream
//! moves here too ([`watch_stream`]).
//!
//! `-o idle_timeout` is not this driver's: the server's housekeeping tick shuts the socket of
//! a connection idle for longer (`crate::server`), and the read or write under way ends.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::session::{Completer, Next, Session};
use crate::state::{ConnLive, ConnState, Registered, Shared};
use crate::tls::{HANDSHAKE_TIMEOUT, Tls};

/// Serves one connection until the client leaves, sends `quit`, its socket is shut (the
/// idle timeout, a stopping server: requests already read are answered first), or a wait
/// fails. Generic over the stream (TCP, UNIX, TLS) so each kind gets its own compiled loop:
/// plain TCP pays nothing for the others.
pub async fn serve<S: Transport>(stream: S, reg: Registered, live: Arc<ConnLive>) {
    let session = Session::new(reg, live);
    let mut conn = Conn { stream, session };
    let mut next = conn.session.pump();
    loop {
        next = match next {
            Next::Write => {
                if !conn.flush().await {
                    return;
                }
                conn.session.pump()
            }
            Next::Read | Next::GiveWay => {
                if !conn.flush().await {
                    return;
                }
                if next == Next::GiveWay {
                    tokio::task::yield_now().await;
                    conn.session.event();
                }
                if !conn.read().await {
                    return;
                }
                conn.session.pump()
            }
            // Boxed, as every rare path: an idle connection's future is its memory.
            Next::Park => Box::pin(conn.wait()).await,
            Next::Close => {
                conn.flush().await;
                return;
            }
            Next::Shutdown => {
                conn.flush().await;
                conn.session.sh().shutdown.notify_one();
                return;
            }
            Next::Watch(mask) => return Box::pin(conn.into_watch(mask)).await,
        };
    }
}

/// Serves a connection accepted on a TLS listener: the handshake, bounded by
/// [`HANDSHAKE_TIMEOUT`], then [`serve`] over the encrypted stream and a `close_notify` at
/// the end.
pub async fn serve_tls(stream: TcpStream, tls: Arc<Tls>, reg: Registered, live: Arc<ConnLive>) {
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream));
    let mut s = match handshake.await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tls.handshake_errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!("TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            tls.handshake_errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!("TLS handshake timed out");
            return;
        }
    };
    serve(&mut s, reg, live).await;
    // close_notify, so the client can tell a complete reply from a cut connection; bounded,
    // as a client that stopped reading must not hold the task.
    let _ = tokio::time::timeout(Duration::from_secs(1), s.shutdown()).await;
}

/// A connection: its stream and its session.
struct Conn<S> {
    stream: S,
    session: Session,
}

impl<S: Transport> Conn<S> {
    /// Writes what is pending. `false` when the connection is done (the write failed).
    async fn flush(&mut self) -> bool {
        if self.session.unsent().is_empty() {
            return true;
        }
        self.session.mark(ConnState::Write);
        // TLS keeps records it could not send yet: flush, a no-op on TCP.
        let written = async {
            self.stream.write_all(self.session.unsent()).await?;
            self.stream.flush().await
        };
        if written.await.is_err() {
            return false;
        }
        self.session.written();
        self.session.mark(ConnState::ParseCmd);
        true
    }

    /// Streams `watch` events from here on, after the replies up to the command's OK.
    async fn into_watch(self, mask: u8) {
        self.session.mark(ConnState::Watch);
        let Conn { stream, session } = self;
        watch_stream(stream, session.sh(), mask, session.unsent()).await;
    }

    /// Waits for a parked request's completion; what the session does then.
    async fn wait(&mut self) -> Next {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let done = Completer::new(move |outcome| {
            let _ = tx.send(outcome);
        });
        // A router's job runs in this task, which would only wait for it anyway.
        if let Some(job) = self.session.park_here(done) {
            job.await;
        }
        let outcome = rx
            .await
            .unwrap_or_else(|_| Err("the wait was abandoned".into()));
        self.session.resume(outcome)
    }

    /// Reads what has arrived; when nothing has, gives the buffers back and waits. `false`
    /// when the connection is done: the client left, the socket failed or was shut (the
    /// idle timeout), or the server is stopping.
    async fn read(&mut self) -> bool {
        loop {
            // Checked before every read: a client that keeps sending must not keep a
            // stopping server waiting. A connection waiting below is woken by the stop
            // shutting its socket's reading side.
            if self.session.sh().stopping() {
                return false;
            }
            self.session.room_to_read();
            let room = self.session.rbuf.capacity() - self.session.rbuf.len();
            match self.stream.read_now(&mut self.session.rbuf) {
                Ok(0) => return false,
                Ok(n) => {
                    self.session.arrived(n, n == room);
                    self.session.event();
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return false,
            }
            self.session.mark(self.session.waiting_state());
            self.session.release();
            if self.stream.readable().await.is_err() {
                return false;
            }
        }
    }
}

/// What the request loop needs of a stream beyond reading and writing: a read that does not
/// wait and a wait that does not read, so that a connection with nothing to read can give
/// its buffers back in between. Implemented for TCP, UNIX sockets and TLS over TCP.
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

/// After `watch`: subscribe, send `pending` (the replies up to the `watch` command's OK),
/// then stream log lines until the client goes away; input is ignored.
pub async fn watch_stream<S: AsyncRead + AsyncWrite + Unpin>(
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
