//! Text-protocol helpers for tests that ask one request at a time and read its reply line by
//! line, on the testkit's `BlockingWire`; and a figure out of a `stats` reply.
#![allow(dead_code)]

use std::time::Duration;

use memkit_testkit::wire::{BlockingWire, Until};

/// A connection asking one request at a time (10 s for each reply).
pub struct Lines(pub BlockingWire);

impl Lines {
    pub fn connect(port: u16) -> std::io::Result<Lines> {
        Lines::connect_waiting(port, Duration::from_secs(10))
    }

    /// A connection waiting up to `wait` for each reply (a read past it fails `TimedOut`).
    pub fn connect_waiting(port: u16, wait: Duration) -> std::io::Result<Lines> {
        let w = BlockingWire::tcp(("127.0.0.1", port))?;
        Ok(Lines(w.with_timeout(wait)))
    }

    /// The next line, without its `\r\n`; `UnexpectedEof` when the server closed first.
    pub fn line(&mut self) -> std::io::Result<String> {
        let l = self.0.try_read(Until::LINE)?;
        Ok(String::from_utf8_lossy(&l).trim_end().to_string())
    }

    /// Sends `req` and reads the first line of its reply.
    pub fn ask(&mut self, req: &str) -> std::io::Result<String> {
        self.0.try_send(req.as_bytes())?;
        self.line()
    }

    /// `set`: its reply line (`STORED`, an error...).
    pub fn set(&mut self, key: &str, value: &str) -> std::io::Result<String> {
        self.ask(&format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()))
    }

    /// `get`: the value, `None` on a miss.
    pub fn get(&mut self, key: &str) -> std::io::Result<Option<String>> {
        let head = self.ask(&format!("get {key}\r\n"))?;
        if head == "END" {
            return Ok(None);
        }
        assert!(head.starts_with("VALUE "), "{head}");
        let v = self.line()?;
        assert_eq!(self.line()?, "END");
        Ok(Some(v))
    }

    /// `mg key v f c`: (value, flags, cas), or `None` on a miss.
    pub fn mg(&mut self, key: &str) -> std::io::Result<Option<(String, u32, u64)>> {
        let head = self.ask(&format!("mg {key} v f c\r\n"))?;
        if head == "EN" {
            return Ok(None);
        }
        let mut parts = head.split(' ');
        assert_eq!(parts.next(), Some("VA"), "{head}");
        let _len = parts.next();
        let (mut flags, mut cas) = (0, 0);
        for p in parts {
            match p.as_bytes()[0] {
                b'f' => flags = p[1..].parse().unwrap(),
                b'c' => cas = p[1..].parse().unwrap(),
                _ => {}
            }
        }
        Ok(Some((self.line()?, flags, cas)))
    }

    /// `ms key S F c` → the new CAS, `None` if not stored.
    pub fn ms(&mut self, key: &str, value: &str, flags: u32) -> std::io::Result<Option<u64>> {
        let r = self.ask(&format!(
            "ms {key} {} F{flags} c\r\n{value}\r\n",
            value.len()
        ))?;
        Ok(r.strip_prefix("HD c").map(|c| c.parse().unwrap()))
    }
}

/// `STAT name value` of a `stats` reply, as a number.
pub fn stat(stats: &str, name: &str) -> u64 {
    let prefix = format!("STAT {name} ");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no STAT {name}"))
        .parse()
        .unwrap()
}
