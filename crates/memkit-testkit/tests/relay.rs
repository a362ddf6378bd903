//! The relay's own checks ([`memkit_testkit::relay`]): bytes pass unchanged, each fault does
//! what it says, and a dropped relay leaves no thread or connection behind. Against an echo
//! server or a listener the test accepts on itself (to hold both ends of a connection), and
//! against memkitd in-process (feature `server`:
//! `cargo test -p memkit-testkit --features server --test relay`).
//!
//! Waits are bounded and only lower bounds of time are asserted: a fault that should stop
//! bytes is checked by their absence for a while, never by how fast anything happens.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use memkit_testkit::relay::{Direction, Mode, Relay};

/// How long a test waits for what should happen.
const WITHIN: Duration = Duration::from_secs(5);
/// How long a test watches for what should not happen.
const QUIET: Duration = Duration::from_millis(300);

/// An echo server on 127.0.0.1, stopped (its threads joined) on drop.
struct Echo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let acceptor = thread::spawn(move || {
            let mut conns = Vec::new();
            while !st.load(SeqCst) {
                match listener.accept() {
                    Ok((s, _)) => {
                        let st = st.clone();
                        conns.push(thread::spawn(move || echo(s, &st)));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
            conns.into_iter().for_each(|c| c.join().unwrap());
        });
        Echo {
            addr,
            stop,
            acceptor: Some(acceptor),
        }
    }
}

/// Writes back what `s` reads until it ends or the server stops.
fn echo(mut s: TcpStream, stop: &AtomicBool) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut buf = vec![0; 64 * 1024];
    while !stop.load(SeqCst) {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if s.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if timed_out(&e) => {}
            Err(_) => return,
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(a) = self.acceptor.take() {
            a.join().unwrap();
        }
    }
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, WITHIN).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Exactly `n` bytes from `s`, or what failed (within `WITHIN`).
fn read_n(s: &mut TcpStream, n: usize) -> io::Result<Vec<u8>> {
    s.set_read_timeout(Some(WITHIN)).unwrap();
    let mut buf = vec![0; n];
    s.read_exact(&mut buf)?;
    Ok(buf)
}

/// Whether nothing arrives on `s` for `QUIET`.
fn quiet(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(QUIET)).unwrap();
    // Any byte, an end or a failure is something.
    s.read(&mut [0; 64]).is_err_and(|e| timed_out(&e))
}

/// What arrives on `s` before it ends (an end of stream or an error), if it ends within
/// `WITHIN`.
fn ends(s: &mut TcpStream) -> Option<Vec<u8>> {
    let deadline = Instant::now() + WITHIN;
    let mut got = Vec::new();
    let mut buf = [0; 1024];
    while Instant::now() < deadline {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if timed_out(&e) => {}
            Err(_) => return Some(got),
        }
    }
    None
}

/// Whether `s` is reset (not closed in order) within `WITHIN`; what arrives before is
/// dropped.
fn reset(s: &mut TcpStream) -> bool {
    let deadline = Instant::now() + WITHIN;
    let mut buf = [0; 1024];
    while Instant::now() < deadline {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) if timed_out(&e) => {}
            Err(e) => return e.kind() == io::ErrorKind::ConnectionReset,
        }
    }
    false
}

/// The next connection on `listener` within `within`, if any.
fn accept(listener: &TcpListener, within: Duration) -> Option<TcpStream> {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok((s, _)) = listener.accept() {
            s.set_nonblocking(false).unwrap();
            s.set_nodelay(true).unwrap();
            return Some(s);
        }
        thread::sleep(Duration::from_millis(5));
    }
    None
}

/// A connection through `relay` to `target`, both ends: the client's and the target's.
fn pair(relay: &Relay, target: &TcpListener) -> (TcpStream, TcpStream) {
    let client = connect(relay.addr());
    let server = accept(target, WITHIN).expect("the relay connects to the target");
    (client, server)
}

/// Whether the relay's byte counters reach `to_target` and `from_target` within `WITHIN`.
fn counted(relay: &Relay, to_target: u64, from_target: u64) -> bool {
    let deadline = Instant::now() + WITHIN;
    while Instant::now() < deadline {
        let s = relay.stats();
        if (s.to_target, s.from_target) == (to_target, from_target) {
            return true;
        }
        thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Whether `bytes` written on `from` arrive on `to` unchanged.
fn passes(from: &mut TcpStream, to: &mut TcpStream, bytes: &[u8]) -> bool {
    from.write_all(bytes).unwrap();
    read_n(to, bytes.len()).is_ok_and(|got| got == bytes)
}

/// 1 MiB that differs from one connection to the next.
fn pattern(seed: u8) -> Vec<u8> {
    (0..1u32 << 20)
        .map(|i: u32| (i.wrapping_mul(31) >> 3) as u8 ^ seed)
        .collect()
}

#[test]
fn bytes_pass_both_ways_unchanged() {
    let echo = Echo::start();
    let relay = Relay::start(echo.addr);
    let clients: Vec<_> = (0..4u8)
        .map(|i| {
            let addr = relay.addr();
            thread::spawn(move || {
                let mut c = connect(addr);
                let sent = pattern(i);
                // Written while the echo comes back, so both directions are busy at once.
                let mut w = c.try_clone().unwrap();
                let data = sent.clone();
                let writer = thread::spawn(move || w.write_all(&data).unwrap());
                let got = read_n(&mut c, sent.len()).unwrap();
                writer.join().unwrap();
                assert!(got == sent, "connection {i}: the echo differs");
            })
        })
        .collect();
    clients.into_iter().for_each(|c| c.join().unwrap());
    assert_eq!(relay.stats().accepted, 4);
    assert!(counted(&relay, 4 << 20, 4 << 20), "{:?}", relay.stats());
}

#[test]
fn cut_holds_both_ways_and_heal_resets_and_lets_new_connections_through() {
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start(target.local_addr().unwrap());
    let (mut client, mut server) = pair(&relay, &target);
    assert!(passes(&mut client, &mut server, b"ping"));
    assert!(passes(&mut server, &mut client, b"pong"));

    // Counted once written: possibly just after the peer has read them.
    assert!(counted(&relay, 4, 4));

    relay.cut();
    client.write_all(b"lost").unwrap();
    server.write_all(b"lost").unwrap();
    assert!(quiet(&mut server), "a cut delivered to the target");
    assert!(quiet(&mut client), "a cut delivered to the client");
    // A new connection is accepted and held, and never reaches the target.
    let mut held = connect(relay.addr());
    held.write_all(b"held").unwrap();
    assert!(
        accept(&target, QUIET).is_none(),
        "a cut connected to the target"
    );
    assert!(quiet(&mut held));
    let during = relay.stats();
    assert_eq!((during.to_target, during.from_target), (4, 4));
    assert_eq!(during.accepted, 2);

    relay.heal();
    // What was held back is dropped, and the connections that lived through the cut end.
    assert_eq!(
        ends(&mut client),
        Some(vec![]),
        "the client's connection stays open"
    );
    assert_eq!(
        ends(&mut server),
        Some(vec![]),
        "the target's connection stays open"
    );
    assert!(ends(&mut held).is_some(), "the held connection stays open");
    let (mut client, mut server) = pair(&relay, &target);
    assert!(passes(&mut client, &mut server, b"again"));
    assert!(passes(&mut server, &mut client, b"again"));
}

#[test]
fn refuse_mode_resets_new_connections_at_once() {
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start(target.local_addr().unwrap());
    relay.cut_with(Mode::Refuse);
    let mut refused = connect(relay.addr());
    assert!(
        ends(&mut refused).is_some(),
        "a refused connection stays open"
    );
    assert!(
        accept(&target, QUIET).is_none(),
        "a cut connected to the target"
    );
    assert_eq!(relay.stats().accepted, 1);

    relay.heal();
    let (mut client, mut server) = pair(&relay, &target);
    assert!(passes(&mut client, &mut server, b"back"));
}

#[test]
fn a_one_way_cut_delivers_the_other_direction_only() {
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start(target.local_addr().unwrap());
    let (mut client, mut server) = pair(&relay, &target);
    relay.cut_one_way(Direction::ToTarget);
    client.write_all(b"request").unwrap();
    assert!(quiet(&mut server), "a cut direction delivered");
    assert!(passes(&mut server, &mut client, b"reply"));

    relay.heal();
    assert!(ends(&mut client).is_some());
    // A connection made during a one-way cut is forwarded the open way.
    relay.cut_one_way(Direction::FromTarget);
    let (mut client, mut server) = pair(&relay, &target);
    assert!(passes(&mut client, &mut server, b"request"));
    server.write_all(b"reply").unwrap();
    assert!(quiet(&mut client), "a cut direction delivered");
}

#[test]
fn a_delay_adds_at_least_itself_each_way() {
    let echo = Echo::start();
    let relay = Relay::start(echo.addr);
    let mut c = connect(relay.addr());
    assert!(passes(&mut c.try_clone().unwrap(), &mut c, b"warm"));
    let delay = Duration::from_millis(100);
    relay.delay(delay);
    let start = Instant::now();
    assert!(passes(&mut c.try_clone().unwrap(), &mut c, b"slow"));
    // One chunk to the echo and one back, each delayed.
    let took = start.elapsed();
    assert!(took >= 2 * delay, "a round trip took {took:?}");
}

#[test]
fn reset_all_closes_every_connection_and_new_ones_work() {
    let echo = Echo::start();
    let relay = Relay::start(echo.addr);
    let mut clients: Vec<_> = (0..3).map(|_| connect(relay.addr())).collect();
    for c in &mut clients {
        assert!(passes(&mut c.try_clone().unwrap(), c, b"hello"));
    }
    assert_eq!(relay.stats().open, 3);
    relay.reset_all();
    for c in &mut clients {
        assert!(reset(c), "a connection outlived reset_all or was not reset");
    }
    let mut c = connect(relay.addr());
    assert!(passes(&mut c.try_clone().unwrap(), &mut c, b"fresh"));
}

#[test]
fn dropping_the_relay_joins_its_threads_and_closes_its_connections() {
    let echo = Echo::start();
    let relay = Relay::start(echo.addr);
    let handle = relay.handle();
    let mut clients: Vec<_> = (0..3).map(|_| connect(relay.addr())).collect();
    for c in &mut clients {
        assert!(passes(&mut c.try_clone().unwrap(), c, b"hello"));
    }
    // The acceptor and two threads a forwarded connection.
    assert_eq!(handle.threads(), 1 + 2 * 3);
    relay.cut();
    clients.push(connect(relay.addr())); // held by the cut, on no thread of its own
    let addr = relay.addr();
    drop(relay);
    assert_eq!(handle.threads(), 0);
    for c in &mut clients {
        assert!(ends(c).is_some(), "a connection outlived its relay");
    }
    assert!(TcpStream::connect(addr).is_err(), "the relay still listens");
}

#[cfg(feature = "server")]
#[tokio::test]
async fn through_memkitd_a_cut_times_out_gets_while_direct_connections_work() {
    use memkit_testkit::TestServer;
    use memkit_testkit::wire::{Until, Wire};

    let server = TestServer::start(&["-m", "8", "-t", "2"]);
    let relay = Relay::start(server.tcp_addr());
    let short = Duration::from_millis(300);
    let mut through = Wire::tcp(relay.addr()).await.unwrap().with_timeout(short);
    through.expect(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n").await;
    through
        .expect(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n")
        .await;

    relay.cut();
    let e = through.try_ask(b"get k\r\n", Until::END).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    let mut direct = server.wire().await;
    direct
        .expect(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n")
        .await;
}
