//! What the page shows of keys, only with `--dashboard-keys`: the hottest keys of the last
//! interval and a read-only key browser. With `-Y` or `-S` both need HTTP Basic
//! credentials that the server's auth file (or SASL password file) accepts.
//!
//! - Hot keys: while someone asks for them (in the last [`LOOK_SECS`]), the fetches are
//!   sampled ([`crate::watch::HotKeys`]: one in 16 per worker thread, the hottest 64 kept)
//!   and every [`HOT_INTERVAL_SECS`] the interval's keys are kept for the page. Nobody
//!   looking, the sampling stops.
//! - Key browser: keys starting with a prefix, from a dump ([`memkit_engine::Engine::crawl`],
//!   64 items under a shard's lock at a time) that stops after [`MATCHES`] matches or
//!   [`SCAN_BUDGET`] items looked at, with a cursor the page sends back for more. Each key
//!   with its TTL, value size, flags, last access, CAS.
//! - Logins: a wrong password makes the next attempts within a backoff (100 ms, doubling
//!   with each failure in a row, at most 10 s: SASL's) fail unchecked, whoever sends
//!   them; a request with no credentials is only told to send some.
//!
//! A browser on this machine visiting a hostile site could be made to ask these routes
//! under a name that resolves to 127.0.0.1 (DNS rebinding); without a login they therefore
//! answer only requests whose `Host` is an IP address or `localhost`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memkit_engine::DumpCursor;
use parking_lot::Mutex;

use super::json::Json;
use super::param;
use crate::metrics::Response;
use crate::state::Shared;
use crate::watch::{HOT_SAMPLE, HotCount};

/// Seconds in a hot-keys interval.
pub const HOT_INTERVAL_SECS: u64 = 5;
/// Seconds after the last request for hot keys that the sampling stops.
pub const LOOK_SECS: u64 = 15;
/// Matches a key search returns at most.
pub const MATCHES: usize = 100;
/// Items a key search looks at, at most, before it returns with a cursor.
pub const SCAN_BUDGET: usize = 100_000;
/// Cursors kept for "more" (the oldest is forgotten past it).
const CURSORS: usize = 32;

/// The hot keys of the last interval, and when the page last asked.
#[derive(Debug, Default)]
pub struct HotState {
    last_look: Option<Instant>,
    last: Vec<(Box<[u8]>, HotCount)>,
    /// When the interval of `last` ended.
    at: Option<Instant>,
}

impl HotState {
    /// At the end of an interval: keeps its keys, or stops sampling when nobody looked.
    pub fn rotate(&mut self, sh: &Shared) {
        let hot = &sh.watchers.hot;
        let looking = self
            .last_look
            .is_some_and(|t| t.elapsed() < Duration::from_secs(LOOK_SECS));
        if !looking {
            hot.set_sampling(false);
            *self = HotState::default();
            return;
        }
        self.last = hot.take();
        self.at = Some(Instant::now());
    }

    /// `/api/hot`: the last interval's keys; starts the sampling when it was off.
    pub fn look(&mut self, sh: &Shared) -> String {
        self.last_look = Some(Instant::now());
        let hot = &sh.watchers.hot;
        if !hot.sampling() {
            hot.set_sampling(true);
        }
        let mut j = Json::new();
        j.open();
        j.field_u("interval", HOT_INTERVAL_SECS);
        j.field_u("sample", HOT_SAMPLE);
        j.key("age").f(self.at.map(|t| t.elapsed().as_secs_f64()));
        j.key("keys").open_array();
        for (key, c) in &self.last {
            j.open().field_s("key", &String::from_utf8_lossy(key));
            // Sampled fetches scaled to all of them, per second.
            let per_sec = (c.samples * HOT_SAMPLE) as f64 / HOT_INTERVAL_SECS as f64;
            j.key("per_sec").f(Some(per_sec));
            j.key("hit_ratio").f(Some(c.hits as f64 / c.samples as f64));
            j.field_u("samples", c.samples).field_u("error", c.error);
            j.close();
        }
        j.close_array().close();
        j.finish()
    }
}

/// The key browser's cursors and the logins' backoff.
#[derive(Debug, Default)]
pub struct Browser {
    cursors: Mutex<VecDeque<(u64, Vec<u8>, DumpCursor)>>,
    next_cursor: std::sync::atomic::AtomicU64,
    /// Failed logins in a row, and until when attempts fail unchecked.
    failures: Mutex<(u8, Option<Instant>)>,
}

/// Whether the key routes need a login: the server has `-Y` or `-S`.
pub fn login_required(sh: &Shared) -> bool {
    sh.auth.is_some() || sh.settings.sasl
}

const UNAUTHORIZED: &str = "WWW-Authenticate: Basic realm=\"memkitd\", charset=\"UTF-8\"\r\n\
Cache-Control: no-store\r\n";

fn unauthorized() -> Response {
    Response {
        headers: UNAUTHORIZED,
        ..Response::new("401 Unauthorized", "text/plain", &b"login needed\n"[..])
    }
}

impl Browser {
    /// Whether the request may see keys; the reply to send instead when not.
    pub fn admit(&self, sh: &Shared, head: &str) -> Result<(), Response> {
        if !login_required(sh) {
            return match header(head, "host").is_none_or(host_is_local) {
                true => Ok(()),
                false => Err(Response::new(
                    "403 Forbidden",
                    "text/plain",
                    &b"keys are shown to http://IP:PORT/ or http://localhost:PORT/ only\n"[..],
                )),
            };
        }
        let Some((user, pass)) = header(head, "authorization").and_then(basic) else {
            return Err(unauthorized());
        };
        let mut failures = self.failures.lock();
        if failures.1.is_some_and(|until| Instant::now() < until) {
            return Err(unauthorized());
        }
        let ok = sh.auth.as_ref().is_some_and(|a| a.verify(&user, &pass))
            || (sh.settings.sasl && crate::sasl::check_password(sh, &user, &pass));
        if ok {
            *failures = (0, None);
            return Ok(());
        }
        failures.0 = failures.0.saturating_add(1);
        let wait = Duration::from_millis(u64::from(crate::sasl::backoff(failures.0)));
        failures.1 = Some(Instant::now() + wait);
        tracing::info!("metrics: key browser login failed");
        Err(unauthorized())
    }

    /// `/api/keys?prefix=P[&more=CURSOR]`: the next matches, off the runtime's thread.
    pub async fn search(&self, sh: &Arc<Shared>, query: &str) -> String {
        let prefix = param(query, "prefix").unwrap_or_default();
        let more: Option<u64> =
            param(query, "more").and_then(|m| String::from_utf8(m).ok()?.parse().ok());
        let cursor = match more {
            Some(id) => {
                let mut cursors = self.cursors.lock();
                match cursors
                    .iter()
                    .position(|(i, p, _)| *i == id && *p == prefix)
                {
                    Some(at) => cursors.remove(at).map(|(_, _, c)| c),
                    None => return r#"{"error":"that search is over; start it again"}"#.into(),
                }
            }
            None => Some(DumpCursor::default()),
        };
        let shared = sh.clone();
        let p = prefix.clone();
        let found = tokio::task::spawn_blocking(move || scan(&shared, &p, cursor.unwrap()))
            .await
            .unwrap_or_default();
        let id = found.cursor.map(|c| {
            let id = self
                .next_cursor
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            let mut cursors = self.cursors.lock();
            if cursors.len() >= CURSORS {
                cursors.pop_front();
            }
            cursors.push_back((id, prefix, c));
            id
        });
        let mut j = Json::new();
        j.open().field_u("scanned", found.scanned as u64);
        j.key("more");
        match id {
            Some(id) => j.u(id),
            None => j.f(None),
        };
        j.key("keys").open_array();
        for k in &found.keys {
            j.open().field_s("key", &String::from_utf8_lossy(&k.key));
            j.key("ttl").i(k.ttl);
            j.field_u("size", k.size)
                .field_u("flags", u64::from(k.flags));
            j.field_u("idle", k.idle).field_u("cas", k.cas);
            j.key("fetched").b(k.fetched).close();
        }
        j.close_array().close();
        j.finish()
    }
}

/// One key found.
#[derive(Debug, Clone, Default)]
struct Found {
    key: Vec<u8>,
    /// Seconds left, -1 for never.
    ttl: i64,
    /// Value length.
    size: u64,
    flags: u32,
    /// Seconds since its last access.
    idle: u64,
    cas: u64,
    fetched: bool,
}

#[derive(Debug, Default)]
struct Scan {
    keys: Vec<Found>,
    scanned: usize,
    /// Where to go on, unless the dump is over.
    cursor: Option<DumpCursor>,
}

/// Lists the keys starting with `prefix` from `cursor` on, within [`MATCHES`] and
/// [`SCAN_BUDGET`].
fn scan(sh: &Shared, prefix: &[u8], mut cursor: DumpCursor) -> Scan {
    let now = memkit_types::Clock::now_secs(&**sh.engine.clock());
    let mut out = Scan::default();
    let mut more = true;
    while more && out.keys.len() < MATCHES && out.scanned < SCAN_BUDGET {
        // A batch never passes the matches wanted, so the cursor resumes after the last.
        let batch = (MATCHES - out.keys.len()).min(64);
        more = sh.engine.crawl(&mut cursor, batch, |m| {
            out.scanned += 1;
            if !m.key.starts_with(prefix) {
                return;
            }
            out.keys.push(Found {
                key: m.key.to_vec(),
                ttl: m
                    .exptime_unix
                    .map_or(-1, |e| e.saturating_sub(now).min(i64::MAX as u64) as i64),
                size: m.value_len as u64,
                flags: m.flags,
                idle: now.saturating_sub(m.last_access_unix),
                cas: m.cas,
                fetched: m.fetched,
            });
        });
    }
    out.keys.sort_by(|a, b| a.key.cmp(&b.key));
    out.cursor = more.then_some(cursor);
    out
}

/// The value of header `name` (lowercase) in a request head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// `Basic base64(user:password)` into its parts.
fn basic(value: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let (scheme, creds) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let creds = creds.trim().as_bytes();
    let mut out = vec![0u8; creds.len()];
    let n = memkit_protocol::base64::decode_into(creds, &mut out)?;
    out.truncate(n);
    let colon = out.iter().position(|&b| b == b':')?;
    Some((out[..colon].to_vec(), out[colon + 1..].to_vec()))
}

/// Whether a `Host` header names this machine by address or as `localhost`.
fn host_is_local(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => {
            return v6
                .split(']')
                .next()
                .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok());
        }
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_for_credentials_and_host() {
        let head = "GET /api/keys HTTP/1.1\r\nHost: 127.0.0.1:9150\r\n\
                    authorization:  Basic dXNlcjpwYTpzcw==\r\n\r\n";
        assert_eq!(header(head, "host"), Some("127.0.0.1:9150"));
        let (u, p) = basic(header(head, "authorization").unwrap()).unwrap();
        assert_eq!((&u[..], &p[..]), (&b"user"[..], &b"pa:ss"[..]));
        assert_eq!(basic("Bearer x"), None);
        assert_eq!(basic("Basic !!!"), None);
        for local in [
            "127.0.0.1:9150",
            "10.1.2.3",
            "localhost:80",
            "[::1]:9150",
            "[fe80::1]",
        ] {
            assert!(host_is_local(local), "{local}");
        }
        for far in [
            "evil.example:9150",
            "127.0.0.1.nip.io",
            "[evil]:1",
            "localhost.evil",
        ] {
            assert!(!host_is_local(far), "{far}");
        }
    }
}
