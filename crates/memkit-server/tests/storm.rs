//! Connect-and-reset storms against the io_uring worker while it moves between its ring and
//! its epoll. A test binary of its own: the worker's moves follow its measured load, which
//! other tests running beside it in one binary would blur.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use memkit_testkit::TestServer;
use memkit_testkit::wire::{Until, Wire};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "support/lines.rs"]
mod lines;

/// `memkit_io_moves` from a `stats` reply.
fn io_moves(stats: &str) -> u64 {
    lines::stat(stats, "memkit_io_moves")
}

/// Connections opened and reset by the hundred (at once, mid-request, mid-reply) while a
/// worker moves between its ring and its epoll: every well-behaved client gets exactly its
/// own replies. An operation of the ring acting on a descriptor number after its connection
/// closed (the number reused by a new connection) would take a request's bytes or put a
/// reply's into a stranger's stream, and a reply here would be missing or wrong.
#[tokio::test]
async fn connect_and_reset_storms_never_cross_connections() {
    if memkit_server::config::Io::Uring.effective() != memkit_server::config::Io::Uring {
        panic!("this kernel sets up no io_uring: the storm needs the ring worker");
    }
    let s = TestServer::start(&["-t", "1"]);
    let addr = s.tcp_addr();
    let mut asker = s.wire().await;
    let moves_before = io_moves(&asker.ask(b"stats\r\n", Until::END).await);
    let start = Instant::now();
    // Until the worker has moved both ways (its load measured over windows of passes, which
    // a loaded machine makes slower), 60 s at most.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = move || (start.elapsed().as_millis() / 1500).is_multiple_of(2);
    // Well-behaved clients: phases of pipelined set+get from every client at once (the
    // worker busy), then of one request at a time with pauses (light).
    let good: Vec<_> = (0..12)
        .map(|id| {
            let done = done.clone();
            tokio::spawn(async move {
                let mut w = Wire::tcp(addr).await.unwrap();
                let mut n = 0u64;
                while !done.load(Relaxed) {
                    let busy = busy();
                    let burst = if busy { 16 } else { 1 };
                    let mut req = Vec::new();
                    let mut want = Vec::new();
                    for i in 0..burst {
                        let (k, v) = (format!("g:{id}:{}", n + i), format!("{:08}", n + i));
                        req.extend_from_slice(
                            format!("set {k} 0 0 8\r\n{v}\r\nget {k}\r\n").as_bytes(),
                        );
                        want.extend_from_slice(
                            format!("STORED\r\nVALUE {k} 0 8\r\n{v}\r\nEND\r\n").as_bytes(),
                        );
                    }
                    w.send(&req).await;
                    let got = w.read(Until::Bytes(want.len())).await;
                    assert!(
                        got == want,
                        "client {id} got {:?}",
                        String::from_utf8_lossy(&got)
                    );
                    n += burst;
                    if !busy {
                        // One client at a time: a connection with input a pass.
                        let pause = if id == 0 { 1 } else { 40 + id };
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                    }
                }
                n
            })
        })
        .collect();
    // The storm: connect, maybe send part or all of a request, maybe read a little, reset.
    let storm: Vec<_> = (0..6)
        .map(|t| {
            let done = done.clone();
            tokio::spawn(async move {
                let mut i = 0u32;
                while !done.load(Relaxed) {
                    i += 1;
                    if !busy() {
                        // A light phase: a reset now and then.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    let Ok(mut c) = TcpStream::connect(addr).await else {
                        continue;
                    };
                    let _ = c.set_zero_linger();
                    match (i + t) % 5 {
                        0 => {}
                        1 => drop(c.write_all(b"get sto").await),
                        2 => drop(c.write_all(b"set s 0 0 5\r\nab").await),
                        3 => {
                            let _ = c.write_all(b"get g:0:0 g:1:0 g:2:0\r\n").await;
                            let mut b = [0u8; 16];
                            let _ = c.read(&mut b).await;
                        }
                        _ => drop(c.write_all(&b"mn\r\n".repeat(200)).await),
                    }
                    drop(c);
                }
                i
            })
        })
        .collect();
    let mut moves = 0;
    while moves < moves_before + 2 && start.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        moves = io_moves(&asker.ask(b"stats\r\n", Until::END).await);
    }
    done.store(true, Relaxed);
    let mut answered = 0;
    for g in good {
        answered += g.await.unwrap();
    }
    let mut resets = 0;
    for t in storm {
        resets += t.await.unwrap();
    }
    assert!(
        answered > 1000 && resets > 200,
        "{answered} answered, {resets} resets"
    );
    assert!(
        moves >= moves_before + 2,
        "the worker moved {} times in 60 s",
        moves - moves_before
    );
    s.stop().await;
}
