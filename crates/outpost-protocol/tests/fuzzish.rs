//! Property tests standing in for the fuzzer in CI: arbitrary bytes and mutated golden
//! vectors never panic, and whatever decodes re-encodes to something that decodes the same.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use outpost_protocol::{decode, encode};
use proptest::prelude::*;

fn goldens() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "msgpack"))
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

fn check(bytes: &[u8]) {
    if let Ok(msg) = decode(bytes) {
        let again = encode(&msg).expect("a decoded message re-encodes");
        assert_eq!(decode(&again).expect("re-encoded bytes decode"), msg);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes);
    }

    #[test]
    fn mutated_goldens(pick in any::<prop::sample::Index>(),
                       edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        let goldens = goldens();
        let mut bytes = pick.get(&goldens).clone();
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        check(&bytes);
    }
}
