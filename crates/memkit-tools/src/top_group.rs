//! `memkit top`'s replication section: for each server whose `stats` carry `raft_role` (a
//! memkitd node of a replicated group), its node id, role, the leader it knows of, its
//! term, commit and applied indexes, and how far it applies behind what it knows
//! committed. Nothing when no server is in a group (memcached, a plain memkitd). And its
//! router section ([`router_section`]): a row per backend of each memkitd router.

use crate::stats::{Pairs, get};
use crate::top::ServerView;

/// The section's lines (a title, a head, a row per node, a blank line), or none.
pub fn section(views: &[ServerView]) -> Vec<String> {
    let rows: Vec<String> = views
        .iter()
        .filter_map(|v| {
            let (_, s) = v.cur.as_ref()?;
            let role = crate::stats::get(&s.general, "raft_role")?;
            let leader = match s.u("raft_leader") {
                0 => "-".to_string(),
                l => l.to_string(),
            };
            let (commit, applied) = (s.u("raft_commit_index"), s.u("raft_applied_index"));
            Some(format!(
                "  {:<21} {:>5} {:<9} {:>6} {:>6} {:>10} {:>10} {:>7}",
                v.addr.chars().take(21).collect::<String>(),
                s.u("raft_node"),
                role,
                leader,
                s.u("raft_term"),
                commit,
                applied,
                commit.saturating_sub(applied)
            ))
        })
        .collect();
    if rows.is_empty() {
        return rows;
    }
    let mut l = vec![
        " replicated group (stats raft_*)".to_string(),
        format!(
            "  {:<21} {:>5} {:<9} {:>6} {:>6} {:>10} {:>10} {:>7}",
            "SERVER", "NODE", "ROLE", "LEADER", "TERM", "COMMIT", "APPLIED", "BEHIND"
        ),
    ];
    l.extend(rows);
    l.push(String::new());
    l
}

/// The router section's lines (a title, a head, a row per backend, a blank line), or none:
/// for each server that answers `stats router` (a memkitd router, `--route`), a row per
/// backend server of its pools: requests a second over the last interval, errors and marks
/// down so far, whether it is down now, and its batches' median and 99th percentile round
/// trip.
pub fn router_section(views: &[ServerView]) -> Vec<String> {
    let mut rows = Vec::new();
    for v in views {
        let Some((t1, s)) = &v.cur else { continue };
        let prev = v.prev.as_ref();
        for (k, addr) in &s.router {
            let Some(stem) = k.strip_suffix(":addr") else {
                continue;
            };
            let Some((pool, _)) = stem.strip_prefix("pool:").and_then(|s| s.rsplit_once(':'))
            else {
                continue;
            };
            let n = |p: &Pairs, f: &str| -> u64 {
                get(p, &format!("{stem}:{f}"))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            let rate = match prev {
                Some((t0, p)) if t1 > t0 => {
                    let secs = (*t1 - *t0).as_secs_f64();
                    n(&s.router, "requests").saturating_sub(n(&p.router, "requests")) as f64 / secs
                }
                _ => 0.0,
            };
            rows.push(format!(
                "  {:<21} {:<10} {:<21} {:>9} {:>8} {:>4} {:>4} {:>8} {:>8}",
                v.addr.chars().take(21).collect::<String>(),
                pool.chars().take(10).collect::<String>(),
                addr.chars().take(21).collect::<String>(),
                crate::top::count(rate),
                n(&s.router, "errors"),
                n(&s.router, "tko_events"),
                if n(&s.router, "down") == 1 {
                    "DOWN"
                } else {
                    "up"
                },
                n(&s.router, "latency_p50_us"),
                n(&s.router, "latency_p99_us"),
            ));
        }
    }
    if rows.is_empty() {
        return rows;
    }
    let mut l = vec![
        " router backends (stats router)".to_string(),
        format!(
            "  {:<21} {:<10} {:<21} {:>9} {:>8} {:>4} {:>4} {:>8} {:>8}",
            "ROUTER", "POOL", "SERVER", "REQ/S", "ERRORS", "TKO", "STATE", "P50_US", "P99_US"
        ),
    ];
    l.extend(rows);
    l.push(String::new());
    l
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::stats::Snapshot;

    fn view(addr: &str, general: &[(&str, &str)]) -> ServerView {
        let general = general
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        ServerView {
            addr: addr.into(),
            cur: Some((
                Instant::now(),
                Snapshot {
                    general,
                    ..Snapshot::default()
                },
            )),
            ..ServerView::default()
        }
    }

    #[test]
    fn a_row_per_group_node_and_nothing_without_one() {
        let node = |id: &str, role: &str| {
            view(
                &format!("127.0.0.1:1121{id}"),
                &[
                    ("raft_node", id),
                    ("raft_role", role),
                    ("raft_leader", "1"),
                    ("raft_term", "4"),
                    ("raft_commit_index", "120"),
                    ("raft_applied_index", "117"),
                ],
            )
        };
        let views = [
            node("1", "leader"),
            node("2", "follower"),
            view("127.0.0.1:11219", &[("version", "1.6.18")]),
        ];
        let lines = section(&views);
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert!(lines[1].contains("ROLE") && lines[1].contains("APPLIED"));
        assert!(lines[2].contains("127.0.0.1:11211") && lines[2].contains("leader"));
        assert!(lines[3].contains("follower") && lines[3].ends_with("       3"));
        assert!(section(&views[2..]).is_empty());
        // In the frame, above the selected view's detail.
        let text = crate::top::frame(&views, 0, Duration::from_secs(1), 120, 40).join("\n");
        assert!(text.contains("replicated group"), "{text}");
    }

    fn snap(router: &[(&str, &str)]) -> Snapshot {
        Snapshot {
            router: router
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_row_per_backend_with_its_request_rate() {
        let t0 = Instant::now();
        let line = |req: &'static str| {
            snap(&[
                ("requests", "9"),
                ("pool:main:0:addr", "10.0.0.1:11211"),
                ("pool:main:0:requests", req),
                ("pool:main:0:tko_events", "2"),
                ("pool:main:0:down", "1"),
                ("pool:main:0:latency_p50_us", "512"),
            ])
        };
        let v = ServerView {
            addr: "127.0.0.1:11211".into(),
            cur: Some((t0 + Duration::from_secs(2), line("300"))),
            prev: Some((t0, line("100"))),
            error: None,
        };
        let plain = ServerView {
            addr: "127.0.0.1:11212".into(),
            cur: Some((t0, Snapshot::default())),
            ..ServerView::default()
        };
        let lines = router_section(&[v, plain.clone()]);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[1].contains("REQ/S") && lines[1].contains("P99_US"));
        let row = &lines[2];
        assert!(
            row.contains("main") && row.contains("10.0.0.1:11211"),
            "{row}"
        );
        assert!(
            row.contains(" 100 ") && row.contains("DOWN") && row.contains(" 512 "),
            "{row}"
        );
        assert!(router_section(&[plain]).is_empty());
    }
}
