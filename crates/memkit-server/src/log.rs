//! memkitd's diagnostics: every event goes through `tracing`, to standard error, filtered by
//! `RUST_LOG` (an `EnvFilter`: `RUST_LOG=memkitd=debug,warn`) when it is set, otherwise by
//! memcached's verbosity: none for warnings and errors, `-v` info (listeners, connections),
//! `-vv` debug (every request, as memcached's `-vv` prints them), `-vvv` trace. The
//! `verbosity N` command changes that level at run time, as it does memcached's, unless
//! `RUST_LOG` decides. `--log-format json` writes one JSON object per line (timestamp, level,
//! target, fields) for log shippers; `text` (the default) one line per event.
//!
//! One kind of output bypasses the subscriber: [`verbatim`], for the start-up refusals and
//! usage errors whose text (and exit status) must be memcached's byte for byte, because
//! scripts, units and `tests/interop/test_startup.py` compare them with memcached's first
//! line of standard error; most of them are written before the command line is even parsed.
//! The start and stop summaries a quiet server still prints (what a `--persist` store
//! recovered, what a warm restart restored or saved, a graceful stop) use the target
//! [`LIFECYCLE`], which the default filter lets through at info.

use std::io::Write;
use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, fmt, reload};

/// Target of the start and stop lines shown even without `-v`.
pub const LIFECYCLE: &str = "memkitd::lifecycle";

/// Target of `-vv`'s request lines (`<ID command`).
pub const REQUESTS: &str = "memkitd::requests";

/// `--log-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// memkitd's logging flag (memcached has none; `-v` is memcached's and stays).
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Log format on standard error; the level is RUST_LOG when set, else -v/-vv/-vvv.
    #[arg(long = "log-format", value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

/// The filter's handle, kept for `verbosity N`; absent when `RUST_LOG` decides.
static VERBOSITY: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// The directives for memcached's verbosity `v` (the number of `-v`).
pub fn directives(v: u8) -> String {
    let level = match v {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    format!("{level},{LIFECYCLE}=info")
}

/// `RUST_LOG`, when set to something.
fn rust_log() -> Option<String> {
    std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// Installs the subscriber: `RUST_LOG` or `verbose`'s level, in `format`, on standard error.
pub fn init(verbose: u8, format: LogFormat) {
    let env = rust_log();
    let directives = env.clone().unwrap_or_else(|| directives(verbose));
    // Lossy: a mistyped directive drops that directive, not the whole log.
    let (filter, handle) = reload::Layer::new(EnvFilter::builder().parse_lossy(directives));
    if env.is_none() {
        let _ = VERBOSITY.set(handle);
    }
    let registry = tracing_subscriber::registry().with(filter);
    // ANSI colours off: the output goes to journald and files more often than to a terminal.
    let text = fmt::layer().with_writer(std::io::stderr).with_ansi(false);
    let _ = match format {
        LogFormat::Text => registry.with(text).try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .try_init(),
    };
}

/// `verbosity N` at run time: the level follows, as memcached's does (unless `RUST_LOG`).
pub fn set_verbosity(v: u8) {
    if let Some(h) = VERBOSITY.get() {
        let _ = h.reload(EnvFilter::builder().parse_lossy(directives(v)));
    }
}

/// Writes `msg` and a newline to standard error exactly as given, outside the subscriber:
/// only for the refusals and usage errors that must read as memcached's (see the module).
pub fn verbatim(msg: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{msg}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_levels_and_keeps_startup_lines() {
        assert_eq!(directives(0), "warn,memkitd::lifecycle=info");
        assert_eq!(directives(1), "info,memkitd::lifecycle=info");
        assert_eq!(directives(2), "debug,memkitd::lifecycle=info");
        assert_eq!(directives(5), "trace,memkitd::lifecycle=info");
        // Every default parses as an EnvFilter would from RUST_LOG.
        for v in 0..4 {
            assert!(directives(v).parse::<EnvFilter>().is_ok());
        }
    }
}
