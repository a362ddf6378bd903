//! `memkit watch [fetchers|mutations|evictions]...`: the servers' live `watch` streams,
//! merged; each line prefixed with its server when there are several.

use std::io::Write;
use std::time::Duration;

use memkit_client::{ClientConfig, ServerSpec};
use tokio::sync::mpsc;

use crate::raw::Raw;

/// Event kinds `watch` takes (memcached 1.6 and memkitd).
pub const KINDS: [&str; 3] = ["fetchers", "mutations", "evictions"];

/// Options of `memkit watch`.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Event kinds (empty: all of [`KINDS`]).
    pub kinds: Vec<String>,
    /// Stop after this many events in total.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
}

/// Streams events to `out` until the count or duration is reached, or every server has
/// closed; returns the events written and the servers' errors.
pub async fn watch(
    servers: &[ServerSpec],
    config: &ClientConfig,
    opts: &WatchOptions,
    out: &mut dyn Write,
) -> (u64, Vec<String>) {
    let kinds = if opts.kinds.is_empty() {
        KINDS.join(" ")
    } else {
        opts.kinds.join(" ")
    };
    let prefix = servers.len() > 1;
    let (tx, mut rx) = mpsc::channel::<Result<(String, String), String>>(1024);
    for server in servers {
        let tx = tx.clone();
        let spec = server.clone();
        let server = server.addr();
        let config = config.clone();
        let kinds = kinds.clone();
        tokio::spawn(async move {
            let r = async {
                let mut c = Raw::connect(&spec, &config).await?;
                c.send(&format!("watch {kinds}")).await?;
                match c.line(false).await? {
                    Some(l) if l == "OK" => {}
                    Some(l) => return Err(format!("{server}: watch {kinds}: {l}")),
                    None => return Err(format!("{server}: closed")),
                }
                // Readiness marker: the stream is live from here on.
                let _ = tx.send(Ok((server.clone(), String::new()))).await;
                while let Some(l) = c.line(true).await? {
                    if tx.send(Ok((server.clone(), l))).await.is_err() {
                        break;
                    }
                }
                Ok(())
            }
            .await;
            if let Err(e) = r {
                let _ = tx.send(Err(e)).await;
            }
        });
    }
    drop(tx);
    let deadline = opts.duration.map(|d| tokio::time::Instant::now() + d);
    let mut n = 0u64;
    let mut errors = Vec::new();
    let mut ready = 0usize;
    loop {
        if opts.count.is_some_and(|c| n >= c) {
            break;
        }
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, rx.recv()).await {
                Ok(v) => v,
                Err(_) => break,
            },
            None => rx.recv().await,
        };
        match next {
            None => break,
            Some(Err(e)) => errors.push(e),
            Some(Ok((_, l))) if l.is_empty() => {
                ready += 1;
                if ready == servers.len() {
                    // Scripts (and the tests) wait for this line on stderr before acting.
                    eprintln!("memkit: watching {kinds} on {ready} server(s)");
                }
            }
            Some(Ok((server, l))) => {
                let r = if prefix {
                    writeln!(out, "{server} {l}")
                } else {
                    writeln!(out, "{l}")
                };
                let _ = out.flush();
                if r.is_err() {
                    break;
                }
                n += 1;
            }
        }
    }
    (n, errors)
}
