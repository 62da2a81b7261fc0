//! `outpost`: Outpost's command-line tool.
//!
//! - `outpost connect`: the headless client. Joins a LiveKit room, greets the assistant,
//!   prints the transcript and tool activity as they happen, sends each stdin line as a
//!   user message (EOF leaves), runs tools under the policy file only (a call the policy
//!   would ask about is denied: nobody is there to answer), logs everything to the store.
//! - `outpost history list|show|search|export`: the store in the same data directory.
//! - `outpost protocol decode`: one MessagePack message on stdin → pretty JSON on stdout.
//! - `outpost protocol encode`: one JSON message on stdin → MessagePack on stdout.
//! - `outpost mcp add|list|remove|trust|tools`: the user's MCP servers (`mcp.toml`,
//!   docs/MCP.md); `trust` confirms servers added or changed outside Outpost.
//! - `outpost policy trust`: confirms a policy file changed outside Outpost to allow more.
//!
//! Invalid input (a message, an argument, a policy file, an unknown conversation) exits
//! with status 2 and the error on stderr; other failures exit with 1.
//!
//! Nothing another party wrote (the assistant, MCP servers, the history) is printed raw:
//! `terminal` turns control characters into visible stand-ins first.
//!
//! Layout: `connect` and `history` hold their subcommands; `protocol` the codec tools;
//! `terminal` what makes text safe to print.
//! The library exists so the workspace tests build the very same command.

mod connect;
mod history;
mod mcp;
mod policy;
mod protocol;
mod terminal;

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
    /// Join a LiveKit room and talk to the assistant from the terminal.
    Connect(connect::ConnectArgs),
    /// Read the conversation history: list, show, search, export.
    History(history::HistoryArgs),
    /// Debug an assistant integration: convert protocol messages between MessagePack and JSON.
    #[command(subcommand)]
    Protocol(protocol::ProtocolCommand),
    /// The MCP servers whose tools Outpost offers: add, list, remove, trust, tools.
    Mcp(mcp::McpArgs),
    /// The policy file: confirm a change made outside Outpost (trust).
    Policy(policy::PolicyArgs),
}

/// Exit status for input that is not valid (messages, arguments, files).
const EXIT_INVALID: u8 = 2;

/// Runs the command line and returns the process exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Protocol(cmd) => protocol::run(cmd),
        Command::Connect(args) => connect::run(args),
        Command::History(args) => history::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Policy(args) => policy::run(args),
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
    eprintln!("error: {}", terminal::lines(msg));
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

/// Builds the single-threaded runtime the async commands use.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Other(anyhow::anyhow!("starting the async runtime: {e}")))
}
