//! The perf sampler on real processes: a spinning shell must come out mostly user mode, a
//! `dd` copying /dev/zero mostly kernel. Where perf cannot record (not installed, as on CI,
//! or not permitted), the run's `auto` choice must fall back to `/proc` with a reason and
//! `perf` must refuse; `MEMKIT_REQUIRE_PERF=1` turns that fallback into a failure, for
//! machines that are meant to have perf.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use memkit_bench::cpu_sample::{self, CpuSplit, Sampler, Samples, SplitSource};

/// A child process, killed when dropped.
struct Busy(Child);

impl Busy {
    fn spawn(program: &str, args: &[&str]) -> Busy {
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        Busy(child)
    }

    /// Samples it for half a second.
    fn sample(&self, perf: &std::path::Path) -> Samples {
        let sampler = Sampler::start(perf, self.0.id(), cpu_sample::HZ)
            .unwrap_or_else(|e| panic!("perf could record in the probe, not here: {e}"));
        std::thread::sleep(Duration::from_millis(500));
        sampler.finish().expect("perf samples")
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sampler_tells_user_from_kernel_or_the_run_falls_back_to_proc() {
    let (split, why_not) = cpu_sample::choose(CpuSplit::Auto).expect("auto never fails");
    let SplitSource::Perf { perf, .. } = split else {
        let why_not = why_not.expect("a fallback says why");
        eprintln!("perf cannot record: {why_not}");
        assert!(
            std::env::var_os("MEMKIT_REQUIRE_PERF").is_none(),
            "MEMKIT_REQUIRE_PERF is set but perf cannot record: {why_not}"
        );
        let refused = cpu_sample::choose(CpuSplit::Perf).expect_err("perf mode must refuse");
        assert!(
            refused.to_string().contains("--cpu-split perf"),
            "{refused}"
        );
        return;
    };
    assert!(why_not.is_none());

    // Only arithmetic and jumps: the timer interrupts perf samples with catch it in user mode.
    let spin = Busy::spawn("sh", &["-c", "while :; do :; done"]).sample(&perf);
    eprintln!("spinning shell: {spin:?}");
    assert!(spin.user > 0, "{spin:?}");
    assert!(spin.user >= 9 * spin.kernel, "a spinning shell: {spin:?}");

    // Each read is the kernel clearing 1 MiB of dd's buffer; dd itself does next to nothing.
    let dd = Busy::spawn("dd", &["if=/dev/zero", "of=/dev/null", "bs=1M"]).sample(&perf);
    eprintln!("dd: {dd:?}");
    assert!(dd.kernel > 0, "{dd:?}");
    assert!(dd.kernel >= 4 * dd.user, "dd from /dev/zero: {dd:?}");
}
