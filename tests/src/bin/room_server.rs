//! The `outpost-room` command line, built inside the test package so integration tests
//! get a fresh binary through `CARGO_BIN_EXE_room_server` (cargo does not build other
//! packages' binaries for a package's tests). Same code as the real binary.

fn main() -> std::process::ExitCode {
    match outpost_room::cli::main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("room_server: {e}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}
