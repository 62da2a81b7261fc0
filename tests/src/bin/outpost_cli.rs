//! The `outpost` command line, built inside the test package so integration tests get a
//! fresh binary through `CARGO_BIN_EXE_outpost_cli` (cargo does not build other packages'
//! binaries for a package's tests). Same code as the real `outpost` binary.

fn main() -> std::process::ExitCode {
    outpost_cli::main()
}
