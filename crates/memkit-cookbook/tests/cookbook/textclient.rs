//! TEST-ONLY: a minimal blocking meta-protocol client implementing `Memcache`, so worker
//! processes can reach memkitd or memcached before memkit-client lands. It speaks only the
//! commands the cookbook uses (`mg`, `ms`, `md`, `ma`, `touch`, `flush_all`), blocks the
//! calling thread, and has no pooling, timeouts or reconnects. Not for use outside tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;

use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Error, Exptime,
    GetOptions, Item, Memcache, Result, StoreMode, StoreOptions, StoreOutcome, Stored, Ttl,
};

#[derive(Debug)]
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn line(&mut self) -> Result<String> {
        let mut s = String::new();
        if self.r.read_line(&mut s)? == 0 {
            return Err(Error::Io("connection closed".into()));
        }
        Ok(s.trim_end().to_owned())
    }

    fn data(&mut self, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0; len + 2];
        self.r.read_exact(&mut buf)?;
        buf.truncate(len);
        Ok(buf)
    }
}

/// One connection, used by one request at a time.
#[derive(Debug)]
pub struct TextClient {
    conn: Mutex<Conn>,
}

fn server_error(line: &str) -> Error {
    if let Some(msg) = line.strip_prefix("SERVER_ERROR ") {
        match msg {
            "object too large for cache" => Error::TooLarge,
            "out of memory storing object" => Error::OutOfMemory,
            m => Error::Server(m.into()),
        }
    } else if let Some(msg) = line.strip_prefix("CLIENT_ERROR ") {
        Error::Client(msg.into())
    } else {
        Error::Protocol(line.into())
    }
}

fn flag(tokens: &[&str], f: char) -> Option<String> {
    tokens
        .iter()
        .find(|t| t.starts_with(f))
        .map(|t| t[f.len_utf8()..].to_owned())
}

fn key_str(key: &[u8]) -> Result<&str> {
    memkit_types::validate_key(key)?;
    std::str::from_utf8(key).map_err(|_| Error::InvalidKey)
}

impl TextClient {
    pub fn connect(addr: &str) -> std::io::Result<Self> {
        let w = TcpStream::connect(addr)?;
        w.set_nodelay(true)?;
        let r = BufReader::new(w.try_clone()?);
        Ok(TextClient {
            conn: Mutex::new(Conn { r, w }),
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut c = self.conn.lock().unwrap();
        f(&mut c)
    }
}

impl Memcache for TextClient {
    async fn get_multi(&self, keys: &[&[u8]], opts: &GetOptions) -> Result<Vec<Option<Item>>> {
        self.with(|c| {
            let mut req = Vec::new();
            for k in keys {
                let mut cmd = format!("mg {} v f c", key_str(k)?);
                if opts.meta {
                    cmd.push_str(" t");
                }
                if let Some(t) = opts.touch {
                    cmd.push_str(&format!(" T{}", t.0));
                }
                req.extend_from_slice(cmd.as_bytes());
                req.extend_from_slice(b"\r\n");
            }
            c.w.write_all(&req)?;
            let mut out = Vec::with_capacity(keys.len());
            for _ in keys {
                let line = c.line()?;
                let tokens: Vec<&str> = line.split(' ').collect();
                match tokens[0] {
                    "EN" => out.push(None),
                    "VA" => {
                        let len: usize = tokens[1]
                            .parse()
                            .map_err(|_| Error::Protocol(line.clone()))?;
                        let value = c.data(len)?;
                        let ttl = flag(&tokens, 't').map(|t| match t.as_str() {
                            "-1" => Ttl::Never,
                            n => Ttl::Secs(n.parse().unwrap_or(0)),
                        });
                        out.push(Some(Item {
                            value: value.into(),
                            flags: flag(&tokens, 'f').and_then(|f| f.parse().ok()).unwrap_or(0),
                            cas: flag(&tokens, 'c').and_then(|f| f.parse().ok()).unwrap_or(0),
                            ttl,
                            ..Default::default()
                        }));
                    }
                    _ => return Err(server_error(&line)),
                }
            }
            Ok(out)
        })
    }

    async fn store(&self, key: &[u8], value: &[u8], opts: &StoreOptions) -> Result<Stored> {
        self.with(|c| {
            let mode = match opts.mode {
                StoreMode::Set => "S",
                StoreMode::Add => "E",
                StoreMode::Replace => "R",
                StoreMode::Append => "A",
                StoreMode::Prepend => "P",
            };
            let mut cmd = format!(
                "ms {} {} c M{mode} F{} T{}",
                key_str(key)?,
                value.len(),
                opts.flags,
                opts.exptime.0
            );
            if let Some(cas) = opts.cas {
                cmd.push_str(&format!(" C{cas}"));
            }
            if let Some(n) = opts.vivify {
                cmd.push_str(&format!(" N{}", n.0));
            }
            let mut req = cmd.into_bytes();
            req.extend_from_slice(b"\r\n");
            req.extend_from_slice(value);
            req.extend_from_slice(b"\r\n");
            c.w.write_all(&req)?;
            let line = c.line()?;
            let tokens: Vec<&str> = line.split(' ').collect();
            let outcome = match tokens[0] {
                "HD" => StoreOutcome::Stored,
                "NS" => StoreOutcome::NotStored,
                "EX" => StoreOutcome::Exists,
                "NF" => StoreOutcome::NotFound,
                _ => return Err(server_error(&line)),
            };
            let cas = flag(&tokens, 'c').and_then(|c| c.parse().ok()).unwrap_or(0);
            Ok(Stored { outcome, cas })
        })
    }

    async fn delete_with(&self, key: &[u8], opts: &DeleteOptions) -> Result<DeleteOutcome> {
        self.with(|c| {
            let mut cmd = format!("md {}", key_str(key)?);
            if let Some(cas) = opts.cas {
                cmd.push_str(&format!(" C{cas}"));
            }
            cmd.push_str("\r\n");
            c.w.write_all(cmd.as_bytes())?;
            let line = c.line()?;
            match line.split(' ').next().unwrap_or("") {
                "HD" => Ok(DeleteOutcome::Deleted),
                "NF" => Ok(DeleteOutcome::NotFound),
                "EX" => Ok(DeleteOutcome::Exists),
                _ => Err(server_error(&line)),
            }
        })
    }

    async fn arithmetic(&self, key: &[u8], opts: &ArithOptions) -> Result<ArithOutcome> {
        self.with(|c| {
            let mode = if opts.mode == ArithMode::Incr {
                "I"
            } else {
                "D"
            };
            let mut cmd = format!("ma {} v c M{mode} D{}", key_str(key)?, opts.delta);
            if let Some((initial, ttl)) = opts.vivify {
                cmd.push_str(&format!(" N{} J{initial}", ttl.0));
            }
            if let Some(cas) = opts.cas {
                cmd.push_str(&format!(" C{cas}"));
            }
            cmd.push_str("\r\n");
            c.w.write_all(cmd.as_bytes())?;
            let line = c.line()?;
            let tokens: Vec<&str> = line.split(' ').collect();
            match tokens[0] {
                "VA" => {
                    let len: usize = tokens[1]
                        .parse()
                        .map_err(|_| Error::Protocol(line.clone()))?;
                    let data = c.data(len)?;
                    let value = std::str::from_utf8(&data)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .ok_or_else(|| Error::Protocol(line.clone()))?;
                    let cas = flag(&tokens, 'c').and_then(|c| c.parse().ok()).unwrap_or(0);
                    Ok(ArithOutcome::Value {
                        value,
                        cas,
                        ttl: None,
                    })
                }
                "NF" => Ok(ArithOutcome::NotFound),
                "NS" => Ok(ArithOutcome::NotStored),
                "EX" => Ok(ArithOutcome::Exists),
                _ if line.contains("non-numeric") => Ok(ArithOutcome::NonNumeric),
                _ => Err(server_error(&line)),
            }
        })
    }

    async fn touch(&self, key: &[u8], exptime: Exptime) -> Result<bool> {
        self.with(|c| {
            c.w.write_all(format!("touch {} {}\r\n", key_str(key)?, exptime.0).as_bytes())?;
            let line = c.line()?;
            match line.as_str() {
                "TOUCHED" => Ok(true),
                "NOT_FOUND" => Ok(false),
                _ => Err(server_error(&line)),
            }
        })
    }

    async fn flush_all(&self, delay: u32) -> Result<()> {
        self.with(|c| {
            c.w.write_all(format!("flush_all {delay}\r\n").as_bytes())?;
            let line = c.line()?;
            if line == "OK" {
                Ok(())
            } else {
                Err(server_error(&line))
            }
        })
    }
}
