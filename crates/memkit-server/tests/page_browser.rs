//! The page in a real browser: Debian's `chromium`, headless, loads it from a memkitd that
//! has had traffic, runs its scripts (`--virtual-time-budget`: its timers run ahead, its
//! fetches are waited for) and hands back the DOM it built. What a person sees is checked
//! there: the charts are drawn, the hit ratio is `stats`' own, the size-class bars sum to
//! `stats bytes`, a key set through the protocol is found by its prefix, the hottest key is
//! the one fetched most, and without `--dashboard-keys` nothing of the keys is shown.
//!
//! chromium missing fails the test under CI (`scripts/install-test-deps.sh` installs it)
//! and skips with a note elsewhere ([`memkit_testkit::interop`]).

#[path = "support/http.rs"]
mod http;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use http::{get, memcache, start, stat, stats};
use memkit_testkit::interop::skip;
use memkit_testkit::tempdir;
use memkit_testkit::wire::Until;

/// Whether chromium runs here; when not, [`skip`] has failed the test or noted the skip.
fn have_chromium() -> bool {
    let ok = Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip("chromium (Debian package chromium)");
    }
    ok
}

/// The DOM chromium builds for `url`, once `ready` holds of it (the page is loaded afresh,
/// in a fresh profile, up to 20 times).
fn render(url: &str, ready: impl Fn(&str) -> bool) -> String {
    let mut dom = String::new();
    for _ in 0..20 {
        let profile = tempdir("page-chromium");
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--virtual-time-budget=10000",
                "--dump-dom",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let out = wait_or_kill(&mut child, Duration::from_secs(120));
        dom = String::from_utf8_lossy(&out).into_owned();
        if ready(&dom) {
            return dom;
        }
    }
    panic!("the page at {url} never got ready; last DOM:\n{dom}");
}

/// The child's standard output once it exits; killed (that child only) past `within`.
fn wait_or_kill(child: &mut std::process::Child, within: Duration) -> Vec<u8> {
    use std::io::Read;
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium still running after {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The attributes of each `<tag ...>` in `dom`.
fn elements(dom: &str, tag: &str) -> Vec<HashMap<String, String>> {
    let open = format!("<{tag}");
    let mut out = Vec::new();
    for (at, _) in dom.match_indices(&open) {
        let rest = &dom[at + open.len()..];
        if !rest.starts_with([' ', '>']) {
            continue;
        }
        let end = rest.find('>').unwrap_or(rest.len());
        out.push(attributes(&rest[..end]));
    }
    out
}

/// `a="1" b c="x"` as a map (entities of the few characters the test's keys could hold).
fn attributes(mut s: &str) -> HashMap<String, String> {
    let mut m = HashMap::new();
    loop {
        s = s.trim_start();
        let Some(eq) = s.find(['=', ' ']) else {
            if !s.is_empty() {
                m.insert(s.to_string(), String::new());
            }
            return m;
        };
        let name = s[..eq].to_string();
        if &s[eq..eq + 1] == " " {
            m.insert(name, String::new());
            s = &s[eq..];
            continue;
        }
        let v = &s[eq + 2..];
        let close = v.find('"').unwrap_or(v.len());
        let value = v[..close]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        m.insert(name, value);
        s = v.get(close + 1..).unwrap_or("");
    }
}

/// The attributes of the element with `id`.
fn by_id(dom: &str, tag: &str, id: &str) -> HashMap<String, String> {
    elements(dom, tag)
        .into_iter()
        .find(|a| a.get("id").map(String::as_str) == Some(id))
        .unwrap_or_else(|| panic!("no <{tag} id={id}> in\n{dom}"))
}

fn body(dom: &str) -> HashMap<String, String> {
    elements(dom, "body").into_iter().next().unwrap()
}

fn traffic(d: &http::Dash) {
    let mut c = memcache(&d.server);
    let mut req = Vec::new();
    for i in 0..400 {
        let n = [3, 60, 250, 1200, 9000][i % 5];
        req.extend_from_slice(format!("set page:{i} {} 0 {n} noreply\r\n", i % 3).as_bytes());
        req.extend_from_slice(&vec![b'v'; n]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"set browse:me:1 7 3600 123\r\n");
    req.extend_from_slice(&[b'b'; 123]);
    req.extend_from_slice(b"\r\n");
    c.send(&req);
    c.read(Until::Lines(1));
    for i in 0..700 {
        c.send(format!("get page:{}\r\n", i % 530).as_bytes());
        c.read(Until::END);
    }
}

/// With traffic behind it, the page shows `stats`' hit ratio, size-class bars that sum to
/// `stats bytes`, its charts, and the key set through the protocol under its prefix.
#[test]
fn the_page_shows_what_stats_says() {
    if !have_chromium() {
        return;
    }
    let d = start(&["--dashboard-keys"]);
    traffic(&d);
    let st = stats(&d.server);
    let (hits, misses) = (stat(&st, "get_hits"), stat(&st, "get_misses"));
    assert!(hits > 0 && misses > 0);
    let url = format!("http://127.0.0.1:{}/?prefix=browse%3Ame", d.port);
    let dom = render(&url, |dom| {
        let b = body(dom);
        ["data-now", "data-classes", "data-keys"]
            .iter()
            .all(|k| b.contains_key(*k))
    });

    // The charts are drawn: four series and the size classes, each a uPlot canvas.
    let charts = elements(&dom, "div")
        .into_iter()
        .filter(|a| {
            a.get("class")
                .is_some_and(|c| c.split(' ').any(|c| c == "uplot"))
        })
        .count();
    assert_eq!(charts, 5, "uPlot charts");
    assert!(elements(&dom, "canvas").len() >= 5);

    let hr = by_id(&dom, "p", "hit-ratio");
    let shown: f64 = hr["data-value"].parse().unwrap();
    let want = hits as f64 / (hits + misses) as f64;
    assert_eq!(shown, want, "hit ratio shown vs stats");
    assert_eq!(hr["data-hits"], hits.to_string());
    let text = format!("{:.2} %", want * 100.0);
    assert!(dom.contains(&format!(">{text}</p>")), "{text} not shown");

    let bars: Vec<u64> = elements(&dom, "tr")
        .iter()
        .filter_map(|a| a.get("data-chunk").and(a.get("data-bytes")))
        .map(|b| b.parse().unwrap())
        .collect();
    assert!(bars.len() >= 5, "{bars:?}");
    assert_eq!(
        bars.iter().sum::<u64>(),
        stat(&st, "bytes"),
        "bars vs stats bytes"
    );

    let found: Vec<_> = elements(&dom, "tr")
        .into_iter()
        .filter(|a| a.contains_key("data-ttl"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["data-key"], "browse:me:1");
    assert_eq!(found[0]["data-size"], "123");
    assert_eq!(found[0]["data-flags"], "7");
    let ttl: i64 = found[0]["data-ttl"].parse().unwrap();
    assert!((3500..=3600).contains(&ttl), "ttl {ttl}");
    assert!(!by_id(&dom, "section", "keys-panel").contains_key("hidden"));
}

/// Fetched far more than the others while the page looks, `hot:one` heads its hot keys.
#[test]
fn the_hottest_key_is_the_one_fetched_most() {
    if !have_chromium() {
        return;
    }
    let d = start(&["--dashboard-keys"]);
    memcache(&d.server).expect(b"set hot:one 0 0 1\r\n1\r\n", b"STORED\r\n");
    // Looking starts the sampling.
    assert_eq!(get(d.port, "/api/hot", "").status, 200);
    let stop = Arc::new(AtomicBool::new(false));
    let mut c = memcache(&d.server);
    let stopping = stop.clone();
    let load = std::thread::spawn(move || {
        let mut n = 0u64;
        while !stopping.load(Ordering::Relaxed) {
            let mut req = Vec::new();
            for i in 0..100 {
                let key = if i % 5 == 4 {
                    format!("cold:{n}")
                } else {
                    "hot:one".into()
                };
                req.extend_from_slice(format!("mg {key} v\r\n").as_bytes());
                n += 1;
            }
            req.extend_from_slice(b"mn\r\n");
            c.send(&req);
            c.read(Until::End(b"MN\r\n"));
        }
    });
    let url = format!("http://127.0.0.1:{}/", d.port);
    let dom = render(&url, |dom| {
        body(dom).get("data-hot").is_some_and(|n| n != "0")
    });
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let rows: Vec<_> = elements(&dom, "tr")
        .into_iter()
        .filter_map(|a| a.get("data-key").cloned())
        .collect();
    assert_eq!(
        rows.first().map(String::as_str),
        Some("hot:one"),
        "{rows:?}"
    );
}

/// Without `--dashboard-keys` the page loads and draws, its key panels stay hidden and no
/// key appears anywhere in it, though one was asked for in the address.
#[test]
fn without_dashboard_keys_no_key_is_shown() {
    if !have_chromium() {
        return;
    }
    let d = start(&[]);
    traffic(&d);
    let url = format!("http://127.0.0.1:{}/?prefix=browse", d.port);
    let dom = render(&url, |dom| {
        let b = body(dom);
        b.contains_key("data-now") && b.contains_key("data-classes")
    });
    for panel in ["keys-panel", "hot-panel"] {
        assert!(
            by_id(&dom, "section", panel).contains_key("hidden"),
            "{panel}"
        );
    }
    assert!(!body(&dom).contains_key("data-keys"));
    assert!(!body(&dom).contains_key("data-hot"));
    for key in ["browse:me", "page:1"] {
        assert!(!dom.contains(key), "{key} shown");
    }
    assert!(
        elements(&dom, "tr")
            .iter()
            .all(|a| !a.contains_key("data-key"))
    );
}
