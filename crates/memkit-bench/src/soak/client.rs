//! One soak client: sessions of random requests on its own keys, every reply checked
//! against what it stored, and the ways a session ends (quit, close, a close mid-data or
//! mid-line, an unread get).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{Errors, KEYS, OP_TIMEOUT, Tally};

/// What a client knows of one of its keys.
#[derive(Debug, Clone, Copy)]
enum Held {
    /// A value of this length, generated from this tag.
    Value(usize, u64),
    /// A counter at this number.
    Counter(u64),
    /// Unknown: the old value or none (memcached keeps the old value when a large set fails
    /// for memory in the middle of its data).
    Unknown,
}

pub(super) struct Client {
    addr: SocketAddr,
    id: usize,
    rng: SmallRng,
    keys: Vec<Option<Held>>,
    item_max: usize,
    tally: Arc<Tally>,
    errors: Arc<Errors>,
    version: u64,
    /// A noreply request was sent and no reply has been read since.
    unsynced: bool,
}

type Conn = BufReader<TcpStream>;

/// A value's bytes: any byte values (`\r\n` included), fixed by its tag.
fn value(len: usize, tag: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    for word in 0..len.div_ceil(8) {
        v.extend_from_slice(&crate::workload::mix64(tag ^ (word as u64) << 20).to_le_bytes());
    }
    v.truncate(len);
    v
}

impl Client {
    /// Client `id`, its random choices seeded from the soak's seed and its id.
    pub(super) fn new(
        addr: SocketAddr,
        id: usize,
        seed: u64,
        item_max: usize,
        tally: Arc<Tally>,
        errors: Arc<Errors>,
    ) -> Client {
        Client {
            addr,
            id,
            rng: SmallRng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(id as u64)),
            keys: vec![None; KEYS],
            item_max,
            tally,
            errors,
            version: 0,
            unsynced: false,
        }
    }

    /// Sessions until `deadline`; the first failure ends this client and is reported.
    pub(super) async fn run(mut self, deadline: tokio::time::Instant) {
        while tokio::time::Instant::now() < deadline {
            if let Err(e) = self.session(deadline).await {
                let mut errs = self.errors.lock().unwrap();
                if errs.len() < 20 {
                    errs.push(format!("client {}: {e}", self.id));
                }
                return;
            }
        }
    }

    fn key(&self, k: usize) -> String {
        format!("soak:{}:{k}", self.id)
    }

    async fn session(&mut self, deadline: tokio::time::Instant) -> Result<(), String> {
        let stream = tokio::time::timeout(OP_TIMEOUT, TcpStream::connect(self.addr))
            .await
            .map_err(|_| "connect timed out".to_string())?
            .map_err(|e| format!("connect: {e}"))?;
        self.tally.sessions.fetch_add(1, Ordering::Relaxed);
        let mut c = BufReader::new(stream);
        let n = self.rng.random_range(1..=200);
        for _ in 0..n {
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            self.tally.requests.fetch_add(1, Ordering::Relaxed);
            tokio::time::timeout(OP_TIMEOUT, self.request(&mut c))
                .await
                .map_err(|_| "no reply within 10 s".to_string())??;
        }
        self.leave(c).await
    }

    /// Ends a session one of five ways; none leaves a request half-counted.
    async fn leave(&mut self, mut c: Conn) -> Result<(), String> {
        // A noreply set not yet followed by a reply may still be unapplied when the next
        // session's requests, on another connection, arrive: wait for it first.
        if self.unsynced {
            let v = self.ask(&mut c, "version\r\n").await?;
            if !v.starts_with("VERSION ") {
                return Err(format!("version: {v:?}"));
            }
        }
        let k = self.rng.random_range(0..KEYS);
        let key = self.key(k);
        let w = |e: std::io::Error| format!("write: {e}");
        match self.rng.random_range(0..10) {
            // In the middle of a data block: the set never happened.
            0 => {
                let len = self.rng.random_range(2..64 * 1024);
                let head = format!("set {key} 0 0 {len}\r\n");
                c.get_mut().write_all(head.as_bytes()).await.map_err(w)?;
                let part = value(self.rng.random_range(0..len), 7);
                c.get_mut().write_all(&part).await.map_err(w)?;
                self.tally.aborted_mid_data.fetch_add(1, Ordering::Relaxed);
            }
            // In the middle of a command line.
            1 => {
                c.get_mut().write_all(b"get soak:").await.map_err(w)?;
                self.tally.aborted_mid_line.fetch_add(1, Ordering::Relaxed);
            }
            // Right after a get whose reply is never read.
            2 => {
                let line = format!("get {key}\r\n");
                c.get_mut().write_all(line.as_bytes()).await.map_err(w)?;
                self.tally.get_keys.fetch_add(1, Ordering::Relaxed);
                self.tally.unread_gets.fetch_add(1, Ordering::Relaxed);
            }
            3..=5 => {}
            _ => {
                c.get_mut().write_all(b"quit\r\n").await.map_err(w)?;
                let mut rest = Vec::new();
                let n = c.read_to_end(&mut rest).await.map_err(|e| e.to_string())?;
                if n != 0 {
                    return Err(format!("bytes after quit: {:?}", show(&rest)));
                }
            }
        }
        Ok(())
    }

    async fn request(&mut self, c: &mut Conn) -> Result<(), String> {
        let k = self.rng.random_range(0..KEYS);
        // A request with a reply is answered after the noreply ones before it; only a
        // noreply set leaves the connection unsynced.
        self.unsynced = false;
        match self.rng.random_range(0..100) {
            0..35 => self.get(c, &[k]).await,
            35..45 => {
                let n = self.rng.random_range(2..=8);
                let ks: Vec<usize> = (0..n).map(|_| self.rng.random_range(0..KEYS)).collect();
                self.get(c, &ks).await
            }
            45..70 => self.set(c, k, false).await,
            70..75 => self.set(c, k, true).await,
            75..80 => {
                let line = format!("delete {}\r\n", self.key(k));
                let r = self.ask(c, &line).await?;
                self.tally.deletes.fetch_add(1, Ordering::Relaxed);
                match (r.as_str(), self.keys[k]) {
                    ("DELETED\r\n", Some(_)) => {}
                    ("NOT_FOUND\r\n", _) => {}
                    _ => return Err(format!("delete of {:?}: {r:?}", self.keys[k])),
                }
                self.keys[k] = None;
                Ok(())
            }
            80..88 => self.incr(c, k).await,
            _ => self.malformed(c, k).await,
        }
    }

    async fn ask(&mut self, c: &mut Conn, line: &str) -> Result<String, String> {
        c.get_mut()
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        read_line(c).await
    }

    async fn get(&mut self, c: &mut Conn, ks: &[usize]) -> Result<(), String> {
        let mut line = String::from("get");
        for &k in ks {
            line.push(' ');
            line.push_str(&self.key(k));
        }
        line.push_str("\r\n");
        c.get_mut()
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        self.tally
            .get_keys
            .fetch_add(ks.len() as u64, Ordering::Relaxed);
        let mut found = vec![false; ks.len()];
        loop {
            let l = read_line(c).await?;
            if l == "END\r\n" {
                break;
            }
            let w: Vec<&str> = l.trim_end().split(' ').collect();
            let (Some(&"VALUE"), Some(key), Some(len)) = (w.first(), w.get(1), w.get(3)) else {
                return Err(format!("get: unexpected {l:?}"));
            };
            let len: usize = len.parse().map_err(|_| format!("get: bad length {l:?}"))?;
            let mut data = vec![0u8; len + 2];
            c.read_exact(&mut data)
                .await
                .map_err(|e| format!("read: {e}"))?;
            // Replies come in the order asked; a key asked twice is answered twice.
            let Some(i) = (0..ks.len()).find(|&i| !found[i] && self.key(ks[i]) == *key) else {
                return Err(format!(
                    "get: {key} not asked for or out of order in {:?}",
                    line.trim_end()
                ));
            };
            found[i] = true;
            let ok = match self.keys[ks[i]] {
                Some(Held::Value(n, tag)) => n == len && data[..len] == value(n, tag)[..],
                Some(Held::Counter(n)) => data[..len] == *n.to_string().as_bytes(),
                Some(Held::Unknown) => true,
                None => false,
            };
            if !ok || &data[len..] != b"\r\n" {
                return Err(format!(
                    "get {key}: {len} bytes that are not the last value stored ({:?})",
                    self.keys[ks[i]]
                ));
            }
            self.tally.hits.fetch_add(1, Ordering::Relaxed);
            self.tally
                .bytes_checked
                .fetch_add(len as u64, Ordering::Relaxed);
        }
        for (i, &k) in ks.iter().enumerate() {
            if !found[i] {
                self.tally.misses.fetch_add(1, Ordering::Relaxed);
                if self.keys[k].is_some() {
                    self.tally.evicted.fetch_add(1, Ordering::Relaxed);
                    self.keys[k] = None;
                }
            }
        }
        Ok(())
    }

    /// A random size: mostly small, some up to `-I`.
    fn size(&mut self) -> usize {
        let max = self.item_max - 512;
        match self.rng.random_range(0..100) {
            0..60 => self.rng.random_range(0..=100),
            60..90 => self.rng.random_range(100..=10_000),
            90..99 => self.rng.random_range(10_000..=100_000.min(max)),
            _ => self.rng.random_range(100_000.min(max)..=max),
        }
    }

    async fn set(&mut self, c: &mut Conn, k: usize, noreply: bool) -> Result<(), String> {
        let len = if noreply {
            self.rng.random_range(0..=1000)
        } else {
            self.size()
        };
        self.version += 1;
        let tag = (self.id as u64) << 40 | self.version;
        let mut req = format!(
            "set {} 0 0 {len}{}\r\n",
            self.key(k),
            if noreply { " noreply" } else { "" }
        )
        .into_bytes();
        req.extend_from_slice(&value(len, tag));
        req.extend_from_slice(b"\r\n");
        c.get_mut()
            .write_all(&req)
            .await
            .map_err(|e| format!("write: {e}"))?;
        if noreply {
            // A noreply set refused for memory would go unseen: only small ones are sent.
            self.tally.sets.fetch_add(1, Ordering::Relaxed);
            self.keys[k] = Some(Held::Value(len, tag));
            self.unsynced = true;
            return Ok(());
        }
        let r = read_line(c).await?;
        if r == "STORED\r\n" {
            self.tally.sets.fetch_add(1, Ordering::Relaxed);
            self.keys[k] = Some(Held::Value(len, tag));
        } else if r
            .to_ascii_lowercase()
            .starts_with("server_error out of memory")
        {
            // memcached at a small -m (its slab classes are taken): the set is not counted
            // in cmd_set; whether the old value stays depends on where the allocation failed.
            self.tally.out_of_memory.fetch_add(1, Ordering::Relaxed);
            self.keys[k] = Some(Held::Unknown);
        } else {
            return Err(format!("set of {len} bytes: {r:?}"));
        }
        Ok(())
    }

    async fn incr(&mut self, c: &mut Conn, k: usize) -> Result<(), String> {
        let Some(Held::Counter(n)) = self.keys[k] else {
            let line = format!("set {} 0 0 1\r\n0\r\n", self.key(k));
            let r = self.ask(c, &line).await?;
            self.tally.sets.fetch_add(1, Ordering::Relaxed);
            if r != "STORED\r\n" {
                return Err(format!("set counter: {r:?}"));
            }
            self.keys[k] = Some(Held::Counter(0));
            return Ok(());
        };
        let by = self.rng.random_range(1..1000u64);
        let r = self
            .ask(c, &format!("incr {} {by}\r\n", self.key(k)))
            .await?;
        self.tally.incrs.fetch_add(1, Ordering::Relaxed);
        if r == "NOT_FOUND\r\n" {
            self.tally.evicted.fetch_add(1, Ordering::Relaxed);
            self.keys[k] = None;
        } else if r.trim_end() == (n + by).to_string() {
            self.keys[k] = Some(Held::Counter(n + by));
        } else {
            return Err(format!("incr {n} by {by}: {r:?}"));
        }
        Ok(())
    }

    /// A malformed request and the error line it must get; the connection goes on.
    async fn malformed(&mut self, c: &mut Conn, k: usize) -> Result<(), String> {
        self.tally.malformed.fetch_add(1, Ordering::Relaxed);
        let key = self.key(k);
        let (req, want): (Vec<u8>, &str) = match self.rng.random_range(0..6) {
            0 => (
                format!("bogus{} {key}\r\n", self.rng.random_range(0..100)).into_bytes(),
                "ERROR\r\n",
            ),
            1 => (b"\r\n".to_vec(), "ERROR\r\n"),
            2 => (
                format!("set {key} 0 0 notanumber\r\n").into_bytes(),
                "CLIENT_ERROR bad command line format\r\n",
            ),
            3 => (
                format!("incr {key} notanumber\r\n").into_bytes(),
                "CLIENT_ERROR invalid numeric delta argument\r\n",
            ),
            4 => (
                format!("get {}\r\n", "k".repeat(251)).into_bytes(),
                "CLIENT_ERROR bad command line format\r\n",
            ),
            // A value over -I: refused, its data swallowed, and (as memcached does) the
            // key's old value removed.
            _ => {
                let len = self.item_max + 1;
                let mut r = format!("set {key} 0 0 {len}\r\n").into_bytes();
                r.extend_from_slice(&value(len, 3));
                r.extend_from_slice(b"\r\n");
                self.keys[k] = None;
                self.tally.too_large.fetch_add(1, Ordering::Relaxed);
                (r, "SERVER_ERROR object too large for cache\r\n")
            }
        };
        c.get_mut()
            .write_all(&req)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let r = read_line(c).await?;
        if r != want {
            return Err(format!("{:?}: {r:?}, want {want:?}", show(&req)));
        }
        Ok(())
    }
}

async fn read_line(c: &mut Conn) -> Result<String, String> {
    let mut l = Vec::new();
    let n = c
        .read_until(b'\n', &mut l)
        .await
        .map_err(|e| format!("read: {e}"))?;
    if n == 0 || !l.ends_with(b"\r\n") {
        return Err(format!("connection closed; got {:?}", show(&l)));
    }
    String::from_utf8(l).map_err(|e| format!("reply not UTF-8: {e}"))
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(80)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_fixed_by_their_tag() {
        assert_eq!(value(1000, 5), value(1000, 5));
        assert_ne!(value(1000, 5), value(1000, 6));
        assert!(value(1_000_000, 1).windows(2).any(|w| w == b"\r\n"));
    }
}
