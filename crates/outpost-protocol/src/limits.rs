//! Limits the codec enforces on every message, in both directions.
//!
//! They exist so that a hostile or buggy peer cannot make a decoder allocate without bound,
//! recurse without bound or hold a message id the store cannot index. Every limit is part of
//! the wire contract and is listed in docs/PROTOCOL.md.

/// The highest protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 2;
/// The lowest protocol version this crate speaks.
pub const MIN_PROTOCOL_VERSION: u32 = 1;

/// Largest encoded message accepted or produced, in bytes (64 MiB).
///
/// Messages above [`MAX_PACKET_BYTES`] travel as a LiveKit byte stream; this cap bounds
/// what a receiver buffers for one message.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Largest encoded message sent as a single reliable data packet. Anything larger goes
/// as a byte stream on the same topic (LiveKit recommends at most ~15 KiB per packet).
pub const MAX_PACKET_BYTES: usize = 15_000;

/// Deepest nesting of maps and arrays in a message, counting the message map itself as
/// level 1 (so a request's `parameters` map is level 2 and may hold 30 more levels).
pub const MAX_DEPTH: usize = 32;

/// Most MessagePack elements (scalars, arrays, maps, map keys) one message may hold.
pub const MAX_ELEMENTS: usize = 500_000;

/// Longest id (`id`, `messageId`, session and conversation ids), in bytes.
pub const MAX_ID_BYTES: usize = 128;

/// Longest tool name, error code or other short identifier, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// Most messages a ClientHello's `history` may hold (the newest are sent).
pub const MAX_HISTORY_MESSAGES: usize = 1000;

/// Most capabilities a ServerWelcome may list.
pub const MAX_CAPABILITIES: usize = 64;

/// Largest attachment (type 13), in bytes of the file (its base64 is a third longer).
pub const MAX_ATTACHMENT_BYTES: usize = 8 * 1024 * 1024;

/// Longest attachment file name, in bytes.
pub const MAX_FILE_NAME_BYTES: usize = 255;

/// Default tool timeout when `timeoutMs` is omitted (seed 000).
pub const DEFAULT_TIMEOUT_MS: u32 = 30_000;

/// Largest accepted `timeoutMs`: one hour. Anything larger is treated as a mistake.
pub const MAX_TIMEOUT_MS: u32 = 3_600_000;

/// The LiveKit data topic every Outpost message travels on, as a packet or a byte stream.
pub const TOPIC: &str = "outpost";
