//! memcached's command line, with the same meanings.
//!
//! Known flags are applied; flags that have no meaning here (slab tuning, large pages,
//! UDP...) are accepted and reported with a warning, never a crash, so that an existing
//! memcached command line starts memkitd unchanged. One deliberate difference: with no `-l`,
//! memkitd listens on 127.0.0.1, not on every interface (see `docs/protocol-notes.md`).

use clap::{ArgAction, Parser};

mod extended;
mod flash;
mod io;
pub mod listen;
pub mod numbers;
pub mod raft;

pub use flash::{FLASH_WITH_PERSIST, FlashSettings};
pub use io::Io;
use numbers::{Numbers, strtol};

/// memkitd — a memcached 1.6 compatible server.
///
/// Numeric values are strings here and read as memcached reads them (C's `atoi`), so that
/// what memcached takes starts memkitd and what it refuses is refused with its message.
#[derive(Debug, Clone, Parser)]
// getopt takes a flag twice (`-d -d`, `-p 1 -p 2`: the last wins); so does memkitd.
#[command(
    args_override_self = true,
    name = "memkitd",
    version = concat!(env!("CARGO_PKG_VERSION"), " (memcached 1.6 compatible)"),
    about = "memkitd: a memcached 1.6 drop-in server (text, meta and binary protocols).",
    long_about = "memkitd: a memcached 1.6 drop-in server (text, meta and binary protocols).\n\
        Takes memcached's flags with the same meaning. Listens on 127.0.0.1:11211 unless -l \
        says otherwise (memcached listens on all interfaces); UDP is off."
)]
pub struct Args {
    /// TCP port to listen on (0: none).
    #[arg(short = 'p', long = "port", allow_hyphen_values = true)]
    pub port: Option<String>,
    /// UDP port; only 0 (off) is supported.
    #[arg(short = 'U', long = "udp-port", allow_hyphen_values = true)]
    pub udp_port: Option<String>,
    /// Interface(s) to listen on: repeatable, comma separated, `[::1]:PORT`, `*` (default
    /// 127.0.0.1, loopback only).
    #[arg(short = 'l', long = "listen", action = ArgAction::Append)]
    pub listen: Vec<String>,
    /// Item memory in megabytes (also accepts k/m/g suffixes).
    #[arg(
        short = 'm',
        long = "memory-limit",
        default_value = "64",
        allow_hyphen_values = true
    )]
    pub memory_limit: String,
    /// Return an error on memory exhausted instead of evicting.
    #[arg(short = 'M', long = "disable-evictions")]
    pub disable_evictions: bool,
    /// Max simultaneous connections.
    #[arg(
        short = 'c',
        long = "conn-limit",
        default_value = "1024",
        allow_hyphen_values = true
    )]
    pub conn_limit: String,
    /// Number of worker threads.
    #[arg(
        short = 't',
        long = "threads",
        default_value = "4",
        allow_hyphen_values = true
    )]
    pub threads: String,
    /// How worker threads wait for their connections (memkitd's own): io_uring where the
    /// kernel has it, else epoll; or epoll.
    #[arg(long = "io", value_enum, default_value_t)]
    pub io: Io,
    /// Maximum number of requests per event: a connection with more input waiting then gives
    /// way to the others (counted in conn_yields)
    #[arg(
        short = 'R',
        long = "max-reqs-per-event",
        default_value = "20",
        allow_hyphen_values = true
    )]
    pub reqs_per_event: String,
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
    #[arg(short = 'I', long = "max-item-size", allow_hyphen_values = true)]
    pub max_item_size: Option<String>,
    /// Verbose (repeat for more: -vv prints every command).
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,
    /// Comma-separated extended options, e.g. -o idle_timeout=60.
    #[arg(short = 'o', long = "extended", action = ArgAction::Append)]
    pub extended: Vec<String>,
    /// TCP backlog queue length.
    #[arg(
        short = 'b',
        long = "listen-backlog",
        default_value = "1024",
        allow_hyphen_values = true
    )]
    pub backlog: String,
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
    #[arg(short = 'f', long = "slab-growth-factor", allow_hyphen_values = true)]
    pub factor: Option<String>,
    /// Minimum space allocated for key+value+flags (accepted, unused).
    #[arg(short = 'n', long = "slab-min-size", allow_hyphen_values = true)]
    pub min_size: Option<String>,
    /// Require SASL authentication (binary protocol, mechanism PLAIN). The password file
    /// (`user:password` lines) is named by MEMCACHED_SASL_PWDB or --sasl-pwdb.
    #[arg(short = 'S', long = "enable-sasl")]
    pub sasl: bool,
    /// With -S: the password file (default: the MEMCACHED_SASL_PWDB environment variable).
    #[arg(long = "sasl-pwdb", value_name = "FILE")]
    pub sasl_pwdb: Option<String>,
    /// The rest of memcached's flags.
    #[command(flatten)]
    pub process: ProcessArgs,
    /// memkitd's own flags (memcached has none of these).
    #[command(flatten)]
    pub persist: PersistArgs,
    #[command(flatten)]
    pub raft: raft::RaftArgs,
    #[command(flatten)]
    pub route: RouteArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub log: crate::log::LogArgs,
    #[command(flatten)]
    pub security: SecurityArgs,
}

/// memcached's process-level flags: identity, daemon, unix socket, limits.
#[derive(Debug, Clone, clap::Args)]
pub struct ProcessArgs {
    /// Assume the identity of this user (and its group) once listening; required when run
    /// as root, ignored otherwise.
    #[arg(short = 'u', long = "user")]
    pub user: Option<String>,
    /// Run as a daemon (fork, detach from the terminal).
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,
    /// Maximize the core file limit.
    #[arg(short = 'r', long = "enable-coredumps")]
    pub coredumps: bool,
    /// Lock down all paged memory (mlockall).
    #[arg(short = 'k', long = "lock-memory")]
    pub lock_memory: bool,
    /// Try to use large memory pages (accepted, no effect).
    #[arg(short = 'L', long = "enable-largepages")]
    pub large_pages: bool,
    /// Stats prefix delimiter (turns per-prefix stats on).
    #[arg(short = 'D')]
    pub delimiter: Option<String>,
    /// UNIX socket to listen on (disables the TCP listeners).
    #[arg(short = 's', long = "unix-socket")]
    pub unix_socket: Option<String>,
    /// Access mask for the UNIX socket, in octal (default 700).
    #[arg(short = 'a', long = "unix-mask")]
    pub unix_mask: Option<String>,
    /// Disable the flush_all command.
    #[arg(short = 'F', long = "disable-flush-all")]
    pub disable_flush: bool,
    /// Restartable cache: a graceful stop (SIGUSR1) saves the cache to this file, the next
    /// start with the same -m and -I restores it.
    #[arg(short = 'e', long = "memory-file")]
    pub memory_file: Option<String>,
    /// Number of NAPI ids (accepted, no effect).
    #[arg(short = 'N', long = "napi-ids", allow_hyphen_values = true)]
    pub napi_ids: Option<String>,
    /// Print the license and exit.
    #[arg(short = 'i', long = "license")]
    pub license: bool,
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
    // The flags' doc comments are their `--help` text, where brackets mark what is optional.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// With --persist: when a write is on disk (with --raft-*: an entry in the log). sync
    /// (default: acknowledged once fsynced, group commit), periodic[:MS] (fsync every MS ms,
    /// default 1000), none (never fsync).
    #[arg(long = "durability", value_name = "MODE", default_value = "sync")]
    pub durability: memkit_persist::Durability,
    /// With --persist: refuse new data (SERVER_ERROR out of disk space storing object)
    /// while fewer than this many MiB are free on the store's filesystem, so that the
    /// store itself never meets a full disk. Default: 4x the memtable budget, at least 64.
    /// 0 turns the guard off.
    #[arg(long = "persist-reserve", value_name = "MB")]
    pub reserve_mb: Option<u64>,
}

/// Router mode's flag.
#[derive(Debug, Clone, clap::Args)]
pub struct RouteArgs {
    /// Run as a router in front of the pools this TOML file describes (docs/router.md):
    /// requests go to the backends, not to a local store. SIGHUP reloads the file.
    #[arg(long = "route", value_name = "FILE")]
    pub route: Option<std::path::PathBuf>,
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
    /// `-p` (with memcached's `-U` fallback); 0 listens on no TCP port.
    pub port: u16,
    /// The `-l` items (memcached skips one already contained in the list so far); with no
    /// `-l`, `127.0.0.1`. [`listen::parse`] reads them.
    pub listen: Vec<String>,
    /// No `-l` was given (memcached then says "failed to listen on TCP port").
    pub listen_default: bool,
    /// `-s`: a UNIX socket to listen on instead of TCP.
    pub unix_socket: Option<std::path::PathBuf>,
    /// `-a`: its permission bits (memcached's default 0700).
    pub unix_mask: u32,
    pub memory_limit: usize,
    pub evict: bool,
    pub conn_limit: usize,
    pub threads: usize,
    /// `--io`: what the worker threads wait with, as this kernel allows it.
    pub io: Io,
    pub reqs_per_event: usize,
    pub enable_shutdown: bool,
    /// `-F` clears it: `flush_all` refused.
    pub flush_enabled: bool,
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
    /// `-D`: the stats prefix delimiter (default `:`), and whether `-D` turned detail on.
    pub prefix_delimiter: u8,
    pub detail_enabled: bool,
    pub pidfile: Option<String>,
    /// `-u`: the user to run as once listening (only used when started as root).
    pub user: Option<String>,
    /// `-d`, `-r`, `-k`: daemonize, raise the core limit, mlockall.
    pub daemonize: bool,
    pub core_dumps: bool,
    pub lock_memory: bool,
    /// `--persist DIR`: persistent mode.
    pub persist: Option<std::path::PathBuf>,
    /// `--durability`.
    pub durability: memkit_persist::Durability,
    /// `--persist-reserve MB`, in bytes (`None`: the store's default).
    pub persist_reserve: Option<u64>,
    /// `--raft-*`: this server is a node of a replicated group (`crate::replica`).
    pub raft: Option<raft::RaftSettings>,
    /// `--route FILE`: this server is a router (`crate::router`).
    pub route: Option<std::path::PathBuf>,
    /// `-e FILE`: warm restart through this file (see [`crate::warm`]).
    pub memory_file: Option<std::path::PathBuf>,
    /// `--metrics-addr HOST:PORT`: serve Prometheus metrics and the page there (off when
    /// `None`).
    pub metrics_addr: Option<String>,
    /// `--dashboard-keys`: the page's key browser and hot keys are served.
    pub dashboard_keys: bool,
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
    /// `-o ext_path=PATH:SIZE` and the other `ext_*`: the flash tier under RAM (memcached's
    /// extstore); `None` without `ext_path`.
    pub flash: Option<FlashSettings>,
    /// What memcached checks after reading every flag (see [`Settings::check`]).
    tuning: Tuning,
    /// Refusals met while reading the flags, in memcached's order.
    refused: Vec<Refusal>,
}

/// Why memcached would not start: its message and exit status (1 for what its option
/// loop refuses, `EX_USAGE` 64 for the checks after it, `EX_OSERR` 71...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: i32,
    pub message: String,
}

impl Refusal {
    pub fn new(code: i32, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Callers that only report the message (`?` into a `String` error).
impl From<Refusal> for String {
    fn from(r: Refusal) -> String {
        r.message
    }
}

/// The error of [`crate::Shared::try_with_security`] and its kin: exit status and message.
impl From<Refusal> for (i32, String) {
    fn from(r: Refusal) -> (i32, String) {
        (r.code, r.message)
    }
}

/// `EX_USAGE`, `EX_NOUSER`, `EX_OSERR` from sysexits.h, the statuses memcached exits with.
pub const EX_USAGE: i32 = 64;
pub const EX_NOUSER: i32 = 67;
pub const EX_OSERR: i32 = 71;
/// sysexits' EX_CONFIG: `--route`'s file is bad.
pub const EX_CONFIG: i32 = 78;

/// memcached's values that only its start-up checks read.
#[derive(Debug, Clone)]
struct Tuning {
    port: i64,
    udp_port: i64,
    item_size: i64,
    napi_ids: i32,
    slab_chunk_max: i64,
    slab_chunk_changed: bool,
    lru_maintainer: bool,
    hot_lru_pct: i32,
    warm_lru_pct: i32,
    temp_lru: bool,
    protocol_given: bool,
    /// The `ext_*` options as read; [`Settings::flash`] once `ext_path` is among them.
    flash: FlashSettings,
    /// An `ext_*` option was given.
    flash_given: bool,
}

impl Tuning {
    /// memcached's slab page: 1 MiB.
    const SLAB_PAGE: i64 = 1 << 20;
}

impl Default for Settings {
    fn default() -> Self {
        Settings::from_args(Args::parse_from(["memkitd"])).0
    }
}

impl Settings {
    /// Applies the flags. Returns the settings and the warnings to print; what memcached
    /// refuses to start with is kept for [`Settings::check`].
    pub fn from_args(a: Args) -> (Settings, Vec<String>) {
        let mut warn = Vec::new();
        let mut refused = Vec::new();
        let pr = &a.process;
        let n = Numbers::read(&a, &mut warn, &mut refused);
        let (listen, listen_default) = listen_list(&a.listen);
        let (io, io_warning) = a.io.resolve();
        warn.extend(io_warning);
        let mut s = Settings {
            port: u16::try_from(n.port).unwrap_or(0),
            listen,
            listen_default,
            unix_socket: pr.unix_socket.clone().map(Into::into),
            unix_mask: pr
                .unix_mask
                .as_deref()
                .map_or(0o700, |m| strtol(m, 8) as u32)
                & 0o777,
            memory_limit: n.memory as usize,
            evict: !a.disable_evictions,
            conn_limit: n.conns.max(1) as usize,
            threads: n.threads.max(1) as usize,
            io,
            reqs_per_event: n.reqs.max(1) as usize,
            enable_shutdown: a.enable_shutdown,
            flush_enabled: !pr.disable_flush,
            item_size_max: n.item_size.max(1024) as usize,
            verbose: a.verbose,
            idle_timeout: 0,
            // A negative backlog is a huge one to listen(2), which caps it at somaxconn.
            backlog: u32::try_from(n.backlog).unwrap_or(4096),
            dumping: !a.disable_dumping,
            watch: !a.disable_watch,
            factor: n.factor,
            min_size: n.min_size.max(1) as usize,
            prefix_delimiter: pr
                .delimiter
                .as_deref()
                .and_then(|d| d.bytes().next())
                .unwrap_or(b':'),
            detail_enabled: pr.delimiter.is_some(),
            pidfile: a.pidfile.clone(),
            user: pr.user.clone(),
            daemonize: pr.daemon,
            core_dumps: pr.coredumps,
            lock_memory: pr.lock_memory,
            persist: a.persist.persist.clone(),
            durability: a.persist.durability,
            persist_reserve: a.persist.reserve_mb.map(|mb| mb << 20),
            raft: None,
            route: a.route.route.clone(),
            memory_file: pr.memory_file.clone().map(Into::into),
            metrics_addr: a.metrics.metrics_addr.clone(),
            dashboard_keys: a.metrics.dashboard_keys,
            auth_file: a.security.auth_file.clone(),
            protocol: Protocol::Auto,
            sasl: a.sasl,
            sasl_pwdb: a
                .sasl_pwdb
                .clone()
                .or_else(|| std::env::var("MEMCACHED_SASL_PWDB").ok()),
            ssl: SslSettings {
                enabled: a.security.enable_ssl,
                min_version: 2,
                ..SslSettings::default()
            },
            flash: None,
            tuning: Tuning {
                port: n.port,
                udp_port: n.udp_port,
                item_size: n.item_size,
                napi_ids: n.napi_ids,
                slab_chunk_max: Tuning::SLAB_PAGE / 2,
                slab_chunk_changed: false,
                lru_maintainer: true,
                hot_lru_pct: 20,
                warm_lru_pct: 40,
                temp_lru: false,
                protocol_given: a.protocol.is_some(),
                flash: FlashSettings::default(),
                flash_given: false,
            },
            refused,
        };
        s.protocol = match a.protocol.as_deref() {
            None | Some("auto") => Protocol::Auto,
            Some("ascii") => Protocol::Ascii,
            Some("binary") => Protocol::Binary,
            Some(other) => {
                s.refused.push(Refusal::new(
                    EX_USAGE,
                    format!(
                        "Invalid value for binding protocol: {other}\n -- should be one of auto, binary, or ascii"
                    ),
                ));
                Protocol::Auto
            }
        };
        let mut tuning = s.tuning.clone();
        'opts: for o in &a.extended {
            for opt in o.split(',') {
                if let Err(msg) = extended::option(&mut s, &mut tuning, opt, &mut warn) {
                    s.refused.push(Refusal::new(1, msg));
                    break 'opts;
                }
            }
        }
        s.tuning = tuning;
        if !s.tuning.flash.files.is_empty() {
            s.flash = Some(s.tuning.flash.clone());
        } else if s.tuning.flash_given {
            warn.push("-o ext_*: no effect without ext_path (the flash tier is off)".into());
        }
        if !s.tuning.protocol_given && s.sasl {
            s.protocol = Protocol::Binary;
        } else if !s.tuning.protocol_given && s.auth_file.is_some() {
            s.protocol = Protocol::Ascii;
        }
        match raft::RaftSettings::from_args(&a.raft, s.persist.is_some()) {
            Ok(r) => s.raft = r,
            Err(r) => s.refused.push(r),
        }
        if s.route.is_some() && s.persist.is_some() {
            let m = "--route and --persist cannot go together: a router stores nothing itself";
            s.refused.push(Refusal::new(EX_USAGE, m));
        }
        // RAM is a cache over the disk in persistent mode, a replicated node's too (its
        // store is memkit-raft's): evicting loses nothing.
        s.evict |= s.persist.is_some();
        no_effect_warnings(&s, &a, &mut warn);
        (s, warn)
    }

    /// What memcached refuses at start-up, with its message and exit status: first what
    /// its option loop refused, then its checks after the loop, in its order.
    pub fn check(&self) -> Result<(), Refusal> {
        if let Some(r) = self.refused.first() {
            return Err(r.clone());
        }
        let t = &self.tuning;
        let usage = |m: String| Err(Refusal::new(EX_USAGE, m));
        if t.napi_ids > self.threads as i32 {
            return usage(format!(
                "Number of napi_ids({}) cannot be greater than number of threads({})",
                t.napi_ids, self.threads
            ));
        }
        if t.item_size < 1024 {
            return usage("Item max size cannot be less than 1024 bytes.".into());
        }
        if t.item_size > (self.memory_limit / 2) as i64 {
            return usage("Cannot set item size limit higher than 1/2 of memory max.".into());
        }
        if t.item_size > 1 << 30 {
            return usage("Cannot set item size limit higher than a gigabyte.".into());
        }
        let chunk = if t.item_size > Tuning::SLAB_PAGE && !t.slab_chunk_changed {
            Tuning::SLAB_PAGE / 2
        } else {
            t.slab_chunk_max
        };
        if chunk > t.item_size {
            return usage(format!(
                "slab_chunk_max (bytes: {chunk}) cannot be larger than -I (item_size_max {})",
                t.item_size
            ));
        }
        if chunk <= 0 || t.item_size % chunk != 0 {
            return usage(format!(
                "-I (item_size_max: {}) must be evenly divisible by slab_chunk_max (bytes: {chunk})",
                t.item_size
            ));
        }
        if Tuning::SLAB_PAGE % chunk != 0 {
            return usage(format!(
                "slab_chunk_max (bytes: {chunk}) must divide evenly into {} (slab_page_size)",
                Tuning::SLAB_PAGE
            ));
        }
        // memcached's storage_check_config, then memkitd's own conflict.
        if let Some(f) = &self.flash {
            f.check_usage(t.item_size, t.udp_port)?;
            if self.persist.is_some() {
                return usage(FLASH_WITH_PERSIST.into());
            }
        }
        if t.hot_lru_pct + t.warm_lru_pct > 80 {
            return usage("hot_lru_pct + warm_lru_pct cannot be more than 80% combined".into());
        }
        if t.temp_lru && !t.lru_maintainer {
            return usage("temporary_ttl requires lru_maintainer to be enabled".into());
        }
        self.check_protocols()?;
        if t.port > 65535 {
            return usage(format!("ERROR: Invalid port number {}.", t.port));
        }
        if t.port < 0 {
            return Err(Refusal::new(
                EX_OSERR,
                format!(
                    "getaddrinfo(): Servname not supported for ai_socktype (port {})",
                    t.port
                ),
            ));
        }
        if self.ssl.enabled && self.port == 0 {
            return usage("ERROR: You cannot enable SSL without a TCP port.".into());
        }
        // The peer port is TLS too, with mutual certificates (`crate::tls::peer_tls`).
        if self.ssl.enabled && self.raft.is_some() && self.ssl.ca_cert.is_none() {
            return usage(crate::tls::PEER_CA_REQUIRED.into());
        }
        // What memcached's extstore_init refuses, once the rest has started.
        self.flash
            .as_ref()
            .map_or(Ok(()), FlashSettings::check_init)
    }

    /// What no server may serve with, however its settings were built (from the flags, or
    /// changed by an embedder afterwards): every server's state is built through it
    /// ([`crate::Shared::try_with_security`]), and [`Settings::check`] runs it in memcached's
    /// order. SASL with the text protocol allowed would let an ASCII connection skip
    /// authentication altogether (`-S` alone implies `-B binary`; memcached refuses `-S`
    /// with `-B ascii` or `-B auto`).
    pub fn validate(&self) -> Result<(), Refusal> {
        if self.sasl && self.protocol != Protocol::Binary {
            return Err(Refusal::new(
                EX_USAGE,
                "ERROR: You cannot allow the ASCII protocol while using SASL.",
            ));
        }
        Ok(())
    }

    /// `-S` and `-Y` against `-B` and `-U`, with memcached's messages.
    fn check_protocols(&self) -> Result<(), Refusal> {
        let given = self.tuning.protocol_given;
        let usage = |m: &str| Err(Refusal::new(EX_USAGE, m));
        if self.sasl {
            self.validate()?;
            if self.tuning.udp_port != 0 {
                return usage("ERROR: Cannot enable UDP while using binary SASL authentication.");
            }
        }
        if self.auth_file.is_some() && given && self.protocol != Protocol::Ascii {
            return usage(
                "ERROR: You cannot allow the BINARY protocol while using ascii authentication tokens.",
            );
        }
        if self.sasl && self.sasl_pwdb.is_none() {
            return Err(Refusal::new(
                1,
                "memkitd: -S needs a password file: set MEMCACHED_SASL_PWDB or --sasl-pwdb",
            ));
        }
        Ok(())
    }
}

/// The `-l` items as memcached keeps them (it skips one its list already contains), and
/// whether there were none (then memkitd listens on 127.0.0.1).
fn listen_list(given: &[String]) -> (Vec<String>, bool) {
    let mut listen: Vec<String> = Vec::new();
    for l in given {
        // memcached appends an -l to its list unless the list already contains it.
        if !listen.join(",").contains(l.as_str()) {
            listen.push(l.clone());
        }
    }
    let listen_default = listen.is_empty();
    if listen_default {
        listen.push("127.0.0.1".into());
    }
    (listen, listen_default)
}

/// Warnings for the flags memkitd accepts without memcached's effect.
fn no_effect_warnings(s: &Settings, a: &Args, warn: &mut Vec<String>) {
    let pr = &a.process;
    if s.persist.is_some() && a.disable_evictions {
        warn.push("-M has no effect with --persist: RAM evicts, the disk keeps all".into());
    }
    if s.persist.is_none() && s.durability != memkit_persist::Durability::Sync {
        warn.push("--durability has no effect without --persist".into());
    }
    if a.metrics.dashboard_keys && s.metrics_addr.is_none() {
        warn.push("--dashboard-keys has no effect without --metrics-addr".into());
    }
    if s.tuning.udp_port != 0 {
        warn.push("UDP is not supported; -U ignored (UDP stays off)".into());
    }
    if a.disable_cas {
        warn.push("-C accepted, but CAS stays enabled".into());
    }
    if pr.memory_file.is_some() && s.persist.is_some() {
        warn.push("-e has no effect with --persist: the store keeps the data itself".into());
    }
    if pr.large_pages {
        warn.push("-L accepted, no effect in memkitd".into());
    }
    if s.tuning.napi_ids > 0 {
        warn.push("-N accepted, no effect in memkitd".into());
    }
}

/// memkitd's `--metrics-addr` and `--dashboard-keys` flags (off by default).
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics (memcached_exporter's names) at http://HOST:PORT/metrics,
    /// and a live page for operators at http://HOST:PORT/.
    #[arg(long = "metrics-addr", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// Show keys on the page: its hot keys and read-only key browser (behind -Y or -S's
    /// credentials when they are on).
    #[arg(long = "dashboard-keys")]
    pub dashboard_keys: bool,
}

impl Settings {
    /// The engine configuration these settings ask for.
    pub fn engine_config(&self) -> memkit_engine::EngineConfig {
        memkit_engine::EngineConfig {
            memory_limit: self.memory_limit,
            item_size_max: self.item_size_max,
            evict: self.evict,
            ..Default::default()
        }
    }
}

/// The version memkitd reports: memcached's protocol level, then memkit's own.
pub const VERSION: &str = concat!("1.6.18-memkit-", env!("CARGO_PKG_VERSION"));
/// The reply to `version`.
pub const VERSION_LINE: &str = concat!("VERSION 1.6.18-memkit-", env!("CARGO_PKG_VERSION"));

#[cfg(test)]
mod tests;
