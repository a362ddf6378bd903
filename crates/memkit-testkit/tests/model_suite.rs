//! The model passes its own suite: the suite's expectations and the model agree.

use memkit_testkit::{Model, suite};
use memkit_types::{ManualClock, blocking::block_on};

#[test]
fn model_passes_the_whole_suite() {
    let clock = ManualClock::default();
    let model = Model::new(clock.clone());
    let report = block_on(suite::run(&model, &clock));
    report.assert_all_passed();
    assert!(report.skipped.is_empty());
    assert!(report.passed.len() >= 60, "{report}");
}

#[test]
fn options_skip_newer_meta_and_flush() {
    let clock = ManualClock::default();
    let model = Model::new(clock.clone());
    let opts = suite::SuiteOptions {
        max_needs: suite::Needs::Base,
        flush: false,
        filter: None,
    };
    let report = block_on(suite::run_with(&model, &clock, &opts));
    report.assert_all_passed();
    for skipped in ["explicit_new_cas", "flush_all_now", "flush_all_delayed"] {
        assert!(report.skipped.contains(&skipped), "{skipped} ran");
    }
}
