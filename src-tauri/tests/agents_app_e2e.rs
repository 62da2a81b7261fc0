//! End to end: the real `outpost-app` under Xvfb as the frontend of a real LiveKit Agents
//! agent (PyPI `livekit-agents`, `tests/py/lk_agent.py` with a scripted LLM, discovering
//! and forwarding Outpost's tools with `examples/livekit-agents/outpost_tools.py`).
//!
//! The app connects with a saved connection; the agent finds it, lists its tools with
//! `outpost.list_tools` and starts its `AgentSession`. The status bar shows LiveKit Agents
//! mode; the user's message goes out on `lk.chat`; the agent's answer streams back on
//! `lk.transcription`. "read PATH" makes the agent's LLM call `read_local_file` by RPC for
//! a file outside the allowed folders: the consent dialog shows the path, Allow once, and
//! the agent's next words quote the file. The card sits above those words (ordering), and
//! history search finds the conversation. Same namespaces and harness as `app_e2e.rs`.
//!
//! Needs what `app_e2e.rs` needs plus `.venv-agents` (scripts/test.sh makes it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use anyhow::ensure;
use common::{App, Assistant, Bed, Driver, start_lk_agent};
use outpost_tests::lkclient::in_netns;
use outpost_tests::server::ServerKind;

const ROOM: &str = "agents-app-e2e";
const NOTE: &str = "the heron waits by the weir";

outpost_tests::both_servers!(livekit_agents_agent_through_the_app);

fn livekit_agents_agent_through_the_app(kind: ServerKind) {
    let _one = common::serial();
    let bed = Bed::new(kind, ROOM).unwrap();
    let root = bed.root.clone();
    let config = bed.profile.config.clone();
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let notes = outside.join("heron-notes.txt");
    std::fs::write(&notes, format!("{NOTE}\n")).unwrap();
    let env = bed.profile.env(Some(&bed.token));
    let server_ns = bed.pair.server_ns.clone();
    let client_ns = bed.pair.client_ns.clone();
    let url = bed.server.url.clone();
    let notes = notes.display().to_string();
    let logs = root.join("logs");
    let outcome = in_netns(&client_ns.clone(), move || async move {
        let driver = Driver::start(&client_ns, &logs, &env).await?;
        let agent = start_lk_agent(&server_ns, &url, ROOM, &root)?;
        let r = scenario(&agent, &notes, &config).await;
        let r = App::quit_after(r, &driver, &config).await;
        driver.with_log(r, Some(&agent))
    });
    drop(bed);
    outcome.unwrap_or_else(|e| common::fail(&e));
}

async fn scenario(
    agent: &Assistant,
    notes: &str,
    _config: &std::path::Path,
) -> anyhow::Result<App> {
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    // The agent waits for the app, lists its tools and starts its session.
    agent.wait_event("ready").await?;
    let discovered = agent
        .events()
        .into_iter()
        .find(|e| e["event"] == "tools")
        .map(|e| e["names"].clone())
        .unwrap_or_default();
    ensure!(
        discovered
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n == "read_local_file")),
        "the agent did not discover read_local_file: {discovered}"
    );
    // The mode is shown (found from the agent's RPC discovery or its lk.agent.state).
    app.wait_text("[data-testid=assistant-mode]", "LiveKit Agents")
        .await?;

    // A chat round trip: lk.chat out, a streamed lk.transcription back.
    app.say("hello").await?;
    app.wait_assistant("Hello from the scripted agent.").await?;

    // A forwarded tool call with consent: Allow once, and the agent quotes the file.
    app.say(&format!("read {notes}")).await?;
    let (text, paths) = app.wait_consent().await?;
    ensure!(paths == [notes.to_owned()], "the dialog lists {paths:?}");
    ensure!(text.contains("read_local_file"), "dialog: {text}");
    app.answer_consent("Allow once").await?;
    app.wait_card("read_local_file", "completed", |c| {
        c["tool"] == "read_local_file"
    })
    .await?;
    app.wait_assistant(&format!("The file says: {NOTE}"))
        .await?;
    // Ordering: the card comes before the words that quote its result.
    let order = app
        .js("const items = Array.from(document.querySelectorAll(\
               '[data-testid=tool-card], [data-testid=assistant-message]'));\
             const card = items.findIndex(e => e.dataset.testid === 'tool-card');\
             const quote = items.findIndex(e => e.innerText.includes('The file says'));\
             return [card, quote];")
        .await?;
    let (card, quote) = (order[0].as_i64(), order[1].as_i64());
    ensure!(
        matches!((card, quote), (Some(c), Some(q)) if c >= 0 && q > c),
        "the card ({card:?}) must come before the quote ({quote:?})"
    );

    // History finds the conversation.
    app.open_screen("History").await?;
    app.wait_css("#history-search")
        .await?
        .send_keys("heron")
        .await?;
    app.wait_text("ul[aria-label='Search results'] mark", "heron")
        .await?;
    Ok(app)
}
