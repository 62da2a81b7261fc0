//! The `outpost-agent` program, built inside the test package so end-to-end tests get a
//! fresh binary through `CARGO_BIN_EXE_agent_server`. Same code as the real binary.

use clap::Parser as _;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "outpost_agent=debug,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = outpost_agent::config::Cli::parse();
    let r = outpost_agent::run::run(cli, |line| {
        #[allow(clippy::print_stdout)]
        {
            println!("{line}");
        }
    })
    .await;
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("agent_server: {e}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}
