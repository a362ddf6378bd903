//! One pipelined connection: callers write, a reader task reads, and a FIFO of pending
//! replies matches the two.
//!
//! Design (and why): memcached answers requests on a connection strictly in order, so a
//! connection needs no request ids, only a queue. A caller with a [`Job`] (encoded bytes,
//! how many replies to expect) registers its reply slot in the FIFO and, under the same
//! lock, writes the bytes itself when nothing is waiting to be written: a request costs no
//! hand-off to another task, and on a multi-threaded runtime no wake-up of another thread,
//! which is what a request's latency is made of when the server answers in microseconds.
//! What the socket does not take at once is buffered, and the **writer task** writes it
//! when the socket can take more; later callers append behind it, so bytes and slots keep
//! one order. The **reader task** decodes replies with the codec and fills the slot at the
//! head of the FIFO. Concurrent callers therefore share one socket with their requests
//! pipelined, and nobody holds a lock across an await. Reading and writing are separate
//! because a server that is writing a large reply stops reading our input: a writer that
//! waited in `write_all` before reading would deadlock against it.
//!
//! When anything goes wrong (EOF, I/O error, a malformed or unsolicited reply, or a request
//! unanswered past the timeout), the connection is **closed**: every pending slot fails with
//! [`Error::Io`] (the timed-out one with [`Error::Timeout`]), the tasks stop, and the pool
//! replaces it on next use. A timed-out connection cannot be reused because its late reply
//! would be taken for the next request's.
//!
//! The **watchdog task** keeps the timeout: one timer a connection, set for the oldest
//! pending request's deadline, not one a request. On tokio's current-thread runtime a timer
//! set earlier than any other wakes the runtime's driver (a write to its eventfd, then a
//! spurious return from `epoll_wait`): a timer a request would cost a router's worker those
//! two system calls for most requests.
//!
//! The stream is any `AsyncRead + AsyncWrite` ([`Stream`]) made by a [`Connector`]: plain TCP
//! by default, TLS by plugging in a connector that wraps the socket.
//!
//! The reader decodes the connection's [`Protocol`]: text lines or binary frames, the
//! bytes copied out of the read buffer into [`Reply`]s (the text replies of one read share
//! one `Bytes`: a reply kept pins its read's replies, no more; a binary frame has its own),
//! which the protocol crate's decoder reads again for the caller. A binary frame longer
//! than the largest value the client accepts, plus room for a key and extras, closes the
//! connection as a malformed reply rather than being buffered.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker, ready};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use memkit_protocol::{DecodeError, Limits, binary};
use memkit_types::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadHalf, WriteHalf};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::distribution::ServerSpec;
use crate::reply::{BinaryReply, Reply, Shape, TextReply};

/// Which of memcached's protocols a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    /// The text protocol, classic and meta commands ([`crate::Dialect`] picks which).
    #[default]
    Text,
    /// The binary protocol: the only one a server started with `-S` (SASL) serves; see
    /// [`crate::binary`] for what it can say.
    Binary,
}

/// A byte stream to a server: TCP, TLS over TCP, a Unix socket...
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// A boxed future, for [`Connector`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Opens streams to servers: the seam where TLS (or a test double) plugs in.
pub trait Connector: Send + Sync + fmt::Debug + 'static {
    /// Connects to `server`. The caller applies the connect timeout.
    fn connect<'a>(&'a self, server: &'a ServerSpec) -> BoxFuture<'a, io::Result<Box<dyn Stream>>>;
}

/// Plain TCP with `TCP_NODELAY`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector;

impl Connector for TcpConnector {
    fn connect<'a>(&'a self, server: &'a ServerSpec) -> BoxFuture<'a, io::Result<Box<dyn Stream>>> {
        Box::pin(async move {
            let s = tokio::net::TcpStream::connect((server.host.as_str(), server.port)).await?;
            s.set_nodelay(true)?;
            Ok(Box::new(s) as Box<dyn Stream>)
        })
    }
}

/// How a request's replies end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Each request gets exactly one reply (storage, meta commands, incr...).
    One,
    /// Each request gets replies until `END` or an error line (`get`, `stats`); in the
    /// binary protocol, until a frame with an empty key or an error status (`STAT`).
    UntilEnd,
}

/// Requests to write and what their replies look like.
#[derive(Debug)]
pub struct Job {
    /// Encoded requests.
    pub bytes: Vec<u8>,
    /// Reply shape.
    pub expect: Expect,
    /// How many requests `bytes` holds.
    pub count: usize,
}

type Answer = oneshot::Sender<Result<Vec<Reply>, Error>>;

struct Slot {
    /// When its bytes were handed over: the watchdog's clock.
    sent: Instant,
    expect: Expect,
    remaining: usize,
    replies: Vec<Reply>,
    tx: Answer,
}

impl Slot {
    /// Hands the slot's replies to its caller (gone if the caller gave up waiting).
    fn answer(self) {
        let _ = self.tx.send(Ok(self.replies));
    }
}

#[derive(Default)]
struct Fifo {
    slots: VecDeque<Slot>,
    closed: bool,
}

/// The write side: the stream's half, and what the socket has not taken yet.
struct Out {
    wr: WriteHalf<Box<dyn Stream>>,
    /// Bytes behind a write that did not finish at once, for the writer task.
    buf: BytesMut,
    /// The writer task has bytes to write or a flush to finish: callers append to `buf`.
    busy: bool,
    /// Callers write themselves when the writer task is idle (else they always leave it
    /// the bytes); see [`Connection::start_with`].
    direct: bool,
}

impl Out {
    /// Writes `bytes` now if the writer task has nothing pending and the socket takes them
    /// without waiting; buffers the rest. Returns whether the writer task has work.
    fn push(&mut self, bytes: &[u8]) -> io::Result<bool> {
        if self.busy || !self.direct {
            self.buf.extend_from_slice(bytes);
            self.busy = true;
            return Ok(true);
        }
        // A waker that does nothing: a write that would wait leaves the bytes to the writer
        // task, whose own poll registers its waker.
        let mut cx = Context::from_waker(Waker::noop());
        let mut n = 0;
        while n < bytes.len() {
            match Pin::new(&mut self.wr).poll_write(&mut cx, &bytes[n..]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(k)) => n += k,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        if n == bytes.len() {
            match Pin::new(&mut self.wr).poll_flush(&mut cx) {
                Poll::Ready(Ok(())) => return Ok(false),
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => {}
            }
        }
        self.buf.extend_from_slice(&bytes[n..]);
        self.busy = true;
        Ok(true)
    }

    /// The writer task's part: writes `buf` out and flushes.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.buf.is_empty() {
            match ready!(Pin::new(&mut self.wr).poll_write(cx, &self.buf)) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.buf.advance(n),
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        ready!(Pin::new(&mut self.wr).poll_flush(cx))?;
        self.busy = false;
        Poll::Ready(Ok(()))
    }
}

struct Shared {
    fifo: Mutex<Fifo>,
    out: Mutex<Out>,
    open: AtomicBool,
    /// Wakes the writer task when `out` has work for it.
    writer: Notify,
    /// Wakes callers waiting for `out.buf` to drain (see [`MAX_BUFFERED`]).
    room: Notify,
}

/// Why [`Shared::send`] did not take a job.
enum Refused {
    Full(Job),
    Closed,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Closes the connection: fails every pending slot, refuses new ones.
    fn close(&self, why: &str) {
        self.close_with(None, why);
    }

    /// [`Shared::close`], the oldest pending slot failed with `head` if given.
    fn close_with(&self, head: Option<Error>, why: &str) {
        self.open.store(false, Ordering::Release);
        let slots = {
            let mut f = lock(&self.fifo);
            f.closed = true;
            std::mem::take(&mut f.slots)
        };
        let mut head = head;
        for s in slots {
            let e = head.take().unwrap_or_else(|| Error::Io(why.to_string()));
            let _ = s.tx.send(Err(e));
        }
        self.room.notify_waiters();
    }

    /// Registers `job`'s reply slot and writes or buffers its bytes, both under the write
    /// lock so that slots and bytes keep one order.
    fn send(&self, job: Job) -> Result<oneshot::Receiver<Result<Vec<Reply>, Error>>, Refused> {
        let mut out = lock(&self.out);
        if out.buf.len() >= MAX_BUFFERED {
            return Err(Refused::Full(job));
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut f = lock(&self.fifo);
            if f.closed {
                return Err(Refused::Closed);
            }
            f.slots.push_back(Slot {
                sent: Instant::now(),
                expect: job.expect,
                remaining: job.count,
                replies: Vec::with_capacity(job.count),
                tx,
            });
        }
        match out.push(&job.bytes) {
            Ok(true) => self.writer.notify_one(),
            Ok(false) => {}
            Err(e) => {
                drop(out);
                self.close(&format!("write failed: {e}"));
            }
        }
        Ok(rx)
    }
}

/// One pipelined connection; see the module docs.
pub struct Connection {
    shared: Arc<Shared>,
    tasks: [JoinHandle<()>; 3],
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("open", &self.is_open())
            .finish()
    }
}

/// Callers wait while this many bytes wait for the socket (a server that stopped reading).
const MAX_BUFFERED: usize = 4 << 20;

impl Connection {
    /// Starts the reader, writer and watchdog tasks of a text connection on the current
    /// tokio runtime, with requests timed out after `timeout`.
    pub fn start(stream: Box<dyn Stream>, limits: Limits, timeout: Duration) -> Connection {
        Connection::start_with(stream, limits, Protocol::Text, timeout)
    }

    /// Starts the reader, writer and watchdog tasks of a `protocol` connection on the
    /// current tokio runtime; a request unanswered `timeout` after it was handed over
    /// closes the connection. The stream must be ready for requests (logged in, if the
    /// server wants it).
    ///
    /// On a current-thread runtime callers never write themselves: the writer task runs on
    /// their own thread, so handing it the bytes costs no wake-up, and it runs after every
    /// task already woken, whose requests it then sends in the same write (a router's
    /// worker answering many clients at once sends each backend one write, not one each).
    pub fn start_with(
        stream: Box<dyn Stream>,
        limits: Limits,
        protocol: Protocol,
        timeout: Duration,
    ) -> Connection {
        let (rd, wr) = tokio::io::split(stream);
        let shared = Arc::new(Shared {
            fifo: Mutex::new(Fifo::default()),
            out: Mutex::new(Out {
                wr,
                buf: BytesMut::new(),
                busy: false,
                direct: tokio::runtime::Handle::current().runtime_flavor()
                    != tokio::runtime::RuntimeFlavor::CurrentThread,
            }),
            open: AtomicBool::new(true),
            writer: Notify::new(),
            room: Notify::new(),
        });
        let reader = tokio::spawn(read_loop(rd, shared.clone(), limits, protocol));
        let writer = tokio::spawn(write_loop(shared.clone()));
        let watchdog = tokio::spawn(watch(shared.clone(), timeout));
        Connection {
            shared,
            tasks: [reader, writer, watchdog],
        }
    }

    /// Whether the connection can still take requests.
    pub fn is_open(&self) -> bool {
        self.shared.open.load(Ordering::Acquire)
    }

    /// Sends `job` and waits for its replies (or for the timeout to close the connection).
    pub async fn call(&self, job: Job) -> Result<Vec<Reply>, Error> {
        self.queue(job).await?.await
    }

    /// Queues `job` behind every job queued before it (the server answers them in that
    /// order) and returns the wait for its replies. The bytes are written before this
    /// returns, or buffered for the writer task.
    pub async fn queue(
        &self,
        mut job: Job,
    ) -> Result<impl Future<Output = Result<Vec<Reply>, Error>> + use<>, Error> {
        let rx = loop {
            let room = self.shared.room.notified();
            match self.shared.send(job) {
                Ok(rx) => break rx,
                Err(Refused::Closed) => return Err(Error::Io("connection closed".into())),
                Err(Refused::Full(j)) => {
                    job = j;
                    room.await;
                }
            }
        };
        Ok(async move {
            rx.await
                .unwrap_or_else(|_| Err(Error::Io("connection closed".into())))
        })
    }

    /// Closes the connection and fails everything pending on it.
    pub fn close(&self, why: &str) {
        self.shared.close(why);
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close("connection dropped");
    }
}

/// Closes the connection when its oldest pending request has waited `timeout`: sleeps until
/// that request's deadline, then looks again at whichever is oldest then (requests are
/// answered in order, so a later one's deadline is later); with none pending, looks again a
/// `timeout` later, before any request handed over meanwhile is due.
async fn watch(shared: Arc<Shared>, timeout: Duration) {
    loop {
        let oldest = lock(&shared.fifo).slots.front().map(|s| s.sent);
        let Some(sent) = oldest else {
            tokio::time::sleep(timeout).await;
            continue;
        };
        let deadline = sent + timeout;
        if Instant::now() >= deadline {
            return shared.close_with(Some(Error::Timeout), "request timed out");
        }
        tokio::time::sleep_until(deadline.into()).await;
    }
}

/// Writes what callers left buffered, each time they say there is some.
async fn write_loop(shared: Arc<Shared>) {
    loop {
        shared.writer.notified().await;
        let res = std::future::poll_fn(|cx| lock(&shared.out).drain(cx)).await;
        if let Err(e) = res {
            return shared.close(&format!("write failed: {e}"));
        }
        shared.room.notify_waiters();
    }
}

async fn read_loop(
    mut rd: ReadHalf<Box<dyn Stream>>,
    shared: Arc<Shared>,
    limits: Limits,
    protocol: Protocol,
) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    // A binary frame may carry the largest value plus a key and extras, no more.
    let max_body = limits.max_item_size.saturating_add(64 * 1024);
    // Kept from read to read: where each reply a read completed ends, and the slots it
    // answered.
    let (mut ends, mut answered) = (Vec::new(), Vec::new());
    loop {
        match rd.read_buf(&mut buf).await {
            Ok(0) => return shared.close("connection closed by the server"),
            Ok(_) => {}
            Err(e) => return shared.close(&format!("read failed: {e}")),
        }
        let taken = match protocol {
            Protocol::Text => text_replies(&mut buf, &limits, &shared, &mut ends, &mut answered),
            Protocol::Binary => binary_replies(&mut buf, max_body, &shared),
        };
        if let Err(why) = taken {
            return shared.close(why);
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
    }
}

/// Takes the whole text replies at the start of `buf`, copied out of it in one piece (one
/// allocation a read, not one a reply), and files them under one lock of the FIFO. Each is
/// decoded once here, to find its end; its reader decodes it again, unless it is a `VALUE`
/// (whose fields [`Shape`] keeps).
fn text_replies(
    buf: &mut BytesMut,
    limits: &Limits,
    shared: &Shared,
    ends: &mut Vec<(usize, Shape)>,
    answered: &mut Vec<Slot>,
) -> Result<(), &'static str> {
    ends.clear();
    let mut at = 0;
    loop {
        match TextReply::measure(&buf[at..], limits) {
            Ok((used, shape)) => {
                at += used;
                ends.push((at, shape));
            }
            Err(DecodeError::Incomplete) => break,
            Err(_) => return Err("malformed reply"),
        }
    }
    if ends.is_empty() {
        return Ok(());
    }
    let whole = Bytes::copy_from_slice(&buf[..at]);
    buf.advance(at);
    let mut start = 0;
    let mut filed = true;
    {
        let mut f = lock(&shared.fifo);
        for &(end, shape) in ends.iter() {
            let reply = TextReply::of(whole.slice(start..end), shape);
            start = end;
            match file(&mut f, Reply::Text(reply)) {
                Filed::Pending => {}
                Filed::Answered(slot) => answered.push(slot),
                Filed::Unsolicited => {
                    filed = false;
                    break;
                }
            }
        }
    }
    // Sent outside the lock: a caller's wake-up may cost a system call.
    answered.drain(..).for_each(Slot::answer);
    match filed {
        true => Ok(()),
        false => Err("reply without a request"),
    }
}

/// Takes the whole binary frames at the start of `buf`, each copied out of it, and files
/// them.
fn binary_replies(
    buf: &mut BytesMut,
    max_body: usize,
    shared: &Shared,
) -> Result<(), &'static str> {
    loop {
        match BinaryReply::decode(buf) {
            Ok(Some((r, used))) => {
                buf.advance(used);
                if !deliver(shared, Reply::Binary(r)) {
                    return Err("reply without a request");
                }
            }
            Ok(None) => {
                return match binary::Header::parse(buf) {
                    Some(h) if h.body_len as usize > max_body => {
                        Err("malformed reply (binary frame too long)")
                    }
                    _ => Ok(()),
                };
            }
            Err(_) => return Err("malformed reply"),
        }
    }
}

/// Files `reply` under the oldest pending slot; false if there is none.
fn deliver(shared: &Shared, reply: Reply) -> bool {
    let filed = file(&mut lock(&shared.fifo), reply);
    match filed {
        Filed::Pending => true,
        Filed::Answered(slot) => {
            slot.answer();
            true
        }
        Filed::Unsolicited => false,
    }
}

/// What filing a reply did.
enum Filed {
    /// The oldest slot waits for more.
    Pending,
    /// The oldest slot has all its replies: taken out of the FIFO, to be answered.
    Answered(Slot),
    /// No slot waits for it.
    Unsolicited,
}

/// Files `reply` under the oldest pending slot of `f`.
fn file(f: &mut Fifo, reply: Reply) -> Filed {
    let Some(slot) = f.slots.front_mut() else {
        return Filed::Unsolicited;
    };
    let ends = match slot.expect {
        Expect::One => true,
        Expect::UntilEnd => reply.ends_list(),
    };
    slot.replies.push(reply);
    if ends {
        slot.remaining -= 1;
    }
    match slot.remaining {
        0 => Filed::Answered(f.slots.pop_front().expect("front exists")),
        _ => Filed::Pending,
    }
}
