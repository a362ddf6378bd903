//! One pipelined connection: a writer task, a reader task, and a FIFO of pending replies.
//!
//! Design (and why): memcached answers requests on a connection strictly in order, so a
//! connection needs no request ids, only a queue. Callers hand a [`Job`] (encoded bytes,
//! how many replies to expect, a oneshot for the answer) to the **writer task** over a
//! channel; the writer drains every job already waiting into one buffer, registers their
//! reply slots in the FIFO *before* writing, and writes the batch with one syscall. The
//! **reader task** decodes replies with the codec and fills the slot at the head of the
//! FIFO. Concurrent callers therefore share one socket with their requests batched and
//! pipelined, and nobody holds a lock across I/O. Reading and writing run in separate tasks
//! because a server that is writing a large reply stops reading our input: a single task
//! blocked in `write_all` would deadlock against it (a mutex-protected framed connection has
//! the same problem unless it interleaves both directions by hand).
//!
//! When anything goes wrong (EOF, I/O error, a malformed or unsolicited reply, or a caller's
//! timeout), the connection is **closed**: every pending slot fails with [`Error::Io`], the
//! tasks stop, and the pool replaces it on next use. A timed-out connection cannot be reused
//! because its late reply would be taken for the next request's.
//!
//! The stream is any `AsyncRead + AsyncWrite` ([`Stream`]) made by a [`Connector`]: plain TCP
//! by default, TLS by plugging in a connector that wraps the socket.
//!
//! The reader decodes the connection's [`Protocol`]: text lines or binary frames, each
//! reply's bytes copied out of the read buffer into a [`Reply`] (one `Bytes` per reply),
//! which the protocol crate's decoder reads again for the caller. A binary frame longer
//! than the largest value the client accepts, plus room for a key and extras, closes the
//! connection as a malformed reply rather than being buffered.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, BytesMut};
use memkit_protocol::{DecodeError, Limits, binary};
use memkit_types::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::distribution::ServerSpec;
use crate::reply::{BinaryReply, Reply, TextReply};

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
    expect: Expect,
    remaining: usize,
    replies: Vec<Reply>,
    tx: Answer,
}

#[derive(Default)]
struct Fifo {
    slots: VecDeque<Slot>,
    closed: bool,
}

struct Shared {
    fifo: Mutex<Fifo>,
    open: AtomicBool,
}

impl Shared {
    /// Closes the connection: fails every pending slot, refuses new ones.
    fn close(&self, why: &str) {
        self.open.store(false, Ordering::Release);
        let slots = {
            let mut f = self.fifo.lock().unwrap_or_else(|e| e.into_inner());
            f.closed = true;
            std::mem::take(&mut f.slots)
        };
        for s in slots {
            let _ = s.tx.send(Err(Error::Io(why.to_string())));
        }
    }
}

/// One pipelined connection; see the module docs.
pub struct Connection {
    tx: mpsc::Sender<(Job, Answer)>,
    shared: Arc<Shared>,
    tasks: [JoinHandle<()>; 2],
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("open", &self.is_open())
            .finish()
    }
}

/// Flush the batch once it holds this many bytes even if more jobs are waiting.
const MAX_BATCH: usize = 256 * 1024;

impl Connection {
    /// Starts the reader and writer tasks of a text connection on the current tokio runtime.
    pub fn start(stream: Box<dyn Stream>, limits: Limits) -> Connection {
        Connection::start_with(stream, limits, Protocol::Text)
    }

    /// Starts the reader and writer tasks of a `protocol` connection on the current tokio
    /// runtime. The stream must be ready for requests (logged in, if the server wants it).
    pub fn start_with(stream: Box<dyn Stream>, limits: Limits, protocol: Protocol) -> Connection {
        let (rd, wr) = tokio::io::split(stream);
        let shared = Arc::new(Shared {
            fifo: Mutex::new(Fifo::default()),
            open: AtomicBool::new(true),
        });
        let (tx, rx) = mpsc::channel(1024);
        let reader = tokio::spawn(read_loop(rd, shared.clone(), limits, protocol));
        let writer = tokio::spawn(write_loop(wr, rx, shared.clone()));
        Connection {
            tx,
            shared,
            tasks: [reader, writer],
        }
    }

    /// Whether the connection can still take requests.
    pub fn is_open(&self) -> bool {
        self.shared.open.load(Ordering::Acquire)
    }

    /// Sends `job` and waits for its replies (no timeout: see [`Connection::close`]).
    pub async fn call(&self, job: Job) -> Result<Vec<Reply>, Error> {
        self.queue(job).await?.await
    }

    /// Queues `job` behind every job queued before it (the server answers them in that
    /// order) and returns the wait for its replies.
    pub async fn queue(
        &self,
        job: Job,
    ) -> Result<impl Future<Output = Result<Vec<Reply>, Error>> + use<>, Error> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send((job, tx)).await.is_err() {
            return Err(Error::Io("connection closed".into()));
        }
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

async fn write_loop(
    mut wr: tokio::io::WriteHalf<Box<dyn Stream>>,
    mut rx: mpsc::Receiver<(Job, Answer)>,
    shared: Arc<Shared>,
) {
    let mut buf = Vec::with_capacity(16 * 1024);
    while let Some(first) = rx.recv().await {
        buf.clear();
        let mut batch = vec![first];
        let mut size = batch[0].0.bytes.len();
        while size < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => {
                    size += j.0.bytes.len();
                    batch.push(j);
                }
                Err(_) => break,
            }
        }
        {
            let mut f = shared.fifo.lock().unwrap_or_else(|e| e.into_inner());
            for (job, tx) in batch {
                if f.closed {
                    let _ = tx.send(Err(Error::Io("connection closed".into())));
                    continue;
                }
                buf.extend_from_slice(&job.bytes);
                f.slots.push_back(Slot {
                    expect: job.expect,
                    remaining: job.count,
                    replies: Vec::with_capacity(job.count),
                    tx,
                });
            }
            if f.closed {
                return;
            }
        }
        if let Err(e) = async {
            wr.write_all(&buf).await?;
            wr.flush().await
        }
        .await
        {
            shared.close(&format!("write failed: {e}"));
            return;
        }
    }
}

async fn read_loop(
    mut rd: tokio::io::ReadHalf<Box<dyn Stream>>,
    shared: Arc<Shared>,
    limits: Limits,
    protocol: Protocol,
) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    // A binary frame may carry the largest value plus a key and extras, no more.
    let max_body = limits.max_item_size.saturating_add(64 * 1024);
    loop {
        match rd.read_buf(&mut buf).await {
            Ok(0) => return shared.close("connection closed by the server"),
            Ok(_) => {}
            Err(e) => return shared.close(&format!("read failed: {e}")),
        }
        loop {
            let reply = match protocol {
                Protocol::Text => match TextReply::decode(&buf, &limits) {
                    Ok((r, used)) => {
                        buf.advance(used);
                        Reply::Text(r)
                    }
                    Err(DecodeError::Incomplete) => break,
                    Err(_) => return shared.close("malformed reply"),
                },
                Protocol::Binary => match BinaryReply::decode(&buf) {
                    Ok(Some((r, used))) => {
                        buf.advance(used);
                        Reply::Binary(r)
                    }
                    Ok(None) => match binary::Header::parse(&buf) {
                        Some(h) if h.body_len as usize > max_body => {
                            return shared.close("malformed reply (binary frame too long)");
                        }
                        _ => break,
                    },
                    Err(_) => return shared.close("malformed reply"),
                },
            };
            if !deliver(&shared, reply) {
                return shared.close("reply without a request");
            }
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
    }
}

/// Files `reply` under the oldest pending slot; false if there is none.
fn deliver(shared: &Shared, reply: Reply) -> bool {
    let mut f = shared.fifo.lock().unwrap_or_else(|e| e.into_inner());
    let Some(slot) = f.slots.front_mut() else {
        return false;
    };
    let ends = match slot.expect {
        Expect::One => true,
        Expect::UntilEnd => reply.ends_list(),
    };
    slot.replies.push(reply);
    if ends {
        slot.remaining -= 1;
    }
    if slot.remaining == 0 {
        let slot = f.slots.pop_front().expect("front exists");
        drop(f);
        let _ = slot.tx.send(Ok(slot.replies));
    }
    true
}
