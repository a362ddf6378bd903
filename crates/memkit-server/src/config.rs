//! memcached's command line, with the same meanings.
//!
//! Known flags are applied; flags that have no meaning here (slab tuning, large pages,
//! UDP...) are accepted and reported with a warning, never a crash, so that an existing
//! memcached command line starts memkitd unchanged. One deliberate difference: with no `-l`,
//! memkitd listens on 127.0.0.1, not on every interface (see `docs/protocol-notes.md`).

use clap::{ArgAction, Parser};

/// memkitd — a memcached 1.6 compatible server.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "memkitd",
    version = concat!(env!("CARGO_PKG_VERSION"), " (memcached 1.6 compatible)"),
    about = "memkitd: a memcached 1.6 drop-in server (text, meta and binary protocols).",
    long_about = "memkitd: a memcached 1.6 drop-in server (text, meta and binary protocols).\n\
        Takes memcached's flags with the same meaning. Listens on 127.0.0.1:11211 unless -l \
        says otherwise (memcached listens on all interfaces); UDP is off."
)]
pub struct Args {
    /// TCP port to listen on.
    #[arg(short = 'p', long = "port", default_value_t = 11211)]
    pub port: u16,
    /// UDP port; only 0 (off) is supported.
    #[arg(short = 'U', long = "udp-port", default_value_t = 0)]
    pub udp_port: u16,
    /// Interface(s) to listen on, comma separated (default 127.0.0.1, loopback only).
    #[arg(short = 'l', long = "listen", default_value = "127.0.0.1")]
    pub listen: String,
    /// Item memory in megabytes (also accepts k/m/g suffixes).
    #[arg(short = 'm', long = "memory-limit", default_value = "64", value_parser = parse_megabytes)]
    pub memory_limit: usize,
    /// Return an error on memory exhausted instead of evicting.
    #[arg(short = 'M', long = "disable-evictions")]
    pub disable_evictions: bool,
    /// Max simultaneous connections.
    #[arg(short = 'c', long = "conn-limit", default_value_t = 1024)]
    pub conn_limit: usize,
    /// Number of worker threads.
    #[arg(short = 't', long = "threads", default_value_t = 4)]
    pub threads: usize,
    /// Maximum number of requests per event (accepted; memkitd batches all ready requests).
    #[arg(short = 'R', long = "max-reqs-per-event", default_value_t = 20)]
    pub reqs_per_event: usize,
    /// Disable use of CAS (accepted with a warning: CAS stays on).
    #[arg(short = 'C', long = "disable-cas")]
    pub disable_cas: bool,
    /// Enable the ascii "shutdown" command.
    #[arg(short = 'A', long = "enable-shutdown")]
    pub enable_shutdown: bool,
    /// Protocol: auto (default: a client's first byte decides), ascii or binary. -S implies
    /// binary and -Y ascii, as in memcached.
    #[arg(short = 'B', long = "protocol")]
    pub protocol: Option<String>,
    /// Maximum item size, with k/m suffix (default 1m, minimum 1k, at most half of -m).
    #[arg(short = 'I', long = "max-item-size", default_value = "1m", value_parser = parse_size)]
    pub max_item_size: usize,
    /// Verbose (repeat for more: -vv prints every command).
    #[arg(short = 'v', action = ArgAction::Count)]
    pub verbose: u8,
    /// Comma-separated extended options, e.g. -o idle_timeout=60.
    #[arg(short = 'o', long = "extended", action = ArgAction::Append)]
    pub extended: Vec<String>,
    /// TCP backlog queue length.
    #[arg(short = 'b', long = "listen-backlog", default_value_t = 1024)]
    pub backlog: u32,
    /// Write the process id to this file.
    #[arg(short = 'P', long = "pidfile")]
    pub pidfile: Option<String>,
    /// Disable `stats cachedump` and `lru_crawler metadump`.
    #[arg(short = 'X', long = "disable-dumping")]
    pub disable_dumping: bool,
    /// Disable `watch` (the logger).
    #[arg(short = 'W', long = "disable-watch")]
    pub disable_watch: bool,
    /// Chunk size growth factor (accepted: memkitd has no slab classes).
    #[arg(short = 'f', long = "slab-growth-factor")]
    pub factor: Option<f64>,
    /// Minimum space allocated for key+value+flags (accepted, unused).
    #[arg(short = 'n', long = "slab-min-size")]
    pub min_size: Option<usize>,
    /// Run as a daemon (accepted: run memkitd under a supervisor instead).
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,
    /// Assume the identity of this user (accepted, ignored).
    #[arg(short = 'u', long = "user")]
    pub user: Option<String>,
    /// Lock down all paged memory (accepted, ignored).
    #[arg(short = 'k', long = "lock-memory")]
    pub lock_memory: bool,
    /// Try to use large memory pages (accepted, ignored).
    #[arg(short = 'L', long = "enable-largepages")]
    pub large_pages: bool,
    /// Stats prefix delimiter (accepted, ignored).
    #[arg(short = 'D')]
    pub delimiter: Option<String>,
    /// UNIX socket path (not supported: warned about).
    #[arg(short = 's', long = "unix-socket")]
    pub unix_socket: Option<String>,
    /// Require SASL authentication (binary protocol, mechanism PLAIN). The password file
    /// (`user:password` lines) is named by MEMCACHED_SASL_PWDB or --sasl-pwdb.
    #[arg(short = 'S', long = "enable-sasl")]
    pub sasl: bool,
    /// With -S: the password file (default: the MEMCACHED_SASL_PWDB environment variable).
    #[arg(long = "sasl-pwdb", value_name = "FILE")]
    pub sasl_pwdb: Option<String>,
    /// memkitd's own flags (memcached has none of these).
    #[command(flatten)]
    pub persist: PersistArgs,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
    #[command(flatten)]
    pub security: SecurityArgs,
}

/// Authentication and TLS flags (memcached's `-Y` and `-Z`; TLS details come in `-o ssl_*`).
#[derive(Debug, Clone, clap::Args)]
pub struct SecurityArgs {
    /// Enable ASCII protocol authentication. FILE holds `user:password` lines; a client's
    /// first command must be `set <any key> 0 0 <bytes>` with `user password` as data.
    #[arg(short = 'Y', long = "auth-file", value_name = "FILE")]
    pub auth_file: Option<String>,
    /// Enable TLS (-o ssl_chain_cert=FILE,ssl_key=FILE[,ssl_ca_cert=FILE,ssl_verify_mode=N]).
    #[arg(short = 'Z', long = "enable-ssl")]
    pub enable_ssl: bool,
}

/// TLS settings (`-Z`, `-o ssl_*`), with memcached's names and numbering.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SslSettings {
    /// `-Z`.
    pub enabled: bool,
    /// `ssl_chain_cert`: the server's certificate chain, PEM.
    pub chain_cert: Option<String>,
    /// `ssl_key`: its private key, PEM (default: read from the chain file).
    pub key: Option<String>,
    /// `ssl_ca_cert`: CAs whose client certificates are accepted, PEM.
    pub ca_cert: Option<String>,
    /// `ssl_verify_mode`: 0 none, 1 request (verify if sent), 2 require, 3 once (= 2: there
    /// is no renegotiation to skip verifying on).
    pub verify_mode: u8,
    /// `ssl_min_version`: 2 = TLS 1.2 (default), 3 = TLS 1.3. 0 and 1 (TLS 1.0/1.1) are
    /// raised to 2 with a warning: rustls does not speak them.
    pub min_version: u8,
}

/// Persistent mode's flags. A separate struct: clap's generated code for one large struct
/// builds every argument in one stack frame, and debug-build tests run it on small stacks.
#[derive(Debug, Clone, clap::Args)]
pub struct PersistArgs {
    /// Persistent mode: keep the data in this directory (MemcacheDB-style, crash-safe).
    #[arg(long = "persist", value_name = "DIR")]
    pub persist: Option<std::path::PathBuf>,
    /// With --persist: when a write is on disk. sync (default: acknowledged once fsynced,
    /// group commit), periodic[:MS] (fsync every MS ms, default 1000), none (never fsync).
    #[arg(long = "durability", value_name = "MODE", default_value = "sync")]
    pub durability: memkit_persist::Durability,
    /// With --persist: refuse new data (SERVER_ERROR out of disk space storing object)
    /// while fewer than this many MiB are free on the store's filesystem, so that the
    /// store itself never meets a full disk. Default: 4x the memtable budget, at least 64.
    /// 0 turns the guard off.
    #[arg(long = "persist-reserve", value_name = "MB")]
    pub reserve_mb: Option<u64>,
}

/// `-B`: the protocols a connection may speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The first byte decides: 0x80 is binary, anything else text (memcached's default).
    Auto,
    /// Text and meta only.
    Ascii,
    /// Binary only.
    Binary,
}

impl Protocol {
    /// The name `stats settings` shows as `binding_protocol`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Auto => "auto-negotiate",
            Protocol::Ascii => "ascii",
            Protocol::Binary => "binary",
        }
    }
}

/// The settings the server runs with, after applying and checking the flags.
#[derive(Debug, Clone)]
pub struct Settings {
    pub port: u16,
    pub listen: Vec<String>,
    pub memory_limit: usize,
    pub evict: bool,
    pub conn_limit: usize,
    pub threads: usize,
    pub reqs_per_event: usize,
    pub enable_shutdown: bool,
    pub item_size_max: usize,
    pub verbose: u8,
    /// Close connections this many seconds after their last complete request, or when a write
    /// stalls that long (`-o idle_timeout=`); 0 = never.
    pub idle_timeout: u64,
    pub backlog: u32,
    pub dumping: bool,
    pub watch: bool,
    pub factor: f64,
    pub min_size: usize,
    pub pidfile: Option<String>,
    /// `--persist DIR`: persistent mode.
    pub persist: Option<std::path::PathBuf>,
    /// `--durability`.
    pub durability: memkit_persist::Durability,
    /// `--persist-reserve MB`, in bytes (`None`: the store's default).
    pub persist_reserve: Option<u64>,
    /// `--metrics-addr HOST:PORT`: serve Prometheus metrics there (off when `None`).
    pub metrics_addr: Option<String>,
    /// `-Y FILE`: ASCII authentication against this `user:password` file.
    pub auth_file: Option<String>,
    /// `-B`: which protocols connections may speak.
    pub protocol: Protocol,
    /// `-S`: binary connections must authenticate with SASL first.
    pub sasl: bool,
    /// The SASL password file (`--sasl-pwdb` or `MEMCACHED_SASL_PWDB`).
    pub sasl_pwdb: Option<String>,
    /// `-Z` and `-o ssl_*`.
    pub ssl: SslSettings,
    /// Options memcached refuses to start with (bad `-o ssl_*` values), for [`Settings::check`].
    refused: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::from_args(Args::parse_from(["memkitd"])).0
    }
}

impl Settings {
    /// Applies the flags. Returns the settings and the warnings to print; `Err` for what
    /// memcached also refuses to start with.
    pub fn from_args(a: Args) -> (Settings, Vec<String>) {
        let mut warn = Vec::new();
        let mut s = Settings {
            port: a.port,
            listen: a.listen.split(',').map(|l| l.trim().to_string()).collect(),
            memory_limit: a.memory_limit,
            evict: !a.disable_evictions,
            conn_limit: a.conn_limit.max(1),
            threads: a.threads.max(1),
            reqs_per_event: a.reqs_per_event,
            enable_shutdown: a.enable_shutdown,
            item_size_max: a.max_item_size,
            verbose: a.verbose,
            idle_timeout: 0,
            backlog: a.backlog,
            dumping: !a.disable_dumping,
            watch: !a.disable_watch,
            factor: a.factor.unwrap_or(1.25),
            min_size: a.min_size.unwrap_or(48),
            pidfile: a.pidfile,
            persist: a.persist.persist,
            durability: a.persist.durability,
            persist_reserve: a.persist.reserve_mb.map(|mb| mb << 20),
            metrics_addr: a.metrics.metrics_addr,
            auth_file: a.security.auth_file,
            protocol: Protocol::Auto,
            sasl: a.sasl,
            sasl_pwdb: a
                .sasl_pwdb
                .or_else(|| std::env::var("MEMCACHED_SASL_PWDB").ok()),
            ssl: SslSettings {
                enabled: a.security.enable_ssl,
                min_version: 2,
                ..SslSettings::default()
            },
            refused: Vec::new(),
        };
        if s.persist.is_some() && !s.evict {
            // RAM is a cache over the disk in persistent mode: evicting loses nothing.
            warn.push("-M has no effect with --persist: RAM evicts, the disk keeps all".into());
            s.evict = true;
        }
        if s.persist.is_none() && s.durability != memkit_persist::Durability::Sync {
            warn.push("--durability has no effect without --persist".into());
        }
        if a.udp_port != 0 {
            warn.push("UDP is not supported; -U ignored (UDP stays off)".into());
        }
        if a.unix_socket.is_some() {
            warn.push("UNIX sockets are not supported; -s ignored".into());
        }
        if a.disable_cas {
            warn.push("-C accepted, but CAS stays enabled".into());
        }
        binding_protocol(&mut s, a.protocol.as_deref());
        for (set, name) in [
            (a.daemon, "-d"),
            (a.user.is_some(), "-u"),
            (a.lock_memory, "-k"),
            (a.large_pages, "-L"),
            (a.delimiter.is_some(), "-D"),
        ] {
            if set {
                warn.push(format!("{name} accepted and ignored"));
            }
        }
        for opt in a.extended.iter().flat_map(|o| o.split(',')) {
            let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
            match k {
                "idle_timeout" => match v.parse() {
                    Ok(n) => s.idle_timeout = n,
                    Err(_) => warn.push(format!("-o idle_timeout: bad value {v:?}")),
                },
                "item_size_max" => match parse_size(v) {
                    Ok(n) => s.item_size_max = n,
                    Err(e) => warn.push(format!("-o item_size_max: {e}")),
                },
                k if k.starts_with("ssl_") => ssl_option(&mut s, k, v, &mut warn),
                // memcached's tuning knobs for machinery memkitd does not have.
                "modern"
                | "hashpower"
                | "slab_reassign"
                | "slab_automove"
                | "lru_crawler"
                | "no_lru_crawler"
                | "lru_maintainer"
                | "no_lru_maintainer"
                | "maxconns_fast"
                | "no_maxconns_fast"
                | "tail_repair_time"
                | "hash_algorithm"
                | "slab_chunk_max"
                | "temporary_ttl"
                | "watcher_logbuf_size"
                | "worker_logbuf_size"
                | "track_sizes"
                | "no_hashexpand"
                | "hot_lru_pct"
                | "warm_lru_pct" => warn.push(format!("-o {k}: accepted, no effect in memkitd")),
                "" => {}
                other => warn.push(format!("-o {other}: unknown option, ignored")),
            }
        }
        s.item_size_max = s.item_size_max.max(1024);
        (s, warn)
    }

    /// What memcached refuses at start-up, with its message.
    pub fn check(&self) -> Result<(), String> {
        if self.item_size_max > 1024 * 1024 * 1024 {
            return Err("Cannot set item size limit higher than 1 gigabyte.".into());
        }
        if self.item_size_max > self.memory_limit / 2 {
            return Err("Cannot set item size limit higher than 1/2 of memory max.".into());
        }
        if let Some(msg) = self.refused.first() {
            return Err(msg.clone());
        }
        Ok(())
    }
}

/// `-B`, and what `-S` and `-Y` imply for it, with memcached's messages for the
/// combinations it refuses.
fn binding_protocol(s: &mut Settings, flag: Option<&str>) {
    s.protocol = match flag {
        None if s.sasl => Protocol::Binary,
        None if s.auth_file.is_some() => Protocol::Ascii,
        None | Some("auto") => Protocol::Auto,
        Some("ascii") => Protocol::Ascii,
        Some("binary") => Protocol::Binary,
        Some(other) => {
            s.refused.push(format!(
                "Invalid value for binding protocol: {other}\n -- should be one of auto, binary, or ascii"
            ));
            Protocol::Auto
        }
    };
    if s.sasl && flag.is_some() && s.protocol != Protocol::Binary {
        s.refused
            .push("ERROR: You cannot allow the ASCII protocol while using SASL.".into());
    }
    if s.auth_file.is_some() && flag.is_some() && s.protocol != Protocol::Ascii {
        s.refused.push(
            "ERROR: You cannot allow the BINARY protocol while using ascii authentication tokens."
                .into(),
        );
    }
    if s.sasl && s.sasl_pwdb.is_none() {
        s.refused.push(
            "memkitd: -S needs a password file: set MEMCACHED_SASL_PWDB or --sasl-pwdb".into(),
        );
    }
}

/// One `-o ssl_*` option; memcached's messages for the values it refuses.
fn ssl_option(s: &mut Settings, k: &str, v: &str, warn: &mut Vec<String>) {
    let ssl = &mut s.ssl;
    let path = |v: &str| (!v.is_empty()).then(|| v.to_string());
    let missing = || format!("Missing {k} argument");
    let refused = &mut s.refused;
    match k {
        "ssl_chain_cert" => match path(v) {
            Some(p) => ssl.chain_cert = Some(p),
            None => refused.push(missing()),
        },
        "ssl_key" => match path(v) {
            Some(p) => ssl.key = Some(p),
            None => refused.push(missing()),
        },
        "ssl_ca_cert" => match path(v) {
            Some(p) => ssl.ca_cert = Some(p),
            None => refused.push(missing()),
        },
        "ssl_verify_mode" => match v.parse::<u8>() {
            Ok(n @ 0..=3) => ssl.verify_mode = n,
            Ok(_) => refused.push("Invalid ssl_verify_mode. Use help to see valid options.".into()),
            Err(_) if v.is_empty() => refused.push(missing()),
            Err(_) => refused.push("could not parse argument to ssl_verify_mode".into()),
        },
        "ssl_min_version" => match v.parse::<u8>() {
            Ok(n @ 2..=3) => ssl.min_version = n,
            Ok(n @ 0..=1) => {
                warn.push(format!(
                    "-o ssl_min_version={n}: TLS 1.0/1.1 are not supported; TLS 1.2 is the minimum"
                ));
                ssl.min_version = 2;
            }
            Ok(_) => refused.push("Invalid ssl_min_version. Use help to see valid options.".into()),
            Err(_) if v.is_empty() => refused.push(missing()),
            Err(_) => refused.push("could not parse argument to ssl_min_version".into()),
        },
        // SSL_FILETYPE_PEM is 1; DER and ENGINE keys are not supported.
        "ssl_keyformat" if v == "1" => {}
        "ssl_keyformat" => refused.push(format!("-o ssl_keyformat={v}: only PEM (1) is supported")),
        "ssl_ciphers" => warn.push(
            "-o ssl_ciphers: accepted, ignored (rustls's safe default suites are used)".into(),
        ),
        "ssl_wbuf_size" | "ssl_session_cache" | "ssl_kernel_tls" => {
            warn.push(format!("-o {k}: accepted, no effect in memkitd"))
        }
        other => warn.push(format!("-o {other}: unknown option, ignored")),
    }
}

/// `-m`: megabytes, or a size with a k/m/g suffix.
fn parse_megabytes(s: &str) -> Result<usize, String> {
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<usize>()
            .map(|mb| mb << 20)
            .map_err(|e| e.to_string());
    }
    parse_size(s)
}

/// `-I`: bytes, or with a k/m/g suffix.
fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, shift) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: usize = num.parse().map_err(|_| format!("bad size {s:?}"))?;
    n.checked_shl(shift)
        .filter(|v| v >> shift == n)
        .ok_or_else(|| format!("size {s:?} too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_command_lines_parse() {
        let a = Args::parse_from([
            "memkitd",
            "-p",
            "12345",
            "-U",
            "0",
            "-m",
            "128",
            "-c",
            "10",
            "-t",
            "2",
            "-I",
            "2m",
            "-M",
            "-A",
            "-vv",
            "-o",
            "idle_timeout=30,modern",
            "-B",
            "ascii",
            "-R",
            "5",
        ]);
        let (s, warn) = Settings::from_args(a);
        assert_eq!(
            (s.port, s.memory_limit, s.conn_limit, s.threads),
            (12345, 128 << 20, 10, 2)
        );
        assert_eq!(
            (s.item_size_max, s.evict, s.enable_shutdown, s.verbose),
            (2 << 20, false, true, 2)
        );
        assert_eq!(s.idle_timeout, 30);
        assert_eq!(s.listen, vec!["127.0.0.1"]);
        assert_eq!(warn.len(), 1, "{warn:?}");
        assert!(s.check().is_ok());
    }

    #[test]
    fn unknown_extended_options_warn_and_bad_sizes_refuse() {
        let (s, warn) = Settings::from_args(Args::parse_from(["memkitd", "-o", "frobnicate=1"]));
        assert!(warn[0].contains("unknown option"));
        assert_eq!(s.port, 11211);
        let (s, _) = Settings::from_args(Args::parse_from(["memkitd", "-m", "1", "-I", "1m"]));
        assert!(s.check().is_err());
        assert!(Args::try_parse_from(["memkitd", "-I", "lots"]).is_err());
    }

    #[test]
    fn security_flags_parse_like_memcached() {
        let (s, warn) = Settings::from_args(Args::parse_from([
            "memkitd",
            "-Y",
            "users",
            "-Z",
            "-o",
            "ssl_chain_cert=c.pem,ssl_key=k.pem,ssl_ca_cert=ca.pem,ssl_verify_mode=2",
            "-o",
            "ssl_min_version=1,ssl_ciphers=HIGH",
        ]));
        assert_eq!(s.auth_file.as_deref(), Some("users"));
        assert_eq!(
            s.ssl,
            SslSettings {
                enabled: true,
                chain_cert: Some("c.pem".into()),
                key: Some("k.pem".into()),
                ca_cert: Some("ca.pem".into()),
                verify_mode: 2,
                min_version: 2,
            }
        );
        assert_eq!(warn.len(), 2, "{warn:?}");
        assert!(s.check().is_ok());
        let refused = |o: &str| {
            Settings::from_args(Args::parse_from(["memkitd", "-o", o]))
                .0
                .check()
                .unwrap_err()
        };
        assert_eq!(refused("ssl_chain_cert"), "Missing ssl_chain_cert argument");
        assert_eq!(
            refused("ssl_verify_mode=4"),
            "Invalid ssl_verify_mode. Use help to see valid options."
        );
        assert_eq!(
            refused("ssl_min_version=x"),
            "could not parse argument to ssl_min_version"
        );
    }
}
