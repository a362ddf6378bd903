//! `memkit`: libmemcached-tools' everyday verbs over a pool.
//!
//! ```text
//! memkit --servers 10.0.0.1:11211,10.0.0.2:11211:2 --distribution ketama get KEY...
//! memkit set KEY [VALUE]          (VALUE from stdin when absent)
//! memkit delete KEY...   memkit incr KEY [DELTA]   memkit decr KEY [DELTA]
//! memkit stats [ARGS]    memkit flush [DELAY]      memkit ping
//! memkit --which KEY              (the server KEY maps to)
//! ```
//! The server list defaults to `$MEMCACHED_SERVERS` (as libmemcached-tools read it), then
//! `127.0.0.1:11211`. Exit status: 0 on success, 1 when a key was not found or a server
//! failed, 2 on bad usage.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use memkit_client::{ClientConfig, Cluster, ClusterConfig, Distribution, ServerSpec};
use memkit_types::{Exptime, GetOptions, Memcache};

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "memkit",
    version,
    about = "memcached pool tool (libmemcached placement)"
)]
pub struct Args {
    /// Servers: host[:port[:weight]],... (default $MEMCACHED_SERVERS, then 127.0.0.1:11211).
    #[arg(
        long,
        short = 's',
        env = "MEMCACHED_SERVERS",
        default_value = "127.0.0.1:11211"
    )]
    pub servers: String,
    /// ketama (libmemcached weighted), ketama-unweighted[:hash], modula, modula:<hash>,
    /// php-consistent[:crc32|fnv], php-standard[:crc32|fnv] (PHP's pecl memcache).
    #[arg(long, short = 'd', default_value = "ketama")]
    pub distribution: String,
    /// Connect and request timeout in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,
    /// Print the server KEY maps to, one line per --which (then run the command, if one is
    /// given).
    #[arg(long, value_name = "KEY")]
    pub which: Vec<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Option<Cmd>,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Print each value found (like memccat); exit 1 if any key is missing.
    Get {
        /// Keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Store VALUE (or stdin) under KEY.
    Set {
        /// Key.
        key: String,
        /// Value; read from stdin when absent.
        value: Option<String>,
        /// Client flags.
        #[arg(long, default_value_t = 0)]
        flags: u32,
        /// Expiry (memcached's exptime: seconds, or an absolute Unix time).
        #[arg(long, default_value_t = 0)]
        exptime: i64,
    },
    /// Delete keys.
    Delete {
        /// Keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Increment a counter; prints the new value.
    Incr {
        /// Key.
        key: String,
        /// Delta.
        #[arg(default_value_t = 1)]
        delta: u64,
    },
    /// Decrement a counter (stops at 0); prints the new value.
    Decr {
        /// Key.
        key: String,
        /// Delta.
        #[arg(default_value_t = 1)]
        delta: u64,
    },
    /// `stats [ARGS]` of every server.
    Stats {
        /// `settings`, `items`, `slabs`, ... (not with `--format prometheus`, which reads
        /// `stats`, `stats settings`, `stats items` and `stats slabs` itself).
        args: Vec<String>,
        /// text (memcstat's layout), table, json, or prometheus (memcached_exporter names).
        #[arg(long, short = 'f', value_enum, default_value = "text")]
        format: crate::stats::Format,
    },
    /// `flush_all [DELAY]` on every server.
    Flush {
        /// Delay in seconds.
        #[arg(default_value_t = 0)]
        delay: u32,
    },
    /// `version` of every server, with the round-trip time.
    Ping,
    /// Live dashboard: ops/s, hit ratio, evictions, items, memory, connections, and the
    /// memory per item-size class; q quits, tab moves between the total and each server.
    Top {
        /// Seconds between refreshes.
        #[arg(long, short = 'i', default_value_t = 1.0)]
        interval: f64,
        /// Stop after N refreshes.
        #[arg(long, short = 'n')]
        iterations: Option<u64>,
        /// Print frames as plain text (the default when not on a terminal).
        #[arg(long, short = 'b')]
        batch: bool,
    },
    /// Every key with its metadata (`lru_crawler metadump all`).
    Dump {
        /// Only keys starting with PREFIX.
        #[arg(long)]
        prefix: Option<String>,
        /// Stop after N keys.
        #[arg(long, short = 'n')]
        limit: Option<usize>,
        /// text (columns), json (one object per line), raw (the server's lines).
        #[arg(long, short = 'f', value_enum, default_value = "text")]
        format: crate::dump::DumpFormat,
    },
    /// Stream the servers' `watch` events (fetchers, mutations, evictions; default all).
    Watch {
        /// Event kinds: fetchers, mutations, evictions.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(crate::watch::KINDS))]
        kinds: Vec<String>,
        /// Stop after N events.
        #[arg(long, short = 'n')]
        count: Option<u64>,
        /// Stop after SECS seconds.
        #[arg(long)]
        duration: Option<f64>,
    },
    /// Render the cookbook's M/L/W/U/H per-key trace files (or every *.trace in a directory).
    Trace {
        /// Trace files or directories.
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
        /// Keep reading: print letters as they are appended (like `tail -f`).
        #[arg(long, short = 'F')]
        follow: bool,
        /// Letters per line.
        #[arg(long, default_value_t = 64)]
        width: usize,
    },
}

/// Runs the command; returns the exit status.
pub fn main(args: Args) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("memkit: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("memkit: {e}");
            ExitCode::from(2)
        }
    }
}

fn pool(args: &Args) -> Result<Cluster, String> {
    let servers = ServerSpec::parse_list(&args.servers)?;
    if servers.is_empty() {
        return Err("no servers".into());
    }
    let dist: Distribution = args.distribution.parse()?;
    let t = Duration::from_millis(args.timeout_ms);
    let cfg = ClusterConfig {
        client: ClientConfig {
            connect_timeout: t,
            request_timeout: t,
            pool_size: 1,
            ..ClientConfig::default()
        },
        // A one-shot tool reports failures instead of routing around them.
        remap_on_failure: false,
        ..ClusterConfig::new(dist)
    };
    Ok(Cluster::new(servers, cfg))
}

async fn run(args: Args) -> Result<ExitCode, String> {
    if let Some(Cmd::Trace {
        files,
        follow,
        width,
    }) = &args.command
    {
        return crate::trace::run(files, *follow, *width).await;
    }
    let c = pool(&args)?;
    let addrs: Vec<String> = c.servers().iter().map(|s| s.addr()).collect();
    let timeout = Duration::from_millis(args.timeout_ms);
    for key in &args.which {
        match c.server_for(key.as_bytes()) {
            Some(i) => println!("{}", c.servers()[i]),
            None => return Err("no server".into()),
        }
    }
    let Some(cmd) = args.command else {
        return if !args.which.is_empty() {
            Ok(ExitCode::SUCCESS)
        } else {
            Err("no command (try --help)".into())
        };
    };
    let mut ok = true;
    let mut out = std::io::stdout().lock();
    let fail = |what: &str, e: &dyn std::fmt::Display| eprintln!("memkit: {what}: {e}");
    match cmd {
        Cmd::Get { keys } => {
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            let items = c
                .get_multi(&refs, &GetOptions::default())
                .await
                .map_err(|e| e.to_string())?;
            for (k, item) in keys.iter().zip(items) {
                match item {
                    Some(i) => {
                        let _ = out.write_all(&i.value);
                        let _ = out.write_all(b"\n");
                    }
                    None => {
                        eprintln!("memkit: {k}: not found");
                        ok = false;
                    }
                }
            }
        }
        Cmd::Set {
            key,
            value,
            flags,
            exptime,
        } => {
            let value = match value {
                Some(v) => v.into_bytes(),
                None => {
                    let mut v = Vec::new();
                    std::io::stdin()
                        .read_to_end(&mut v)
                        .map_err(|e| e.to_string())?;
                    v
                }
            };
            if let Err(e) = c.set(key.as_bytes(), &value, flags, Exptime(exptime)).await {
                fail(&key, &e);
                ok = false;
            }
        }
        Cmd::Delete { keys } => {
            for k in keys {
                match c.delete(k.as_bytes()).await {
                    Ok(true) => {}
                    Ok(false) => {
                        eprintln!("memkit: {k}: not found");
                        ok = false;
                    }
                    Err(e) => {
                        fail(&k, &e);
                        ok = false;
                    }
                }
            }
        }
        Cmd::Incr { key, delta } => ok &= arith(&c, &key, c.incr(key.as_bytes(), delta).await),
        Cmd::Decr { key, delta } => ok &= arith(&c, &key, c.decr(key.as_bytes(), delta).await),
        Cmd::Stats {
            args: sargs,
            format,
        } => {
            use crate::stats::{Format, fetch_all, render_pairs, render_prometheus};
            if format == Format::Prometheus {
                if !sargs.is_empty() {
                    return Err("--format prometheus takes no stats arguments".into());
                }
                let res = fetch_all(&c, true).await;
                for (server, r) in &res {
                    if let Err(e) = r {
                        fail(server, e);
                        ok = false;
                    }
                }
                let _ = out.write_all(render_prometheus(&res).as_bytes());
            } else {
                let res: Vec<(String, Result<crate::stats::Pairs, String>)> = c
                    .stats(&sargs.join(" "))
                    .await
                    .into_iter()
                    .map(|(s, r)| (s.addr(), r.map_err(|e| e.to_string())))
                    .collect();
                for (server, r) in &res {
                    if let Err(e) = r {
                        fail(server, e);
                        ok = false;
                    }
                }
                let _ = out.write_all(render_pairs(format, &res).as_bytes());
            }
        }
        Cmd::Flush { delay } => {
            if let Err(e) = c.flush_all(delay).await {
                fail("flush_all", &e);
                ok = false;
            }
        }
        Cmd::Dump {
            prefix,
            limit,
            format,
        } => {
            let opts = crate::dump::DumpOptions {
                prefix,
                limit,
                format,
            };
            let (_, errors) = crate::dump::dump(&addrs, timeout, &opts, &mut out).await;
            for e in errors {
                eprintln!("memkit: {e}");
                ok = false;
            }
        }
        Cmd::Watch {
            kinds,
            count,
            duration,
        } => {
            let opts = crate::watch::WatchOptions {
                kinds,
                count,
                duration: duration.map(Duration::from_secs_f64),
            };
            let (_, errors) = crate::watch::watch(&addrs, timeout, &opts, &mut out).await;
            for e in errors {
                eprintln!("memkit: {e}");
                ok = false;
            }
        }
        Cmd::Trace { .. } => unreachable!("handled above"),
        Cmd::Top {
            interval,
            iterations,
            batch,
        } => {
            let opts = crate::top::TopOptions {
                interval: Duration::from_secs_f64(interval.max(0.1)),
                iterations,
                batch,
            };
            drop(out);
            crate::top::run(&c, &opts).await?;
            return Ok(ExitCode::SUCCESS);
        }
        Cmd::Ping => {
            for i in 0..c.servers().len() {
                let t = Instant::now();
                match c.client(i).version().await {
                    Ok(v) => {
                        let _ = writeln!(
                            out,
                            "{}: {v} ({:.2} ms)",
                            c.servers()[i],
                            t.elapsed().as_secs_f64() * 1e3
                        );
                    }
                    Err(e) => {
                        fail(&c.servers()[i].to_string(), &e);
                        ok = false;
                    }
                }
            }
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn arith(_: &Cluster, key: &str, res: memkit_types::Result<Option<u64>>) -> bool {
    match res {
        Ok(Some(v)) => {
            println!("{v}");
            true
        }
        Ok(None) => {
            eprintln!("memkit: {key}: not found");
            false
        }
        Err(e) => {
            eprintln!("memkit: {key}: {e}");
            false
        }
    }
}
