//! `memkit top`'s replication section: for each server whose `stats` carry `raft_role` (a
//! memkitd node of a replicated group), its node id, role, the leader it knows of, its
//! term, commit and applied indexes, and how far it applies behind what it knows
//! committed. Nothing when no server is in a group (memcached, a plain memkitd).

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
}
