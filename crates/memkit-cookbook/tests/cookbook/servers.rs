//! Test servers, the harness's (`memkit_testkit`): memkitd in-process and real memcached as
//! a child process, each with its address as the recipes' clients take it.

use memkit_testkit::{TestServer, memcached};

/// memkitd in-process; [`Memkitd::kill`] (or a drop) stops it and closes every socket.
#[derive(Debug)]
pub struct Memkitd {
    pub addr: String,
    server: TestServer,
}

impl Memkitd {
    pub fn start() -> Memkitd {
        let server = TestServer::start(&[]);
        let addr = server.addr().to_string();
        Memkitd { addr, server }
    }

    pub fn kill(&mut self) {
        self.server.kill();
    }
}

/// Real memcached, killed by PID on drop. `None` when it is not installed (a failure under
/// `CI=true`).
#[derive(Debug)]
pub struct Memcached {
    pub addr: String,
    _server: memcached::Memcached,
}

impl Memcached {
    pub fn start() -> Option<Memcached> {
        let server = memcached::spawn(&[])?;
        let addr = server.addr();
        Some(Memcached {
            addr,
            _server: server,
        })
    }
}
