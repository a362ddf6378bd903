//! The router's configuration file (`memkitd --route FILE`, TOML): pools and routes,
//! checked whole before anything uses them. `docs/router.md` is the reference; an error
//! names the file's line, and on a reload (SIGHUP) a file with one keeps the old routes.
//!
//! ```toml
//! [pools.main]
//! servers = ["10.0.0.1:11211", "10.0.0.2:11211:2"]   # host:port[:weight]
//! placement = "ketama"                                # memkit-client's names
//!
//! [[route]]
//! prefix = "session:"          # keys starting with it ("" or absent: every key)
//! type = "all-majority"        # hash, failover, all-sync, all-majority, all-fastest,
//! pool = "main"                #   all-async, warm-up
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use memkit_client::{Dialect, Distribution, ServerSpec};
use serde::Deserialize;
use toml::Spanned;

/// The file as read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    pools: BTreeMap<String, Spanned<PoolFile>>,
    #[serde(default)]
    route: Vec<Spanned<RouteFile>>,
}

#[derive(Debug, Deserialize, PartialEq, Eq, Clone)]
#[serde(deny_unknown_fields)]
struct PoolFile {
    servers: Vec<String>,
    placement: Option<String>,
    protocol: Option<String>,
    connections: Option<usize>,
    timeout_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
    tko_after: Option<u32>,
    probe_ms: Option<u64>,
    username: Option<String>,
    password: Option<String>,
    tls_ca: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    tls_name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteFile {
    #[serde(default)]
    prefix: String,
    commands: Option<Vec<String>>,
    #[serde(rename = "type")]
    kind: String,
    pool: Option<String>,
    pools: Option<Vec<String>>,
    #[serde(default)]
    failover_on_miss: bool,
    cold: Option<String>,
    warm: Option<String>,
    warm_exptime: Option<u32>,
    gutter: Option<String>,
    gutter_ttl: Option<u32>,
    shadow: Option<String>,
    shadow_fraction: Option<f64>,
    split_above: Option<usize>,
}

/// The wire a pool's servers are spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Meta commands (the default): everything memkit's commands can say.
    Meta,
    /// Classic text commands, for servers older than meta.
    Classic,
    /// Binary, for servers started with `-S` (SASL).
    Binary,
}

/// TLS to a pool's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub ca: String,
    pub cert: Option<(String, String)>,
    pub name: Option<String>,
}

/// A pool: servers and how keys are placed on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: String,
    pub servers: Vec<ServerSpec>,
    pub placement: Distribution,
    pub wire: Wire,
    pub connections: usize,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Consecutive failures after which a server is marked down (TKO).
    pub tko_after: u32,
    /// How often a marked-down server is probed.
    pub probe: Duration,
    pub auth: Option<(String, String)>,
    pub tls: Option<Tls>,
}

/// Which commands a route takes (`commands = [...]`).
pub mod class {
    /// Reads: `get`, `gets`, `gat`, `gats`, `mg`.
    pub const GET: u8 = 1;
    /// Stores: `set`, `add`, `replace`, `append`, `prepend`, `cas`, `ms`.
    pub const SET: u8 = 2;
    /// `delete`, `md`.
    pub const DELETE: u8 = 4;
    /// `incr`, `decr`, `ma`.
    pub const ARITH: u8 = 8;
    /// `touch`.
    pub const TOUCH: u8 = 16;
    /// `flush_all` (sent to every server the matching routes use).
    pub const FLUSH: u8 = 32;
    /// Every class.
    pub const ALL: u8 = 63;
    /// The names the file uses.
    pub const NAMES: [(&str, u8); 6] = [
        ("get", GET),
        ("set", SET),
        ("delete", DELETE),
        ("arith", ARITH),
        ("touch", TOUCH),
        ("flush", FLUSH),
    ];
}

/// What a route does with a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// To the key's server in one pool.
    Hash { pool: String },
    /// To the first pool; on an error or a marked-down server (and, with `on_miss`, a
    /// read's miss) to the next, in order.
    Failover { pools: Vec<String>, on_miss: bool },
    /// A replicated pool: writes to every server; the reply waits for all (`Sync`), a
    /// majority (`Majority`), the first (`Fastest`) or only the key's own server (`Async`,
    /// the others in the background). Reads from the key's server, the next on an error.
    All { pool: String, wait: Wait },
    /// Reads from `cold`; a miss reads `warm` and fills `cold` with what it found (for
    /// `exptime` seconds, 0: no expiry). Writes go to `cold`, deletes to both.
    WarmUp {
        cold: String,
        warm: String,
        exptime: u32,
    },
}

/// How many of a replicated pool's servers a write waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Sync,
    Majority,
    Fastest,
    Async,
}

/// One route: which keys and commands it takes, and what it does with them.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSpec {
    /// The file's line it starts on (`stats router`, messages).
    pub line: usize,
    pub prefix: Vec<u8>,
    pub classes: u8,
    pub kind: Kind,
    /// A marked-down or failing server's requests go to this pool instead, a store's
    /// expiry capped at the TTL (seconds).
    pub gutter: Option<(String, u32)>,
    /// This fraction of keys (by hash) also goes to this pool; its replies are ignored.
    pub shadow: Option<(String, f64)>,
    /// Values above this many bytes are stored as chunks under keys of their own
    /// (`super::split`).
    pub split_above: Option<usize>,
}

/// A checked configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub pools: Vec<PoolSpec>,
    pub routes: Vec<RouteSpec>,
}

/// Reads and checks `path`.
pub fn load(path: &std::path::Path) -> Result<Plan, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}:{e}", path.display()))
}

/// Checks a configuration's text; an error starts with its line number (`LINE: why`).
pub fn parse(text: &str) -> Result<Plan, String> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        format!("{line}: {}", e.message().trim_end())
    })?;
    let mut pools = Vec::new();
    for (name, p) in &file.pools {
        let line = line_of(text, p.span().start);
        pools.push(pool(name, p.get_ref()).map_err(|e| format!("{line}: pool {name:?}: {e}"))?);
    }
    if file.route.is_empty() {
        return Err("1: no [[route]]: the router would answer every request with an error".into());
    }
    let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
    let mut routes = Vec::new();
    for r in &file.route {
        let line = line_of(text, r.span().start);
        routes.push(route(line, r.get_ref(), &names).map_err(|e| format!("{line}: {e}"))?);
    }
    Ok(Plan { pools, routes })
}

/// The 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    1 + text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

fn pool(name: &str, p: &PoolFile) -> Result<PoolSpec, String> {
    if p.servers.is_empty() {
        return Err("no servers".into());
    }
    let servers = p
        .servers
        .iter()
        .map(|s| s.parse::<ServerSpec>())
        .collect::<Result<Vec<_>, _>>()?;
    let placement = match &p.placement {
        None => Distribution::Ketama,
        Some(s) => s.parse()?,
    };
    let wire = match p.protocol.as_deref() {
        None | Some("meta") => Wire::Meta,
        Some("classic" | "text") => Wire::Classic,
        Some("binary") => Wire::Binary,
        Some(other) => {
            return Err(format!(
                "unknown protocol {other:?} (meta, classic, binary)"
            ));
        }
    };
    let ms = |v: Option<u64>, default: u64, what: &str| match v.unwrap_or(default) {
        0 => Err(format!("{what} must be at least 1 ms")),
        n => Ok(Duration::from_millis(n)),
    };
    let auth = match (&p.username, &p.password) {
        (Some(u), Some(pw)) => Some((u.clone(), pw.clone())),
        (None, None) => None,
        _ => return Err("username and password go together".into()),
    };
    let tls = match (&p.tls_ca, &p.tls_cert, &p.tls_key) {
        (None, None, None) if p.tls_name.is_none() => None,
        (Some(ca), cert, key) => Some(Tls {
            ca: ca.clone(),
            cert: match (cert, key) {
                (Some(c), Some(k)) => Some((c.clone(), k.clone())),
                (None, None) => None,
                _ => return Err("tls_cert and tls_key go together".into()),
            },
            name: p.tls_name.clone(),
        }),
        _ => return Err("TLS needs tls_ca".into()),
    };
    Ok(PoolSpec {
        name: name.to_string(),
        servers,
        placement,
        wire,
        connections: p.connections.unwrap_or(1).clamp(1, 64),
        timeout: ms(p.timeout_ms, 1000, "timeout_ms")?,
        connect_timeout: ms(p.connect_timeout_ms, 1000, "connect_timeout_ms")?,
        tko_after: p.tko_after.unwrap_or(3).max(1),
        probe: ms(p.probe_ms, 1000, "probe_ms")?,
        auth,
        tls,
    })
}

fn route(line: usize, r: &RouteFile, pools: &[&str]) -> Result<RouteSpec, String> {
    let known = |name: &Option<String>, what: &str| -> Result<String, String> {
        let n = name
            .as_ref()
            .ok_or_else(|| format!("type {:?} needs {what}", r.kind))?;
        match pools.contains(&n.as_str()) {
            true => Ok(n.clone()),
            false => Err(format!("{what} {n:?} is not a pool (pools: {pools:?})")),
        }
    };
    let kind = match r.kind.as_str() {
        "hash" => Kind::Hash {
            pool: known(&r.pool, "pool")?,
        },
        "failover" => {
            let list = r.pools.as_ref().filter(|l| l.len() >= 2);
            let list = list.ok_or("type \"failover\" needs pools = [two or more]")?;
            let pools = list
                .iter()
                .map(|p| known(&Some(p.clone()), "pool"))
                .collect::<Result<_, _>>()?;
            Kind::Failover {
                pools,
                on_miss: r.failover_on_miss,
            }
        }
        "all-sync" | "all-majority" | "all-fastest" | "all-async" => Kind::All {
            pool: known(&r.pool, "pool")?,
            wait: match r.kind.as_str() {
                "all-sync" => Wait::Sync,
                "all-majority" => Wait::Majority,
                "all-fastest" => Wait::Fastest,
                _ => Wait::Async,
            },
        },
        "warm-up" => Kind::WarmUp {
            cold: known(&r.cold, "cold")?,
            warm: known(&r.warm, "warm")?,
            exptime: r.warm_exptime.unwrap_or(0),
        },
        other => {
            return Err(format!(
                "unknown route type {other:?} (hash, failover, all-sync, all-majority, \
                 all-fastest, all-async, warm-up)"
            ));
        }
    };
    let classes = match &r.commands {
        None => class::ALL,
        Some(list) if list.is_empty() => return Err("commands = [] takes nothing".into()),
        Some(list) => list.iter().try_fold(0, |acc, c| {
            class::NAMES
                .iter()
                .find(|(n, _)| n == c)
                .map(|(_, bit)| acc | bit)
                .ok_or_else(|| {
                    format!("unknown command class {c:?} (get, set, delete, arith, touch, flush)")
                })
        })?,
    };
    let gutter = match (&r.gutter, r.gutter_ttl) {
        (None, None) => None,
        (g @ Some(_), ttl) => Some((known(g, "gutter")?, ttl.unwrap_or(10).max(1))),
        (None, Some(_)) => return Err("gutter_ttl without gutter".into()),
    };
    let shadow = match (&r.shadow, r.shadow_fraction) {
        (None, None) => None,
        (s @ Some(_), f) => {
            let f = f.unwrap_or(1.0);
            if !(f > 0.0 && f <= 1.0) {
                return Err(format!("shadow_fraction {f} is not in (0, 1]"));
            }
            Some((known(s, "shadow")?, f))
        }
        (None, Some(_)) => return Err("shadow_fraction without shadow".into()),
    };
    if let Some(n) = r.split_above.filter(|&n| n < 1024) {
        return Err(format!("split_above {n} is below 1024 bytes"));
    }
    if r.prefix.len() > 250 || r.prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!("prefix {:?} cannot start a key", r.prefix));
    }
    Ok(RouteSpec {
        line,
        prefix: r.prefix.as_bytes().to_vec(),
        classes,
        kind,
        gutter,
        shadow,
        split_above: r.split_above,
    })
}

impl PoolSpec {
    /// The client settings for this pool's servers.
    pub fn client_config(&self) -> Result<memkit_client::ClientConfig, String> {
        let mut c = memkit_client::ClientConfig {
            connect_timeout: self.connect_timeout,
            request_timeout: self.timeout,
            pool_size: self.connections,
            dialect: match self.wire {
                Wire::Classic => Dialect::Classic,
                _ => Dialect::Meta,
            },
            ..Default::default()
        };
        if self.wire == Wire::Binary {
            c = c.binary();
        }
        if let Some((u, p)) = &self.auth {
            let creds = memkit_client::Credentials::new(u, p)
                .map_err(|e| format!("pool {}: {e}", self.name))?;
            c = c.with_auth(creds);
        }
        if let Some(t) = &self.tls {
            let mut o = memkit_client::TlsOptions::new().ca_pem_file(&t.ca);
            if let Some((cert, key)) = &t.cert {
                o = o.client_cert_pem_files(cert, key);
            }
            if let Some(n) = &t.name {
                o = o.server_name(n);
            }
            c = c.with_tls(
                o.connector()
                    .map_err(|e| format!("pool {}: {e}", self.name))?,
            );
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[pools.a]
servers = ["127.0.0.1:11211", "127.0.0.1:11212:2"]

[pools.b]
servers = ["127.0.0.1:11213"]
placement = "modula"
protocol = "binary"

[[route]]
prefix = "s:"
type = "failover"
pools = ["a", "b"]
failover_on_miss = true

[[route]]
type = "hash"
pool = "a"
commands = ["get", "set"]
shadow = "b"
shadow_fraction = 0.5
"#;

    #[test]
    fn a_good_file_becomes_a_plan() {
        let p = parse(GOOD).unwrap();
        assert_eq!(p.pools.len(), 2);
        assert_eq!(p.pools[0].servers[1].weight, 2);
        assert_eq!(p.pools[1].placement, Distribution::MODULA);
        assert_eq!(p.pools[1].wire, Wire::Binary);
        assert_eq!(p.routes[0].line, 10);
        assert_eq!(p.routes[0].prefix, b"s:");
        assert_eq!(
            p.routes[0].kind,
            Kind::Failover {
                pools: vec!["a".into(), "b".into()],
                on_miss: true
            }
        );
        assert_eq!(p.routes[1].classes, class::GET | class::SET);
        assert_eq!(p.routes[1].shadow, Some(("b".into(), 0.5)));
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            (
                GOOD.replace("pools = [\"a\", \"b\"]", "pools = [\"a\", \"c\"]"),
                "10: pool \"c\" is not a pool",
            ),
            (
                GOOD.replace("\"modula\"", "\"rot13\""),
                "5: pool \"b\": unknown distribution",
            ),
            (
                GOOD.replace("type = \"hash\"", "type = \"hsah\""),
                "16: unknown route type \"hsah\"",
            ),
            (
                GOOD.replace("shadow_fraction = 0.5", "shadow_fraction = 2.0"),
                "16: shadow_fraction 2",
            ),
            (
                GOOD.replace("\"set\"]", "\"put\"]"),
                "16: unknown command class \"put\"",
            ),
            (
                GOOD.replace("placement = \"modula\"", "placemnt = 1"),
                "7: unknown field `placemnt`",
            ),
            (
                GOOD.replace("servers = [\"127.0.0.1:11213\"]", "servers = [\"h:x\"]"),
                "5: pool \"b\": bad server",
            ),
            (GOOD.replace("[[route]]\ntype", "[[route]\ntype"), "16: "),
            (
                "[pools.a]\nservers = [\"h:1\"]\n".to_string(),
                "1: no [[route]]",
            ),
        ];
        for (text, want) in cases {
            let got = parse(&text).unwrap_err();
            assert!(got.starts_with(want), "{got:?} should start with {want:?}");
        }
    }
}
