//! Starts the desktop app's local demo (`outpost_desktop::demo::Demo`) with the programs
//! given as arguments, prints `ready URL PID PID` (the room server's and the assistant's
//! process ids), then follows stdin: `stop` stops the demo and exits, end of input exits
//! without stopping it. `tests/demo_children.rs` kills it instead, like a crash.
//!
//! Usage: demo_parent ROOM_PROGRAM AGENT_PROGRAM LOG_DIR

use std::io::BufRead as _;
use std::path::PathBuf;

use anyhow::Context as _;
use outpost_desktop::demo::{Demo, DemoPrograms};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [room, agent, logs] = args.as_slice() else {
        anyhow::bail!("usage: demo_parent ROOM_PROGRAM AGENT_PROGRAM LOG_DIR");
    };
    let programs = DemoPrograms {
        room: room.clone(),
        agent: agent.clone(),
    };
    let demo = Demo::start_with(&programs, logs)
        .await
        .context("starting the demo")?;
    let pids: Vec<String> = demo.pids().iter().map(ToString::to_string).collect();
    #[allow(clippy::print_stdout)]
    {
        println!("ready {} {}", demo.url, pids.join(" "));
    }
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    })
    .await??;
    if line.trim() == "stop" {
        demo.stop().await;
    } else {
        // Leave without stopping: the children must notice on their own.
        std::mem::forget(demo);
    }
    Ok(())
}
