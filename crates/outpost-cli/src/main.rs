//! The `outpost` binary; everything lives in the library (`outpost_cli::main`) so the
//! workspace tests can build the same command.

fn main() -> std::process::ExitCode {
    outpost_cli::main()
}
