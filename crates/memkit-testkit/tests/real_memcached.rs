//! The suite's expectations checked against a real memcached (1.6.18 on Debian 12): a tiny
//! blocking meta-protocol client, just enough to run the suite, with real time.
//!
//! Skipped (with a note) when `memcached` is not installed, a failure under `CI=true` or
//! `MEMKIT_REQUIRE_INTEROP=1` (`memkit_testkit::memcached`). This is not memkit's client; it
//! exists so that the suite itself is proven against the reference before any memkit backend
//! is held to it.

use std::future::{Future, ready};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;

use memkit_testkit::memcached::{self, Memcached};
use memkit_testkit::suite::{self, Needs, SuiteOptions, WallClock};
use memkit_types::{
    ArithMode, ArithOptions, ArithOutcome, DeleteOptions, DeleteOutcome, Error, Exptime,
    GetOptions, Item, Memcache, Result, StoreMode, StoreOptions, StoreOutcome, Stored, Ttl,
    validate_key,
};

#[derive(Debug)]
struct Meta(Mutex<BufReader<TcpStream>>);

fn io(e: std::io::Error) -> Error {
    Error::Io(e.to_string())
}

fn line(r: &mut BufReader<TcpStream>) -> Result<String> {
    let mut s = String::new();
    r.read_line(&mut s).map_err(io)?;
    Ok(s.trim_end_matches("\r\n").to_string())
}

fn exp(e: Exptime) -> String {
    e.0.to_string()
}

/// Appends ` <flag><arg>` when the option is set.
fn flag<T: std::fmt::Display>(cmd: &mut String, flag: &str, arg: Option<T>) {
    if let Some(arg) = arg {
        cmd.push_str(&format!(" {flag}{arg}"));
    }
}

fn status_error(l: &str) -> Error {
    if l.contains("too large") {
        Error::TooLarge
    } else if let Some(m) = l.strip_prefix("CLIENT_ERROR ") {
        Error::Client(m.into())
    } else {
        Error::Protocol(l.into())
    }
}

impl Meta {
    fn call(&self, cmd: &str, data: Option<&[u8]>) -> Result<(String, Option<Vec<u8>>)> {
        let mut conn = self.0.lock().unwrap();
        let mut buf = cmd.as_bytes().to_vec();
        buf.extend_from_slice(b"\r\n");
        if let Some(d) = data {
            buf.extend_from_slice(d);
            buf.extend_from_slice(b"\r\n");
        }
        conn.get_mut().write_all(&buf).map_err(io)?;
        let l = line(&mut conn)?;
        if let Some(rest) = l.strip_prefix("VA ") {
            let len: usize = rest.split(' ').next().unwrap().parse().unwrap();
            let mut v = vec![0; len + 2];
            conn.read_exact(&mut v).map_err(io)?;
            v.truncate(len);
            return Ok((l, Some(v)));
        }
        Ok((l, None))
    }

    fn key(key: &[u8]) -> Result<&str> {
        validate_key(key)?;
        std::str::from_utf8(key).map_err(|_| Error::InvalidKey)
    }

    fn get_one(&self, key: &[u8], o: &GetOptions) -> Result<Option<Item>> {
        let mut cmd = format!("mg {} v f c", Self::key(key)?);
        flag(&mut cmd, "T", o.touch.map(exp));
        flag(&mut cmd, "N", o.vivify.map(exp));
        flag(&mut cmd, "R", o.recache_below);
        flag(&mut cmd, "E", o.new_cas);
        if o.meta {
            cmd.push_str(" t h l");
        }
        if o.no_bump {
            cmd.push_str(" u");
        }
        let (l, v) = self.call(&cmd, None)?;
        if l == "EN" {
            return Ok(None);
        }
        let Some(value) = v else {
            return Err(status_error(&l));
        };
        let mut item = Item {
            value: value.into(),
            ..Default::default()
        };
        for tok in l.split(' ').skip(2) {
            let (f, arg) = tok.split_at(1);
            match f {
                "f" => item.flags = arg.parse().unwrap(),
                "c" => item.cas = arg.parse().unwrap(),
                "t" => {
                    item.ttl = Some(if arg == "-1" {
                        Ttl::Never
                    } else {
                        Ttl::Secs(arg.parse().unwrap())
                    })
                }
                "h" => item.fetched = Some(arg == "1"),
                "l" => item.last_access = Some(arg.parse().unwrap()),
                "W" => item.win = true,
                "X" => item.stale = true,
                "Z" => item.win_taken = true,
                _ => {}
            }
        }
        Ok(Some(item))
    }

    fn store_now(&self, key: &[u8], value: &[u8], o: &StoreOptions) -> Result<Stored> {
        let mode = match o.mode {
            StoreMode::Set => "S",
            StoreMode::Add => "E",
            StoreMode::Replace => "R",
            StoreMode::Append => "A",
            StoreMode::Prepend => "P",
        };
        let mut cmd = format!(
            "ms {} {} T{} F{} M{mode} c",
            Self::key(key)?,
            value.len(),
            exp(o.exptime),
            o.flags
        );
        flag(&mut cmd, "C", o.cas);
        flag(&mut cmd, "N", o.vivify.map(exp));
        flag(&mut cmd, "E", o.new_cas);
        if o.invalidate {
            cmd.push_str(" I");
        }
        let (l, _) = self.call(&cmd, Some(value))?;
        let outcome = match &l[..2.min(l.len())] {
            "HD" => StoreOutcome::Stored,
            "NS" => StoreOutcome::NotStored,
            "EX" => StoreOutcome::Exists,
            "NF" => StoreOutcome::NotFound,
            _ => return Err(status_error(&l)),
        };
        let cas = l
            .split(' ')
            .find_map(|t| t.strip_prefix('c'))
            .map_or(0, |c| c.parse().unwrap());
        Ok(Stored { outcome, cas })
    }
}

impl Memcache for Meta {
    fn get_multi(
        &self,
        keys: &[&[u8]],
        o: &GetOptions,
    ) -> impl Future<Output = Result<Vec<Option<Item>>>> + Send {
        let r = keys
            .iter()
            .try_for_each(|k| validate_key(k))
            .and_then(|()| keys.iter().map(|k| self.get_one(k, o)).collect());
        ready(r)
    }

    fn store(
        &self,
        key: &[u8],
        value: &[u8],
        o: &StoreOptions,
    ) -> impl Future<Output = Result<Stored>> + Send {
        ready(self.store_now(key, value, o))
    }

    fn delete_with(
        &self,
        key: &[u8],
        o: &DeleteOptions,
    ) -> impl Future<Output = Result<DeleteOutcome>> + Send {
        let r = (|| {
            let mut cmd = format!("md {}", Self::key(key)?);
            flag(&mut cmd, "C", o.cas);
            flag(&mut cmd, "T", o.stale_ttl.map(exp));
            flag(&mut cmd, "E", o.new_cas);
            if o.invalidate {
                cmd.push_str(" I");
            }
            if o.remove_value {
                cmd.push_str(" x");
            }
            let (l, _) = self.call(&cmd, None)?;
            match &l[..] {
                "HD" => Ok(DeleteOutcome::Deleted),
                "NF" => Ok(DeleteOutcome::NotFound),
                "EX" => Ok(DeleteOutcome::Exists),
                _ => Err(status_error(&l)),
            }
        })();
        ready(r)
    }

    fn arithmetic(
        &self,
        key: &[u8],
        o: &ArithOptions,
    ) -> impl Future<Output = Result<ArithOutcome>> + Send {
        let r = (|| {
            let m = if o.mode == ArithMode::Incr { "I" } else { "D" };
            let mut cmd = format!("ma {} M{m} D{} v c", Self::key(key)?, o.delta);
            flag(&mut cmd, "N", o.vivify.map(|(_, e)| exp(e)));
            flag(&mut cmd, "J", o.vivify.map(|(j, _)| j));
            flag(&mut cmd, "C", o.cas);
            flag(&mut cmd, "T", o.update_ttl.map(exp));
            flag(&mut cmd, "E", o.new_cas);
            // memcached applies and reports flags in the order given: `t` after `N`/`T`.
            cmd.push_str(" t");
            let (l, v) = self.call(&cmd, None)?;
            match (&l[..2.min(l.len())], v) {
                ("VA", Some(v)) => {
                    let (mut cas, mut ttl) = (0, None);
                    for tok in l.split(' ').skip(2) {
                        let (f, arg) = tok.split_at(1);
                        match f {
                            "c" => cas = arg.parse().unwrap(),
                            "t" if arg != "-1" => ttl = Some(arg.parse().unwrap()),
                            _ => {}
                        }
                    }
                    let value = String::from_utf8(v).unwrap().parse().unwrap();
                    Ok(ArithOutcome::Value { value, cas, ttl })
                }
                ("NF", _) => Ok(ArithOutcome::NotFound),
                ("EX", _) => Ok(ArithOutcome::Exists),
                ("NS", _) => Ok(ArithOutcome::NotStored),
                _ if l.contains("non-numeric") => Ok(ArithOutcome::NonNumeric),
                _ => Err(status_error(&l)),
            }
        })();
        ready(r)
    }

    fn touch(&self, key: &[u8], e: Exptime) -> impl Future<Output = Result<bool>> + Send {
        let r = Self::key(key).and_then(|k| self.call(&format!("touch {k} {}", exp(e)), None));
        ready(r.map(|(l, _)| l == "TOUCHED"))
    }

    fn flush_all(&self, delay: u32) -> impl Future<Output = Result<()>> + Send {
        ready(self.call(&format!("flush_all {delay}"), None).map(|_| ()))
    }
}

/// memcached with a 1 MiB item limit (the suite's large-value cases), and a connection.
fn start() -> Option<(Memcached, Meta)> {
    let server = memcached::spawn(&["-m", "64", "-I", "1m"])?;
    let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect to memcached");
    Some((server, Meta(Mutex::new(BufReader::new(s)))))
}

#[tokio::test(flavor = "current_thread")]
async fn suite_matches_real_memcached() {
    // No memcached: skipped with a note, a failure under CI=true / MEMKIT_REQUIRE_INTEROP=1.
    let Some((_server, mc)) = start() else {
        return;
    };
    // Debian's 1.6.18 predates `E`, `md x` and `ms` append-vivify.
    let opts = SuiteOptions {
        max_needs: Needs::Base,
        ..Default::default()
    };
    let report = suite::run_with(&mc, &WallClock, &opts).await;
    eprintln!("{report}");
    report.assert_all_passed();
}
