//! ASCII authentication (`-Y`) end to end: memkitd in-process on port 0, and the same
//! conversations against real memcached 1.6.18 (`memcached -Y`) so every expected
//! byte is memcached's own. memcached is skipped with a note when it is not installed,
//! unless `CI=true` makes that a failure.

use std::sync::Arc;

use memkit_server::{Args, Settings, Shared};
use memkit_testkit::tempdir::{TempDir, tempdir};
use memkit_testkit::wire::{BlockingWire, Until};
use memkit_testkit::{TestServer, memcached};

/// An auth file (`-Y`) in a scratch directory of its own, removed on drop.
struct AuthFile {
    path: String,
    _dir: TempDir,
}

impl AuthFile {
    fn new(body: &[u8]) -> AuthFile {
        let dir = tempdir("auth");
        let path = dir.path().join("users");
        std::fs::write(&path, body).unwrap();
        AuthFile {
            path: path.to_str().unwrap().to_string(),
            _dir: dir,
        }
    }
    fn path(&self) -> &str {
        &self.path
    }
}

fn open(port: u16) -> BlockingWire {
    BlockingWire::tcp(("127.0.0.1", port)).unwrap()
}

const USERS: &[u8] = b"alice:secret\nbob:hunter2\n";

/// One conversation, a request and memcached's exact reply at a time (each reply is read
/// before the next request is sent: memcached drops replies to unauthenticated commands
/// that arrive in one read, see `auth.rs`).
const SCRIPT: &[(&[u8], &[u8])] = &[
    (b"get foo\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"version\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"quit\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"SET k 0 0 12\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"set k 0 0\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"set k 0 0 abc\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (
        b"set k 0 0 11\r\nalice wrong\r\n",
        b"CLIENT_ERROR authentication failure\r\n",
    ),
    (
        b"set k 0 0 5\r\nalice\r\n",
        b"CLIENT_ERROR bad authentication token format\r\n",
    ),
    (
        b"set k 0 0 12\r\nalice secretXX",
        b"CLIENT_ERROR bad command line termination\r\n",
    ),
    (
        b"set k 0 0 12\r\nalice\tsecret\r\n",
        b"CLIENT_ERROR bad authentication token format\r\n",
    ),
    (b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    // Success; key, flags and exptime are ignored and nothing is stored.
    (b"set k 0 0 12 noreply\r\nalice secret\r\n", b"STORED\r\n"),
    (b"get k\r\n", b"END\r\n"),
    (b"set k 0 0 2\r\nhi\r\n", b"STORED\r\n"),
    (b"get k\r\n", b"VALUE k 0 2\r\nhi\r\nEND\r\n"),
    // Once in, a second auth-shaped set is an ordinary set.
    (b"set k 0 0 11\r\nbob hunter2\r\n", b"STORED\r\n"),
    (b"get k\r\n", b"VALUE k 0 11\r\nbob hunter2\r\nEND\r\n"),
];

fn run_script(port: u16) {
    let mut c = open(port);
    for (req, want) in SCRIPT {
        c.expect(req, want);
    }
}

#[test]
fn memkitd_and_memcached_answer_the_same_bytes() {
    let f = AuthFile::new(USERS);
    let k = TestServer::start(&["-Y", f.path()]);
    run_script(k.port());
    if let Some(m) = memcached::spawn(&["-Y", f.path()]) {
        run_script(m.port);
    }
}

#[test]
fn a_failure_keeps_the_connection_and_a_retry_succeeds() {
    let f = AuthFile::new(USERS);
    let k = TestServer::start(&["-Y", f.path()]);
    let m = memcached::spawn(&["-Y", f.path()]);
    for port in std::iter::once(k.port()).chain(m.as_ref().map(|m| m.port)) {
        let mut c = open(port);
        c.expect(
            b"set a 0 0 5\r\nbob h\r\n",
            b"CLIENT_ERROR authentication failure\r\n",
        );
        c.expect(b"set a 0 0 11\r\nbob hunter2\r\n", b"STORED\r\n");
        // Pipelined behind the credentials on a new connection: answered in order.
        let mut c = open(port);
        c.expect(
            b"set a 0 0 12\r\nalice secret\r\nset x 0 0 1\r\n1\r\nget x\r\n",
            b"STORED\r\nSTORED\r\nVALUE x 0 1\r\n1\r\nEND\r\n",
        );
        // Three attempts above, the fourth is `stats`' own.
        let st = stats(port);
        assert_eq!(
            (st("auth_cmds"), st("auth_errors")),
            ("4".into(), "1".into())
        );
        assert_eq!(st("auth_enabled_ascii"), f.path());
        let mut c = open(port);
        c.expect(b"set a 0 0 12\r\nalice secret\r\n", b"STORED\r\n");
        c.expect(b"stats reset\r\n", b"RESET\r\n");
        assert_eq!(
            stats(port)("auth_cmds"),
            "1",
            "stats' own login after the reset"
        );
    }
    assert_eq!(k.shared().auth.as_ref().map(|a| a.path()), Some(f.path()));
}

/// `stats` of an authenticated connection, as a lookup.
fn stats(port: u16) -> impl Fn(&str) -> String {
    let mut c = open(port);
    c.expect(b"set a 0 0 12\r\nalice secret\r\n", b"STORED\r\n");
    let mut text = c.ask(b"stats\r\nstats settings\r\n", Until::END);
    text += &String::from_utf8_lossy(&c.read(Until::END));
    move |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
            .unwrap_or_else(|| panic!("no stat {name}"))
            .to_string()
    }
}

#[test]
fn junk_without_a_newline_closes_like_memcached() {
    let f = AuthFile::new(USERS);
    let k = TestServer::start(&["-Y", f.path()]);
    let m = memcached::spawn(&["-Y", f.path()]);
    for port in std::iter::once(k.port()).chain(m.as_ref().map(|m| m.port)) {
        let mut c = open(port);
        c.send(&[b'x'; 3000]);
        assert!(c.closed(), "port {port}");
    }
}

#[test]
fn without_an_auth_file_nothing_changes() {
    let k = TestServer::start(&[]);
    let mut c = open(k.port());
    c.expect(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    assert!(k.shared().auth.is_none());
}

#[test]
fn bad_auth_files_refuse_to_start_with_memcacheds_messages() {
    let parse = |args: &[&str]| {
        let mut argv = vec!["memkitd"];
        argv.extend_from_slice(args);
        let (settings, _) = Settings::from_args(<Args as clap::Parser>::parse_from(argv));
        Shared::try_with_persist(
            Arc::new(memkit_server::engine_for(&settings)),
            None,
            settings,
        )
        .map(|_| ())
    };
    let missing = parse(&["-Y", "/nonexistent/memkit-auth"]).unwrap_err();
    assert_eq!(missing.0, 1);
    assert!(
        missing
            .1
            .starts_with("Could not open authfile [/nonexistent/memkit-auth]")
    );
    let f = AuthFile::new(b"alice:secret\nnocolon\n");
    let bad = parse(&["-Y", f.path()]).unwrap_err();
    assert_eq!(
        bad.1,
        format!(
            "Authfile [{}] has a malformed entry. Should be 'user:password'",
            f.path()
        )
    );
}
