//! Tests of the record codec and the frame.

use super::record::{FRAME_HEADER_BYTES, MAX_PAYLOAD_BYTES, le_u32};
use super::*;
use proptest::prelude::*;

fn arb_record() -> impl Strategy<Value = LogRecord> {
    prop_oneof![
        (
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..64),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(txn, dataset, partition, index, del, key, seq, value)| {
                LogRecord::Update {
                    txn,
                    dataset,
                    partition,
                    index,
                    op: if del { LogOp::Delete } else { LogOp::Put },
                    key,
                    seq,
                    value,
                }
            }),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            proptest::collection::vec(
                (
                    any::<bool>(),
                    proptest::collection::vec(any::<u8>(), 0..40),
                    proptest::collection::vec(any::<u8>(), 0..40),
                ),
                0..20,
            ),
        )
            .prop_map(|(txn, dataset, index, seq, es)| LogRecord::UpdateBatch {
                txn,
                dataset,
                partition: dataset % 7,
                index,
                seq,
                entries: es
                    .into_iter()
                    .map(|(del, key, value)| LogEntry {
                        op: if del { LogOp::Delete } else { LogOp::Put },
                        key,
                        value,
                    })
                    .collect(),
            }),
        any::<u64>().prop_map(|txn| LogRecord::Commit { txn }),
        any::<u64>().prop_map(|txn| LogRecord::Abort { txn }),
        any::<u64>().prop_map(|txn| LogRecord::Wait { txn }),
    ]
}

proptest! {
    #[test]
    fn record_encoding_round_trips(rec in arb_record()) {
        let frame = rec.encode_frame().unwrap();
        prop_assert_eq!(frame.len(), rec.encoded_len());
        let len = le_u32(&frame, 0).unwrap() as usize;
        prop_assert_eq!(len + FRAME_HEADER_BYTES, frame.len());
        prop_assert_eq!(le_u32(&frame, 4).unwrap(), crc32c::crc32c(&frame[8..]));
        prop_assert_eq!(LogRecord::decode_payload(&frame[8..]).unwrap(), rec);
    }

    /// The borrowed UPDATE the write path logs frames exactly as the
    /// owned record (recovery reads it back as one).
    #[test]
    fn borrowed_update_frames_as_the_owned_record(rec in arb_record()) {
        let LogRecord::Update { txn, dataset, partition, index, op, key, seq, value } = &rec else {
            return Ok(());
        };
        let borrowed = UpdateRef {
            txn: *txn,
            dataset: *dataset,
            partition: *partition,
            index: *index,
            op: *op,
            key,
            seq: *seq,
            value,
        };
        let mut frame = vec![7u8; 3];
        borrowed.encode_frame_into(&mut frame).unwrap();
        prop_assert_eq!(frame, rec.encode_frame().unwrap());
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = LogRecord::decode_payload(&bytes);
    }
}

#[test]
fn decode_rejects_bad_payloads() {
    let mut p = Vec::new();
    LogRecord::Commit { txn: 5 }.encode_payload(&mut p);
    assert!(LogRecord::decode_payload(&p).is_ok());
    let mut v = p.clone();
    v[0] = 2;
    assert!(
        LogRecord::decode_payload(&v)
            .unwrap_err()
            .contains("version")
    );
    let mut v = p.clone();
    v[1] = 9;
    assert!(LogRecord::decode_payload(&v).unwrap_err().contains("tag"));
    let mut v = p.clone();
    v.push(0);
    assert!(
        LogRecord::decode_payload(&v)
            .unwrap_err()
            .contains("trailing")
    );
    // An update batch whose entry count promises more than the payload holds.
    let mut v = Vec::new();
    LogRecord::UpdateBatch {
        txn: 1,
        dataset: 2,
        partition: 0,
        index: 3,
        seq: 4,
        entries: vec![LogEntry {
            op: LogOp::Put,
            key: b"k".to_vec(),
            value: Vec::new(),
        }],
    }
    .encode_payload(&mut v);
    assert!(LogRecord::decode_payload(&v).is_ok());
    // Payload: version, tag, txn, dataset, partition, index, seq, count.
    assert_eq!(v[7], 1);
    v[7] = 0x7f;
    assert!(
        LogRecord::decode_payload(&v)
            .unwrap_err()
            .contains("entries")
    );
    v[7] = 1;
    v.pop();
    assert!(
        LogRecord::decode_payload(&v)
            .unwrap_err()
            .contains("truncated")
    );
    let huge = LogRecord::Update {
        txn: 1,
        dataset: 0,
        partition: 0,
        index: 0,
        op: LogOp::Put,
        key: vec![],
        seq: 0,
        value: vec![0; MAX_PAYLOAD_BYTES],
    };
    assert!(matches!(
        huge.encode_frame(),
        Err(Error::ValueTooLarge { .. })
    ));
}
