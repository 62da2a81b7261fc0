//! Shared helpers for Outpost's workspace-level tests: locating binaries, the Python venv
//! with the official LiveKit SDK, and throw-away network namespaces.
//!
//! - [`bench`]: what the bench binaries share (knobs, median, the SDK caller).
//! - [`cli`]: `outpost connect` as a child with a throw-away profile, its stdout kept.
//! - [`connect`]: the real `outpost connect --json` as a child, its events collected.
//! - [`cutproxy`]: a TCP forwarder whose connections a test can cut (drops a
//!   signaling WebSocket while the peer connections stay up).
//! - [`keyring`]: a private D-Bus session with an unlocked GNOME Keyring (Secret Service).
//! - [`lkclient`]: two namespaces, room server and official-SDK peer for the
//!   `outpost-livekit` tests, and running the Rust client inside a namespace.
//! - [`netns`]: a namespace with a veth pair, deleted on drop.
//! - [`oauth`]: oidc-provider and an MCP server that requires its tokens, and a Chromium
//!   browser program that signs in through them.
//! - [`pki`]: a throw-away CA and server certificate for `wss://` tests.
//! - [`proc`]: child processes killed on drop, with their stderr kept for failures.
//! - [`pulse`]: a private PulseAudio daemon with null sinks for the voice tests and
//!   outpost-audio's device tests; tones and their level and pitch.
//! - [`python`]: the venv with the official LiveKit SDK.
//! - [`room`]: an `outpost-room` server inside a namespace, and a minimal Rust
//!   signaling client (join, ping, leave) for tests that need many participants.
//! - [`server`]: "a LiveKit server" in a namespace: `outpost-room` or the real
//!   `livekit-server`, and [`both_servers!`] to run a test against each.
//! - [`speech`]: espeak-ng's speech as a WAV, and how well a recording matches it.

pub mod bench;
pub mod cli;
pub mod connect;
pub mod cutproxy;
pub mod keyring;
pub mod lkclient;
pub mod netns;
pub mod oauth;
pub mod pki;
pub mod proc;
pub mod pulse;
pub mod python;
pub mod room;
pub mod server;
pub mod speech;

/// Sends this test process's `tracing` output to stderr when `RUST_LOG` is set (the
/// in-process clients' logs, for debugging a failing test). Safe to call many times.
pub fn trace_from_env() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}
