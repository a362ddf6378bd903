//! Every `memkit` subcommand against memkitd started with `-Z` (TLS, rcgen's throwaway PKI),
//! `-Y` (ASCII authentication), and both: with the right options each one works, without
//! them (or with a CA that did not sign the server, or a wrong password) each one fails with
//! status 2.

mod common;

use common::{Memkitd, memkit, stderr, stdout};
use memkit_testkit::certs::TestPki;

/// Every subcommand that talks to servers, with arguments that succeed on a server holding
/// key `k` (and counter `n`).
const SUBCOMMANDS: &[&[&str]] = &[
    &["get", "k"],
    &["gat", "0", "k"],
    &["touch", "k", "0"],
    &["set", "k", "v"],
    &["replace", "k", "v"],
    &["append", "k", "+"],
    &["prepend", "k", "-"],
    &["incr", "n"],
    &["decr", "n"],
    &["ping"],
    &["version"],
    &["verbosity", "0"],
    &["stats"],
    &["stats", "--format", "prometheus"],
    &["top", "-b", "-n", "1"],
    &["dump"],
    &["watch", "--duration", "0.3"],
    &["--which", "k", "get", "k"],
];

/// Runs every subcommand with `opts` and expects `want` (first storing `k` and `n`, which
/// must work exactly when `want` is 0).
fn every_subcommand(server: &str, opts: &[&str], want: i32) {
    for (key, value) in [("k", "v"), ("n", "5")] {
        let o = memkit(server, &[opts, &["set", key, value]].concat(), None);
        assert_eq!(o.status.code(), Some(want), "set {key}: {}", stderr(&o));
    }
    for sub in SUBCOMMANDS {
        let args = [opts, sub].concat();
        let o = memkit(server, &args, None);
        assert_eq!(o.status.code(), Some(want), "{args:?}: {}", stderr(&o));
        if want == 0 && sub[0] == "get" {
            assert!(!stdout(&o).is_empty(), "{args:?}");
        }
    }
    let o = memkit(server, &[opts, &["add", "fresh", "1"]].concat(), None);
    assert_eq!(o.status.code(), Some(want), "add: {}", stderr(&o));
    let o = memkit(server, &[opts, &["delete", "fresh"]].concat(), None);
    assert_eq!(o.status.code(), Some(want), "delete: {}", stderr(&o));
    let o = memkit(server, &[opts, &["flush"]].concat(), None);
    assert_eq!(o.status.code(), Some(want), "flush: {}", stderr(&o));
}

#[test]
fn tls_on_every_subcommand() {
    let pki = TestPki::generate();
    let m = Memkitd::start(&["-Z", "-o", &pki.server_opts(0)]);
    let s = m.addr();
    let ca = pki.path("ca.pem");
    assert_eq!(
        memkit(&s, &["--tls-ca", &ca, "set", "k", "v"], None)
            .status
            .code(),
        Some(0)
    );
    every_subcommand(&s, &["--tls", "--tls-ca", &ca], 0);
    every_subcommand(&s, &["--tls-insecure"], 0);
    // By name: the certificate lists localhost.
    let by_name = format!("localhost:{}", m.port);
    every_subcommand(&by_name, &["--tls-ca", &ca], 0);
    // Plain text to a TLS port, and a CA that did not sign the server.
    every_subcommand(&s, &[], 2);
    let other = TestPki::generate();
    every_subcommand(&s, &["--tls-ca", &other.path("ca.pem")], 2);
}

#[test]
fn tls_client_certificates() {
    let pki = TestPki::generate();
    let m = Memkitd::start(&["-Z", "-o", &pki.server_opts(2)]);
    let s = m.addr();
    let ca = pki.path("ca.pem");
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    assert_eq!(
        memkit(
            &s,
            &[
                "--tls-ca",
                &ca,
                "--tls-cert",
                &cert,
                "--tls-key",
                &key,
                "set",
                "k",
                "v"
            ],
            None
        )
        .status
        .code(),
        Some(0)
    );
    every_subcommand(
        &s,
        &["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key],
        0,
    );
    every_subcommand(&s, &["--tls-ca", &ca], 2);
    let (rc, rk) = (pki.path("rogue.pem"), pki.path("rogue.key"));
    let o = memkit(
        &s,
        &["--tls-ca", &ca, "--tls-cert", &rc, "--tls-key", &rk, "ping"],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
}

fn users(pki: &TestPki) -> String {
    let path = pki.dir().join("users");
    std::fs::write(&path, "alice:secret\nbob:hunter2\n").unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn authentication_on_every_subcommand() {
    let pki = TestPki::generate();
    let m = Memkitd::start(&["-Y", &users(&pki)]);
    let s = m.addr();
    let auth = ["--username", "bob", "--password", "hunter2"];
    assert_eq!(
        memkit(&s, &[&auth[..], &["set", "k", "v"]].concat(), None)
            .status
            .code(),
        Some(0)
    );
    every_subcommand(&s, &auth, 0);
    every_subcommand(&s, &[], 2);
    every_subcommand(&s, &["--username", "bob", "--password", "wrong"], 2);
    // The password from the environment, kept out of argv.
    let o = memkit(&s, &[&auth[..], &["set", "k", "v"]].concat(), None);
    assert_eq!(o.status.code(), Some(0));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_memkit"))
        .args(["--servers", &s, "--username", "alice", "get", "k"])
        .env("MEMKIT_PASSWORD", "secret")
        .env_remove("MEMCACHED_SERVERS")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn tls_and_authentication_together() {
    let pki = TestPki::generate();
    let m = Memkitd::start(&["-Z", "-o", &pki.server_opts(0), "-Y", &users(&pki)]);
    let s = m.addr();
    let ca = pki.path("ca.pem");
    let both = [
        "--tls-ca",
        &ca,
        "--username",
        "alice",
        "--password",
        "secret",
    ];
    assert_eq!(
        memkit(&s, &[&both[..], &["set", "k", "v"]].concat(), None)
            .status
            .code(),
        Some(0)
    );
    every_subcommand(&s, &both, 0);
    every_subcommand(&s, &["--tls-ca", &ca], 2);
    every_subcommand(&s, &["--username", "alice", "--password", "secret"], 2);
}
