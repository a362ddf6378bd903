//! `memkit cluster status|add ID HOST:PORT|remove ID`: a replicated group of memkitd nodes
//! (`--raft-*`) seen and changed through memkitd's `cluster` text command, which any node
//! answers (a change is carried out by the leader, a status is the leader's view when one
//! answers). Over [`Raw`] text connections, so TLS and `-Y` authentication work as for the
//! other subcommands, and `--binary` is refused (the binary protocol has no such command).
//!
//! Which node: the servers of `--servers` in order, the first that accepts a connection.
//! One that cannot be reached is reported and the next is tried; once a command is sent,
//! its answer (or the lack of one) is final, so a change is never sent twice.
//!
//! Exit status: 0 when the status was read or the change made; 2 when no node could be
//! reached, or the node refused or failed (`CLIENT_ERROR`: not in a group, bad usage;
//! `SERVER_ERROR`: no leader, a new node that did not catch up, ...).

use std::io::Write;
use std::time::Duration;

use memkit_client::{ClientConfig, ServerSpec};
use serde::Serialize;

use crate::raw::Raw;
use crate::status::Status;

/// How long a `status` answer may take at least: a follower asks its leader first, and
/// falls back to its own view only after its `--raft-timeout-ms` (5 s by default).
const STATUS_WAIT: Duration = Duration::from_secs(15);

/// How long an `add` or `remove` answer may take at least: memkitd keeps trying a change
/// for 60 s (a new node's catching up included) before it answers `SERVER_ERROR`.
const CHANGE_WAIT: Duration = Duration::from_secs(90);

/// What `memkit cluster` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ClusterCmd {
    /// The group as a node sees it (the leader's view when one answers): role, leader,
    /// term, indexes, and each member, voter or learner, with its lag behind the leader.
    Status {
        /// text (a table) or json (one object).
        #[arg(long, short = 'f', value_enum, default_value = "text")]
        format: StatusFormat,
    },
    /// Add node ID, whose peer port is HOST:PORT (its --raft-listen): it must run already,
    /// started with --raft-node ID --raft-listen HOST:PORT and --raft-peers listing the
    /// members and itself. It joins as a learner, catches up, then votes.
    Add {
        /// The new node's id (its --raft-node).
        id: u64,
        /// Its peer address, HOST:PORT (its --raft-listen).
        addr: String,
    },
    /// Remove node ID, voter or learner, from the group (a leader removed steps down).
    Remove {
        /// The node's id.
        id: u64,
    },
}

/// How `memkit cluster status` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    /// The node's view, then a row per member.
    Text,
    /// One JSON object: the node's figures and `members`.
    Json,
}

/// One member of the group, as `cluster status` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Member {
    /// Node id.
    pub id: u64,
    /// Peer address.
    pub addr: String,
    /// Votes (else a learner).
    pub voter: bool,
    /// Leads the group.
    pub leader: bool,
    /// The last log index the leader knows it holds (absent for the leader itself and when
    /// no leader answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<u64>,
    /// Log entries it lacks, as the leader sees it (absent as `matched` is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag: Option<u64>,
}

/// A node's answer to `cluster status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GroupStatus {
    /// The server that answered (`host:port`).
    pub server: String,
    /// Its node id.
    pub node: u64,
    /// Its role: leader, follower, candidate, learner.
    pub role: String,
    /// The leader it knows of (0: none).
    pub leader: u64,
    /// Its term.
    pub term: u64,
    /// The last index in its log.
    pub last_log_index: u64,
    /// The last index it knows committed.
    pub commit_index: u64,
    /// The last index it applied.
    pub applied_index: u64,
    /// A membership change is under way (joint consensus).
    pub joint: bool,
    /// The members, voters first.
    pub members: Vec<Member>,
}

impl GroupStatus {
    /// Parses the `STAT` lines of `cluster status` (without `END`); lines it does not know
    /// are skipped, so a newer server's extra lines do not break it.
    pub fn parse(server: &str, lines: &[String]) -> Result<GroupStatus, String> {
        let mut st = GroupStatus {
            server: server.to_string(),
            ..GroupStatus::default()
        };
        for l in lines {
            let mut w = l.split_ascii_whitespace();
            if w.next() != Some("STAT") {
                return Err(format!("unexpected line {l:?}"));
            }
            let (Some(name), rest) = (w.next(), w.collect::<Vec<_>>()) else {
                continue;
            };
            let num = || -> Result<u64, String> {
                rest.first()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("bad line {l:?}"))
            };
            match name {
                "node" => st.node = num()?,
                "role" => st.role = rest.first().unwrap_or(&"").to_string(),
                "leader" => st.leader = num()?,
                "term" => st.term = num()?,
                "last_log_index" => st.last_log_index = num()?,
                "commit_index" => st.commit_index = num()?,
                "applied_index" => st.applied_index = num()?,
                "joint" => st.joint = rest.first() == Some(&"yes"),
                "member" => st
                    .members
                    .push(member(&rest).ok_or_else(|| format!("bad line {l:?}"))?),
                _ => {}
            }
        }
        Ok(st)
    }

    /// Whether a leader's view came with it (every member but the leader has a lag).
    pub fn has_leader_view(&self) -> bool {
        self.members.iter().any(|m| m.leader)
    }
}

/// `ID ADDR voter|learner [leader | matched=N lag=N]`.
fn member(words: &[&str]) -> Option<Member> {
    let [id, addr, kind, more @ ..] = words else {
        return None;
    };
    let mut m = Member {
        id: id.parse().ok()?,
        addr: addr.to_string(),
        voter: *kind == "voter",
        ..Member::default()
    };
    for w in more {
        match w.split_once('=') {
            None if *w == "leader" => m.leader = true,
            Some(("matched", v)) => m.matched = v.parse().ok(),
            Some(("lag", v)) => m.lag = v.parse().ok(),
            _ => {}
        }
    }
    Some(m)
}

/// The readable form of `cluster status`: the node's view, then a row per member.
pub fn render_text(st: &GroupStatus) -> String {
    let leader = match st.leader {
        0 => "no leader known".to_string(),
        l if l == st.node => "leader itself".to_string(),
        l => format!("leader {l}"),
    };
    let mut out = format!(
        "node {} at {}: {}, {leader}, term {}\nlog {}, committed {}, applied {}\n",
        st.node, st.server, st.role, st.term, st.last_log_index, st.commit_index, st.applied_index
    );
    if st.joint {
        out.push_str("a membership change is under way (joint consensus)\n");
    }
    if !st.has_leader_view() {
        out.push_str("no leader answered: the members as this node last saw them, no lag\n");
    }
    out.push_str(&format!(
        "\n  {:>4}  {:<21}  {:<7}  {:<8}  {:>10}  {:>8}\n",
        "ID", "PEER ADDRESS", "VOTES", "ROLE", "MATCHED", "LAG"
    ));
    let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let view = st.has_leader_view();
    for m in &st.members {
        // Without a leader's view, who follows whom is not known.
        let role = match (m.leader, m.voter, view) {
            (true, _, _) => "leader",
            (false, true, true) => "follower",
            (false, true, false) => "-",
            (false, false, _) => "learner",
        };
        out.push_str(&format!(
            "{} {:>4}  {:<21}  {:<7}  {:<8}  {:>10}  {:>8}\n",
            if m.id == st.node { "*" } else { " " },
            m.id,
            m.addr,
            if m.voter { "voter" } else { "no" },
            role,
            n(m.matched),
            n(m.lag)
        ));
    }
    out
}

/// Runs `memkit cluster ...` against the first of `servers` that can be reached.
pub async fn run(
    servers: &[ServerSpec],
    config: &ClientConfig,
    cmd: ClusterCmd,
) -> Result<Status, String> {
    let mut st = Status::default();
    let (line, wait) = match &cmd {
        ClusterCmd::Status { .. } => ("cluster status".to_string(), STATUS_WAIT),
        ClusterCmd::Add { id, addr } => (format!("cluster add {id} {addr}"), CHANGE_WAIT),
        ClusterCmd::Remove { id } => (format!("cluster remove {id}"), CHANGE_WAIT),
    };
    let wait = wait.max(config.request_timeout);
    for server in servers {
        let mut raw = match Raw::connect(server, config).await {
            Ok(r) => r,
            Err(e) => {
                st.fail("cluster", &e);
                continue;
            }
        };
        let answer = ask(&mut raw, &line, wait).await;
        match answer {
            Ok(lines) => {
                // An earlier server that could not be reached is not the command's failure.
                st = Status::default();
                print(&cmd, raw.addr(), &lines)?;
            }
            Err(e) => st.fail(&format!("{}: {line}", raw.addr()), &e),
        }
        return Ok(st);
    }
    if servers.is_empty() {
        return Err("no servers".into());
    }
    Ok(st)
}

/// Sends `line` and reads the answer: the lines before `END`, or the one `OK ...` line.
async fn ask(raw: &mut Raw, line: &str, wait: Duration) -> Result<Vec<String>, String> {
    raw.send(line).await?;
    let mut lines = Vec::new();
    loop {
        let l = tokio::time::timeout(wait, raw.line(true))
            .await
            .map_err(|_| format!("no answer within {} s", wait.as_secs()))??
            .ok_or("the server closed the connection")?;
        if l == "END" || l.starts_with("OK") {
            if l.starts_with("OK") {
                lines.push(l);
            }
            return Ok(lines);
        }
        if l == "ERROR" {
            return Err("ERROR (a server without the cluster command: not memkitd?)".into());
        }
        for p in ["CLIENT_ERROR ", "SERVER_ERROR ", "ERROR "] {
            if let Some(why) = l.strip_prefix(p) {
                return Err(why.to_string());
            }
        }
        lines.push(l);
    }
}

fn print(cmd: &ClusterCmd, server: &str, lines: &[String]) -> Result<(), String> {
    let text = match cmd {
        ClusterCmd::Status { format } => {
            let st = GroupStatus::parse(server, lines).map_err(|e| format!("{server}: {e}"))?;
            match format {
                StatusFormat::Text => render_text(&st),
                StatusFormat::Json => {
                    let mut j = serde_json::to_string_pretty(&st).map_err(|e| e.to_string())?;
                    j.push('\n');
                    j
                }
            }
        }
        // `OK voters=1,2,4 learners=`: the membership the change left.
        _ => {
            let ok = lines.first().map_or("", String::as_str);
            format!("{}\n", ok.strip_prefix("OK").unwrap_or(ok).trim())
        }
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn status_from_the_leaders_view() {
        let st = GroupStatus::parse(
            "127.0.0.1:11211",
            &lines(
                "STAT node 2\nSTAT role follower\nSTAT leader 1\nSTAT term 3\n\
                 STAT last_log_index 40\nSTAT commit_index 40\nSTAT applied_index 39\n\
                 STAT joint no\nSTAT something_new 7\n\
                 STAT member 1 127.0.0.1:7001 voter leader\n\
                 STAT member 2 127.0.0.1:7002 voter matched=40 lag=0\n\
                 STAT member 4 127.0.0.1:7004 learner matched=30 lag=10",
            ),
        )
        .unwrap();
        assert_eq!((st.node, st.leader, st.term), (2, 1, 3));
        assert_eq!((st.commit_index, st.applied_index), (40, 39));
        assert!(st.has_leader_view() && !st.joint);
        assert_eq!(st.members.len(), 3);
        assert!(st.members[0].leader && st.members[0].lag.is_none());
        assert_eq!(st.members[2].lag, Some(10));
        assert!(!st.members[2].voter);
        let text = render_text(&st);
        assert!(text.contains("node 2 at 127.0.0.1:11211: follower, leader 1, term 3"));
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("127.0.0.1:70"))
            .collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(
            rows[0].contains("voter") && rows[0].contains("leader"),
            "{text}"
        );
        assert!(
            rows[1].starts_with('*') && rows[1].contains("follower"),
            "{text}"
        );
        assert!(
            rows[2].contains("learner") && rows[2].ends_with(" 10"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::to_value(&st).unwrap();
        assert_eq!(json["members"][2]["lag"], 10);
        assert!(json["members"][0].get("lag").is_none());
    }

    #[test]
    fn status_without_a_leader_and_bad_lines() {
        let st = GroupStatus::parse(
            "h:1",
            &lines("STAT node 3\nSTAT role candidate\nSTAT leader 0\nSTAT joint yes\nSTAT member 3 h:7003 voter"),
        )
        .unwrap();
        let text = render_text(&st);
        assert!(text.contains("no leader known"), "{text}");
        assert!(text.contains("joint consensus"), "{text}");
        assert!(text.contains("no leader answered"), "{text}");
        assert!(!text.contains("follower  "), "{text}");
        assert!(GroupStatus::parse("h:1", &lines("STAT term x")).is_err());
        assert!(GroupStatus::parse("h:1", &lines("STAT member 1")).is_err());
        assert!(GroupStatus::parse("h:1", &lines("VALUE k 0 1")).is_err());
    }
}
