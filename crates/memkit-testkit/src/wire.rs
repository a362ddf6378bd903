//! [`Wire`]: a raw connection for the tests that speak memcached's protocols byte for byte
//! (pipelines, bad input, half requests, binary frames, TLS), with every read bounded in
//! time; [`BlockingWire`], the same for synchronous tests.
//!
//! A test sends bytes and reads a reply up to where [`Until`] says it ends: a terminator
//! (`END\r\n`), a count of lines, a count of bytes, one binary frame, or the server's
//! close. The reply is cut there; bytes that arrived behind it stay buffered for the next
//! read, so how the server's writes happen to be split never changes what a test sees.
//! Each read fails (or, in the forms without `try_`, panics with what arrived) when its
//! reply is not complete within the wire's timeout (5 s unless [`Wire::with_timeout`]) or
//! the connection ends first.

use std::io;
use std::path::Path;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs, UnixStream};
use tokio::runtime::Runtime;

/// Where a reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until<'a> {
    /// Through the first occurrence of these bytes: `End(b"END\r\n")`, `End(b"\r\n")`.
    End(&'a [u8]),
    /// Through the `n`th `\r\n`.
    Lines(usize),
    /// Exactly `n` bytes.
    Bytes(usize),
    /// One binary-protocol frame: the 24-byte header and the body its length announces.
    Frame,
    /// Everything until the server closes the connection.
    Closed,
}

impl Until<'static> {
    /// Through the first `END\r\n`: a retrieval's reply, a `stats` listing.
    pub const END: Until<'static> = Until::End(b"END\r\n");
    /// One line.
    pub const LINE: Until<'static> = Until::Lines(1);
}

/// A binary frame's header length.
const HEADER_LEN: usize = 24;

impl Until<'_> {
    /// The length of the reply at the start of `buf`, once `buf` holds all of it. The
    /// first `checked` bytes held no end before, so a terminator is looked for only where
    /// it may end in what came after them.
    fn len(&self, buf: &[u8], checked: usize) -> Option<usize> {
        match *self {
            Until::End([]) | Until::Lines(0) => Some(0),
            Until::End(end) => {
                let from = checked.saturating_sub(end.len().saturating_sub(1));
                let at = buf[from..].windows(end.len()).position(|w| w == end)?;
                Some(from + at + end.len())
            }
            Until::Lines(n) => {
                let mut crlfs = buf.windows(2).enumerate().filter(|(_, w)| w == b"\r\n");
                crlfs.nth(n - 1).map(|(i, _)| i + 2)
            }
            Until::Bytes(n) => (buf.len() >= n).then_some(n),
            Until::Frame => {
                let body = u32::from_be_bytes(buf.get(8..12)?.try_into().ok()?) as usize;
                let n = HEADER_LEN + body;
                (buf.len() >= n).then_some(n)
            }
            Until::Closed => None,
        }
    }
}

/// A raw connection; see the module notes.
#[derive(Debug)]
pub struct Wire<S> {
    stream: S,
    /// Bytes read and not yet returned.
    buf: BytesMut,
    timeout: Duration,
}

/// How long a connect may take: a listener whose backlog is full leaves it waiting.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Wire<TcpStream> {
    /// A TCP connection to `addr`, made within 5 s.
    pub async fn tcp(addr: impl ToSocketAddrs) -> io::Result<Wire<TcpStream>> {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(stream) => Ok(Wire::new(stream?)),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no connection within {CONNECT_TIMEOUT:?}"),
            )),
        }
    }
}

impl Wire<UnixStream> {
    /// A connection to the UNIX socket at `path`.
    pub async fn unix(path: impl AsRef<Path>) -> io::Result<Wire<UnixStream>> {
        Ok(Wire::new(UnixStream::connect(path).await?))
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What had arrived, for a failure's message: all of it, or its two ends when long.
fn arrived(b: &[u8]) -> String {
    const SHOWN: usize = 200;
    if b.len() <= 2 * SHOWN {
        return format!("{:?}", text(b));
    }
    let (head, tail) = (&b[..SHOWN], &b[b.len() - SHOWN..]);
    format!("{} bytes, {:?} ... {:?}", b.len(), text(head), text(tail))
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    /// A wire over `stream` (a TLS stream, a socket set up by hand), reads bounded by 5 s.
    pub fn new(stream: S) -> Wire<S> {
        Wire {
            stream,
            buf: BytesMut::new(),
            timeout: Duration::from_secs(5),
        }
    }

    /// The same wire with each read bounded by `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Wire<S> {
        self.timeout = timeout;
        self
    }

    /// Writes `bytes` (and flushes them: a TLS stream holds them until then).
    pub async fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// [`Wire::try_send`], panicking on failure.
    pub async fn send(&mut self, bytes: &[u8]) {
        if let Err(e) = self.try_send(bytes).await {
            panic!("send failed: {e}");
        }
    }

    /// The next reply, through where `until` says it ends. Fails with `TimedOut` when the
    /// reply is not complete within the timeout, `UnexpectedEof` when the connection ends
    /// first (except for [`Until::Closed`]); the error names what had arrived.
    pub async fn try_read(&mut self, until: Until<'_>) -> io::Result<Vec<u8>> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut checked = 0;
        loop {
            if let Some(n) = until.len(&self.buf, checked) {
                return Ok(self.buf.split_to(n).to_vec());
            }
            checked = self.buf.len();
            let read = tokio::time::timeout_at(deadline, self.fill()).await;
            let failed = |kind, what: &str| {
                let got = arrived(&self.buf);
                io::Error::new(kind, format!("{what} (until {until:?}); got {got}"))
            };
            match read {
                Err(_) => {
                    let what = format!("no reply within {:?}", self.timeout);
                    return Err(failed(io::ErrorKind::TimedOut, &what));
                }
                Ok(Ok(0)) if until == Until::Closed => return Ok(self.buf.split().to_vec()),
                Ok(Ok(0)) => return Err(failed(io::ErrorKind::UnexpectedEof, "closed")),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(failed(e.kind(), &e.to_string())),
            }
        }
    }

    /// [`Wire::try_read`], panicking on failure.
    pub async fn read(&mut self, until: Until<'_>) -> Vec<u8> {
        self.try_read(until)
            .await
            .unwrap_or_else(|e| panic!("read failed: {e}"))
    }

    /// Sends `request` and reads its reply, as text.
    pub async fn try_ask(&mut self, request: &[u8], until: Until<'_>) -> io::Result<String> {
        self.try_send(request).await?;
        Ok(text(&self.try_read(until).await?))
    }

    /// [`Wire::try_ask`], panicking on failure.
    pub async fn ask(&mut self, request: &[u8], until: Until<'_>) -> String {
        self.try_ask(request, until)
            .await
            .unwrap_or_else(|e| panic!("asked {}: {e}", arrived(request)))
    }

    /// Sends `request` and asserts that the reply is `want`, byte for byte (it reads as
    /// many bytes as `want` has).
    pub async fn expect(&mut self, request: &[u8], want: &[u8]) {
        self.send(request).await;
        let got = self.read(Until::Bytes(want.len())).await;
        assert_eq!(text(&got), text(want), "after sending {}", arrived(request));
    }

    /// What has arrived, or arrives within `within` (possibly nothing): for a stream with
    /// no reply to wait for, such as `watch`'s.
    pub async fn pending(&mut self, within: Duration) -> Vec<u8> {
        let _ = tokio::time::timeout(within, self.fill()).await;
        self.buf.split().to_vec()
    }

    /// Reads what the stream has into the buffer: how many bytes (0 at its end).
    async fn fill(&mut self) -> io::Result<usize> {
        self.buf.reserve(64 * 1024);
        self.stream.read_buf(&mut self.buf).await
    }

    /// Whether the server closes the connection (an end of stream or a reset) within the
    /// timeout; what it sends before is dropped.
    pub async fn closed(&mut self) -> bool {
        match self.try_read(Until::Closed).await {
            Ok(_) => true,
            Err(e) => e.kind() != io::ErrorKind::TimedOut,
        }
    }

    /// The stream, for what a wire does not do (a half-close, splitting it). Bytes the
    /// wire has read and not returned are not in it any more.
    pub fn stream(&mut self) -> &mut S {
        &mut self.stream
    }
}

/// A [`Wire`] for synchronous tests (`#[test]`, threads of their own): the same calls,
/// each run to its end on a runtime of the wire's own. Not for code already inside a tokio
/// runtime, where that runtime cannot start (use [`Wire`] there).
#[derive(Debug)]
pub struct BlockingWire<S = TcpStream> {
    rt: Runtime,
    wire: Wire<S>,
}

fn runtime() -> io::Result<Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

impl BlockingWire<TcpStream> {
    /// A TCP connection to `addr`.
    pub fn tcp(addr: impl ToSocketAddrs) -> io::Result<BlockingWire<TcpStream>> {
        let rt = runtime()?;
        let wire = rt.block_on(Wire::tcp(addr))?;
        Ok(BlockingWire { rt, wire })
    }
}

impl BlockingWire<UnixStream> {
    /// A connection to the UNIX socket at `path`.
    pub fn unix(path: impl AsRef<Path>) -> io::Result<BlockingWire<UnixStream>> {
        let rt = runtime()?;
        let wire = rt.block_on(Wire::unix(path))?;
        Ok(BlockingWire { rt, wire })
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> BlockingWire<S> {
    /// [`Wire::with_timeout`].
    pub fn with_timeout(mut self, timeout: Duration) -> BlockingWire<S> {
        self.wire = self.wire.with_timeout(timeout);
        self
    }

    /// [`Wire::try_send`].
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.rt.block_on(self.wire.try_send(bytes))
    }

    /// [`Wire::send`].
    pub fn send(&mut self, bytes: &[u8]) {
        self.rt.block_on(self.wire.send(bytes))
    }

    /// [`Wire::try_read`].
    pub fn try_read(&mut self, until: Until<'_>) -> io::Result<Vec<u8>> {
        self.rt.block_on(self.wire.try_read(until))
    }

    /// [`Wire::read`].
    pub fn read(&mut self, until: Until<'_>) -> Vec<u8> {
        self.rt.block_on(self.wire.read(until))
    }

    /// [`Wire::try_ask`].
    pub fn try_ask(&mut self, request: &[u8], until: Until<'_>) -> io::Result<String> {
        self.rt.block_on(self.wire.try_ask(request, until))
    }

    /// [`Wire::ask`].
    pub fn ask(&mut self, request: &[u8], until: Until<'_>) -> String {
        self.rt.block_on(self.wire.ask(request, until))
    }

    /// [`Wire::expect`].
    pub fn expect(&mut self, request: &[u8], want: &[u8]) {
        self.rt.block_on(self.wire.expect(request, want))
    }

    /// [`Wire::closed`].
    pub fn closed(&mut self) -> bool {
        self.rt.block_on(self.wire.closed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_end_where_until_says_whatever_the_reads() {
        let stream = b"STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\nxEND\r\n";
        let end = Until::End(b"END\r\n");
        // However much has been checked before, the first END\r\n ends the reply.
        for checked in 0..29 {
            assert_eq!(end.len(&stream[..30], checked), Some(29));
        }
        assert_eq!(end.len(&stream[..28], 0), None);
        assert_eq!(Until::Lines(3).len(stream, 0), Some(24));
        assert_eq!(Until::Lines(0).len(stream, 0), Some(0));
        assert_eq!(Until::End(b"").len(stream, 0), Some(0));
        assert_eq!(Until::Bytes(4).len(b"abc", 0), None);
        assert_eq!(Until::Bytes(4).len(b"abcde", 0), Some(4));
        let mut frame = vec![0x81, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        frame.resize(HEADER_LEN + 2, 0);
        assert_eq!(Until::Frame.len(&frame[..25], 0), None);
        assert_eq!(
            Until::Frame.len(&[frame.clone(), frame].concat(), 0),
            Some(26)
        );
        assert_eq!(Until::Closed.len(stream, 0), None);
    }

    #[tokio::test]
    async fn what_arrives_behind_a_reply_is_kept_for_the_next() {
        let (client, mut server) = tokio::io::duplex(1024);
        let mut w = Wire::new(client).with_timeout(Duration::from_millis(200));
        server.write_all(b"one\r\ntwo\r\nthr").await.unwrap();
        assert_eq!(w.read(Until::Lines(1)).await, b"one\r\n");
        assert_eq!(w.read(Until::End(b"\r\n")).await, b"two\r\n");
        let e = w.try_read(Until::Lines(1)).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("got \"thr\""), "{e}");
        server.write_all(b"ee\r\n").await.unwrap();
        drop(server);
        assert_eq!(w.read(Until::Lines(1)).await, b"three\r\n");
        let e = w.try_read(Until::Bytes(1)).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(w.closed().await);
    }
}
