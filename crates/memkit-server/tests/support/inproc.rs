//! The in-process server the integration tests share: memkitd on 127.0.0.1:0 with a
//! shutdown future, and a raw connection with reads bounded in time.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use memkit_server::{Args, Settings, Shared};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

pub struct Server {
    pub addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    pub task: JoinHandle<()>,
    pub shared: Arc<Shared>,
}

impl Server {
    pub async fn start(args: &[&str]) -> Server {
        let mut argv = vec!["memkitd"];
        argv.extend_from_slice(args);
        let (settings, _) = Settings::from_args(<Args as clap::Parser>::parse_from(argv));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Shared::new(Arc::new(memkit_server::engine_for(&settings)), settings);
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(memkit_server::run(listener, shared.clone(), async move {
            let _ = rx.await;
        }));
        Server {
            addr,
            stop: Some(tx),
            task,
            shared,
        }
    }

    pub async fn conn(&self) -> Conn {
        Conn(TcpStream::connect(self.addr).await.unwrap())
    }

    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        timeout(Duration::from_secs(5), self.task)
            .await
            .expect("server stops")
            .unwrap();
    }
}

pub struct Conn(pub TcpStream);

impl Conn {
    pub async fn send(&mut self, b: &[u8]) {
        self.0.write_all(b).await.unwrap();
    }

    /// Reads until the reply ends with `end` (or fails the test after 5 s).
    pub async fn until(&mut self, end: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        // On the heap: a 64 KiB array inside every `ask` future made each test's future
        // megabytes large, which debug builds copy onto the 2 MiB test-thread stack.
        let mut chunk = vec![0u8; 65536];
        timeout(Duration::from_secs(5), async {
            while !buf.ends_with(end) {
                let n = self.0.read(&mut chunk).await.unwrap();
                assert!(
                    n > 0,
                    "closed early; got {:?}",
                    String::from_utf8_lossy(&buf)
                );
                buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("timed out; got {:?}", String::from_utf8_lossy(&buf)));
        buf
    }

    pub async fn ask(&mut self, req: &[u8], end: &[u8]) -> String {
        self.send(req).await;
        String::from_utf8_lossy(&self.until(end).await).into_owned()
    }

    /// Whether the server closes the connection within 5 s.
    pub async fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 1024];
        let r = timeout(Duration::from_secs(5), async {
            loop {
                match self.0.read(&mut chunk).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        r.unwrap_or(false)
    }
}
