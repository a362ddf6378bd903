//! The figures of the process behind an endpoint, under the names Prometheus' client
//! libraries give them (`process_*`, as client_golang's process collector writes them), so
//! the stock "process" panels and alerts apply. Gathering them is the caller's business (a
//! server knows its own process; a tool rendering a pool's stats has no process to show).

use crate::{Families, Kind};

/// One process's figures; a `None` is left out of the exposition.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessFigures {
    /// User plus system CPU time (`getrusage(RUSAGE_SELF)`), seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size now (not the peak), bytes.
    pub resident_bytes: Option<u64>,
    /// Virtual memory size, bytes.
    pub virtual_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<u64>,
    /// Start of the process, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl Families {
    pub(crate) fn push_process(&mut self, p: &ProcessFigures) {
        let rows: [(&'static str, Kind, &'static str, Option<String>); 6] = [
            (
                "process_cpu_seconds_total",
                Kind::Counter,
                "Total user and system CPU time spent in seconds.",
                p.cpu_seconds.map(|v| v.to_string()),
            ),
            (
                "process_resident_memory_bytes",
                Kind::Gauge,
                "Resident memory size in bytes.",
                p.resident_bytes.map(|v| v.to_string()),
            ),
            (
                "process_virtual_memory_bytes",
                Kind::Gauge,
                "Virtual memory size in bytes.",
                p.virtual_bytes.map(|v| v.to_string()),
            ),
            (
                "process_open_fds",
                Kind::Gauge,
                "Number of open file descriptors.",
                p.open_fds.map(|v| v.to_string()),
            ),
            (
                "process_max_fds",
                Kind::Gauge,
                "Maximum number of open file descriptors.",
                p.max_fds.map(|v| v.to_string()),
            ),
            (
                "process_start_time_seconds",
                Kind::Gauge,
                "Start time of the process since unix epoch in seconds.",
                p.start_time_seconds.map(|v| v.to_string()),
            ),
        ];
        for (name, kind, help, value) in rows {
            if let Some(v) = value {
                self.push(name, kind, help, String::new(), v);
            }
        }
    }
}
