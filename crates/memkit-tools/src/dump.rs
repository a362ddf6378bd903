//! `memkit dump`: every key of every server with its metadata, through
//! `lru_crawler metadump all` (memcached ≥ 1.4.31 and memkitd; refused when the server runs
//! with `-o no_lru_crawler` / memkitd's `-X`).

use std::io::Write;
use std::time::Duration;

use memkit_client::{ClientConfig, ServerSpec};

use crate::json::Object;
use crate::raw::{Raw, fields, unescape};

/// Output of `memkit dump`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DumpFormat {
    /// Aligned columns: key, size, class, TTL left, last access, fetched, CAS.
    Text,
    /// One JSON object per line with every field the server sent (plus `server`).
    Json,
    /// The server's lines as they are (`key=... exp=... la=...`).
    Raw,
}

/// Options of `memkit dump`.
#[derive(Debug, Clone)]
pub struct DumpOptions {
    /// Only keys starting with this (after decoding).
    pub prefix: Option<String>,
    /// Stop after this many keys in total.
    pub limit: Option<usize>,
    /// Output format.
    pub format: DumpFormat,
}

/// Dumps every server's keys to `out`; returns the number of keys written and the errors.
pub async fn dump(
    servers: &[ServerSpec],
    config: &ClientConfig,
    opts: &DumpOptions,
    out: &mut dyn Write,
) -> (usize, Vec<String>) {
    let mut written = 0usize;
    let mut errors = Vec::new();
    if opts.format == DumpFormat::Text {
        let _ = writeln!(
            out,
            "{:<21} {:<40} {:>8} {:>4} {:>9} {:>9} {:>5} {:>10}",
            "SERVER", "KEY", "SIZE", "CLS", "TTL", "IDLE", "FETCH", "CAS"
        );
    }
    for server in servers {
        if opts.limit.is_some_and(|l| written >= l) {
            break;
        }
        match dump_one(server, config, opts, out, &mut written).await {
            Ok(()) => {}
            Err(e) => errors.push(e),
        }
    }
    (written, errors)
}

async fn dump_one(
    spec: &ServerSpec,
    config: &ClientConfig,
    opts: &DumpOptions,
    out: &mut dyn Write,
    written: &mut usize,
) -> Result<(), String> {
    let mut c = Raw::connect(spec, config).await?;
    let server = spec.addr();
    let server = server.as_str();
    // The server's clock, so TTLs and idle times are right even if ours differs.
    c.send("stats").await?;
    let mut now: Option<i64> = None;
    while let Some(l) = c.line(false).await? {
        if l == "END" {
            break;
        }
        if let Some(t) = l.strip_prefix("STAT time ") {
            now = t.trim().parse().ok();
        }
    }
    let now = now.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    });
    // Only one crawl runs at a time: memcached answers BUSY while another is under way.
    let mut attempt = 0;
    loop {
        c.send("lru_crawler metadump all").await?;
        let first = c.line(false).await?.ok_or(format!("{server}: closed"))?;
        if first.starts_with("BUSY") && attempt < 20 {
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if first.starts_with("ERROR")
            || first.starts_with("CLIENT_ERROR")
            || first.starts_with("SERVER_ERROR")
            || first.starts_with("BUSY")
        {
            return Err(format!("{server}: lru_crawler metadump: {first}"));
        }
        let mut line = Some(first);
        while let Some(l) = line {
            if l == "END" {
                return Ok(());
            }
            if emit(server, now, &l, opts, out) {
                *written += 1;
            }
            if opts.limit.is_some_and(|lim| *written >= lim) {
                // Dropping the connection stops the server's crawl.
                return Ok(());
            }
            line = c.line(false).await?;
        }
        return Err(format!("{server}: closed before END"));
    }
}

/// Writes one metadump line; false if it was filtered out.
fn emit(server: &str, now: i64, line: &str, opts: &DumpOptions, out: &mut dyn Write) -> bool {
    let f = fields(line);
    let get = |k: &str| f.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
    let Some(raw_key) = get("key") else {
        return false;
    };
    let key = unescape(raw_key);
    if let Some(p) = &opts.prefix
        && !key.starts_with(p.as_str())
    {
        return false;
    }
    let res = match opts.format {
        DumpFormat::Raw => writeln!(out, "{line}"),
        DumpFormat::Json => {
            let mut o: Object = Object::default();
            o.push("server", server);
            for (k, v) in &f {
                if *k == "key" {
                    o.push(*k, key.as_str());
                } else {
                    o.push(*k, crate::json::value(v));
                }
            }
            writeln!(out, "{}", crate::json::line(&o))
        }
        DumpFormat::Text => {
            let exp: i64 = get("exp").and_then(|v| v.parse().ok()).unwrap_or(-1);
            let ttl = if exp < 0 {
                "never".to_string()
            } else {
                secs((exp - now).max(0))
            };
            let idle = get("la")
                .and_then(|v| v.parse::<i64>().ok())
                .map_or("-".into(), |la| secs((now - la).max(0)));
            writeln!(
                out,
                "{:<21} {:<40} {:>8} {:>4} {:>9} {:>9} {:>5} {:>10}",
                server,
                key,
                get("size").unwrap_or("-"),
                get("cls").unwrap_or("-"),
                ttl,
                idle,
                get("fetch").unwrap_or("-"),
                get("cas").unwrap_or("-"),
            )
        }
    };
    res.is_ok()
}

/// Seconds as `42s`, `7m03s`, `5h02m`, `3d04h`.
pub fn secs(s: i64) -> String {
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s if s < 86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        s => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_lines() {
        let line = "key=user%3A1 exp=1100 la=990 cas=8 fetch=yes cls=1 size=10";
        let mut out = Vec::new();
        let o = DumpOptions {
            prefix: Some("user:".into()),
            limit: None,
            format: DumpFormat::Text,
        };
        assert!(emit("h:1", 1000, line, &o, &mut out));
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("user:1"), "{s}");
        assert!(
            s.contains("1m40s") && s.contains("10s") && s.contains("yes"),
            "{s}"
        );
        let mut out = Vec::new();
        let o = DumpOptions {
            format: DumpFormat::Json,
            ..o
        };
        assert!(emit("h:1", 1000, line, &o, &mut out));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"server\":\"h:1\",\"key\":\"user:1\",\"exp\":1100,\"la\":990,\"cas\":8,\"fetch\":\"yes\",\"cls\":1,\"size\":10}\n"
        );
        let o = DumpOptions {
            prefix: Some("post:".into()),
            ..o
        };
        assert!(!emit("h:1", 1000, line, &o, &mut Vec::new()));
        assert_eq!(secs(3725), "1h02m");
    }
}
