//! The key-value verbs of `memkit` (`get`, `gat`, `touch`, the stores, `cas`, `delete`,
//! counters) and the per-server ones (`stats`, `flush`, `ping`, `version`, `verbosity`),
//! with the exit status each outcome gives ([`crate::status::Status`]).

use std::io::{Read, Write};
use std::time::Instant;

use memkit_client::{Client, Cluster, Protocol};
use memkit_types::{Exptime, GetOptions, Item, Memcache, StoreMode, StoreOutcome, Ttl};
use serde::Serialize;

use crate::cli::Cmd;
use crate::raw::Raw;
use crate::status::Status;

/// Key, value (or stdin), flags and expiry of `set`, `add` and `replace`.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Key.
    pub key: String,
    /// Value; read from stdin when absent.
    pub value: Option<String>,
    /// Client flags.
    #[arg(long, default_value_t = 0)]
    pub flags: u32,
    /// Expiry (memcached's exptime: seconds, or an absolute Unix time).
    #[arg(long, default_value_t = 0)]
    pub exptime: i64,
}

/// Key and value (or stdin) of `append` and `prepend` (which keep flags and expiry).
#[derive(Debug, Clone, clap::Args)]
pub struct ConcatArgs {
    /// Key.
    pub key: String,
    /// Value; read from stdin when absent.
    pub value: Option<String>,
}

/// How `get` and `gat` print items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GetFormat {
    /// The value's bytes, then a newline (like memccat).
    Value,
    /// `KEY FLAGS CAS TTL VALUE` (TTL in seconds, -1 for none, `-` when unknown: over
    /// binary), then a newline.
    Line,
    /// One JSON object per key.
    Json,
}

/// `get --format json`: one per key.
#[derive(Debug, Serialize)]
struct JsonItem<'a> {
    key: &'a str,
    found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    flags: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cas: Option<u64>,
    /// Seconds left, -1 for no expiry; absent when unknown (binary replies carry no TTL).
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<i64>,
    /// The value when it is UTF-8 ...
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    /// ... else its base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    value_base64: Option<String>,
}

/// Seconds left, -1 for no expiry; `None` when the read did not ask (binary cannot).
fn ttl_secs(t: Option<Ttl>) -> Option<i64> {
    match t? {
        Ttl::Secs(s) => Some(i64::from(s)),
        Ttl::Never => Some(-1),
    }
}

/// Whether the pool speaks the binary protocol (`--binary`).
fn binary(c: &Cluster) -> bool {
    !c.servers().is_empty() && c.client(0).config().protocol == Protocol::Binary
}

fn value_of(v: Option<String>) -> Result<Vec<u8>, String> {
    match v {
        Some(v) => Ok(v.into_bytes()),
        None => {
            let mut v = Vec::new();
            std::io::stdin()
                .read_to_end(&mut v)
                .map_err(|e| e.to_string())?;
            Ok(v)
        }
    }
}

/// The client of `key`'s server. The verbs talk to it directly: a pool takes an
/// unreachable server for a miss on reads, a one-shot tool must say it was unreachable.
fn client_for<'a>(c: &'a Cluster, key: &str) -> Result<&'a Client, String> {
    c.server_for(key.as_bytes())
        .map(|i| c.client(i))
        .ok_or_else(|| "no server".to_string())
}

/// Runs one verb.
pub async fn run(pool: &Cluster, cmd: Cmd) -> Result<Status, String> {
    let mut st = Status::default();
    let c = |key: &str| client_for(pool, key);
    match cmd {
        Cmd::Get { keys, format } => read(pool, &keys, None, format, &mut st).await,
        Cmd::Gat {
            exptime,
            keys,
            format,
        } => read(pool, &keys, Some(Exptime(exptime)), format, &mut st).await,
        Cmd::Touch { key, exptime } => match c(&key)?.touch(key.as_bytes(), Exptime(exptime)).await
        {
            Ok(true) => {}
            Ok(false) => st.miss(&key, "not found"),
            Err(e) => st.fail(&key, &e),
        },
        Cmd::Set(a) => store(pool, StoreMode::Set, a, None, &mut st).await?,
        Cmd::Add(a) => store(pool, StoreMode::Add, a, None, &mut st).await?,
        Cmd::Replace(a) => store(pool, StoreMode::Replace, a, None, &mut st).await?,
        Cmd::Append(a) => store(pool, StoreMode::Append, concat(a), None, &mut st).await?,
        Cmd::Prepend(a) => store(pool, StoreMode::Prepend, concat(a), None, &mut st).await?,
        Cmd::Cas {
            key,
            cas,
            value,
            flags,
            exptime,
        } => {
            let a = StoreArgs {
                key,
                value,
                flags,
                exptime,
            };
            store(pool, StoreMode::Set, a, Some(cas), &mut st).await?;
        }
        Cmd::Delete { keys } => {
            for k in keys {
                match c(&k)?.delete(k.as_bytes()).await {
                    Ok(true) => {}
                    Ok(false) => st.miss(&k, "not found"),
                    Err(e) => st.fail(&k, &e),
                }
            }
        }
        Cmd::Incr { key, delta } => {
            arith(&key, c(&key)?.incr(key.as_bytes(), delta).await, &mut st);
        }
        Cmd::Decr { key, delta } => {
            arith(&key, c(&key)?.decr(key.as_bytes(), delta).await, &mut st);
        }
        cmd => return servers(pool, cmd).await,
    }
    Ok(st)
}

fn concat(a: ConcatArgs) -> StoreArgs {
    StoreArgs {
        key: a.key,
        value: a.value,
        flags: 0,
        exptime: 0,
    }
}

async fn read(
    c: &Cluster,
    keys: &[String],
    touch: Option<Exptime>,
    format: GetFormat,
    st: &mut Status,
) {
    let opts = GetOptions {
        touch,
        // TTLs come from meta reads (`mg ... t`); a binary reply has none to give.
        meta: format != GetFormat::Value && !binary(c),
        ..GetOptions::default()
    };
    // One batch per server, straight to its client (see `client_for`).
    let mut items: Vec<Option<Item>> = vec![None; keys.len()];
    for (i, spec) in c.servers().iter().enumerate() {
        let mine: Vec<usize> = (0..keys.len())
            .filter(|&k| c.server_for(keys[k].as_bytes()) == Some(i))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let refs: Vec<&[u8]> = mine.iter().map(|&k| keys[k].as_bytes()).collect();
        match c.client(i).get_multi(&refs, &opts).await {
            Ok(got) => {
                for (&k, item) in mine.iter().zip(got) {
                    items[k] = item;
                }
            }
            Err(e) => return st.fail(&spec.addr(), &e),
        }
    }
    let mut out = std::io::stdout().lock();
    for (k, item) in keys.iter().zip(items) {
        if item.is_none() {
            st.miss(k, "not found");
        }
        let _ = print_item(&mut out, k, item.as_ref(), format);
    }
}

fn print_item(
    out: &mut dyn Write,
    key: &str,
    item: Option<&Item>,
    format: GetFormat,
) -> std::io::Result<()> {
    match (format, item) {
        (GetFormat::Value, Some(i)) => {
            out.write_all(&i.value)?;
            out.write_all(b"\n")
        }
        (GetFormat::Line, Some(i)) => {
            let ttl = ttl_secs(i.ttl).map_or("-".to_string(), |t| t.to_string());
            write!(out, "{key} {} {} {ttl} ", i.flags, i.cas)?;
            out.write_all(&i.value)?;
            out.write_all(b"\n")
        }
        (GetFormat::Json, _) => {
            let text = item.and_then(|i| std::str::from_utf8(&i.value).ok());
            let j = JsonItem {
                key,
                found: item.is_some(),
                flags: item.map(|i| i.flags),
                cas: item.map(|i| i.cas),
                ttl: item.and_then(|i| ttl_secs(i.ttl)),
                value: text,
                value_base64: item
                    .filter(|_| text.is_none())
                    .map(|i| crate::json::base64(&i.value)),
            };
            writeln!(out, "{}", crate::json::line(&j))
        }
        (_, None) => Ok(()),
    }
}

async fn store(
    c: &Cluster,
    mode: StoreMode,
    a: StoreArgs,
    cas: Option<u64>,
    st: &mut Status,
) -> Result<(), String> {
    let value = value_of(a.value)?;
    let opts = memkit_types::StoreOptions {
        cas,
        ..memkit_types::StoreOptions::new(mode, a.flags, Exptime(a.exptime))
    };
    match client_for(c, &a.key)?
        .store(a.key.as_bytes(), &value, &opts)
        .await
    {
        Ok(s) => match s.outcome {
            StoreOutcome::Stored => {}
            StoreOutcome::NotStored => st.miss(&a.key, "not stored"),
            StoreOutcome::Exists => st.miss(&a.key, "exists (CAS mismatch)"),
            StoreOutcome::NotFound => st.miss(&a.key, "not found"),
        },
        Err(e) => st.fail(&a.key, &e),
    }
    Ok(())
}

fn arith(key: &str, res: memkit_types::Result<Option<u64>>, st: &mut Status) {
    match res {
        Ok(Some(v)) => println!("{v}"),
        Ok(None) => st.miss(key, "not found"),
        Err(e) => st.fail(key, &e),
    }
}

/// The commands every server runs: `stats`, `flush`, `ping`, `version`, `verbosity`.
async fn servers(c: &Cluster, cmd: Cmd) -> Result<Status, String> {
    let mut st = Status::default();
    let mut out = std::io::stdout().lock();
    match cmd {
        Cmd::Stats { args, format } => {
            let text = crate::stats::run(c, &args, format, &mut st).await?;
            let _ = out.write_all(text.as_bytes());
        }
        Cmd::Flush { delay } => {
            if let Err(e) = c.flush_all(delay).await {
                st.fail("flush_all", &e);
            }
        }
        Cmd::Ping | Cmd::Version => {
            let ping = matches!(cmd, Cmd::Ping);
            for (i, spec) in c.servers().iter().enumerate() {
                let t = Instant::now();
                match c.client(i).version().await {
                    Ok(v) if ping => {
                        let ms = t.elapsed().as_secs_f64() * 1e3;
                        let _ = writeln!(out, "{spec}: {v} ({ms:.2} ms)");
                    }
                    Ok(v) => {
                        let _ = writeln!(out, "{} {v}", spec.addr());
                    }
                    Err(e) => st.fail(&spec.to_string(), &e),
                }
            }
        }
        Cmd::Verbosity { level } => {
            for (i, spec) in c.servers().iter().enumerate() {
                if let Err(e) = verbosity(c, i, level).await {
                    st.fail(&spec.addr(), &e);
                }
            }
        }
        other => return Err(format!("{other:?}: not a server command")),
    }
    Ok(st)
}

/// `verbosity LEVEL` on server `i` (the client library does not model it).
async fn verbosity(c: &Cluster, i: usize, level: u32) -> Result<(), String> {
    let mut raw = Raw::connect(&c.servers()[i], c.client(i).config()).await?;
    raw.send(&format!("verbosity {level}")).await?;
    match raw.line(false).await? {
        Some(l) if l == "OK" => Ok(()),
        Some(l) => Err(format!("verbosity {level}: {l}")),
        None => Err("closed".into()),
    }
}
