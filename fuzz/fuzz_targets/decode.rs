//! Fuzzes `outpost_protocol::decode`: it must never panic, hang or blow the stack, and any
//! message it accepts must re-encode to bytes that decode to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = outpost_protocol::decode(data) {
        let bytes = outpost_protocol::encode(&msg).expect("a decoded message re-encodes");
        let again = outpost_protocol::decode(&bytes).expect("re-encoded bytes decode");
        assert_eq!(again, msg);
    }
});
