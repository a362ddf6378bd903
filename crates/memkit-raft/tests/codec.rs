//! Everything that crosses the wire or goes to the log survives the binary codec: every
//! `Request` and `Response` variant (openraft's errors included) and an entry of each
//! payload and each `Write` variant, with every optional field both set and unset. postcard
//! cannot encode what needs `deserialize_any` (untagged enums, `flatten`), or skipped fields:
//! a type that starts to need one fails here, not between two nodes.
//!
//! Compared through `Debug`: not every openraft type is `PartialEq`, and `Debug` shows every
//! field.

use std::collections::{BTreeMap, BTreeSet};

use memkit_raft::codec;
use memkit_raft::network::{Envelope, Request, Response};
use memkit_raft::{
    ArithResult, Change, ClusterError, DeleteResult, Mode, Proposal, Refusal, Reply, SetExptime,
    StoreResult, TypeConfig, Vivify, Write,
};
use openraft::error::{Fatal, InstallSnapshotError, RaftError, SnapshotMismatch};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{
    AnyError, BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, Membership, SnapshotMeta,
    SnapshotSegmentId, StorageError, StorageIOError, StoredMembership, Vote,
};

fn round_trip<T>(v: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let bytes = codec::to_vec(v).expect("encodes");
    let back: T = codec::from_slice(&bytes).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    assert_eq!(format!("{back:?}"), format!("{v:?}"));
    // A frame with a byte over, or one short, is refused.
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(codec::from_slice::<T>(&longer).is_err(), "{v:?}");
    assert!(
        codec::from_slice::<T>(&bytes[..bytes.len() - 1]).is_err(),
        "{v:?}"
    );
}

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn vote() -> Vote<u64> {
    Vote::new_committed(3, 1)
}

fn writes() -> Vec<Write> {
    let value: Vec<u8> = (0..=255).collect();
    let set = SetExptime {
        exptime_unix: Some(1_800_000_000),
    };
    vec![
        Write::Store {
            key: b"k".to_vec(),
            value: value.clone(),
            flags: u32::MAX,
            exptime_unix: None,
            mode: Mode::Set,
            cas: None,
            invalidate: false,
            vivify: None,
        },
        Write::Store {
            key: b"k2".to_vec(),
            value: Vec::new(),
            flags: 0,
            exptime_unix: Some(u64::MAX),
            mode: Mode::Prepend,
            cas: Some(u64::MAX),
            invalidate: true,
            vivify: Some(SetExptime { exptime_unix: None }),
        },
        Write::Delete {
            key: b"d".to_vec(),
            cas: None,
            invalidate: false,
            stale_exptime: None,
            remove_value: false,
        },
        Write::Delete {
            key: b"d".to_vec(),
            cas: Some(7),
            invalidate: true,
            stale_exptime: Some(set),
            remove_value: true,
        },
        Write::Arith {
            key: b"n".to_vec(),
            incr: true,
            delta: u64::MAX,
            cas: None,
            vivify: None,
            set_exptime: None,
        },
        Write::Arith {
            key: b"n".to_vec(),
            incr: false,
            delta: 1,
            cas: Some(9),
            vivify: Some(Vivify {
                initial: 5,
                exptime_unix: Some(1),
            }),
            set_exptime: Some(set),
        },
        Write::Touch {
            key: b"t".to_vec(),
            exptime_unix: Some(2),
        },
        Write::Touch {
            key: b"t".to_vec(),
            exptime_unix: None,
        },
        Write::TouchRead {
            key: b"g".to_vec(),
            exptime_unix: Some(1_800_000_000),
            classic: true,
        },
        Write::TouchRead {
            key: b"g".to_vec(),
            exptime_unix: None,
            classic: false,
        },
        Write::Flush { at_unix: None },
        Write::Flush {
            at_unix: Some(1_700_000_000),
        },
    ]
}

fn entries() -> Vec<Entry<TypeConfig>> {
    let nodes: BTreeMap<u64, BasicNode> = (1..=3)
        .map(|id| (id, BasicNode::new(format!("127.0.0.1:{}", 7000 + id))))
        .collect();
    let voters: BTreeSet<u64> = nodes.keys().copied().collect();
    let mut out = vec![
        Entry {
            log_id: log_id(1, 0),
            payload: EntryPayload::Membership(Membership::new(vec![voters], nodes)),
        },
        Entry {
            log_id: log_id(2, 1),
            payload: EntryPayload::Blank,
        },
    ];
    for (i, write) in writes().into_iter().enumerate() {
        out.push(Entry {
            log_id: log_id(2, 2 + i as u64),
            payload: EntryPayload::Normal(Proposal {
                stamp_ms: 1_700_000_000_000 + i as u64,
                writes: vec![write],
            }),
        });
    }
    // And every write in one entry.
    out.push(Entry {
        log_id: log_id(3, 1_000),
        payload: EntryPayload::Normal(Proposal {
            stamp_ms: 1_700_000_000_001,
            writes: writes(),
        }),
    });
    out
}

fn meta() -> SnapshotMeta<u64, BasicNode> {
    let last = entries().remove(0);
    let EntryPayload::Membership(m) = last.payload else {
        unreachable!()
    };
    SnapshotMeta {
        last_log_id: Some(log_id(2, 11)),
        last_membership: StoredMembership::new(Some(last.log_id), m),
        snapshot_id: "2-11-1700000000000".into(),
    }
}

fn storage_error() -> StorageError<u64> {
    let e = AnyError::error("disk gone").add_context(|| "appending");
    StorageIOError::read_snapshot(Some(meta().signature()), &e).into()
}

#[test]
fn every_entry_round_trips() {
    for e in entries() {
        round_trip(&e);
    }
}

#[test]
fn every_request_round_trips() {
    let mut reqs = vec![
        Request::Append(AppendEntriesRequest {
            vote: vote(),
            prev_log_id: None,
            entries: Vec::new(),
            leader_commit: None,
        }),
        Request::Append(AppendEntriesRequest {
            vote: vote(),
            prev_log_id: Some(log_id(2, 1)),
            entries: entries(),
            leader_commit: Some(log_id(2, 3)),
        }),
        Request::Vote(VoteRequest::new(Vote::new(4, 2), None)),
        Request::Vote(VoteRequest::new(Vote::new(4, 2), Some(log_id(3, 9)))),
        Request::Snapshot(InstallSnapshotRequest {
            vote: vote(),
            meta: meta(),
            offset: 1 << 20,
            data: (0..=255).cycle().take(4096).collect(),
            done: false,
        }),
        Request::Snapshot(InstallSnapshotRequest {
            vote: vote(),
            meta: SnapshotMeta::default(),
            offset: 0,
            data: Vec::new(),
            done: true,
        }),
        Request::ReadIndex,
        Request::Status,
        Request::Ping,
        Request::Change {
            change: Change::AddLearner {
                id: 4,
                addr: "127.0.0.1:7004".into(),
            },
            timeout_ms: 60_000,
        },
        Request::Change {
            change: Change::Promote(4),
            timeout_ms: 1,
        },
        Request::Change {
            change: Change::Remove(3),
            timeout_ms: 0,
        },
    ];
    reqs.extend(writes().into_iter().map(|w| Request::Writes(vec![w])));
    reqs.push(Request::Writes(writes()));
    for (from, req) in reqs.into_iter().enumerate() {
        round_trip(&Envelope {
            from: from as u64,
            req,
        });
    }
}

fn replies() -> Vec<Reply> {
    vec![
        Reply::Stored {
            outcome: StoreResult::Stored,
            cas: 12,
        },
        Reply::Stored {
            outcome: StoreResult::NotStored,
            cas: 0,
        },
        Reply::Stored {
            outcome: StoreResult::Exists,
            cas: 0,
        },
        Reply::Stored {
            outcome: StoreResult::NotFound,
            cas: 0,
        },
        Reply::Deleted(DeleteResult::Deleted),
        Reply::Deleted(DeleteResult::NotFound),
        Reply::Deleted(DeleteResult::Exists),
        Reply::Arith(ArithResult::Value {
            value: u64::MAX,
            cas: 3,
            ttl: None,
        }),
        Reply::Arith(ArithResult::Value {
            value: 7,
            cas: 4,
            ttl: Some(30),
        }),
        Reply::Arith(ArithResult::NotFound),
        Reply::Arith(ArithResult::NonNumeric),
        Reply::Arith(ArithResult::Exists),
        Reply::Arith(ArithResult::NotStored),
        Reply::Touched(true),
        Reply::Touched(false),
        Reply::TouchedRead(None),
        Reply::TouchedRead(Some(None)),
        Reply::TouchedRead(Some(Some(1_800_000_000))),
        Reply::Flushed,
        Reply::Refused(Refusal::InvalidKey),
        Reply::Refused(Refusal::TooLarge),
        Reply::Refused(Refusal::OutOfMemory),
        Reply::Refused(Refusal::Other("odd".into())),
    ]
}

fn cluster_errors() -> Vec<ClusterError> {
    vec![
        ClusterError::NoLeader,
        ClusterError::NotLeader(None),
        ClusterError::NotLeader(Some(2)),
        ClusterError::Unreachable("refused".into()),
        ClusterError::Indeterminate("reset".into()),
        ClusterError::Engine(Refusal::InvalidKey),
        ClusterError::Timeout,
        ClusterError::Stopped("down".into()),
    ]
}

fn fatals() -> Vec<Fatal<u64>> {
    vec![
        Fatal::StorageError(storage_error()),
        Fatal::Panicked,
        Fatal::Stopped,
    ]
}

#[test]
fn every_response_round_trips() {
    let mut resps = vec![
        Response::Append(Ok(AppendEntriesResponse::Success)),
        Response::Append(Ok(AppendEntriesResponse::PartialSuccess(None))),
        Response::Append(Ok(AppendEntriesResponse::PartialSuccess(Some(log_id(
            2, 5,
        ))))),
        Response::Append(Ok(AppendEntriesResponse::Conflict)),
        Response::Append(Ok(AppendEntriesResponse::HigherVote(Vote::new(9, 3)))),
        Response::Vote(Ok(VoteResponse::new(vote(), None, true))),
        Response::Vote(Ok(VoteResponse::new(vote(), Some(log_id(3, 4)), false))),
        Response::Snapshot(Ok(InstallSnapshotResponse { vote: vote() })),
        Response::Snapshot(Err(RaftError::APIError(
            InstallSnapshotError::SnapshotMismatch(SnapshotMismatch {
                expect: SnapshotSegmentId {
                    id: "a".into(),
                    offset: 0,
                },
                got: SnapshotSegmentId {
                    id: "a".into(),
                    offset: 4096,
                },
            }),
        ))),
        Response::ReadIndex(Ok(0)),
        Response::ReadIndex(Ok(u64::MAX)),
        Response::Refused("node 9 is not in the group".into()),
    ];
    for f in fatals() {
        resps.push(Response::Append(Err(RaftError::Fatal(f.clone()))));
        resps.push(Response::Vote(Err(RaftError::Fatal(f.clone()))));
        resps.push(Response::Snapshot(Err(RaftError::Fatal(f))));
    }
    resps.extend(
        replies()
            .into_iter()
            .map(|r| Response::Writes(Ok((vec![r], 42)))),
    );
    resps.push(Response::Writes(Ok((replies(), 43))));
    resps.push(Response::Pong);
    resps.push(Response::Change(Ok(memkit_raft::Membership {
        log_index: Some(9),
        committed: true,
        configs: vec![vec![1, 2], vec![1, 2, 4]],
        voters: [(1, "a:1".to_string()), (2, "b:2".to_string())].into(),
        learners: [(4, "d:4".to_string())].into(),
    })));
    resps.push(Response::Change(Err(ClusterError::Rejected(
        "no majority".into(),
    ))));
    resps.extend(cluster_errors().into_iter().flat_map(|e| {
        [
            Response::Writes(Err(e.clone())),
            Response::ReadIndex(Err(e)),
        ]
    }));
    for r in resps {
        round_trip(&r);
    }
}

#[test]
fn a_value_costs_its_bytes() {
    // 100 value bytes, whatever they are, cost 100 bytes and a length in an entry.
    let entry = |value: Vec<u8>| Entry::<TypeConfig> {
        log_id: log_id(2, 1_000_000),
        payload: EntryPayload::Normal(Proposal {
            stamp_ms: 1_700_000_000_000,
            writes: vec![Write::Store {
                key: b"rk:0000000000001".to_vec(),
                value,
                flags: 0,
                exptime_unix: None,
                mode: Mode::Set,
                cas: None,
                invalidate: false,
                vivify: None,
            }],
        }),
    };
    let n = codec::to_vec(&entry(vec![0xff; 100])).unwrap().len();
    assert!(n < 100 + 16 + 40, "{n} bytes");
}
