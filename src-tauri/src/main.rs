//! The `outpost-app` binary: everything is in the library ([`outpost_app::run`]).

// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    outpost_app::run();
}
