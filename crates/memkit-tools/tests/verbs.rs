//! The `memkit` verbs against memkitd: every store mode, `cas`, `touch`, `gat`, `version`,
//! `verbosity`, `get --format value|line|json`, and the exit statuses (0 found, 1 missing or
//! not applied, 2 usage or network).

mod common;

use common::{Memkitd, dead_addr, memkit, stderr, stdout};
use serde_json::Value;

fn code(o: &std::process::Output) -> Option<i32> {
    o.status.code()
}

fn json_get(s: &str, key: &str) -> Value {
    let o = memkit(s, &["get", "-f", "json", key], None);
    let s = stdout(&o);
    serde_json::from_str(s.trim()).expect(&s)
}

#[test]
fn get_formats() {
    let m = Memkitd::start(&[]);
    let s = m.addr();
    let o = memkit(
        &s,
        &["set", "k", "hello", "--flags", "5", "--exptime", "100"],
        None,
    );
    assert_eq!(code(&o), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&memkit(&s, &["get", "k"], None)), "hello\n");

    let j = json_get(&s, "k");
    assert_eq!(j["key"], "k");
    assert_eq!(j["found"], true);
    assert_eq!(j["flags"], 5);
    assert_eq!(j["value"], "hello");
    let cas = j["cas"].as_u64().unwrap();
    assert!(cas > 0, "{j}");
    let ttl = j["ttl"].as_i64().unwrap();
    assert!((95..=100).contains(&ttl), "{j}");

    let line = stdout(&memkit(&s, &["get", "--format", "line", "k"], None));
    let f: Vec<&str> = line.trim_end().split(' ').collect();
    assert_eq!(f.len(), 5, "{line}");
    assert_eq!(
        (f[0], f[1], f[2], f[4]),
        ("k", "5", &*cas.to_string(), "hello")
    );
    assert!((95..=100).contains(&f[3].parse::<i64>().unwrap()), "{line}");

    // No expiry: TTL -1. Bytes that are not UTF-8: base64.
    let o = memkit(&s, &["set", "bin"], Some(&[0xff, 0x00, b'a']));
    assert_eq!(code(&o), Some(0));
    let j = json_get(&s, "bin");
    assert_eq!(j["ttl"], -1);
    assert_eq!(j["value_base64"], "/wBh");
    assert!(j.get("value").is_none(), "{j}");

    // A miss: found false, exit 1; the hits are still printed.
    let o = memkit(&s, &["get", "-f", "json", "k", "nope"], None);
    assert_eq!(code(&o), Some(1));
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1], serde_json::json!({"key": "nope", "found": false}));
    assert!(stderr(&o).contains("nope: not found"), "{}", stderr(&o));
}

#[test]
fn store_modes_cas_touch_gat() {
    let m = Memkitd::start(&[]);
    let s = m.addr();
    let run = |args: &[&str]| code(&memkit(&s, args, None));

    assert_eq!(run(&["add", "a", "1"]), Some(0));
    assert_eq!(run(&["add", "a", "2"]), Some(1), "add on a present key");
    assert_eq!(run(&["replace", "missing", "x"]), Some(1));
    assert_eq!(run(&["replace", "a", "r", "--flags", "9"]), Some(0));
    assert_eq!(run(&["append", "missing", "x"]), Some(1));
    assert_eq!(run(&["prepend", "missing", "x"]), Some(1));
    assert_eq!(run(&["append", "a", ">"]), Some(0));
    assert_eq!(code(&memkit(&s, &["prepend", "a"], Some(b"<"))), Some(0));
    let j = json_get(&s, "a");
    assert_eq!(
        (j["value"].as_str(), j["flags"].as_u64()),
        (Some("<r>"), Some(9))
    );

    // cas: the token from get; a stale one is refused; a missing key is a miss.
    let cas = j["cas"].as_u64().unwrap().to_string();
    let stale = (j["cas"].as_u64().unwrap() + 1000).to_string();
    let o = memkit(&s, &["cas", "a", &stale, "no"], None);
    assert_eq!(code(&o), Some(1));
    assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
    assert_eq!(run(&["cas", "a", &cas, "yes", "--flags", "3"]), Some(0));
    assert_eq!(run(&["cas", "a", &cas, "again"]), Some(1), "token used up");
    assert_eq!(run(&["cas", "gone", "1", "x"]), Some(1));
    assert_eq!(json_get(&s, "a")["value"], "yes");

    // touch and gat set the TTL.
    assert_eq!(run(&["touch", "missing", "10"]), Some(1));
    assert_eq!(run(&["touch", "a", "1000"]), Some(0));
    let ttl = json_get(&s, "a")["ttl"].as_i64().unwrap();
    assert!((995..=1000).contains(&ttl), "{ttl}");
    let o = memkit(&s, &["gat", "500", "a", "-f", "json"], None);
    assert_eq!(code(&o), Some(0));
    let j: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(j["value"], "yes");
    let ttl = json_get(&s, "a")["ttl"].as_i64().unwrap();
    assert!((495..=500).contains(&ttl), "gat did not set the TTL: {ttl}");
    assert_eq!(run(&["gat", "5", "missing"]), Some(1));

    // counters
    assert_eq!(run(&["incr", "missing"]), Some(1));
    assert_eq!(run(&["set", "n", "1"]), Some(0));
    assert_eq!(stdout(&memkit(&s, &["incr", "n", "41"], None)), "42\n");
    assert_eq!(run(&["delete", "n", "n"]), Some(1), "second delete misses");
}

#[test]
fn version_verbosity_and_exit_statuses() {
    let m = Memkitd::start(&[]);
    let s = m.addr();
    let o = memkit(&s, &["version"], None);
    assert_eq!(code(&o), Some(0));
    let v = stdout(&o);
    assert!(
        v.starts_with(&format!("{s} ")) && v.trim_end().len() > s.len() + 1,
        "{v}"
    );
    assert_eq!(code(&memkit(&s, &["verbosity", "1"], None)), Some(0));
    assert_eq!(code(&memkit(&s, &["verbosity", "0"], None)), Some(0));

    // Usage: clap's errors, a bad key, bad TLS options, missing credentials parts.
    for bad in [
        &["get"][..],
        &["frobnicate"],
        &["set", "a key", "v"],
        &["--tls", "ping"],
        &["--tls-cert", "x.pem", "ping"],
        &["--username", "u", "ping"],
        &["-d", "php-consistent:md5", "ping"],
        &["--tls-ca", "/nonexistent/ca.pem", "ping"],
    ] {
        let o = memkit(&s, bad, None);
        assert_eq!(code(&o), Some(2), "{bad:?}: {}", stderr(&o));
    }
    // Network: nothing listening.
    let dead = dead_addr();
    for args in [
        &["get", "k"][..],
        &["set", "k", "v"],
        &["version"],
        &["verbosity", "1"],
        &["stats"],
        &["dump"],
        &["watch", "--duration", "1"],
        &["top", "-b", "-n", "1"],
    ] {
        let o = memkit(&dead, args, None);
        assert_eq!(code(&o), Some(2), "{args:?}: {}", stderr(&o));
    }
    // One server of two down: what the other holds is still printed, status 2.
    let pool = format!("{s},{dead}");
    let o = memkit(&pool, &["version"], None);
    assert_eq!(code(&o), Some(2));
    assert!(stdout(&o).starts_with(&s), "{}", stdout(&o));
}
