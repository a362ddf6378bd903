//! Fetching `stats` from a pool and printing it: `text` (memcstat's layout), `table` (one
//! column per server), `json`, and `prometheus` (rendered by `memkit_metrics`).

use std::fmt::Write;

use memkit_client::Cluster;

/// Name/value pairs as a server sent them.
pub type Pairs = Vec<(String, String)>;

/// What one server answered to `stats`, `stats settings`, `stats items`, `stats slabs`.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// `stats`.
    pub general: Pairs,
    /// `stats settings` (empty if not fetched).
    pub settings: Pairs,
    /// `stats items`.
    pub items: Pairs,
    /// `stats slabs`.
    pub slabs: Pairs,
    /// `stats router` (a memkitd router's; empty for any other server).
    pub router: Pairs,
}

impl Snapshot {
    /// A general stat, parsed.
    pub fn num(&self, name: &str) -> Option<f64> {
        get(&self.general, name)?.trim().parse().ok()
    }

    /// A general stat as an integer (0 when absent).
    pub fn u(&self, name: &str) -> u64 {
        get(&self.general, name)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Memory requested per size class: (class, chunk size, bytes, items), ascending by
    /// class. Chunk sizes come from `stats slabs` (0 if it was not answered); bytes from
    /// `mem_requested` in `stats items` (memcached 1.6, memkitd) or `stats slabs` (1.4/1.5).
    pub fn size_classes(&self) -> Vec<SizeClass> {
        let mut out: std::collections::BTreeMap<u32, SizeClass> = Default::default();
        for (k, v) in &self.items {
            let Some((class, field)) = k
                .strip_prefix("items:")
                .and_then(|r| r.split_once(':'))
                .and_then(|(c, f)| Some((c.parse::<u32>().ok()?, f)))
            else {
                continue;
            };
            let n: u64 = v.trim().parse().unwrap_or(0);
            let e = entry(&mut out, class);
            match field {
                "number" => e.items = n,
                "mem_requested" => e.bytes = n,
                _ => {}
            }
        }
        for (k, v) in &self.slabs {
            let Some((class, field)) = k
                .split_once(':')
                .and_then(|(c, f)| Some((c.parse::<u32>().ok()?, f)))
            else {
                continue;
            };
            let n: u64 = v.trim().parse().unwrap_or(0);
            match field {
                "chunk_size" => entry(&mut out, class).chunk_size = n,
                "mem_requested" => {
                    let e = entry(&mut out, class);
                    if e.bytes == 0 {
                        e.bytes = n;
                    }
                }
                _ => {}
            }
        }
        out.into_values().collect()
    }
}

fn entry(m: &mut std::collections::BTreeMap<u32, SizeClass>, class: u32) -> &mut SizeClass {
    m.entry(class).or_insert(SizeClass {
        class,
        ..SizeClass::default()
    })
}

/// One size class of the memory histogram (seed 003's figure 4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SizeClass {
    /// Slab class id.
    pub class: u32,
    /// Largest item of the class, in bytes (0 when unknown).
    pub chunk_size: u64,
    /// Bytes requested by the items stored in the class.
    pub bytes: u64,
    /// Items stored in the class.
    pub items: u64,
}

/// The value of `name` in `pairs`.
pub fn get<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Every server's snapshot (`stats` must answer; the others may fail and stay empty).
pub async fn fetch_all(c: &Cluster, settings: bool) -> Vec<(String, Result<Snapshot, String>)> {
    let (general, items, slabs, router) = tokio::join!(
        c.stats(""),
        c.stats("items"),
        c.stats("slabs"),
        c.stats("router")
    );
    let sets = if settings {
        c.stats("settings").await
    } else {
        Vec::new()
    };
    let mut sets = sets.into_iter();
    let mut items = items.into_iter();
    let mut slabs = slabs.into_iter();
    let mut router = router.into_iter();
    let mut out = Vec::new();
    for (spec, g) in general {
        let take = |r: Option<(memkit_client::ServerSpec, memkit_types::Result<Pairs>)>| {
            r.and_then(|(_, r)| r.ok()).unwrap_or_default()
        };
        let it = take(items.next());
        let sl = take(slabs.next());
        let st = take(sets.next());
        let ro = take(router.next());
        out.push((
            spec.addr(),
            g.map(|general| Snapshot {
                general,
                settings: st,
                items: it,
                slabs: sl,
                router: ro,
            })
            .map_err(|e| e.to_string()),
        ));
    }
    out
}

/// Output formats of `memkit stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `Server: h:p` then a tab-indented `name: value` per line (memcstat's layout).
    Text,
    /// One row per stat, one column per server.
    Table,
    /// `{"h:p": {"name": value, ...}, ...}`; numbers as JSON numbers, errors as `{"error": ...}`.
    Json,
    /// Prometheus text format with the memcached exporter's metric names.
    Prometheus,
}

/// `memkit stats [ARGS] --format F`: the rendered text; failed servers are reported on
/// stderr and marked in `st` (the others are still shown).
pub async fn run(
    c: &Cluster,
    args: &[String],
    format: Format,
    st: &mut crate::status::Status,
) -> Result<String, String> {
    if format == Format::Prometheus {
        if !args.is_empty() {
            return Err("--format prometheus takes no stats arguments".into());
        }
        let res = fetch_all(c, true).await;
        for (server, r) in &res {
            if let Err(e) = r {
                st.fail(server, e);
            }
        }
        return Ok(render_prometheus(&res));
    }
    let res: Vec<(String, Result<Pairs, String>)> = c
        .stats(&args.join(" "))
        .await
        .into_iter()
        .map(|(s, r)| (s.addr(), r.map_err(|e| e.to_string())))
        .collect();
    for (server, r) in &res {
        if let Err(e) = r {
            st.fail(server, e);
        }
    }
    Ok(render_pairs(format, &res))
}

/// Renders `results` (server, pairs or error) as `format` (not `Prometheus`).
pub fn render_pairs(format: Format, results: &[(String, Result<Pairs, String>)]) -> String {
    let mut out = String::new();
    match format {
        Format::Text | Format::Prometheus => {
            for (server, r) in results {
                if let Ok(pairs) = r {
                    let _ = writeln!(out, "Server: {server}");
                    for (k, v) in pairs {
                        let _ = writeln!(out, "\t{k}: {v}");
                    }
                }
            }
        }
        Format::Table => {
            let mut names: Vec<&str> = Vec::new();
            for (_, r) in results {
                for (k, _) in r.iter().flatten() {
                    if !names.contains(&k.as_str()) {
                        names.push(k);
                    }
                }
            }
            let mut rows: Vec<Vec<String>> = vec![
                std::iter::once("stat".to_string())
                    .chain(results.iter().map(|(s, _)| s.clone()))
                    .collect(),
            ];
            for name in &names {
                let mut row = vec![name.to_string()];
                for (_, r) in results {
                    row.push(match r {
                        Ok(p) => get(p, name).unwrap_or("-").to_string(),
                        Err(_) => "(down)".into(),
                    });
                }
                rows.push(row);
            }
            let cols = rows[0].len();
            let widths: Vec<usize> = (0..cols)
                .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
                .collect();
            for (i, row) in rows.iter().enumerate() {
                let mut line = String::new();
                for (c, cell) in row.iter().enumerate() {
                    if c == 0 {
                        let _ = write!(line, "{cell:<w$}", w = widths[c]);
                    } else {
                        let _ = write!(line, "  {cell:>w$}", w = widths[c]);
                    }
                }
                let _ = writeln!(out, "{}", line.trim_end());
                if i == 0 {
                    let total: usize = widths.iter().sum::<usize>() + 2 * (cols - 1);
                    let _ = writeln!(out, "{}", "-".repeat(total));
                }
            }
        }
        Format::Json => {
            let mut all = crate::json::Object::<crate::json::Object>::default();
            for (server, r) in results {
                let mut o: crate::json::Object = crate::json::Object::default();
                match r {
                    Ok(pairs) => {
                        for (k, v) in pairs {
                            o.push(k.as_str(), crate::json::value(v));
                        }
                    }
                    Err(e) => o.push("error", e.as_str()),
                }
                all.push(server.as_str(), o);
            }
            out = serde_json::to_string_pretty(&all).unwrap_or_default();
            out.push('\n');
        }
    }
    out
}

/// Renders snapshots in the Prometheus text format; a `server` label is added when there is
/// more than one server.
pub fn render_prometheus(results: &[(String, Result<Snapshot, String>)]) -> String {
    let empty = Snapshot::default();
    let labels: Vec<[(&str, &str); 1]> = results
        .iter()
        .map(|(s, _)| [("server", s.as_str())])
        .collect();
    let multi = results.len() > 1;
    let servers: Vec<memkit_metrics::ServerStats<'_>> = results
        .iter()
        .zip(&labels)
        .map(|((_, r), l)| {
            let s = r.as_ref().unwrap_or(&empty);
            memkit_metrics::ServerStats {
                labels: if multi { l } else { &[] },
                up: r.is_ok(),
                general: &s.general,
                settings: &s.settings,
                items: &s.items,
                slabs: &s.slabs,
                // A group's follower progress is not in `stats`: memkitd's own endpoint
                // has it, `memkit cluster status` shows it.
                followers: &[],
                router: &s.router,
            }
        })
        .collect();
    memkit_metrics::render(&servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_from_items_and_slabs() {
        let p = |v: &[(&str, &str)]| -> Pairs {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let s = Snapshot {
            items: p(&[
                ("items:1:number", "2"),
                ("items:1:mem_requested", "150"),
                ("items:5:number", "1"),
                ("items:5:mem_requested", "230"),
            ]),
            slabs: p(&[
                ("1:chunk_size", "96"),
                ("5:chunk_size", "240"),
                ("active_slabs", "2"),
            ]),
            ..Snapshot::default()
        };
        let c = s.size_classes();
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].class, c[0].chunk_size, c[0].bytes, c[0].items),
            (1, 96, 150, 2)
        );
        assert_eq!((c[1].class, c[1].chunk_size, c[1].bytes), (5, 240, 230));
    }

    #[test]
    fn table_aligns_columns() {
        let r = vec![
            (
                "a:1".to_string(),
                Ok(vec![("curr_items".into(), "5".into())]),
            ),
            ("b:2".to_string(), Err("refused".to_string())),
        ];
        let t = render_pairs(Format::Table, &r);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "stat        a:1     b:2");
        assert_eq!(lines[2], "curr_items    5  (down)");
    }
}
