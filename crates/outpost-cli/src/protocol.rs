//! `outpost protocol decode|encode`.

use std::io::{Read, Write};

use clap::Subcommand;
use outpost_protocol::{DEFAULT_TIMEOUT_MS, MAX_MESSAGE_BYTES, Message, decode, encode};

use crate::Failure;

#[derive(Debug, Subcommand)]
pub(crate) enum ProtocolCommand {
    /// Read one MessagePack message on stdin and print it as pretty JSON, with defaults
    /// (such as timeoutMs) made explicit.
    Decode {
        /// Print the message exactly as sent, without filling in defaults.
        #[arg(long)]
        raw: bool,
    },
    /// Read one JSON message on stdin and write it as MessagePack on stdout.
    Encode {
        /// Write hex instead of raw bytes (for terminals and bug reports).
        #[arg(long)]
        hex: bool,
    },
}

pub(crate) fn run(cmd: ProtocolCommand) -> Result<(), Failure> {
    let input = read_stdin()?;
    match cmd {
        ProtocolCommand::Decode { raw } => {
            let mut msg = decode(&input).map_err(|e| Failure::Invalid(e.to_string()))?;
            if !raw {
                fill_defaults(&mut msg);
            }
            let json = outpost_protocol::to_json(&msg);
            let mut text = serde_json::to_string_pretty(&json).map_err(anyhow::Error::from)?;
            text.push('\n');
            std::io::stdout().write_all(text.as_bytes())?;
        }
        ProtocolCommand::Encode { hex } => {
            let value: serde_json::Value = serde_json::from_slice(&input)
                .map_err(|e| Failure::Invalid(format!("input is not JSON: {e}")))?;
            let msg =
                outpost_protocol::from_json(&value).map_err(|e| Failure::Invalid(e.to_string()))?;
            let bytes = encode(&msg).map_err(|e| Failure::Invalid(e.to_string()))?;
            let mut out = std::io::stdout().lock();
            if hex {
                let mut text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                text.push('\n');
                out.write_all(text.as_bytes())?;
            } else {
                out.write_all(&bytes)?;
            }
            out.flush()?;
        }
    }
    Ok(())
}

/// Makes protocol defaults visible, so a reader sees what the app will actually use.
fn fill_defaults(msg: &mut Message) {
    if let Message::ToolUseRequest(req) = msg {
        req.timeout_ms.get_or_insert(DEFAULT_TIMEOUT_MS);
    }
    if let Message::ClientHello(hello) = msg {
        hello
            .min_protocol_version
            .get_or_insert(hello.protocol_version);
    }
}

fn read_stdin() -> Result<Vec<u8>, Failure> {
    let mut buf = Vec::new();
    // Read one byte past the limit so an oversized input is reported, not truncated.
    let limit = u64::try_from(MAX_MESSAGE_BYTES).unwrap_or(u64::MAX) + 1;
    std::io::stdin().lock().take(limit).read_to_end(&mut buf)?;
    if buf.len() > MAX_MESSAGE_BYTES {
        return Err(Failure::Invalid(format!(
            "input exceeds the message limit of {MAX_MESSAGE_BYTES} bytes"
        )));
    }
    Ok(buf)
}
