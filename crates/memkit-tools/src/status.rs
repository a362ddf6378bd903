//! The exit status of a `memkit` command: what it met, a missing key or a failure.

use std::process::ExitCode;

/// What a command met: a missing key (exit 1) and/or a failure (exit 2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// A key was missing or a conditional store did not apply.
    pub missing: bool,
    /// A server could not be reached or answered with an error.
    pub failed: bool,
}

impl Status {
    /// Records a missing key.
    pub fn miss(&mut self, key: &str, what: &str) {
        eprintln!("memkit: {key}: {what}");
        self.missing = true;
    }

    /// Records a failure.
    pub fn fail(&mut self, what: &str, e: &dyn std::fmt::Display) {
        eprintln!("memkit: {what}: {e}");
        self.failed = true;
    }

    /// Records failures reported as lines.
    pub fn errors(&mut self, errors: Vec<String>) {
        for e in errors {
            eprintln!("memkit: {e}");
            self.failed = true;
        }
    }

    /// 0, 1 (missing) or 2 (failed).
    pub fn code(self) -> ExitCode {
        if self.failed {
            ExitCode::from(2)
        } else if self.missing {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}
