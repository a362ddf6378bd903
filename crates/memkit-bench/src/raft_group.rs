//! A replicated group of memkitd processes for `memkit-bench raft`: nodes `1..=n` on
//! 127.0.0.1, each with its `--persist` directory under one scratch directory, started,
//! SIGKILLed (by PID) and started again; the leader and each node's indexes read from
//! `stats` (`raft_role`, `raft_leader`, `raft_commit_index`, `raft_applied_index`).
//!
//! A node keeps its peer port for the group's life (the others dial it there); its client
//! port is picked afresh at each start.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::procs::{Kind, Server, free_port};

/// How often the group's `stats` are polled while waiting for a leader or a catch-up.
const POLL: Duration = Duration::from_millis(10);

#[derive(Debug)]
struct Member {
    raft_port: u16,
    server: Option<Server>,
}

/// A running group; every node still up is killed when it drops.
#[derive(Debug)]
pub struct Group {
    bin: PathBuf,
    dir: PathBuf,
    members: Vec<Member>,
    /// Flags every node gets besides its own (`-m`, `-t`, `--read-consistency`, ...).
    args: Vec<String>,
}

impl Group {
    /// Starts `nodes` nodes of `bin` with their data under `dir` (which must be empty or
    /// absent: a fresh group bootstraps) and `args` each; returns once every node answers.
    pub fn start(bin: &Path, dir: &Path, nodes: usize, args: &[String]) -> io::Result<Group> {
        std::fs::create_dir_all(dir)?;
        let members = (0..nodes)
            .map(|_| {
                Ok(Member {
                    raft_port: free_port()?,
                    server: None,
                })
            })
            .collect::<io::Result<_>>()?;
        let mut g = Group {
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            members,
            args: args.to_vec(),
        };
        for id in g.ids() {
            g.start_node(id)?;
        }
        Ok(g)
    }

    /// The nodes' ids.
    pub fn ids(&self) -> Vec<u64> {
        (1..=self.members.len() as u64).collect()
    }

    fn member(&self, id: u64) -> &Member {
        &self.members[id as usize - 1]
    }

    fn server(&self, id: u64) -> io::Result<&Server> {
        self.member(id)
            .server
            .as_ref()
            .ok_or_else(|| io::Error::other(format!("node {id} is down")))
    }

    /// Node `id`'s client address.
    pub fn addr(&self, id: u64) -> io::Result<SocketAddr> {
        Ok(self.server(id)?.addr)
    }

    /// CPU seconds (user + system) the running nodes have used so far, all together.
    pub fn cpu_secs(&self) -> f64 {
        let up = self.members.iter().filter_map(|m| m.server.as_ref());
        up.map(|s| s.cpu_secs().unwrap_or(0.0)).sum()
    }

    /// Replaces the flags every node gets at its next start.
    pub fn set_args(&mut self, args: &[String]) {
        self.args = args.to_vec();
    }

    /// Starts node `id` (again) on its directory and peer port; returns once it answers.
    pub fn start_node(&mut self, id: u64) -> io::Result<()> {
        let peers = self
            .ids()
            .iter()
            .map(|j| format!("{j}=127.0.0.1:{}", self.member(*j).raft_port))
            .collect::<Vec<_>>()
            .join(",");
        let dir = self.dir.join(format!("node{id}"));
        let mut args: Vec<String> = vec![
            "--persist".into(),
            dir.to_string_lossy().into_owned(),
            "--raft-node".into(),
            id.to_string(),
            "--raft-listen".into(),
            format!("127.0.0.1:{}", self.member(id).raft_port),
            "--raft-peers".into(),
            peers,
        ];
        args.extend(self.args.iter().cloned());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Server::start_args(Kind::Memkitd, &self.bin, &argv)?;
        self.members[id as usize - 1].server = Some(server);
        Ok(())
    }

    /// SIGKILLs node `id` by its PID and waits for it to exit; returns when the signal went.
    pub fn kill(&mut self, id: u64) -> io::Result<Instant> {
        let mut s = self.members[id as usize - 1]
            .server
            .take()
            .ok_or_else(|| io::Error::other(format!("node {id} is already down")))?;
        s.kill_now()
    }

    /// Node `id`'s `stats`.
    pub fn stats(&self, id: u64) -> io::Result<HashMap<String, String>> {
        self.server(id)?.stats()
    }

    fn stat(stats: &HashMap<String, String>, name: &str) -> u64 {
        stats.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// The leader every running node names, once one does and it says so itself, within
    /// `limit`.
    pub fn leader(&self, limit: Duration) -> io::Result<u64> {
        let until = Instant::now() + limit;
        loop {
            if let Some(l) = self.agreed_leader() {
                return Ok(l);
            }
            if Instant::now() > until {
                return Err(io::Error::other(format!(
                    "no agreed leader within {limit:?}"
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    fn agreed_leader(&self) -> Option<u64> {
        let mut leader = None;
        for id in self.ids() {
            if self.member(id).server.is_none() {
                continue;
            }
            let s = self.stats(id).ok()?;
            let l = Self::stat(&s, "raft_leader");
            if l == 0 || leader.is_some_and(|x| x != l) {
                return None;
            }
            leader = Some(l);
            if l == id && s.get("raft_role").map(String::as_str) != Some("leader") {
                return None;
            }
        }
        leader.filter(|l| self.member(*l).server.is_some())
    }

    /// Waits (up to `limit`) until every running node has applied what the leader had
    /// committed when the wait began, and names it.
    pub fn wait_caught_up(&self, limit: Duration) -> io::Result<()> {
        let until = Instant::now() + limit;
        let leader = self.leader(limit)?;
        let target = Self::stat(&self.stats(leader)?, "raft_commit_index");
        for id in self.ids() {
            if self.member(id).server.is_none() {
                continue;
            }
            loop {
                let s = self.stats(id)?;
                if Self::stat(&s, "raft_applied_index") >= target
                    && Self::stat(&s, "raft_leader") == leader
                {
                    break;
                }
                if Instant::now() > until {
                    return Err(io::Error::other(format!(
                        "node {id} did not apply index {target} within {limit:?}"
                    )));
                }
                std::thread::sleep(POLL);
            }
        }
        Ok(())
    }

    /// A running node other than `leader`.
    pub fn follower(&self, leader: u64) -> Option<u64> {
        self.ids()
            .into_iter()
            .find(|&id| id != leader && self.member(id).server.is_some())
    }

    /// Kills every running node (SIGKILL by PID).
    pub fn kill_all(&mut self) {
        for id in self.ids() {
            let _ = self.kill(id);
        }
    }
}
