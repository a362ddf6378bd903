//! memkitd with its metrics address, and raw HTTP to it: the helpers of the page's tests.
#![allow(dead_code)]

use std::time::Duration;

use memkit_testkit::TestServer;
use memkit_testkit::server::free_port;
use memkit_testkit::wire::{BlockingWire, Until};

/// A memkitd child and its metrics port.
pub struct Dash {
    pub server: TestServer,
    pub port: u16,
}

/// This build's memkitd with `--metrics-addr` on a free port and `args`.
pub fn start(args: &[&str]) -> Dash {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut all = vec!["--metrics-addr", addr.as_str()];
    all.extend_from_slice(args);
    let server = TestServer::launch(&all)
        .bin(env!("CARGO_BIN_EXE_memkitd"))
        .start();
    Dash { server, port }
}

/// A reply: status code, head, body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends `request` (a whole head) to the metrics port; the reply, read to the close.
pub fn raw(port: u16, request: &str) -> Reply {
    let mut w = BlockingWire::tcp(("127.0.0.1", port))
        .unwrap()
        .with_timeout(Duration::from_secs(30));
    let got = w.ask(request.as_bytes(), Until::Closed);
    let (head, body) = got.split_once("\r\n\r\n").unwrap_or((&got, ""));
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    Reply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// `GET path` with `headers` (each line ending in CRLF), as a browser at 127.0.0.1 asks.
pub fn get(port: u16, path: &str, headers: &str) -> Reply {
    raw(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}\r\n"),
    )
}

/// A memcached connection to the server.
pub fn memcache(s: &TestServer) -> BlockingWire {
    BlockingWire::tcp(s.tcp_addr())
        .unwrap()
        .with_timeout(Duration::from_secs(30))
}

/// `stats` as name and value.
pub fn stats(s: &TestServer) -> Vec<(String, String)> {
    let text = memcache(s).ask(b"stats\r\n", Until::END);
    text.lines()
        .filter_map(|l| l.strip_prefix("STAT ")?.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The integer stat `name`.
pub fn stat(stats: &[(String, String)], name: &str) -> u64 {
    stats
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name}"))
}
