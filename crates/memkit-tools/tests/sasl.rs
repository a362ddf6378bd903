//! `memkit --binary` against memkitd `-S` (SASL PLAIN, users in a `MEMCACHED_SASL_PWDB`-format
//! file), against real memcached 1.6.18 `-S` (users in a Cyrus sasldb written by
//! `saslpasswd2`; skipped with a note when memcached, `saslpasswd2` or the PLAIN plugin is
//! missing, a failure under CI), and against both started plainly: with the right password
//! every subcommand that has a binary form works; a wrong password, no credentials, or
//! text to a binary-only server exits 2 with a clear message; `dump`, `watch` and
//! `verbosity` are refused with `--binary` before any server is contacted.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Memkitd, dead_addr, memkit, stderr, stdout};
use memkit_testkit::tempdir;

const USER: &str = "alice";
const PASSWORD: &str = "s3cret-pw";

/// Every subcommand with a binary form, with arguments that succeed on a server holding
/// key `k` (and counter `n`).
const BINARY_SUBCOMMANDS: &[&[&str]] = &[
    &["get", "k"],
    &["get", "--format", "json", "k"],
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
    &["stats"],
    &["stats", "items"],
    &["stats", "--format", "table"],
    &["stats", "--format", "prometheus"],
    &["top", "-b", "-n", "1"],
    &["--which", "k", "get", "k"],
];

/// Runs every binary subcommand with `opts` and expects `want` (first storing `k` and `n`,
/// which must work exactly when `want` is 0); returns the stderr of the failures. `VERSION`
/// is served before authentication (memcached's rule), so `ping` and `version` succeed
/// without credentials: `version_anyway`.
fn every_subcommand(server: &str, opts: &[&str], want: i32, version_anyway: bool) -> String {
    let mut errors = String::new();
    let mut check = |args: Vec<&str>| {
        let o = memkit(server, &args, None);
        let version = args.iter().any(|a| *a == "ping" || *a == "version");
        let want = if version && version_anyway { 0 } else { want };
        assert_eq!(o.status.code(), Some(want), "{args:?}: {}", stderr(&o));
        if want == 0 && args.contains(&"get") {
            assert!(!stdout(&o).is_empty(), "{args:?}");
        }
        errors.push_str(&stderr(&o));
    };
    for (key, value) in [("k", "v"), ("n", "5")] {
        check([opts, &["set", key, value]].concat());
    }
    for sub in BINARY_SUBCOMMANDS {
        check([opts, sub].concat());
    }
    check([opts, &["add", "fresh", "1"]].concat());
    check([opts, &["delete", "fresh"]].concat());
    check([opts, &["flush"]].concat());
    errors
}

/// The key verbs' outcomes over binary: what is printed, and 1 for a miss or a store that
/// did not apply.
fn verbs_and_statuses(server: &str, opts: &[&str]) {
    let run = |args: &[&str]| memkit(server, &[opts, args].concat(), None);
    let code = |args: &[&str]| run(args).status.code();
    assert_eq!(code(&["set", "k", "hello", "--flags", "5"]), Some(0));
    assert_eq!(stdout(&run(&["get", "k"])), "hello\n");
    // A binary reply carries no TTL: `-` in the line format, absent from JSON.
    let line = stdout(&run(&["get", "--format", "line", "k"]));
    let f: Vec<&str> = line.trim_end().split(' ').collect();
    assert_eq!((f[0], f[1], f[3], f[4]), ("k", "5", "-", "hello"), "{line}");
    let cas = f[2];
    assert_ne!(cas, "0", "{line}");
    let json: serde_json::Value =
        serde_json::from_str(stdout(&run(&["get", "-f", "json", "k"])).trim()).unwrap();
    assert_eq!(
        (&json["flags"], &json["value"]),
        (&5.into(), &"hello".into())
    );
    assert!(json.get("ttl").is_none(), "{json}");
    assert_eq!(code(&["cas", "k", "1", "x"]), Some(1), "CAS mismatch");
    assert_eq!(code(&["cas", "k", cas, "x"]), Some(0));
    assert_eq!(code(&["add", "k", "y"]), Some(1), "add on a present key");
    assert_eq!(code(&["replace", "nope", "y"]), Some(1));
    assert_eq!(code(&["append", "nope", "y"]), Some(1));
    assert_eq!(code(&["touch", "nope", "10"]), Some(1));
    assert_eq!(code(&["get", "k", "nope"]), Some(1));
    assert_eq!(code(&["set", "n", "41"]), Some(0));
    assert_eq!(stdout(&run(&["incr", "n", "1"])), "42\n");
    assert_eq!(stdout(&run(&["decr", "n", "50"])), "0\n");
    assert_eq!(code(&["incr", "nope"]), Some(1));
    assert_eq!(code(&["delete", "k"]), Some(0));
    assert_eq!(code(&["delete", "k"]), Some(1));
    // A negative expiry cannot be said in binary: a usage error, not a miss.
    let o = run(&["touch", "n", "--", "-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("binary"), "{}", stderr(&o));
}

/// `dump`, `watch` and `verbosity` with `--binary`: refused before connecting.
fn refused_without_a_binary_form(server: &str, opts: &[&str]) {
    for sub in [
        &["dump"][..],
        &["watch", "--duration", "0.3"],
        &["verbosity", "1"],
    ] {
        let o = memkit(server, &[opts, sub].concat(), None);
        assert_eq!(o.status.code(), Some(2), "{sub:?}");
        let err = stderr(&o);
        assert!(
            err.contains(&format!("{} cannot run with --binary", sub[0])),
            "{sub:?}: {err}"
        );
    }
}

fn pwdb(dir: &Path) -> String {
    let path = dir.join("pwdb");
    std::fs::write(&path, format!("{USER}:{PASSWORD}\nbob:hunter2:extra\r\n")).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn memkitd_sasl() {
    let dir = tempdir("tools-sasl");
    let m = Memkitd::start(&["-S", "--sasl-pwdb", &pwdb(dir.path())]);
    let s = m.addr();
    let auth = ["--binary", "--username", USER, "--password", PASSWORD];
    every_subcommand(&s, &auth, 0, false);
    verbs_and_statuses(&s, &auth);
    refused_without_a_binary_form(&s, &auth);
    // Wrong password: every subcommand exits 2 and says why.
    let errors = every_subcommand(
        &s,
        &["--binary", "--username", USER, "--password", "no"],
        2,
        false,
    );
    assert!(
        errors.contains("SASL authentication failed for user \"alice\""),
        "{errors}"
    );
    // No credentials: the server refuses every command until a login.
    let errors = every_subcommand(&s, &["--binary"], 2, true);
    assert!(errors.contains("SASL authentication"), "{errors}");
    // Text to a binary-only server (an ASCII login is longer than a binary header, so the
    // server closes at once).
    let o = memkit(
        &s,
        &["--username", USER, "--password", PASSWORD, "get", "k"],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The credentials from the environment, kept out of argv; bob's pwdb line has extra
    // fields and a CRLF.
    for (user, password) in [(USER, PASSWORD), ("bob", "hunter2")] {
        let o = Command::new(env!("CARGO_BIN_EXE_memkit"))
            .args(["--servers", &s, "--binary", "set", "e", "1"])
            .env("MEMKIT_USERNAME", user)
            .env("MEMKIT_PASSWORD", password)
            .env_remove("MEMCACHED_SERVERS")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

#[test]
fn binary_without_sasl() {
    let m = Memkitd::start(&[]);
    let s = m.addr();
    every_subcommand(&s, &["--binary"], 0, false);
    verbs_and_statuses(&s, &["--binary"]);
    // Nothing is contacted: a dead address still gets the refusal, not a network error.
    refused_without_a_binary_form(&dead_addr(), &["--binary"]);
    // Without --binary the same subcommands run as before.
    let o = memkit(&s, &["verbosity", "1"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn real_memcached_sasl() {
    // Through the harness: a sasldb in `dir` for Debian's memcached (no pwdb support).
    let dir = tempdir("tools-sasl");
    let Some(m) = memkit_testkit::memcached::spawn_sasl(dir.path(), &[(USER, PASSWORD)]) else {
        return;
    };
    let s = m.addr();
    let auth = ["--binary", "--username", USER, "--password", PASSWORD];
    every_subcommand(&s, &auth, 0, false);
    verbs_and_statuses(&s, &auth);
    let errors = every_subcommand(
        &s,
        &["--binary", "--username", USER, "--password", "no"],
        2,
        false,
    );
    assert!(errors.contains("SASL authentication failed"), "{errors}");
    let errors = every_subcommand(&s, &["--binary"], 2, true);
    assert!(errors.contains("SASL authentication"), "{errors}");
    drop(m);
}
