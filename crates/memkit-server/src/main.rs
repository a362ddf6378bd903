//! `memkitd`: parse memcached's flags, check them as memcached does, bind, give up root,
//! build the engine (with `-e`, from the warm restart file; with `-o ext_path`, over the
//! flash tier), serve until SIGINT/SIGTERM or
//! `shutdown`, or until SIGUSR1 or `shutdown graceful`, which with `-e` save the cache first.
//!
//! Start-up order, and why: TCP listeners are bound and the `-Y`/`-Z` files read as root
//! (ports below 1024, root-only key files); then root is given up (`-u`), and as that user
//! the process daemonizes (`-d`), creates the UNIX socket (`-s`, so it belongs to the user,
//! as memcached's does) and opens the `--persist` store (whose files must belong to the user
//! that later writes more of them). memcached does the same from the privilege drop on; it
//! binds TCP after it, memkitd before.
//!
//! Readiness: the sockets are bound early but listen only once the store is open (recovered,
//! with `--persist`; restored, with `-e`), so until the server can answer a connect is
//! refused rather than left waiting. Then the pid file is written (memcached too writes it
//! once its sockets listen, so a `PIDFile=` unit or a script waiting for the file finds a
//! server that accepts) and `READY=1` goes to systemd (`Type=notify`).

use clap::Parser;
use memkit_server::config::Refusal;
use memkit_server::log::{LIFECYCLE, verbatim};
use memkit_server::server::{Listener, Workers, run_listeners};
use memkit_server::state::Security;
use memkit_server::{Args, Settings, Shared, backend_for, bind, notify, process};

fn main() {
    let args = parse_args();
    if args.process.license {
        println!(
            "memkitd {}: licensed under {}",
            env!("CARGO_PKG_VERSION"),
            env!("CARGO_PKG_LICENSE")
        );
        std::process::exit(0);
    }
    let log_format = args.log.log_format;
    let (mut settings, warnings) = Settings::from_args(args);
    // A refused command line prints memcached's message alone, as memcached does.
    settings.check().unwrap_or_else(|r| refuse(r));
    memkit_server::log::init(settings.verbose, log_format);
    for w in &warnings {
        tracing::warn!(target: LIFECYCLE, "{w}");
    }
    if settings.daemonize {
        absolute_paths(&mut settings); // the daemon's working directory is `/`
    }
    if settings.core_dumps {
        process::raise_core_limit().unwrap_or_else(|r| refuse(r));
    }
    process::files_for(settings.conn_limit).unwrap_or_else(|r| refuse(r));
    let identity = process::identity(settings.user.as_deref()).unwrap_or_else(|r| refuse(r));
    // `-s` disables the network listeners, as in memcached; so does `-p 0`.
    let tcp = match settings.unix_socket.is_none() && settings.port != 0 {
        true => bind::tcp(&settings).unwrap_or_else(|r| refuse(r)),
        false => Vec::new(),
    };
    let security = Security::load(&settings).unwrap_or_else(|(code, msg)| {
        verbatim(&msg);
        std::process::exit(code)
    });
    if let Some(id) = &identity {
        process::drop_to(id).unwrap_or_else(|r| refuse(r));
    }
    if settings.daemonize {
        process::daemonize(settings.core_dumps, settings.verbose > 0).unwrap_or_else(|r| refuse(r));
    }
    if settings.lock_memory
        && let Err(w) = process::lock_memory()
    {
        tracing::warn!("{w}");
    }
    let unix = settings.unix_socket.as_ref().map(|path| {
        bind::unix(path, settings.unix_mask, settings.backlog).unwrap_or_else(|r| refuse(r))
    });
    let code = serve(settings, tcp, unix, security);
    std::process::exit(code);
}

/// Prints memcached's message and exits with its status.
fn refuse(r: Refusal) -> ! {
    verbatim(&r.message);
    std::process::exit(r.code)
}

/// clap's parse, with getopt's failure where memcached has one: an unknown flag or a
/// missing value is a message and exit status 1 (`Illegal argument "?"`), not clap's 2.
fn parse_args() -> Args {
    use clap::error::{ContextKind, ErrorKind};
    let e = match Args::try_parse() {
        Ok(a) => return a,
        Err(e) => e,
    };
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    let arg = e
        .get(ContextKind::InvalidArg)
        .map(|a| a.to_string())
        .unwrap_or_default();
    let flag = arg.split([' ', '=', '<']).next().unwrap_or("");
    let first = |c: &str| c.chars().next().unwrap_or('?');
    let msg = match (e.kind(), flag.strip_prefix("--"), flag.strip_prefix('-')) {
        (ErrorKind::UnknownArgument, Some(_), _) => {
            format!("memkitd: unrecognized option '{flag}'")
        }
        (ErrorKind::UnknownArgument, None, Some(c)) => {
            format!("memkitd: invalid option -- '{}'", first(c))
        }
        (_, Some(_), _) => format!("memkitd: option '{flag}' requires an argument"),
        (_, None, Some(c)) => format!("memkitd: option requires an argument -- '{}'", first(c)),
        _ => e.to_string().trim_end().to_string(),
    };
    verbatim(&msg);
    verbatim("Illegal argument \"?\"");
    std::process::exit(1)
}

/// Relative paths made absolute before `-d` changes directory to `/`.
fn absolute_paths(s: &mut Settings) {
    let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    s.persist = s.persist.as_deref().map(abs);
    s.memory_file = s.memory_file.as_deref().map(abs);
    s.unix_socket = s.unix_socket.as_deref().map(abs);
    s.pidfile = s
        .pidfile
        .as_deref()
        .map(|p| abs(p.as_ref()).to_string_lossy().into_owned());
}

/// Starts the runtime and the workers, opens the store, serves; returns the exit status.
fn serve(
    settings: Settings,
    tcp: Vec<bind::Tcp>,
    unix: Option<bind::Unix>,
    security: Security,
) -> i32 {
    // The main thread accepts and runs housekeeping; `-t` worker threads serve the
    // connections (memcached's dispatcher and workers).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            tracing::error!("cannot start runtime: {e}");
            std::process::exit(71)
        });
    let timers = memkit_server::server::needs_timers(&settings, &security);
    let workers = Workers::start_with(settings.threads, timers, settings.io).unwrap_or_else(|e| {
        tracing::error!("cannot start worker threads: {e}");
        std::process::exit(71)
    });
    let pidfile = settings.pidfile.clone();
    let daemon_pidfile = pidfile.clone().filter(|_| settings.daemonize);
    let code = runtime.block_on(async move {
        // Handled from before the store opens, so that a stop asked for while a warm restart
        // restores or `--persist` recovers is not the signal's default action (death, and
        // with `-e` the cache lost): the server stops, and saves, once the store is open.
        let stop = memkit_server::warm::Stop::new();
        let mut signals = Box::pin(stop.or_usr1(shutdown_signal()));
        let replica = match start_replica(&settings) {
            Ok(r) => r,
            Err(r) => {
                tracing::error!("{}", r.message);
                return r.code;
            }
        };
        let backend = match &replica {
            Some(rep) => Ok((rep.engine(), None)),
            None => backend_for(&settings),
        };
        let (engine, persist) = match backend {
            Ok(b) => b,
            Err(r) => {
                tracing::error!("{}", r.message);
                return r.code;
            }
        };
        if let (Some(p), Some(dir)) = (&persist, &settings.persist) {
            log_recovery(&p.recovery, dir, &settings);
        }
        let metrics_addr = settings.metrics_addr.clone();
        let persist = persist.map(|p| p.store);
        let shared = match Shared::try_with_security(engine, persist, settings, security) {
            Ok(s) => s,
            Err((code, msg)) => {
                verbatim(&msg);
                return code;
            }
        };
        if let Some(rep) = replica.clone() {
            shared.set_replica(rep);
        }
        let router = match start_router(&shared) {
            Ok(r) => r,
            Err(r) => {
                tracing::error!("{}", r.message);
                return r.code;
            }
        };
        if stop_pending(&mut signals).await {
            stop_replica(replica.as_deref());
            memkit_server::warm::save_on_stop(&shared, &stop);
            memkit_server::flash::stop(&shared.engine);
            return 0;
        }
        drop(tokio::spawn(reload_on_hup(
            shared.auth.clone(),
            router.clone(),
        )));
        if let Some(a) = metrics_addr.as_deref() {
            match memkit_server::metrics::bind(a).await {
                Ok(l) => drop(tokio::spawn(memkit_server::metrics::serve(
                    l,
                    shared.clone(),
                ))),
                Err(e) => {
                    tracing::error!("metrics: cannot listen on {a}: {e}");
                    return 71;
                }
            }
        }
        // Only now, with the store open, do the sockets listen; then systemd hears of it.
        let listeners = match listen(tcp, unix) {
            Ok(l) => l,
            Err(r) => {
                verbatim(&r.message);
                return r.code;
            }
        };
        if let Some(path) = &pidfile {
            process::write_pid(path);
        }
        notify::ready();
        run_listeners(listeners, shared.clone(), signals, Some(&workers)).await;
        // Every worker stops (its connections closed, its threads joined) before the cache
        // is saved: a connection still answering would acknowledge writes the file lacks.
        drop(workers);
        stop_replica(replica.as_deref());
        if let Some(r) = &router {
            r.stop();
        }
        memkit_server::warm::save_on_stop(&shared, &stop);
        memkit_server::flash::stop(&shared.engine);
        0
    });
    // memcached removes its pid file on exit only when it daemonized.
    if let Some(p) = daemon_pidfile {
        let _ = std::fs::remove_file(p);
    }
    code
}

/// The replicated group's node, when the settings make this server one (`--raft-*`).
fn start_replica(
    settings: &Settings,
) -> Result<Option<std::sync::Arc<memkit_server::replica::Replica>>, Refusal> {
    let (Some(r), Some(dir)) = (&settings.raft, &settings.persist) else {
        return Ok(None);
    };
    // `-Z`: the peers speak TLS with the client port's certificate; memcached exits with
    // EX_USAGE when TLS cannot be set up.
    let tls = match settings.ssl.enabled {
        true => Some(
            memkit_server::tls::peer_tls(&settings.ssl)
                .map_err(|e| Refusal::new(memkit_server::config::EX_USAGE, e))?,
        ),
        false => None,
    };
    let tls_on = if tls.is_some() { " (TLS)" } else { "" };
    let (memory, durability) = (settings.memory_limit, settings.durability);
    let rep = memkit_server::replica::Replica::start(dir, r, memory, durability, tls)?;
    tracing::info!(
        "replication: node {} of {:?}, peers on {}{tls_on}",
        r.node,
        r.peers,
        r.listen
    );
    Ok(Some(std::sync::Arc::new(rep)))
}

/// The router, when the settings make this server one (`--route`): its file loaded and
/// checked (a bad one refuses to start, EX_CONFIG as memcached's bad config), its pools
/// with backend connections for each of the `-t` workers.
fn start_router(
    shared: &memkit_server::Shared,
) -> Result<Option<std::sync::Arc<memkit_server::router::Router>>, Refusal> {
    let Some(path) = &shared.settings.route else {
        return Ok(None);
    };
    let router = memkit_server::router::Router::start(path, shared.settings.threads)
        .map_err(|e| Refusal::new(memkit_server::config::EX_CONFIG, e))?;
    let router = std::sync::Arc::new(router);
    let t = router.table();
    tracing::info!(
        "router: {}: {} pools, {} routes",
        path.display(),
        t.pools.len(),
        t.routes.len()
    );
    shared.set_router(router.clone());
    Ok(Some(router))
}

/// Stops the group's node once no connection is left to answer through it.
fn stop_replica(replica: Option<&memkit_server::replica::Replica>) {
    if let Some(rep) = replica {
        rep.stop();
    }
}

fn log_recovery(r: &memkit_persist::Recovery, dir: &std::path::Path, settings: &Settings) {
    tracing::info!(
        target: LIFECYCLE,
        "persistent store {}: recovered ~{} items, {} bytes on disk, in {} ms \
         (durability {}, CAS above {})",
        dir.display(),
        r.items,
        r.bytes_on_disk,
        r.elapsed.as_millis(),
        settings.durability,
        r.cas_floor
    );
}

/// Whether a stop signal came while the store was opening (the runtime hears of it at its
/// next turn, which `yield_now` gives it): then the server stops without listening.
async fn stop_pending(signals: &mut std::pin::Pin<Box<impl Future<Output = ()>>>) -> bool {
    tokio::task::yield_now().await;
    tokio::select! {
        biased;
        _ = signals.as_mut() => true,
        _ = std::future::ready(()) => false,
    }
}

/// The sockets bound before the runtime started, listening now and registered with it.
fn listen(tcp: Vec<bind::Tcp>, unix: Option<bind::Unix>) -> Result<Vec<Listener>, Refusal> {
    let mut out = Vec::new();
    for t in tcp {
        let tls = t.tls;
        let listener = t.listen()?;
        if let Ok(a) = listener.local_addr() {
            tracing::info!("listening on {a}");
        }
        out.push(Listener::Tcp { listener, tls });
    }
    if let Some(u) = unix {
        out.push(Listener::Unix(u.listen()?));
    }
    Ok(out)
}

/// Resolves at SIGINT or SIGTERM. Both are handled from this call on (not from the first
/// poll): one that arrives before the future is awaited is kept for it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    async fn next(s: Option<Signal>) {
        match s {
            Some(mut s) => drop(s.recv().await),
            None => std::future::pending().await,
        }
    }
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    async move {
        tokio::select! {
            _ = next(int) => {}
            _ = next(term) => {}
        }
        tracing::info!("signal received, shutting down");
    }
}

/// SIGHUP: memcached re-reads the auth file, a router its routes; a file that fails to
/// load keeps the old one.
async fn reload_on_hup(
    auth: Option<std::sync::Arc<memkit_server::auth::Auth>>,
    router: Option<std::sync::Arc<memkit_server::router::Router>>,
) {
    use tokio::signal::unix::{SignalKind, signal};
    if auth.is_none() && router.is_none() {
        return;
    }
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        if let Some(auth) = &auth {
            match auth.reload() {
                Ok(n) => tracing::info!("auth file {} reloaded: {n} entries", auth.path()),
                Err(e) => tracing::warn!("{e}; keeping the previous entries"),
            }
        }
        if let Some(router) = &router {
            match router.reload() {
                Ok(m) => tracing::info!("{m}"),
                Err(e) => tracing::warn!("{e}"),
            }
        }
    }
}
