//! memcached's command line end to end: `-F` in every encoding, the `-s` UNIX listener
//! (text, meta and binary, in-process), and the memkitd binary's start-up: refusing root
//! without `-u`, running as the `-u` user, `-s`/`-a` socket permissions, several `-l`.
//! Side by side with real memcached: tests/interop/test_startup.py.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

#[path = "support/daemon.rs"]
mod daemon;

use daemon::{free_port, launch, spawn, wait_ready};
use memkit_testkit::wire::{BlockingWire, Until, Wire};
use memkit_testkit::{TestServer, tempdir};
use tokio::io::{AsyncRead, AsyncWrite};

/// A binary request header (memcached's protocol_binary_request_header).
fn bin_request(opcode: u8, extras: &[u8], key: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80, opcode];
    f.extend_from_slice(&(key.len() as u16).to_be_bytes());
    f.push(extras.len() as u8);
    f.extend_from_slice(&[0, 0, 0]);
    f.extend_from_slice(&((extras.len() + key.len()) as u32).to_be_bytes());
    f.extend_from_slice(&[0xAB, 0, 0, 0x01]); // opaque
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(extras);
    f.extend_from_slice(key);
    f
}

/// Text, meta and binary on one stream; `flush_all` answered as `-F` (or not) says.
async fn speak_all<S: AsyncRead + AsyncWrite + Unpin>(s: &mut Wire<S>, flush_enabled: bool) {
    let r = s
        .ask(b"set k 5 0 1\r\nv\r\nget k\r\n", Until::Lines(4))
        .await;
    assert_eq!(r, "STORED\r\nVALUE k 5 1\r\nv\r\nEND\r\n");
    let r = s.ask(b"mg k v f\r\nmn\r\n", Until::Lines(3)).await;
    assert_eq!(r, "VA 1 f5\r\nv\r\nMN\r\n");
    let r = s.ask(b"flush_all\r\n", Until::LINE).await;
    let want = match flush_enabled {
        true => "OK\r\n",
        false => "CLIENT_ERROR flush_all not allowed\r\n",
    };
    assert_eq!(r, want);
    // `flush_all noreply` is silent either way; the get after it shows whether it ran.
    let r = s
        .ask(
            b"set k 0 0 1\r\nv\r\nflush_all noreply\r\nget k\r\n",
            Until::END,
        )
        .await;
    let kept = r.starts_with("STORED\r\nVALUE");
    assert_eq!(kept, !flush_enabled, "{r:?}");
}

/// A binary FLUSH: memcached's `process_bin_flush` answers AUTH_ERROR (0x20) under `-F`.
async fn binary_flush_status<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut Wire<S>,
    opcode: u8,
) -> u16 {
    s.send(&bin_request(opcode, &[], b"")).await;
    let r = s.read(Until::Frame).await;
    assert_eq!((r[0], r[1]), (0x81, opcode));
    u16::from_be_bytes([r[6], r[7]])
}

#[tokio::test]
async fn dash_f_refuses_flush_all_in_text_and_binary() {
    for (args, enabled) in [(&[][..], true), (&["-F"][..], false)] {
        let s = TestServer::start(args);
        let addr = s.tcp_addr();
        let mut c = Wire::tcp(addr).await.unwrap();
        speak_all(&mut c, enabled).await;
        let mut b = Wire::tcp(addr).await.unwrap();
        let want = if enabled { 0x00 } else { 0x20 };
        assert_eq!(
            binary_flush_status(&mut b, 0x08).await,
            want,
            "FLUSH {args:?}"
        );
        // FLUSHQ: quiet succeeds silently, so ask a NOOP after it to see the end.
        b.send(&[bin_request(0x18, &[], b""), bin_request(0x0a, &[], b"")].concat())
            .await;
        let mut r = Vec::new();
        while r.len() < 24 || r[r.len() - 24..][1] != 0x0a {
            r.extend(b.read(Until::Frame).await);
        }
        if enabled {
            assert_eq!(r.len(), 24, "FLUSHQ is silent: {r:?}");
        } else {
            assert_eq!((r[1], u16::from_be_bytes([r[6], r[7]])), (0x18, 0x20));
        }
    }
}

#[tokio::test]
async fn unix_listener_serves_text_meta_and_binary() {
    let dir = tempdir("cmdline");
    let path = dir.path().join("mk.sock");
    // In-process, the UNIX socket is served beside the harness's TCP listener.
    let s = TestServer::start(&["-s", path.to_str().unwrap(), "-F"]);
    let tcp_addr = s.tcp_addr();
    let mut c = Wire::unix(&path).await.unwrap();
    speak_all(&mut c, false).await;
    let mut b = Wire::unix(&path).await.unwrap();
    assert_eq!(binary_flush_status(&mut b, 0x08).await, 0x20);
    b.send(&bin_request(0x0b, &[], b"")).await; // VERSION
    let r = b.read(Until::Frame).await;
    assert_eq!((r[1], r[6], r[7]), (0x0b, 0, 0));
    // `stats conns` names the socket as memcached does (a UNIX client has no address).
    let text = c.ask(b"stats conns\r\n", Until::END).await;
    assert!(text.contains(":addr ?:<AF 0>\r\n"), "{text}");
    assert!(
        text.contains(&format!(":listen_addr unix:{}\r\n", path.display())),
        "{text}"
    );
    // Both listeners at once: the TCP one still answers.
    let mut t = Wire::tcp(tcp_addr).await.unwrap();
    assert_eq!(t.ask(b"mn\r\n", Until::LINE).await, "MN\r\n");
    s.stop().await;
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn status_field(pid: u32, field: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .unwrap_or("")
        .to_string()
}

#[test]
fn root_needs_dash_u_and_becomes_that_user() {
    if !is_root() {
        // -u only applies to root; CI runs as root.
        memkit_testkit::interop::skip("root (the -u switch only applies to root)");
        return;
    }
    let port = free_port().to_string();
    // Refusals: the process exits at once, so the harness does not wait for it to listen.
    let refused = |args: &[&str]| launch(args).no_wait().start().wait_exit();
    let (status, stderr) = refused(&["-p", &port, "-l", "127.0.0.1"]);
    assert_eq!(status.code(), Some(64));
    assert_eq!(stderr, "can't run as root without the -u switch\n");
    let (status, _) = refused(&["-p", &port, "-u", "no-such-user-here"]);
    assert_eq!(status.code(), Some(67));
    // `nobody` exists on every Debian system; memcached would take it too.
    let d = spawn(&["-p", &port, "-l", "127.0.0.1", "-u", "nobody"]);
    wait_ready(|| BlockingWire::tcp(("127.0.0.1", port.parse().unwrap())));
    let uid = status_field(d.pid(), "Uid:");
    assert_ne!(uid.split_whitespace().nth(1), Some("0"), "{uid}");
    let fields: Vec<&str> = uid.split_whitespace().skip(1).collect();
    assert!(
        fields.iter().all(|u| *u == fields[0]),
        "real, effective, saved, fs: {uid}"
    );
    assert_eq!(
        status_field(d.pid(), "Groups:").trim(),
        "Groups:",
        "no supplementary groups"
    );
}

#[test]
fn unix_socket_with_mask_replaces_tcp() {
    let dir = tempdir("cmdline");
    let path = dir.path().join("m.sock");
    let port = free_port();
    let d = spawn(&[
        "-s",
        path.to_str().unwrap(),
        "-a",
        "770",
        "-p",
        &port.to_string(),
        "-u",
        "root",
    ]);
    let _s = wait_ready(|| BlockingWire::unix(&path));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o770);
    // memcached: -s disables the network listeners.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    drop(d);
}

#[test]
fn every_listen_address_is_listened_on() {
    let (p1, p2) = (free_port(), free_port());
    let spec = format!("127.0.0.1:{p1},[::1]:{p2}");
    let _d = spawn(&[
        "-l",
        &spec,
        "-l",
        "127.0.0.1",
        "-p",
        &p2.to_string(),
        "-u",
        "root",
    ]);
    wait_ready(|| BlockingWire::tcp(("127.0.0.1", p1)));
    // `-l 127.0.0.1` is contained in the list already, so memcached (and memkitd) skip it.
    assert!(std::net::TcpStream::connect(("127.0.0.1", p2)).is_err());
    if std::net::TcpListener::bind("[::1]:0").is_ok() {
        wait_ready(|| BlockingWire::tcp(("::1", p2)));
    }
}

#[test]
fn open_files_limit_makes_room_for_dash_c() {
    use std::os::unix::process::CommandExt;
    // The harness picks the port (and picks again if another test took it first).
    let d = launch(&["-c", "1000"])
        .command(|cmd| {
            // SAFETY: only setrlimit between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    let mut rl = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
                    rl.rlim_cur = 256;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
                    Ok(())
                });
            }
        })
        .start();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.pid())).unwrap();
    let soft: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        soft >= 1000,
        "soft RLIMIT_NOFILE {soft} leaves no room for -c 1000"
    );
}

#[test]
fn notls_listener_is_plain_next_to_a_tls_one() {
    let pki = memkit_testkit::certs::TestPki::generate();
    let (plain, tls) = (free_port(), free_port());
    let listen = format!("notls:127.0.0.1:{plain},127.0.0.1:{tls}");
    let opts = pki.server_opts(0);
    let _d = spawn(&["-Z", "-o", &opts, "-l", &listen, "-u", "root"]);
    wait_ready(|| BlockingWire::tcp(("127.0.0.1", plain)));
    // The TLS listener takes no plain text: the handshake fails and the connection closes
    // without a reply line.
    let mut s = BlockingWire::tcp(("127.0.0.1", tls)).unwrap();
    let r = s.try_ask(b"version\r\n", Until::LINE);
    assert!(r.is_err(), "plain text got an answer: {r:?}");
}

/// Where the kernel refuses io_uring (here a seccomp filter answers `io_uring_setup` with
/// EPERM, as a container runtime's default profile does), memkitd serves through epoll and
/// says so: a warning on standard error, and `memkit_io epoll` in `stats settings`.
#[cfg(target_os = "linux")]
#[test]
fn a_kernel_that_refuses_io_uring_gets_epoll_and_a_warning() {
    use std::os::unix::process::CommandExt;
    let mut d = launch(&["-t", "1"])
        .command(|cmd| {
            // SAFETY: only prctl between fork and exec; the filter lives in this function's
            // frame until the second prctl has copied it.
            unsafe {
                cmd.pre_exec(|| {
                    let nr = libc::SYS_io_uring_setup as u32;
                    let mut code = [
                        // The system call's number, then: io_uring_setup fails, the rest run.
                        bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
                        bpf(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 1, nr),
                        bpf(
                            libc::BPF_RET | libc::BPF_K,
                            0,
                            0,
                            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                        ),
                        bpf(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
                    ];
                    let prog = libc::sock_fprog {
                        len: code.len() as u16,
                        filter: code.as_mut_ptr(),
                    };
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                        || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        })
        .start();
    let mut c = BlockingWire::tcp(d.tcp_addr())
        .unwrap()
        .with_timeout(Duration::from_secs(10));
    // The get's END, then the stats'.
    let got = c.ask(
        b"set k 0 0 1\r\nv\r\nget k\r\nstats settings\r\n",
        Until::END,
    );
    let said = got + &c.ask(b"", Until::END);
    assert!(
        said.starts_with("STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n"),
        "{said}"
    );
    assert!(said.contains("STAT memkit_io epoll\r\n"), "{said}");
    let (_, err) = d.stop_with(libc::SIGTERM);
    assert!(err.contains("io_uring is not available"), "{err}");
}

#[cfg(target_os = "linux")]
fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}
