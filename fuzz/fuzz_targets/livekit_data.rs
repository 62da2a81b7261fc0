//! Fuzzes what outpost-livekit does with bytes from the server, without a network:
//!
//! - byte 0 even: the rest is one signaling message (`SignalResponse`), decoded and
//!   converted (`outpost_livekit::fuzzing::fuzz_signal_response`).
//! - byte 0 odd: the rest is a sequence of data-channel messages, each prefixed with its
//!   length (two bytes, little-endian), fed through the packet decoder and the stream
//!   receivers with a small receive cap chosen by byte 0
//!   (`outpost_livekit::fuzzing::fuzz_data_packets`): no stream may deliver more than the
//!   cap or than it announced, end short of what it announced, or go on after an error.
//!
//! Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        if let Err(e) = outpost_livekit::fuzzing::fuzz_signal_response(rest) {
            panic!("{e}");
        }
        return;
    }
    let messages = outpost_livekit::fuzzing::messages(rest);
    let cap = u64::from(mode >> 1) * 16;
    if let Err(e) = outpost_livekit::fuzzing::fuzz_data_packets(&messages, cap) {
        panic!("{e}");
    }
});
