//! What an operator installs: `packaging/memkitd.service` (checked by `systemd-analyze`,
//! and its command line started the way systemd would start it), and the man page and
//! shell completions generated from memkitd's flags (current with the code).
//!
//! A container has no systemd to `systemctl start` the unit in, so the start is the
//! equivalent by hand: the unit's own `ExecStart=` line, as the unprivileged user
//! `DynamicUser=` would give it (`nobody` when the test runs as root), with `NOTIFY_SOCKET`
//! pointing at a socket of the test, which must receive `READY=1` (`Type=notify`) from a
//! server that answers.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "support/daemon.rs"]
mod daemon;

use memkit_testkit::interop::skip;
use memkit_testkit::tempdir;
use memkit_testkit::wire::{BlockingWire, Until};

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
    let dir = tempdir("pkg-verify");
    let path = unit_copy(dir.path());
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
    let port = daemon::free_port();
    let p = argv
        .iter()
        .position(|a| a == "-p")
        .expect("-p in ExecStart");
    argv[p + 1] = port.to_string();

    let dir = tempdir("pkg-start");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock_path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    // DynamicUser's user must be able to send to it.
    std::fs::set_permissions(&sock_path, std::fs::Permissions::from_mode(0o666)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let notify = sock_path.clone();
    let mut d = daemon::launch(&args)
        .no_wait()
        .command(move |cmd| {
            cmd.env_clear()
                .env("NOTIFY_SOCKET", &notify)
                .current_dir("/");
            // SAFETY: geteuid cannot fail.
            if unsafe { libc::geteuid() } == 0 {
                // nobody:nogroup, as Debian has them; DynamicUser= allocates a fresh one.
                cmd.uid(65534).gid(65534);
            }
        })
        .start();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 256];
    let notice = loop {
        match sock.recv(&mut buf) {
            Ok(n) => break String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("{e}"),
        }
        if let Some(st) = d.child().try_wait() {
            panic!("memkitd exited ({st}) before READY=1: {}", d.wait_exit().1);
        }
        assert!(Instant::now() < deadline, "no READY=1 within 20 s");
    };
    assert!(notice.lines().any(|l| l == "READY=1"), "{notice:?}");
    let mut s = BlockingWire::tcp(("127.0.0.1", port)).unwrap();
    let got = s.ask(b"stats settings\r\n", Until::END);
    // The unit's -m 64 and -c 1024 are what the server runs with.
    assert!(got.contains("STAT maxbytes 67108864\r\n"), "{got}");
    assert!(got.contains("STAT maxconns 1024\r\n"), "{got}");
    drop(d);
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
