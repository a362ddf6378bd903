//! Outcome enums: storage decides, the protocol renders (memcached's `store_item_type`).

use crate::Cas;

/// The outcome of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOutcome {
    /// `STORED` / `HD`.
    Stored,
    /// `NOT_STORED` / `NS`: the mode's condition failed (add on a present key, replace or
    /// append on a missing one).
    NotStored,
    /// `EXISTS` / `EX`: the CAS token did not match.
    Exists,
    /// `NOT_FOUND` / `NF`: a CAS store on a missing key.
    NotFound,
}

/// A store's outcome with the CAS of the stored item (for `ms ... c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stored {
    /// What happened.
    pub outcome: StoreOutcome,
    /// The new item's CAS when stored; 0 otherwise (as memcached reports it).
    pub cas: Cas,
}

/// The outcome of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeleteOutcome {
    /// `DELETED` / `HD` (also for a successful mark-stale).
    Deleted,
    /// `NOT_FOUND` / `NF`.
    NotFound,
    /// `EXISTS` / `EX`: the CAS token did not match.
    Exists,
}

/// The outcome of incr/decr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOutcome {
    /// The new value and the item's new CAS.
    Value {
        /// The value after the operation.
        value: u64,
        /// The item's CAS after the operation.
        cas: Cas,
        /// Remaining TTL in seconds (`None`: never expires), for `ma ... t`.
        ttl: Option<u32>,
    },
    /// The key is absent (and no vivify was asked for).
    NotFound,
    /// The value is not a decimal number below 2^64:
    /// `CLIENT_ERROR cannot increment or decrement non-numeric value`.
    NonNumeric,
    /// The CAS token did not match.
    Exists,
    /// Vivify could not create the item (`NS`).
    NotStored,
}

impl ArithOutcome {
    /// The value, if the operation applied.
    pub fn value(self) -> Option<u64> {
        match self {
            ArithOutcome::Value { value, .. } => Some(value),
            _ => None,
        }
    }
}
