//! memkitd's Prometheus exposition carries real figures: the process's (CPU seconds that
//! grow with work, open descriptors that grow with connections, resident memory that grows
//! with data, a start time that agrees with `uptime`), the persistent store's, TLS
//! handshake errors and authentication failures as they happen. The series' names and
//! the text format are checked by the reference parser in memkit-tools' `tests/ops.rs`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use memkit_server::metrics::exposition;
use memkit_server::{Args, Settings, Shared};
use memkit_testkit::certs::TestPki;
use memkit_testkit::wire::Until;
use memkit_testkit::{TestServer, tempdir};

/// The value of the unlabelled sample `name` (or of `name{labels}` when `name` has them).
fn value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

fn figure(sh: &Shared, name: &str) -> f64 {
    let text = exposition(sh);
    value(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_figures_follow_the_process() {
    let s = TestServer::start(&["-m", "256"]);
    let sh = s.shared().clone();
    let cpu0 = figure(&sh, "process_cpu_seconds_total");
    let fds0 = figure(&sh, "process_open_fds");
    let rss0 = figure(&sh, "process_resident_memory_bytes");

    // 40 connections, each answered once: at least 40 more descriptors (the server's ends).
    let mut conns = Vec::new();
    for _ in 0..40 {
        let mut c = s.wire().await;
        c.ask(b"version\r\n", Until::LINE).await;
        conns.push(c);
    }
    let fds1 = figure(&sh, "process_open_fds");
    assert!(fds1 >= fds0 + 40.0, "open fds {fds0} -> {fds1}");
    drop(conns);

    // 48 MiB of values: work for the CPU, pages for the resident set.
    let mut c = s.wire().await;
    let value = vec![b'x'; 64 * 1024];
    let mut req = Vec::new();
    for i in 0..768 {
        req.clear();
        req.extend_from_slice(format!("set k{i} 0 0 {}\r\n", value.len()).as_bytes());
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n");
        c.ask(&req, Until::LINE).await;
    }
    let cpu1 = figure(&sh, "process_cpu_seconds_total");
    let rss1 = figure(&sh, "process_resident_memory_bytes");
    assert!(cpu1 > cpu0, "cpu seconds {cpu0} -> {cpu1}");
    assert!(rss1 >= rss0 + (32 << 20) as f64, "rss {rss0} -> {rss1}");

    // The start time is now less `stats uptime`.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start = figure(&sh, "process_start_time_seconds");
    let uptime = figure(&sh, "memcached_uptime_seconds");
    assert!((now - uptime - start).abs() < 2.0, "{now} {uptime} {start}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_series_count_the_store() {
    let dir = tempdir("metrics-persist");
    let store_dir = dir.path().join("store");
    let argv = ["memkitd", "--persist", store_dir.to_str().unwrap()];
    let (settings, _) = Settings::from_args(<Args as clap::Parser>::parse_from(argv));
    let (engine, persist) = memkit_server::backend_for(&settings).unwrap();
    let sh = Shared::with_persist(engine, persist.map(|p| p.store), settings);
    let text = exposition(&sh);
    assert!(
        text.contains("memkit_persist_durability_info{durability=\"sync\"} 1\n"),
        "{text}"
    );
    assert_eq!(value(&text, "memkit_persist_disk_low"), Some(0.0), "{text}");
    assert_eq!(value(&text, "memkit_persist_failed"), Some(0.0), "{text}");
    assert!(value(&text, "memkit_persist_disk_free_bytes").unwrap() > 0.0);
    let writes0 = figure(&sh, "memkit_persist_writes_total");

    use memkit_types::{Exptime, Memcache};
    let store = memkit_engine::Embedded::from(sh.engine.clone());
    for i in 0..10 {
        store
            .set(format!("k{i}").as_bytes(), b"v", 0, Exptime::NEVER)
            .await
            .unwrap();
    }
    let disk = sh.persist.clone().unwrap();
    disk.wait_durable(&mut disk.subscribe()).await.unwrap();
    let writes1 = figure(&sh, "memkit_persist_writes_total");
    assert_eq!(writes1, writes0 + 10.0);
    assert!(figure(&sh, "memkit_persist_flushes_total") >= 1.0);
    drop((store, sh));
}

/// Polls `name` until it reaches `want` (the server counts after the client is done).
async fn reaches(sh: &Shared, name: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = value(&exposition(sh), name);
        if v == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{name} is {v:?}, not {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshake_errors_and_auth_failures_are_counted() {
    let pki = TestPki::generate();
    let users = pki.dir().join("users");
    std::fs::write(&users, "alice:secret\n").unwrap();
    let opts = pki.server_opts(0);
    let s = TestServer::start(&["-Z", "-o", &opts]);
    let text = exposition(s.shared());
    assert_eq!(
        value(&text, "memcached_ssl_handshake_errors_total"),
        Some(0.0),
        "{text}"
    );
    // Plain text on a TLS port: not a ClientHello, the handshake fails.
    let mut c = s.wire().await;
    c.send(b"version\r\n").await;
    assert!(c.closed().await);
    reaches(s.shared(), "memcached_ssl_handshake_errors_total", 1.0).await;
    s.stop().await;

    let s = TestServer::start(&["-Y", users.to_str().unwrap()]);
    let mut c = s.wire().await;
    let r = c
        .ask(b"set auth 0 0 11\r\nalice wrong\r\n", Until::LINE)
        .await;
    assert_eq!(r, "CLIENT_ERROR authentication failure\r\n");
    reaches(s.shared(), "memcached_auth_errors_total", 1.0).await;
    reaches(s.shared(), "memcached_auth_commands_total", 1.0).await;
    // Without -Z there is no TLS series, as memcached has no such stat then.
    assert!(!exposition(s.shared()).contains("memcached_ssl_handshake_errors_total"));
    s.stop().await;
}
