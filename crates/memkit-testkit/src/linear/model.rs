//! The sequential specification the checker linearizes against: one memcached key, its
//! value, the operations of [`Op`] and what each answers ([`Ret`]).
//!
//! The state is the key's value or nothing. No CAS number is in it: a server's CAS numbers
//! cannot be predicted (in a replicated group they are log indexes). A version is named by
//! its value instead, which is exact as long as no value is written twice on a key (see the
//! module docs of [`crate::linear`] and the assumptions [`super::check`] verifies).

use todc_utils::Specification;

use super::{Op, Ret};

/// An operation as the checker sees it: what was asked, and what came back (`None`: no
/// answer came back, so any answer fits and the operation may or may not have happened).
#[derive(Clone, Debug)]
pub(super) struct Step {
    pub(super) op: Op,
    pub(super) ret: Option<Ret>,
}

/// [`Specification`] of one key, for todc-utils' checker.
pub(super) struct KeySpec;

impl Specification for KeySpec {
    type State = Option<Vec<u8>>;
    type Operation = Step;

    fn init() -> Self::State {
        None
    }

    fn apply(step: &Step, state: &Self::State) -> (bool, Self::State) {
        let (expected, next) = apply(&step.op, state);
        let fits = match &step.ret {
            None => true,
            Some(ret) => ret.without_cas() == expected,
        };
        (fits, next)
    }
}

/// What `op` answers on `state` (a hit without its CAS), and the state after it.
pub(super) fn apply(op: &Op, state: &Option<Vec<u8>>) -> (Ret, Option<Vec<u8>>) {
    let unchanged = state.clone();
    match (op, state) {
        (Op::Set { value }, _) => (Ret::Stored, Some(value.clone())),
        (Op::Get | Op::Gets, None) => (Ret::Miss, None),
        (Op::Get | Op::Gets, Some(v)) => (
            Ret::Hit {
                value: v.clone(),
                cas: None,
            },
            unchanged,
        ),
        (Op::Cas { .. } | Op::Incr { .. } | Op::Delete, None) => (Ret::NotFound, None),
        // The token names the version the `gets` read, and a version is named by its value.
        (Op::Cas { read, value, .. }, Some(current)) if current == read => {
            (Ret::Stored, Some(value.clone()))
        }
        (Op::Cas { .. }, Some(_)) => (Ret::Exists, unchanged),
        (Op::Incr { delta }, Some(v)) => match number(v) {
            Some(n) => {
                let n = n.wrapping_add(*delta);
                (Ret::Number(n), Some(n.to_string().into_bytes()))
            }
            None => (Ret::NonNumeric, unchanged),
        },
        (Op::Delete, Some(_)) => (Ret::Deleted, None),
    }
}

/// The value as `incr` reads it: 1 to 20 ASCII digits below 2^64. (memcached also takes
/// trailing spaces; histories for this checker write plain numbers or clear text.)
pub(super) fn number(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}
