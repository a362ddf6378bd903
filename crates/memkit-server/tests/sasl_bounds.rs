//! What an unauthenticated SASL client (`-S`) can make the server do is bounded: past a few
//! failed attempts in a row, the connection's next ones within a backoff fail unchecked, SASL data
//! past 16 KiB is refused from its header, and no server can be built with SASL and the
//! text protocol allowed (an ASCII connection would skip authentication), whether its
//! settings came from the command line or from an embedder.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use memkit_protocol::binary::{MAX_SASL_DATA, Status, decode_response, encode_request, op};
use memkit_server::config::Protocol;
use memkit_server::{Args, Settings, Shared};
use memkit_testkit::TestServer;
use memkit_testkit::wire::{BlockingWire, Until};

/// A password file of the test's own, removed when dropped.
struct Pwdb(memkit_testkit::tempdir::TempDir);

impl Pwdb {
    fn new(name: &str) -> Pwdb {
        let dir = memkit_testkit::tempdir(name);
        std::fs::write(dir.path().join("pwdb"), "app:secret\n").unwrap();
        Pwdb(dir)
    }

    fn path(&self) -> String {
        self.0.path().join("pwdb").to_str().unwrap().to_string()
    }

    fn server(&self) -> TestServer {
        TestServer::start(&["-S", "--sasl-pwdb", &self.path()])
    }
}

fn auth_frame(password: &str) -> Vec<u8> {
    let mut f = Vec::new();
    let data = format!("\0app\0{password}");
    encode_request(&mut f, op::SASL_AUTH, 0, 0, &[], b"PLAIN", data.as_bytes());
    f
}

/// A blocking binary connection.
struct Conn(BlockingWire);

impl Conn {
    fn open(s: &TestServer) -> Conn {
        Conn(BlockingWire::tcp(s.tcp_addr()).unwrap())
    }

    fn send(&mut self, b: &[u8]) {
        self.0.send(b);
    }

    /// The next reply's status and body.
    fn reply(&mut self) -> (Status, Vec<u8>) {
        let frame = self.0.read(Until::Frame);
        let (r, _) = decode_response(&frame).unwrap().unwrap();
        (Status::from_u16(r.header.status).unwrap(), r.value.to_vec())
    }

    fn auth(&mut self, password: &str) -> Status {
        self.send(&auth_frame(password));
        self.reply().0
    }
}

/// `auth_cmds` and `auth_errors` of the server.
fn counted(s: &TestServer) -> (u64, u64) {
    let c = &s.shared().counters;
    (c.sasl_cmds.load(Relaxed), c.sasl_errors.load(Relaxed))
}

#[test]
fn a_failed_attempt_makes_the_next_ones_on_its_connection_fail_unchecked() {
    let pwdb = Pwdb::new("backoff");
    let s = pwdb.server();
    let mut c = Conn::open(&s);
    // A wrong guess, then the right password: let in at once, as memcached lets it in.
    assert_eq!(c.auth("wrong"), Status::AuthError);
    assert_eq!(c.auth("secret"), Status::Ok);
    // Past the free guesses, the right password right behind a wrong one (one write) is
    // refused without a look.
    let free = usize::from(memkit_server::sasl::FREE_FAILURES);
    let mut guesses = auth_frame("wrong").repeat(free + 1);
    guesses.extend_from_slice(&auth_frame("secret"));
    c.send(&guesses);
    for _ in 0..free + 2 {
        assert_eq!(c.reply(), (Status::AuthError, b"Auth failure.".to_vec()));
    }
    assert_eq!(counted(&s), (2 + free as u64 + 2, 1 + free as u64 + 2));

    // Another connection is not held back.
    let mut other = Conn::open(&s);
    assert_eq!(other.auth("secret"), Status::Ok);

    // Once the backoff is over, the password is checked again (refusals do not lengthen
    // it, so a client retrying is let in).
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.auth("secret") != Status::Ok {
        assert!(Instant::now() < deadline, "never let in");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut get = Vec::new();
    encode_request(&mut get, op::GET, 0, 0, &[], b"k", b"");
    c.send(&get);
    assert_eq!(c.reply().0, Status::KeyNotFound);
}

#[test]
fn sasl_data_past_16_kib_is_refused_from_its_header_and_discarded() {
    let pwdb = Pwdb::new("data");
    let s = pwdb.server();
    let mut c = Conn::open(&s);
    let mut f = Vec::new();
    let data = vec![b'x'; MAX_SASL_DATA + 1];
    encode_request(&mut f, op::SASL_AUTH, 0, 0, &[], b"PLAIN", &data);
    // The header and the mechanism: the reply comes before the data does.
    let head = 24 + 5;
    c.send(&f[..head]);
    assert_eq!(c.reply(), (Status::AuthError, b"Auth failure.".to_vec()));
    // The data is read and dropped; the connection goes on, in step.
    c.send(&f[head..]);
    assert_eq!(c.auth("secret"), Status::Ok);
    assert_eq!(s.shared().counters.sasl_errors.load(Relaxed), 0);
}

const REFUSED: &str = "ERROR: You cannot allow the ASCII protocol while using SASL.";

fn settings(argv: &[&str]) -> Settings {
    let argv = std::iter::once("memkitd").chain(argv.iter().copied());
    Settings::from_args(<Args as clap::Parser>::parse_from(argv)).0
}

fn build(settings: &Settings) -> Result<Arc<Shared>, (i32, String)> {
    let engine = Arc::new(memkit_server::engine_for(settings));
    Shared::try_with_persist(engine, None, settings.clone())
}

/// The command line refuses `-S -B auto`; an embedder's settings are held to the same
/// rule where every server's state is built, whatever the protocol was set to after.
#[test]
fn sasl_with_the_text_protocol_allowed_cannot_be_served() {
    let pwdb = Pwdb::new("embed");
    let cli = settings(&["-S", "-B", "auto", "--sasl-pwdb", &pwdb.path()]);
    let refusal = cli.check().unwrap_err();
    assert_eq!((refusal.code, refusal.message.as_str()), (64, REFUSED));

    let mut s = settings(&["--sasl-pwdb", &pwdb.path()]);
    s.sasl = true;
    for protocol in [Protocol::Auto, Protocol::Ascii] {
        s.protocol = protocol;
        assert_eq!(s.validate().unwrap_err().message, REFUSED);
        match build(&s) {
            Err(e) => assert_eq!(e, (64, REFUSED.to_owned()), "{protocol:?}"),
            Ok(_) => panic!("{protocol:?} with SASL was built"),
        }
    }
    let panicked = std::panic::catch_unwind(|| {
        Shared::new(Arc::new(memkit_server::engine_for(&s)), s.clone())
    });
    assert!(panicked.is_err(), "Shared::new served SASL with ASCII");

    // `-S` alone implies the binary protocol; setting it so is served.
    let mut cli = settings(&["-S", "--sasl-pwdb", &pwdb.path()]);
    assert_eq!(cli.protocol, Protocol::Binary);
    assert!(build(&cli).is_ok());
    cli.protocol = Protocol::Auto;
    assert_eq!(build(&cli).unwrap_err().1, REFUSED);
    s.protocol = Protocol::Binary;
    assert!(build(&s).is_ok());
}
