//! What an operator installs: `packaging/memkitd.service` (checked by `systemd-analyze`,
//! and its command line started the way systemd would start it), and the man page and
//! shell completions generated from memkitd's flags (current with the code).
//!
//! A container has no systemd to `systemctl start` the unit in, so the start is the
//! equivalent by hand: the unit's own `ExecStart=` line, as the unprivileged user
//! `DynamicUser=` would give it (`nobody` when the test runs as root), with `NOTIFY_SOCKET`
//! pointing at a socket of the test, which must receive `READY=1` (`Type=notify`) from a
//! server that answers.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memkit_testkit::interop::skip;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn unit() -> String {
    std::fs::read_to_string(root().join("packaging/memkitd.service")).unwrap()
}

/// The unit with its binary replaced by this build's, in a private directory.
fn unit_copy(dir: &Path) -> PathBuf {
    let text = unit().replace("/usr/local/bin/memkitd", env!("CARGO_BIN_EXE_memkitd"));
    let path = dir.join("memkitd.service");
    std::fs::write(&path, text).unwrap();
    path
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memkit-pkg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn have_systemd_analyze() -> bool {
    Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `systemd-analyze verify` accepts the unit without a word (it exits 0 even for a line it
/// ignores, so any diagnostic fails the test), and `systemd-analyze security` rates its
/// sandbox (the lower the exposure, the tighter; 2.0 and below is "OK" territory).
#[test]
fn unit_file_verifies_and_is_hardened() {
    let text = unit();
    for line in [
        "Type=notify",
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing");
    }
    if !have_systemd_analyze() {
        return skip("systemd-analyze (Debian package systemd)");
    }
    let dir = tempdir("verify");
    let path = unit_copy(&dir);
    // --man=no: the man page is not installed where man(1) looks during a test.
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.trim().is_empty(), "verify: {err}");
    let o = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&path)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let level: f64 = out
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for memkitd.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in {out}"));
    assert!(level <= 2.0, "exposure {level}:\n{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The unit's `ExecStart=` words.
fn exec_start() -> Vec<String> {
    let text = unit();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart=");
    line.split_whitespace().map(str::to_owned).collect()
}

/// `ExecStart=` as systemd would run it: unprivileged, `NOTIFY_SOCKET` set; `READY=1`
/// arrives and the port (the unit's, moved to a free one) answers.
#[test]
fn unit_command_line_starts_and_notifies() {
    let mut argv = exec_start();
    assert_eq!(argv[0], "/usr/local/bin/memkitd");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = argv
        .iter()
        .position(|a| a == "-p")
        .expect("-p in ExecStart");
    argv[p + 1] = port.to_string();

    let dir = tempdir("start");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock_path = dir.join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    // DynamicUser's user must be able to send to it.
    std::fs::set_permissions(&sock_path, std::fs::Permissions::from_mode(0o666)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memkitd"));
    cmd.args(&argv[1..])
        .env_clear()
        .env("NOTIFY_SOCKET", &sock_path)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // nobody:nogroup, as Debian has them; DynamicUser= allocates a fresh one instead.
        cmd.uid(65534).gid(65534);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 256];
    let notice = loop {
        match sock.recv(&mut buf) {
            Ok(n) => break String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("{e}"),
        }
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("memkitd exited ({st}) before READY=1: {err}");
        }
        assert!(Instant::now() < deadline, "no READY=1 within 20 s");
    };
    assert!(notice.lines().any(|l| l == "READY=1"), "{notice:?}");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"stats settings\r\n").unwrap();
    let mut got = String::new();
    let mut chunk = [0u8; 4096];
    while !got.ends_with("END\r\n") {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed: {got}");
        got.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
    // The unit's -m 64 and -c 1024 are what the server runs with.
    assert!(got.contains("STAT maxbytes 67108864\r\n"), "{got}");
    assert!(got.contains("STAT maxconns 1024\r\n"), "{got}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `packaging/man/memkitd.1` and `packaging/completions/{memkitd.bash,_memkitd,memkitd.fish}`
/// are what memkitd's flags generate.
#[test]
fn man_page_and_completions_are_current() {
    let cmd = <memkit_server::Args as clap::CommandFactory>::command();
    memkit_testkit::generated::check(
        &cmd,
        &root(),
        "cargo test -p memkit-server --test packaging",
    );
}
