//! Whether a test may skip for want of a real peer (memcached, tmux, a Python package).
//!
//! On a developer's machine a missing peer skips that part of a test with a note. Under CI
//! (`CI=true`, where `.ci/run` installs every peer) or with `MEMKIT_REQUIRE_INTEROP=1`, a
//! skip would hide a test that never ran, so it fails instead.

/// Whether missing peers fail tests instead of skipping them.
pub fn required() -> bool {
    std::env::var("MEMKIT_REQUIRE_INTEROP").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Notes that `what` is not available and the caller skips its part, or fails the test
/// when [`required`].
pub fn skip(what: &str) {
    assert!(
        !required(),
        "{what} is not available (required under CI=true or MEMKIT_REQUIRE_INTEROP=1)"
    );
    eprintln!("skipped: {what} is not available");
}
