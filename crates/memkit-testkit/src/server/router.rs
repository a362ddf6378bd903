//! [`Router`]: `memkitd --route FILE` as a child process, its file written from the test's
//! TOML text into a directory of its own; [`Router::reload`] rewrites the file and sends
//! SIGHUP, as an operator would. [`pool`] writes a pool's table.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::TestServer;
use crate::tempdir::{TempDir, tempdir};
use crate::wire::{BlockingWire, Until};

/// A router for one test; see the module notes.
#[derive(Debug)]
pub struct Router {
    pub server: TestServer,
    path: PathBuf,
    _dir: TempDir,
}

/// `[pools.NAME]` with `servers` (`host:port`) and further `key = value` lines.
pub fn pool(name: &str, servers: &[String], extra: &str) -> String {
    let list: Vec<String> = servers.iter().map(|s| format!("{s:?}")).collect();
    format!("[pools.{name}]\nservers = [{}]\n{extra}\n", list.join(", "))
}

impl Router {
    /// Starts a router on `config` (TOML text) with memkitd's `args` for its front.
    pub fn start(config: &str, args: &[&str]) -> Router {
        let dir = tempdir("route");
        let path = dir.path().join("route.toml");
        std::fs::write(&path, config).expect("write the route file");
        let file = path.to_str().expect("a UTF-8 path").to_string();
        let mut all = vec!["--route", file.as_str()];
        all.extend_from_slice(args);
        Router {
            server: TestServer::process(&all),
            path,
            _dir: dir,
        }
    }

    /// Replaces the file with `config` and signals the router to read it (SIGHUP); returns
    /// once `stats router` counts the reload, good or bad.
    pub fn reload(&mut self, config: &str) {
        let before = self.reloads();
        std::fs::write(&self.path, config).expect("write the route file");
        self.server.child().signal(libc::SIGHUP);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.reloads() == before {
            assert!(
                std::time::Instant::now() < deadline,
                "the router did not reload"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Reloads, good and bad, so far.
    fn reloads(&self) -> u64 {
        let s = self.stats("router");
        s["reloads"].parse::<u64>().unwrap() + s["reload_failures"].parse::<u64>().unwrap()
    }

    /// A connection to the router.
    pub fn wire(&self) -> BlockingWire {
        BlockingWire::tcp(self.server.tcp_addr()).expect("connect to the router")
    }

    /// `stats GROUP` (`""`: the general group) as name → value.
    pub fn stats(&self, group: &str) -> BTreeMap<String, String> {
        let req = match group {
            "" => "stats\r\n".to_string(),
            g => format!("stats {g}\r\n"),
        };
        self.wire()
            .ask(req.as_bytes(), Until::END)
            .lines()
            .filter_map(|l| l.strip_prefix("STAT "))
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// One of `stats router`'s figures as a number.
    pub fn stat(&self, name: &str) -> u64 {
        let s = self.stats("router");
        s.get(name)
            .unwrap_or_else(|| panic!("no {name} in stats router: {s:?}"))
            .parse()
            .unwrap()
    }
}
