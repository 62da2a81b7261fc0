//! Fuzzes what outpost-livekit's RPC layer does with data-channel messages from the room,
//! without a network (issue 30): the room answers only its assistant (`bot`), as an
//! Outpost session does.
//!
//! Byte 0 chooses the version 2 payload cap (`byte × 64` bytes); the rest is a sequence of
//! data-channel messages, each prefixed with its length (two bytes, little-endian): version
//! 1 requests, acks and responses, and the headers, chunks and trailers of RPC streams, fed
//! as the engine's data handler feeds them (`outpost_livekit::fuzzing::fuzz_rpc`). No stream
//! from anyone but the assistant may take a slot, no answer may go to someone who did not
//! call, no caller that may not call may get more than its budget of answers, and no
//! request may be answered twice.
//!
//! Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((cap, rest)) = data.split_first() else {
        return;
    };
    let messages = outpost_livekit::fuzzing::messages(rest);
    if let Err(e) = outpost_livekit::fuzzing::fuzz_rpc(&messages, usize::from(*cap) * 64) {
        panic!("{e}");
    }
});
