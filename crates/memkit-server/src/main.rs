//! `memkitd`: parse memcached's flags, build the engine, listen, serve until SIGINT/SIGTERM
//! or `shutdown`.

use clap::Parser;
use memkit_server::server::{Workers, run_on};
use memkit_server::{Args, Settings, Shared, backend_for};

fn main() {
    let (settings, warnings) = Settings::from_args(Args::parse());
    for w in &warnings {
        eprintln!("memkitd: warning: {w}");
    }
    if let Err(msg) = settings.check() {
        eprintln!("{msg}");
        std::process::exit(71); // EX_OSERR, as memcached exits on bad settings
    }
    let level = match settings.verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .init();
    if let Some(path) = &settings.pidfile
        && let Err(e) = std::fs::write(path, format!("{}\n", std::process::id()))
    {
        eprintln!("memkitd: could not write pid file {path}: {e}");
    }
    // The main thread accepts and runs housekeeping; `-t` worker threads serve the
    // connections (memcached's dispatcher and workers).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("memkitd: cannot start runtime: {e}");
            std::process::exit(71)
        });
    let workers = Workers::start(settings.threads).unwrap_or_else(|e| {
        eprintln!("memkitd: cannot start worker threads: {e}");
        std::process::exit(71)
    });
    let code = runtime.block_on(async move {
        let addr = settings
            .listen
            .first()
            .cloned()
            .unwrap_or_else(|| "127.0.0.1".into());
        if settings.listen.len() > 1 {
            tracing::warn!("several -l addresses given; listening on {addr} only");
        }
        let listener = match bind(&addr, settings.port, settings.backlog).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("failed to listen on TCP port {}: {e}", settings.port);
                return 71;
            }
        };
        tracing::info!(
            "listening on {}",
            listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        );
        let (engine, persist) = match backend_for(&settings) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("memkitd: persistent store: {e}");
                return 71;
            }
        };
        if let (Some(p), Some(dir)) = (&persist, &settings.persist) {
            let r = &p.recovery;
            eprintln!(
                "memkitd: persistent store {}: recovered ~{} items, {} bytes on disk, in {} ms \
                 (durability {}, CAS above {})",
                dir.display(),
                r.items,
                r.bytes_on_disk,
                r.elapsed.as_millis(),
                settings.durability,
                r.cas_floor
            );
        }
        let metrics_addr = settings.metrics_addr.clone();
        let shared = match Shared::try_with_persist(engine, persist.map(|p| p.store), settings) {
            Ok(s) => s,
            Err((code, msg)) => {
                eprintln!("{msg}");
                return code;
            }
        };
        if let Some(auth) = shared.auth.clone() {
            drop(tokio::spawn(reload_on_hup(auth)));
        }
        if let Some(a) = metrics_addr.as_deref() {
            match memkit_server::metrics::bind(a).await {
                Ok(l) => drop(tokio::spawn(memkit_server::metrics::serve(
                    l,
                    shared.clone(),
                ))),
                Err(e) => {
                    eprintln!("memkitd: metrics: cannot listen on {a}: {e}");
                    return 71;
                }
            }
        }
        run_on(listener, shared, shutdown_signal(), Some(&workers)).await;
        0
    });
    std::process::exit(code);
}

/// Listens on `addr:port` with memcached's `-b` backlog. `TcpListener::bind` would use the
/// standard library's 128, and a burst of connections past the accept queue has its SYNs
/// dropped and retried a second later.
async fn bind(addr: &str, port: u16, backlog: u32) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host((addr, port)).await? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a) {
            Ok(()) => return socket.listen(backlog),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no address to listen on")))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("signal received, shutting down");
}

/// memcached re-reads the auth file on SIGHUP; a file that fails to load keeps the old one.
async fn reload_on_hup(auth: std::sync::Arc<memkit_server::auth::Auth>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        match auth.reload() {
            Ok(n) => tracing::info!("auth file {} reloaded: {n} entries", auth.path()),
            Err(e) => eprintln!("memkitd: {e}; keeping the previous entries"),
        }
    }
}
