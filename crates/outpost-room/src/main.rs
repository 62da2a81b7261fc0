//! The `outpost-room` binary; the command line lives in `outpost_room::cli`.

fn main() -> std::process::ExitCode {
    match outpost_room::cli::main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("outpost-room: {e}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}
