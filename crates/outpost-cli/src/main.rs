//! `outpost`: Outpost's command-line tool.
//!
//! - `outpost protocol decode`: one MessagePack message on stdin → pretty JSON on stdout.
//! - `outpost protocol encode`: one JSON message on stdin → MessagePack on stdout.
//!
//! Both validate exactly like the app does; invalid input exits with status 2 and the
//! validation error on stderr, so the tools answer "would Outpost accept this?".

mod protocol;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "outpost",
    version,
    about = "Outpost: a desktop client for AI assistants that use local tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Debug an assistant integration: convert protocol messages between MessagePack and JSON.
    #[command(subcommand)]
    Protocol(protocol::ProtocolCommand),
}

/// Exit status for input that is not a valid protocol message.
const EXIT_INVALID: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Protocol(cmd) => protocol::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid(msg)) => {
            report(&msg);
            ExitCode::from(EXIT_INVALID)
        }
        Err(Failure::Other(e)) => {
            report(&format!("{e:#}"));
            ExitCode::FAILURE
        }
    }
}

#[allow(clippy::print_stderr)]
fn report(msg: &str) {
    eprintln!("error: {msg}");
}

/// How a command failed: bad input (exit 2) or anything else (exit 1).
#[derive(Debug)]
pub(crate) enum Failure {
    Invalid(String),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self::Other(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Self::Other(e.into())
    }
}
