//! The page on the metrics address, over HTTP: every response is locked down (the
//! Content-Security-Policy and its companions), the page has no inline code, nothing writes;
//! the key routes exist only with `--dashboard-keys`, answer only local names without a
//! login and only the server's credentials with `-Y` or `-S`; the key browser pages through
//! a prefix; the size classes sum to `stats bytes` and put the items where real memcached's
//! `stats slabs` puts them. What a person sees in a browser: `tests/page_browser.rs`.

#[path = "support/http.rs"]
mod http;

use std::collections::BTreeSet;

use http::{Dash, get, memcache, raw, start, stat, stats};
use memkit_testkit::tempdir;
use memkit_testkit::wire::Until;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
form-action 'none'";

fn set(d: &Dash, key: &str, flags: u32, ttl: u32, len: usize) {
    let req = format!("set {key} {flags} {ttl} {len}\r\n{}\r\n", "v".repeat(len));
    let got = memcache(&d.server).ask(req.as_bytes(), Until::LINE);
    assert_eq!(got, "STORED\r\n");
}

#[test]
fn every_response_is_locked_down_and_nothing_writes() {
    let d = start(&["--dashboard-keys"]);
    let routes = [
        ("/", 200, "text/html; charset=utf-8"),
        ("/assets/page.js", 200, "text/javascript; charset=utf-8"),
        ("/assets/page.css", 200, "text/css; charset=utf-8"),
        (
            "/assets/uPlot.iife.min.js",
            200,
            "text/javascript; charset=utf-8",
        ),
        ("/assets/uPlot.min.css", 200, "text/css; charset=utf-8"),
        (
            "/assets/LICENSE-uPlot.txt",
            200,
            "text/plain; charset=utf-8",
        ),
        ("/api/now", 200, "application/json"),
        ("/api/classes", 200, "application/json"),
        ("/api/hot", 200, "application/json"),
        ("/api/keys?prefix=x", 200, "application/json"),
        ("/metrics", 200, memkit_server::metrics::CONTENT_TYPE),
        ("/nope", 404, "text/plain"),
    ];
    let mut replies = Vec::new();
    for (path, status, ctype) in routes {
        let r = get(d.port, path, "");
        assert_eq!(
            (r.status, r.header("content-type")),
            (status, Some(ctype)),
            "{path}"
        );
        replies.push(r);
    }
    for method in ["POST", "PUT", "DELETE"] {
        let r = raw(
            d.port,
            &format!("{method} /api/keys HTTP/1.1\r\nHost: x\r\n\r\n"),
        );
        assert_eq!(r.status, 405, "{method}");
        replies.push(r);
    }
    replies.push(raw(
        d.port,
        &format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20000)),
    ));
    assert_eq!(replies.last().unwrap().status, 431);
    for r in &replies {
        assert_eq!(r.header("content-security-policy"), Some(CSP), "{}", r.head);
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
    }
    // No inline code or style for the policy to refuse: scripts and styles come from files.
    let html = &replies[0].body;
    assert_eq!(html.matches("<script").count(), 2, "{html}");
    assert_eq!(html.matches("<script src=\"/assets/").count(), 2);
    for inline in [
        "<style",
        " style=",
        " onclick=",
        " onload=",
        "javascript:",
        "<form",
    ] {
        assert!(!html.contains(inline), "{inline} in the page");
    }
    let js = &replies[1].body;
    for risky in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "eval(",
        "document.write",
    ] {
        assert!(!js.contains(risky), "{risky} in page.js");
    }
    // Every fetch of the page is a GET.
    assert!(!js.contains("method:"), "page.js sets a method");
}

#[test]
fn key_routes_exist_only_with_dashboard_keys() {
    let d = start(&[]);
    set(&d, "secret:1", 0, 0, 10);
    for path in ["/api/keys?prefix=secret", "/api/hot", "/api/keys"] {
        let r = get(d.port, path, "");
        assert_eq!(r.status, 404, "{path}: {}", r.body);
        assert!(!r.body.contains("secret"));
    }
    let now = get(d.port, "/api/now", "").json();
    assert_eq!((&now["keys"], &now["hot"]), (&false.into(), &false.into()));
    // Nobody asked for hot keys: the fetches are not sampled.
    memcache(&d.server).ask(b"get secret:1\r\n", Until::END);
    assert!(!get(d.port, "/api/now", "").body.contains("secret"));
}

/// `-X` (no dumps) keeps the key browser off and `-W` (no `watch`) the hot keys, whatever
/// `--dashboard-keys` says.
#[test]
fn x_and_w_keep_their_meaning_for_the_page() {
    let d = start(&["--dashboard-keys", "-X"]);
    assert_eq!(get(d.port, "/api/keys?prefix=", "").status, 404);
    assert_eq!(get(d.port, "/api/hot", "").status, 200);
    let now = get(d.port, "/api/now", "").json();
    assert_eq!((&now["keys"], &now["hot"]), (&false.into(), &true.into()));
    let d = start(&["--dashboard-keys", "-W"]);
    assert_eq!(get(d.port, "/api/keys?prefix=", "").status, 200);
    assert_eq!(get(d.port, "/api/hot", "").status, 404);
    let now = get(d.port, "/api/now", "").json();
    assert_eq!((&now["keys"], &now["hot"]), (&true.into(), &false.into()));
}

/// Without a login, a name other than an address or `localhost` is refused: a page of
/// another site that rebinds its name to 127.0.0.1 reads no keys.
#[test]
fn without_a_login_keys_are_shown_to_local_names_only() {
    let d = start(&["--dashboard-keys"]);
    set(&d, "k:1", 0, 0, 1);
    let ask = |host: &str| {
        raw(
            d.port,
            &format!("GET /api/keys?prefix=k HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        )
    };
    for host in ["127.0.0.1", "localhost:80", "[::1]:9150"] {
        let r = ask(host);
        assert_eq!(r.status, 200, "{host}");
        assert!(r.body.contains("k:1"));
    }
    for host in ["rebound.example:9150", "127.0.0.1.nip.io"] {
        let r = ask(host);
        assert_eq!(r.status, 403, "{host}");
        assert!(!r.body.contains("k:1"));
    }
    assert_eq!(get(d.port, "/api/now", "").json()["login"], false);
}

fn basic(user: &str, pass: &str) -> String {
    let mut b64 = Vec::new();
    memkit_protocol::base64::encode_into(format!("{user}:{pass}").as_bytes(), &mut b64);
    format!(
        "Authorization: Basic {}\r\n",
        String::from_utf8(b64).unwrap()
    )
}

/// Polls `path` with `creds` until it is answered 200 (a failed login's backoff may refuse
/// it for up to 100 ms first); fails after 50 tries.
fn admitted(d: &Dash, path: &str, creds: &str) -> http::Reply {
    for _ in 0..50 {
        let r = get(d.port, path, creds);
        if r.status == 200 {
            return r;
        }
        assert_eq!(r.status, 401, "{}", r.body);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{path} refused {creds:?}");
}

fn refused_without_and_with_a_wrong_password(d: &Dash, user: &str) {
    for path in ["/api/keys?prefix=k", "/api/hot"] {
        let r = get(d.port, path, "");
        assert_eq!(r.status, 401, "{path}");
        assert_eq!(
            r.header("www-authenticate"),
            Some("Basic realm=\"memkitd\", charset=\"UTF-8\"")
        );
        assert!(!r.body.contains("k:1"));
        let r = get(d.port, path, &basic(user, "wrong"));
        assert_eq!(r.status, 401, "{path}");
        assert!(!r.body.contains("k:1"));
    }
    // The page itself and the figures need no login.
    assert_eq!(get(d.port, "/", "").status, 200);
    assert_eq!(get(d.port, "/api/now", "").json()["login"], true);
}

#[test]
fn with_y_keys_need_the_auth_files_credentials() {
    let dir = tempdir("page-auth");
    let file = dir.path().join("auth");
    std::fs::write(&file, "ops:s3cret\n").unwrap();
    let d = start(&["--dashboard-keys", "-Y", file.to_str().unwrap()]);
    let mut c = memcache(&d.server);
    c.expect(b"set x 0 0 10\r\nops s3cret\r\n", b"STORED\r\n");
    c.expect(b"set k:1 0 0 1\r\nv\r\n", b"STORED\r\n");
    refused_without_and_with_a_wrong_password(&d, "ops");
    let r = admitted(&d, "/api/keys?prefix=k", &basic("ops", "s3cret"));
    assert!(r.body.contains("\"k:1\""), "{}", r.body);
    // The page's logins are no memcached commands: auth_cmds counts the protocol's only.
    assert_eq!(stat(&stats_logged_in(&d), "auth_cmds"), 2);
}

fn stats_logged_in(d: &Dash) -> Vec<(String, String)> {
    let mut c = memcache(&d.server);
    c.expect(b"set x 0 0 10\r\nops s3cret\r\n", b"STORED\r\n");
    let text = c.ask(b"stats\r\n", Until::END);
    text.lines()
        .filter_map(|l| l.strip_prefix("STAT ")?.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn with_sasl_keys_need_the_password_files_credentials() {
    let dir = tempdir("page-sasl");
    let file = dir.path().join("pwdb");
    std::fs::write(&file, "ops:pa55\n").unwrap();
    let d = start(&[
        "--dashboard-keys",
        "-S",
        "--sasl-pwdb",
        file.to_str().unwrap(),
    ]);
    refused_without_and_with_a_wrong_password(&d, "ops");
    let r = admitted(&d, "/api/hot", &basic("ops", "pa55"));
    assert_eq!(r.json()["sample"], 16);
}

/// 250 keys under a prefix among 2000 others come back over "more" pages, each once, with
/// their metadata.
#[test]
fn the_key_browser_pages_through_a_prefix() {
    let d = start(&["--dashboard-keys"]);
    let mut c = memcache(&d.server);
    let mut req = Vec::new();
    for i in 0..2000 {
        req.extend_from_slice(format!("set other:{i} 0 0 3 noreply\r\nabc\r\n").as_bytes());
    }
    for i in 0..250 {
        req.extend_from_slice(format!("set many:{i} {i} 3600 5 noreply\r\nhello\r\n").as_bytes());
    }
    req.extend_from_slice(b"mn\r\n");
    c.send(&req);
    c.read(Until::End(b"MN\r\n"));
    let (mut seen, mut more, mut pages) = (BTreeSet::new(), None::<u64>, 0);
    loop {
        let path = match more {
            Some(m) => format!("/api/keys?prefix=many%3A&more={m}"),
            None => "/api/keys?prefix=many%3A".into(),
        };
        let r = get(d.port, &path, "").json();
        pages += 1;
        for k in r["keys"].as_array().unwrap() {
            let key = k["key"].as_str().unwrap().to_string();
            let i: u64 = key.strip_prefix("many:").unwrap().parse().unwrap();
            assert_eq!(k["flags"], i, "{k}");
            assert_eq!(k["size"], 5);
            let ttl = k["ttl"].as_i64().unwrap();
            assert!((3590..=3600).contains(&ttl), "{ttl}");
            assert!(seen.insert(key), "listed twice");
        }
        assert!(r["keys"].as_array().unwrap().len() <= 100);
        match r["more"].as_u64() {
            Some(m) => more = Some(m),
            None => break,
        }
        assert!(pages < 50, "no end");
    }
    assert_eq!(seen.len(), 250);
    assert!(pages >= 3, "{pages} pages");
    // A cursor is for its own prefix only.
    let r = get(d.port, "/api/keys?prefix=other&more=1", "").json();
    assert!(r["error"].is_string(), "{r}");
}

/// Items of known sizes: memkitd's classes sum to `stats bytes`, and memcached's columns
/// put as many items in each chunk size as real memcached's `stats slabs` does.
#[test]
fn size_classes_sum_to_bytes_and_match_memcached() {
    let d = start(&[]);
    // Keys of 6 bytes: a 31-byte value takes memcached's whole 96-byte chunk with flags 0,
    // and spills into the 120-byte class with flags (4 bytes more).
    let items: Vec<(String, u32, usize)> = (0..600)
        .map(|i| {
            (
                format!("c:{i:04}"),
                (i / 6 % 2) as u32,
                [5, 31, 100, 700, 3000, 20000][i % 6],
            )
        })
        .collect();
    let mut req = Vec::new();
    for (k, f, n) in &items {
        req.extend_from_slice(format!("set {k} {f} 0 {n} noreply\r\n").as_bytes());
        req.extend_from_slice(&vec![b'x'; *n]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"mn\r\n");
    let mut c = memcache(&d.server);
    c.send(&req);
    c.read(Until::End(b"MN\r\n"));
    let c = get(d.port, "/api/classes", "").json();
    let st = stats(&d.server);
    assert_eq!(c["exact"], true);
    assert_eq!(c["sampled"], 600);
    let rows = c["classes"].as_array().unwrap();
    let sum = |f: &str| rows.iter().map(|r| r[f].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("bytes"), stat(&st, "bytes"));
    assert_eq!(c["bytes"].as_u64(), Some(stat(&st, "bytes")));
    assert_eq!(sum("items"), 600);
    assert_eq!(sum("mc_items"), 600);
    assert_eq!(c["mc_bytes"].as_u64(), Some(sum("mc_bytes")));

    let Some(mc) = memkit_testkit::memcached::spawn(&[]) else {
        return;
    };
    let mut w = memkit_testkit::wire::BlockingWire::tcp(mc.addr()).unwrap();
    w.send(&req);
    w.read(Until::End(b"MN\r\n"));
    let slabs = w.ask(b"stats slabs\r\n", Until::END);
    let field = |id: &str, name: &str| -> u64 {
        let p = format!("STAT {id}:{name} ");
        slabs
            .lines()
            .find_map(|l| l.strip_prefix(&p)?.parse().ok())
            .unwrap()
    };
    let ids: BTreeSet<&str> = slabs
        .lines()
        .filter_map(|l| l.strip_prefix("STAT ")?.split_once(':').map(|(id, _)| id))
        .collect();
    let mut theirs = Vec::new();
    for id in ids {
        theirs.push((field(id, "chunk_size"), field(id, "used_chunks")));
    }
    theirs.sort();
    let ours: Vec<(u64, u64)> = rows
        .iter()
        .filter(|r| r["mc_items"].as_u64() > Some(0))
        .map(|r| {
            (
                r["chunk"].as_u64().unwrap(),
                r["mc_items"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(&ours[..2], &[(96, 150), (120, 50)]);
    assert_eq!(
        ours, theirs,
        "ours (chunk, items) vs memcached's stats slabs"
    );
}
