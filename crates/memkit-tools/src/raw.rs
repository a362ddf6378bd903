//! A text-protocol connection for the commands the client library does not model
//! (`lru_crawler metadump`, `watch`, `verbosity`): send one line, read reply lines. Opened
//! as the client opens its own (TCP or TLS, then the `-Y` login), see
//! [`ClientConfig::open`]; never with a binary configuration (`--binary`).

use std::time::Duration;

use memkit_client::{ClientConfig, Protocol, ServerSpec, Stream};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// One connection to one server.
pub struct Raw {
    stream: BufReader<Box<dyn Stream>>,
    addr: String,
    timeout: Duration,
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Raw").field("addr", &self.addr).finish()
    }
}

impl Raw {
    /// Connects to `server` with `config` (its connect timeout, TLS and login); lines must
    /// then arrive within its request timeout.
    pub async fn connect(server: &ServerSpec, config: &ClientConfig) -> Result<Raw, String> {
        let addr = server.addr();
        if config.protocol != Protocol::Text {
            return Err(format!("{addr}: a text command over a binary connection"));
        }
        let s = config
            .open(server)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        Ok(Raw {
            stream: BufReader::new(s),
            addr,
            timeout: config.request_timeout,
        })
    }

    /// The server's `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `line` followed by `\r\n`.
    pub async fn send(&mut self, line: &str) -> Result<(), String> {
        let mut buf = Vec::with_capacity(line.len() + 2);
        buf.extend_from_slice(line.as_bytes());
        buf.extend_from_slice(b"\r\n");
        let w = self.stream.get_mut();
        w.write_all(&buf)
            .await
            .map_err(|e| format!("{}: {e}", self.addr))?;
        // TLS streams hold written records until flushed.
        w.flush().await.map_err(|e| format!("{}: {e}", self.addr))
    }

    /// The next line without its line ending; `None` when the server closed. With
    /// `wait == false` a line must arrive within the timeout.
    pub async fn line(&mut self, wait: bool) -> Result<Option<String>, String> {
        let mut buf = Vec::new();
        let read = self.stream.read_until(b'\n', &mut buf);
        let n = if wait {
            read.await
        } else {
            tokio::time::timeout(self.timeout, read)
                .await
                .map_err(|_| format!("{}: timed out", self.addr))?
        }
        .map_err(|e| format!("{}: {e}", self.addr))?;
        if n == 0 {
            return Ok(None);
        }
        while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            buf.pop();
        }
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }
}

/// `key=value` fields of a metadump or watch line, in order.
pub fn fields(line: &str) -> Vec<(&str, &str)> {
    line.split_ascii_whitespace()
        .filter_map(|f| f.split_once('='))
        .collect()
}

/// Decodes memcached's percent-encoding of keys in metadump and watch lines.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_unescape() {
        let f = fields("key=a%20b exp=-1 la=5 cas=8 fetch=yes cls=1 size=10");
        assert_eq!(f[0], ("key", "a%20b"));
        assert_eq!(f[6], ("size", "10"));
        assert_eq!(unescape("a%20b%2"), "a b%2");
        assert_eq!(unescape("%zz%41"), "%zzA");
    }
}
