//! memkitd end to end under arbitrary bytes, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/server_stream.rs` includes this file) and the stable replay test
//! (`tests/fuzz_replay.rs`), so both assert exactly the same.
//!
//! One in-process memkitd from the testkit's `TestServer` (`-t 1`: one worker, as the
//! inputs need no more, or connection tasks with [`Harness::start_tasks`]) serves many
//! inputs; a current-thread tokio runtime drives the client side. For each input: one
//! connection writes the bytes in the chunks the input asks for, then half-closes (and reads
//! every reply up to EOF) or drops the socket (with or without a reset); beside it, as the
//! input asks, a storm of connections reset at once or mid-request, and a client that asks
//! for the cache's dumps and reads them slowly. Then: the server is still running, the
//! connection count is back to its baseline (no connection is left stuck), the replies of a
//! half-closed connection are well-formed (every one decodes with the client decoder of the
//! protocol the first byte chose), the slow reader's dumps are whole, and a second,
//! well-behaved connection gets exact answers.

use std::sync::atomic::Ordering;
use std::time::Duration;

use memkit_protocol::{DecodeError, Limits, decode_response};
use memkit_testkit::TestServer;
use memkit_testkit::wire::{Until, Wire};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::time::timeout;

/// How long a half-closed connection may take to answer and close: generous, because a
/// loaded machine must not turn into a false finding. A stuck connection never closes.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Chunk sizes an input can ask its bytes to be written in (0: one write).
const CHUNKS: [usize; 8] = [0, 1, 2, 3, 7, 16, 100, 1000];

/// A server that outlives many inputs.
#[derive(Debug)]
pub struct Harness {
    rt: Runtime,
    server: TestServer,
    memory_limit: usize,
}

impl Harness {
    /// Starts memkitd in-process with a small memory budget (eviction happens) and an item
    /// size limit well above what an input can send.
    pub fn start() -> Harness {
        Self::start_with(&[])
    }

    /// [`Harness::start`] with more of memkitd's flags: `--io epoll` for the epoll loop.
    pub fn start_with(flags: &[&str]) -> Harness {
        let mut args = vec!["-m", "8", "-c", "64", "-t", "1"];
        args.extend_from_slice(flags);
        Self::serving(TestServer::start(&args))
    }

    /// [`Harness::start`] with every connection a tokio task (the driver TLS connections
    /// and embedders without workers use).
    pub fn start_tasks() -> Harness {
        Self::serving(TestServer::start_tasks(&["-m", "8", "-c", "64"]))
    }

    fn serving(server: TestServer) -> Harness {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let memory_limit = server.shared().settings.memory_limit;
        Harness {
            rt,
            server,
            memory_limit,
        }
    }

    /// Runs one input; panics on a finding.
    ///
    /// Input layout: byte 0 bit 0: half-close (else drop), bit 1: drop with a reset
    /// (linger 0), bits 2-4: chunk size from [`CHUNKS`], bit 5: a slow reader of dumps
    /// beside it, bit 6: a storm of resets first; the rest is sent as is.
    pub fn one(&self, data: &[u8]) {
        let (ctl, payload) = data.split_first().unwrap_or((&1, &[]));
        let half_close = ctl & 1 != 0;
        let reset = ctl & 2 != 0;
        let chunk = CHUNKS[usize::from(ctl >> 2) & 7];
        self.rt.block_on(async {
            let baseline = self.curr_connections();
            if ctl & 0x40 != 0 {
                self.storm().await;
            }
            let input = self.converse(payload, chunk, half_close, reset);
            let (out, clean_eof) = if ctl & 0x20 != 0 {
                tokio::join!(input, self.slow_dumps()).0
            } else {
                input.await
            };
            if half_close {
                check_replies(&out, clean_eof, payload);
            }
            assert!(self.server.is_serving(), "the server stopped");
            self.wait_for_connections(baseline).await;
            // What an input may change globally and a later input must not inherit.
            let shared = self.server.shared();
            shared.engine.set_memory_limit(self.memory_limit);
            shared.verbosity.store(0, Ordering::Relaxed);
            self.well_behaved().await;
            self.wait_for_connections(baseline).await;
        });
    }

    fn curr_connections(&self) -> u64 {
        self.server
            .shared()
            .counters
            .curr_connections
            .load(Ordering::Relaxed)
    }

    /// Writes `payload` and collects what comes back. Returns the bytes and whether the
    /// server closed cleanly (EOF rather than a reset or our own drop).
    async fn converse(
        &self,
        payload: &[u8],
        chunk: usize,
        half_close: bool,
        reset: bool,
    ) -> (Vec<u8>, bool) {
        let stream = TcpStream::connect(self.server.tcp_addr())
            .await
            .expect("connect");
        if reset {
            // Linger 0 makes the close a reset.
            let _ = stream.set_zero_linger();
        }
        let (mut rd, mut wr) = stream.into_split();
        // Reading runs beside writing: a server answering a long pipeline must not block
        // on a client that has not read yet.
        let reader = async {
            let mut out = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match rd.read(&mut buf).await {
                    Ok(0) => return (out, true),
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(_) => return (out, false),
                }
            }
        };
        let writer = async {
            let size = if chunk == 0 {
                payload.len().max(1)
            } else {
                chunk
            };
            for piece in payload.chunks(size) {
                if wr.write_all(piece).await.is_err() {
                    break; // the server closed: what it answered is still checked
                }
                // Let the server read this piece alone.
                tokio::task::yield_now().await;
            }
            if half_close {
                let _ = wr.shutdown().await;
            }
            wr
        };
        if half_close {
            let (wr, read) = tokio::join!(writer, timeout(CLOSE_TIMEOUT, reader));
            drop(wr);
            match read {
                Ok(r) => r,
                Err(_) => panic!(
                    "a half-closed connection was not closed within {CLOSE_TIMEOUT:?} \
                     (input {:?})",
                    String::from_utf8_lossy(payload)
                ),
            }
        } else {
            // Drop the connection right after writing: the server sees EOF or a reset at
            // any point of a command.
            let wr = writer.await;
            drop(reader);
            drop((wr, rd));
            (Vec::new(), false)
        }
    }

    /// 32 connections reset at once, half of them with part of a request sent.
    async fn storm(&self) {
        for i in 0..32 {
            let Ok(mut c) = TcpStream::connect(self.server.tcp_addr()).await else {
                continue;
            };
            let _ = c.set_zero_linger();
            if i % 2 == 1 {
                let _ = c.write_all(b"set storm 0 0 10\r\nhal").await;
            }
        }
    }

    /// Asks for both dumps and reads them slowly (512 bytes a millisecond at most): each is
    /// whole, and ends where it should.
    async fn slow_dumps(&self) {
        let mut c = TcpStream::connect(self.server.tcp_addr())
            .await
            .expect("connect");
        c.write_all(b"lru_crawler metadump all\r\nlru_crawler mgdump\r\nquit\r\n")
            .await
            .expect("ask for the dumps");
        let read = async {
            let mut out = Vec::new();
            let mut buf = [0u8; 512];
            loop {
                match c.read(&mut buf).await {
                    Ok(0) | Err(_) => return out,
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        let out = timeout(CLOSE_TIMEOUT * 4, read)
            .await
            .expect("the dumps end");
        let text = String::from_utf8_lossy(&out);
        let (meta, mg) = text.split_once("END\r\n").expect("metadump ends in END");
        assert!(meta.lines().all(|l| l.starts_with("key=")), "{meta}");
        assert!(mg.ends_with("EN\r\n"), "mgdump ends in EN: {mg}");
        assert!(
            mg.lines()
                .filter(|l| *l != "EN")
                .all(|l| l.starts_with("mg ")),
            "{mg}"
        );
    }

    async fn wait_for_connections(&self, baseline: u64) {
        let waited = timeout(CLOSE_TIMEOUT, async {
            while self.curr_connections() > baseline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "curr_connections stuck at {} (baseline {baseline})",
            self.curr_connections()
        );
    }

    /// A client that follows the protocol gets exact answers.
    async fn well_behaved(&self) {
        let mut s = Wire::tcp(self.server.tcp_addr())
            .await
            .expect("connect")
            .with_timeout(CLOSE_TIMEOUT);
        // `flush_all` first: an input may have left a delayed flush pending, which would
        // (rightly) hide a set made in its last second.
        let ask = b"flush_all\r\nset fuzz:check 5 0 5\r\nhello\r\nget fuzz:check\r\n\
                    mg fuzz:check v f\r\nincr fuzz:n 1\r\nquit\r\n";
        let want = b"OK\r\nSTORED\r\nVALUE fuzz:check 5 5\r\nhello\r\nEND\r\n\
                     VA 5 f5\r\nhello\r\nNOT_FOUND\r\n";
        s.send(ask).await;
        let got = s
            .try_read(Until::Closed)
            .await
            .unwrap_or_else(|e| panic!("well-behaved client: {e}"));
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "well-behaved client after the input"
        );
    }
}

/// Every reply decodes with the client decoder and ends in `\r\n` (a binary frame: has a
/// response header and a length that adds up); after a clean EOF nothing is left over (a
/// reset may cut the last reply short).
fn check_replies(out: &[u8], clean_eof: bool, input: &[u8]) {
    if input.first() == Some(&memkit_protocol::binary::REQUEST_MAGIC) {
        return check_binary_replies(out, clean_eof, input);
    }
    let limits = Limits {
        max_item_size: 4 << 20,
        ..Limits::default()
    };
    let mut pos = 0;
    while pos < out.len() {
        match decode_response(&out[pos..], &limits) {
            Ok((_, used)) => {
                // `lru_crawler metadump` lines end in a bare LF in memcached too.
                let metadump = out[pos..].starts_with(b"key=");
                assert!(
                    out[..pos + used].ends_with(b"\r\n") || metadump,
                    "reply not ended by CRLF: {:?} (input {:?})",
                    String::from_utf8_lossy(&out[pos..pos + used]),
                    String::from_utf8_lossy(input)
                );
                pos += used;
            }
            Err(DecodeError::Incomplete) if !clean_eof => return,
            Err(e) => panic!(
                "reply stream broken at byte {pos} ({e:?}): {:?} (input {:?})",
                String::from_utf8_lossy(&out[pos..(pos + 200).min(out.len())]),
                String::from_utf8_lossy(input)
            ),
        }
    }
}

/// [`check_replies`] for a connection that negotiated the binary protocol.
fn check_binary_replies(out: &[u8], clean_eof: bool, input: &[u8]) {
    let mut pos = 0;
    while pos < out.len() {
        match memkit_protocol::binary::decode_response(&out[pos..]) {
            Ok(Some((_, used))) => pos += used,
            Ok(None) if !clean_eof => return,
            other => panic!(
                "binary reply stream broken at byte {pos} ({other:?}) (input {:?})",
                String::from_utf8_lossy(input)
            ),
        }
    }
}
