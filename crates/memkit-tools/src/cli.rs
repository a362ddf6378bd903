//! `memkit`: libmemcached-tools' everyday verbs over a pool, and the operator views.
//!
//! ```text
//! memkit --servers 10.0.0.1:11211,10.0.0.2:11211:2 --distribution ketama get KEY...
//! memkit set|add|replace KEY [VALUE]   (VALUE from stdin when absent)
//! memkit append|prepend KEY [VALUE]    memkit cas KEY CAS [VALUE]
//! memkit get|gat ... --format value|line|json   memkit touch KEY EXPTIME
//! memkit delete KEY...   memkit incr KEY [DELTA]   memkit decr KEY [DELTA]
//! memkit stats [ARGS]    memkit flush [DELAY]      memkit ping   memkit version
//! memkit verbosity LEVEL memkit top   memkit dump   memkit watch   memkit trace FILE...
//! memkit cluster status [--format json]   memkit cluster add ID HOST:PORT
//! memkit cluster remove ID        (a replicated memkitd group, through any node)
//! memkit --which KEY              (the server KEY maps to)
//! ```
//! Every subcommand reaches TLS (`--tls ...`) and `-Y` servers (`--username/--password`),
//! see [`crate::connect`]. With `--binary` (libmemcached-tools' flag) every subcommand that
//! has a binary form speaks it, and `--username/--password` log in with SASL PLAIN (`-S`
//! servers): the key verbs, `stats` and `top` (binary `STAT`), `flush`, `ping`, `version`;
//! `dump`, `watch`, `verbosity` and `cluster` have none (memcached's binary protocol has no
//! metadump, no watch and no cluster command, and 1.6 answers its `VERBOSITY` with
//! `UNKNOWN_COMMAND`) and are refused with status 2 before any server is contacted. The server list defaults to
//! `$MEMCACHED_SERVERS` (as libmemcached-tools read it), then `127.0.0.1:11211`.
//!
//! Exit status: 0 on success (every key found, every store applied); 1 when a key was
//! missing or a conditional store did not apply (add on a present key, replace/append/
//! prepend/touch on a missing one, a CAS mismatch); 2 on bad usage or when a server could
//! not be reached or answered with an error (network, TLS, authentication). 2 wins over 1.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::connect::ConnArgs;
use crate::status::Status;
use crate::verbs::{ConcatArgs, GetFormat, StoreArgs};

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "memkit",
    version,
    about = "memcached pool tool (libmemcached placement)"
)]
pub struct Args {
    /// Servers, placement, timeouts, TLS and authentication.
    #[command(flatten)]
    pub conn: ConnArgs,
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
    /// Print each item found (like memccat); exit 1 if any key is missing.
    Get {
        /// Keys.
        #[arg(required = true)]
        keys: Vec<String>,
        /// value (the bytes, then a newline), line (`KEY FLAGS CAS TTL VALUE`, TTL -1 for
        /// none, `-` with --binary, which cannot read it), json (one object per key: key,
        /// found, flags, cas, ttl (not with --binary), value or value_base64).
        #[arg(long, short = 'f', value_enum, default_value = "value")]
        format: GetFormat,
    },
    /// Get and touch: read each key and set its expiry (`gat`); exit 1 if any is missing.
    Gat {
        /// New expiry (memcached's exptime: seconds, or an absolute Unix time; 0 none).
        exptime: i64,
        /// Keys.
        #[arg(required = true)]
        keys: Vec<String>,
        /// As for `get`.
        #[arg(long, short = 'f', value_enum, default_value = "value")]
        format: GetFormat,
    },
    /// Set a key's expiry; exit 1 if it is missing.
    Touch {
        /// Key.
        key: String,
        /// New expiry (seconds, or an absolute Unix time; 0 none).
        exptime: i64,
    },
    /// Store VALUE (or stdin) under KEY.
    Set(StoreArgs),
    /// Store only if KEY is absent; exit 1 if it exists.
    Add(StoreArgs),
    /// Store only if KEY is present; exit 1 if it is missing.
    Replace(StoreArgs),
    /// Add VALUE (or stdin) after KEY's value; exit 1 if it is missing.
    Append(ConcatArgs),
    /// Add VALUE (or stdin) before KEY's value; exit 1 if it is missing.
    Prepend(ConcatArgs),
    /// Store only if KEY's CAS is still CAS (from `get --format line|json`); exit 1 on a
    /// mismatch or a missing key.
    Cas {
        /// Key.
        key: String,
        /// The CAS unique the item must still have.
        cas: u64,
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
    /// `version` of every server: `host:port VERSION` per line.
    Version,
    /// `verbosity LEVEL` on every server (text protocol only: not with --binary).
    Verbosity {
        /// Level (memcached: 0 quiet, 1 errors and warnings, 2 and 3 more).
        level: u32,
    },
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
    /// Every key with its metadata (`lru_crawler metadump all`; text protocol only: not with
    /// --binary).
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
    /// Stream the servers' `watch` events (fetchers, mutations, evictions; default all; text
    /// protocol only: not with --binary).
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
    /// A replicated memkitd group (--raft-*), through the first server that answers: its
    /// status, or a member added or removed (text protocol only: not with --binary).
    Cluster {
        /// status, add ID HOST:PORT, remove ID.
        #[command(subcommand)]
        action: crate::cluster::ClusterCmd,
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
            return ExitCode::from(2);
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

async fn run(args: Args) -> Result<ExitCode, String> {
    if let Some(Cmd::Trace {
        files,
        follow,
        width,
    }) = &args.command
    {
        return crate::trace::run(files, *follow, *width).await;
    }
    match &args.command {
        Some(Cmd::Dump { .. }) => args.conn.refuse_binary(
            "dump",
            "memcached's binary protocol has no lru_crawler metadump",
        )?,
        Some(Cmd::Watch { .. }) => args
            .conn
            .refuse_binary("watch", "memcached's binary protocol has no watch")?,
        Some(Cmd::Verbosity { .. }) => args.conn.refuse_binary(
            "verbosity",
            "memcached 1.6 answers the binary VERBOSITY with UNKNOWN_COMMAND",
        )?,
        Some(Cmd::Cluster { .. }) => args.conn.refuse_binary(
            "cluster",
            "memcached's binary protocol has no cluster command",
        )?,
        _ => {}
    }
    let c = args.conn.cluster()?;
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
    let status = match cmd {
        Cmd::Top { .. } | Cmd::Dump { .. } | Cmd::Watch { .. } => {
            views(&args.conn, &c, cmd).await?
        }
        Cmd::Cluster { action } => {
            crate::cluster::run(c.servers(), &args.conn.client_config()?, action).await?
        }
        cmd => crate::verbs::run(&c, cmd).await?,
    };
    Ok(status.code())
}

/// The operator views: `top`, `dump`, `watch`.
async fn views(conn: &ConnArgs, c: &memkit_client::Cluster, cmd: Cmd) -> Result<Status, String> {
    let mut status = Status::default();
    let config = conn.client_config()?;
    let mut out = std::io::stdout().lock();
    match cmd {
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
            status.errors(crate::top::run(c, &opts).await?);
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
            let (_, errors) = crate::dump::dump(c.servers(), &config, &opts, &mut out).await;
            status.errors(errors);
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
            let (_, errors) = crate::watch::watch(c.servers(), &config, &opts, &mut out).await;
            status.errors(errors);
        }
        _ => unreachable!("not a view"),
    }
    Ok(status)
}
