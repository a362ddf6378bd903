//! The in-process server the integration tests share is the harness's
//! ([`memkit_testkit::TestServer::start`]); here is a raw connection to it with reads
//! bounded in time.
#![allow(dead_code)]

use std::time::Duration;

use memkit_testkit::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// A raw connection to `s`.
pub async fn conn(s: &TestServer) -> Conn {
    Conn(TcpStream::connect(s.tcp_addr()).await.unwrap())
}

pub struct Conn(pub TcpStream);

impl Conn {
    pub async fn send(&mut self, b: &[u8]) {
        self.0.write_all(b).await.unwrap();
    }

    /// Reads until the reply ends with `end` (or fails the test after 5 s).
    pub async fn until(&mut self, end: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        // On the heap: a 64 KiB array inside every `ask` future made each test's future
        // megabytes large, which debug builds copy onto the 2 MiB test-thread stack.
        let mut chunk = vec![0u8; 65536];
        timeout(Duration::from_secs(5), async {
            while !buf.ends_with(end) {
                let n = self.0.read(&mut chunk).await.unwrap();
                assert!(
                    n > 0,
                    "closed early; got {:?}",
                    String::from_utf8_lossy(&buf)
                );
                buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("timed out; got {:?}", String::from_utf8_lossy(&buf)));
        buf
    }

    pub async fn ask(&mut self, req: &[u8], end: &[u8]) -> String {
        self.send(req).await;
        String::from_utf8_lossy(&self.until(end).await).into_owned()
    }

    /// Whether the server closes the connection within 5 s.
    pub async fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 1024];
        let r = timeout(Duration::from_secs(5), async {
            loop {
                match self.0.read(&mut chunk).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        r.unwrap_or(false)
    }
}
