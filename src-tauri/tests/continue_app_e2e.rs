//! End to end: continuing a conversation from History in the real app, under Xvfb (the
//! `app_e2e.rs` harness), in both assistant modes.
//!
//! - `continue_with_the_outpost_protocol_after_a_restart`: the local demo (the
//!   `outpost-agent` scripted brain, Outpost protocol). A conversation, then the app quits
//!   (its demo agent with it, so the agent forgets the conversation) and starts again in
//!   a new one. History → the first conversation → Continue: the chat shows its messages
//!   and its tool card; "recall" makes the restarted agent quote the first thing said
//!   back then, which it can know only from the hello's `history`; the answer lands in the
//!   same conversation: search finds both halves under its title, and the list holds no
//!   copy of it.
//! - `continue_with_a_livekit_agents_agent`: a real `livekit-agents` `AgentSession`
//!   (`tests/py/lk_agent.py`, scripted LLM, `outpost_tools.follow_conversation`). A
//!   conversation, then New conversation (the agent's chat context starts empty: "recall"
//!   quotes only the new one), then History → Continue the first: the agent sees
//!   `outpost.conversation_id` change, reads the stored messages with
//!   `outpost.conversation`, and its "recall" quotes the first conversation; search finds
//!   both halves under one title.
//!
//! Needs what `app_e2e.rs` needs (and `.venv-agents` for the second).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use anyhow::{Context as _, ensure};
use common::{App, Assistant, Driver, Profile, wait_for};
use outpost_tests::lkclient::in_netns;
use outpost_tests::netns::NetNs;
use serde_json::Value;

/// History, freshly opened (no search typed, the list loaded anew).
async fn fresh_history(app: &App) -> anyhow::Result<()> {
    app.open_screen("Chat").await?;
    app.open_screen("History").await?;
    app.wait_css("#history-search").await?;
    Ok(())
}

/// The search results for `query` in History: `(conversation title, snippet)` each.
async fn search(app: &App, query: &str) -> anyhow::Result<Vec<(String, String)>> {
    fresh_history(app).await?;
    let input = app.wait_css("#history-search").await?;
    input.send_keys(query).await?;
    let q = serde_json::to_string(query)?;
    let rows = wait_for(&format!("search results for {query}"), || async {
        let v = app
            .js(&format!(
                "const s = document.querySelector('p.count'); \
                 if (!s || !s.textContent.includes({q})) return null; \
                 return Array.from(document.querySelectorAll(\"ul[aria-label='Search results'] button.item\"))\
                   .map(b => [b.querySelector('.title').textContent, b.querySelector('.snippet').textContent]);"
            ))
            .await?;
        Ok(v.as_array().filter(|a| !a.is_empty()).cloned())
    })
    .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let s = |i: usize| r[i].as_str().unwrap_or_default().to_owned();
            (s(0), s(1))
        })
        .collect())
}

/// Opens the conversation titled `title` in History and presses Continue; waits for the
/// chat to show `past` (a message said back then).
async fn continue_conversation(app: &App, title: &str, past: &str) -> anyhow::Result<()> {
    fresh_history(app).await?;
    let r = wait_for(
        &format!("the conversation {title:?} in the list"),
        || async {
            for b in app
                .client
                .find_all(fantoccini::Locator::Css(
                    "ul[aria-label=Conversations] button.item",
                ))
                .await?
            {
                if b.text().await?.contains(title) {
                    return Ok(Some(b));
                }
            }
            Ok(None)
        },
    )
    .await?;
    r.click().await?;
    app.wait_text(".detail-body", past).await?;
    app.click("[data-testid=continue-conversation]").await?;
    // The chat opens with the past messages.
    app.wait_css("#composer-input").await?;
    app.wait_user_message(past).await?;
    Ok(())
}

/// How many complete assistant messages contain `text`.
async fn answers(app: &App, text: &str) -> anyhow::Result<usize> {
    let t = serde_json::to_string(text)?;
    let v = app
        .js(&format!(
            "return Array.from(document.querySelectorAll(\"[data-testid=assistant-message][aria-busy=false]\"))\
               .filter(e => e.innerText.includes({t})).length;"
        ))
        .await?;
    Ok(usize::try_from(v.as_u64().unwrap_or(0))?)
}

/// Says `text` and waits for a new answer containing `answer` (the transcript may hold
/// the same words from the conversation's earlier part).
async fn say_and_wait(app: &App, text: &str, answer: &str) -> anyhow::Result<()> {
    let before = answers(app, answer).await?;
    app.say(text).await?;
    wait_for(&format!("a new answer with {answer:?}"), || async {
        Ok((answers(app, answer).await? > before).then_some(()))
    })
    .await
    .with_context(|| format!("{before} such answers were there before"))
}

/// Both halves of the conversation `title` are one conversation: search finds a word of
/// the first (`first`) and of the second (`second`) under its title, and History lists
/// it once.
async fn one_conversation(app: &App, title: &str, first: &str, second: &str) -> anyhow::Result<()> {
    let hits = search(app, first).await?;
    ensure!(
        hits.iter().any(|(t, s)| t == title && s.contains(first)),
        "search for the first half: {hits:?}"
    );
    let hits = search(app, second).await?;
    ensure!(
        !hits.is_empty() && hits.iter().all(|(t, _)| t == title),
        "the second half is in another conversation: {hits:?}"
    );
    let n = listed(app, title).await?;
    ensure!(n == 1, "History lists {title:?} {n} times");
    Ok(())
}

/// How many conversations History lists with `title`.
async fn listed(app: &App, title: &str) -> anyhow::Result<usize> {
    fresh_history(app).await?;
    app.wait_css("ul[aria-label=Conversations]").await?;
    let t = serde_json::to_string(title)?;
    let v = app
        .js(&format!(
            "return Array.from(document.querySelectorAll(\"ul[aria-label=Conversations] .title\"))\
               .filter(e => e.textContent === {t}).length;"
        ))
        .await?;
    Ok(usize::try_from(v.as_u64().unwrap_or(0))?)
}

// --- the Outpost protocol (the local demo), across a restart -------------------------------

const OTTER: &str = "remember the otter by the mill";

#[test]
fn continue_with_the_outpost_protocol_after_a_restart() {
    let _one = common::serial();
    common::require_demo_programs().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let profile = Profile::new(&root).unwrap();
    let ns = NetNs::create().expect("a network namespace (run as root)");
    let name = ns.name().to_owned();
    let outcome = in_netns(&name.clone(), move || async move {
        let driver = Driver::start(&name, &root.join("logs"), &profile.env(None)).await?;
        driver.with_log(demo_scenario(&driver, &profile).await, None)
    });
    drop(ns);
    outcome.unwrap_or_else(|e| common::fail(&e));
}

async fn demo_scenario(driver: &Driver, profile: &Profile) -> anyhow::Result<()> {
    let app = App::launch().await?;
    app.click_button(".first-run", "Try the local demo").await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    // The first conversation: something to remember, and a tool card (a server-side
    // calculation, shown and not run here).
    app.say(OTTER).await?;
    app.wait_assistant("I am a scripted demo").await?;
    app.say("calculate 6*7").await?;
    app.wait_assistant("= 42").await?;
    app.say("recall").await?;
    app.wait_assistant(&format!("was: “{OTTER}”")).await?;
    // Quit: the demo's agent ends with the app, and forgets the conversation.
    app.quit(driver, &profile.config).await?;

    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    // A new start opens a new conversation: the agent there knows nothing earlier.
    app.say("recall").await?;
    app.wait_assistant("nothing earlier to recall").await?;

    continue_conversation(&app, OTTER, OTTER).await?;
    driver.screenshot(&app, "continue").await?;
    // The past tool card is back too.
    app.wait_card("server_calculator", "completed", |c| {
        c["tool"] == "server_calculator"
    })
    .await?;
    // The restarted agent knows the first half only from the hello's history.
    say_and_wait(&app, "recall the kingfisher", &format!("was: “{OTTER}”")).await?;

    one_conversation(&app, OTTER, "otter", "kingfisher").await?;
    app.quit(driver, &profile.config).await?;
    Ok(())
}

// --- LiveKit Agents ---------------------------------------------------------------------------

const ROOM: &str = "continue-app-e2e";
const HERON: &str = "remember the heron";

#[test]
fn continue_with_a_livekit_agents_agent() {
    let _one = common::serial();
    let dir = tempfile::tempdir().unwrap();
    common::with_lk_agent(ROOM, dir.path(), |driver, agent, profile| {
        Box::pin(agents_scenario(driver, agent, profile))
    });
}

/// The conversations the agent has loaded from Outpost so far.
fn loads(agent: &Assistant) -> Vec<Value> {
    agent
        .events()
        .into_iter()
        .filter(|e| e["event"] == "context")
        .collect()
}

/// Waits for the agent to load a conversation (after the `before` it had loaded) and
/// checks it held `messages` messages.
async fn agent_loaded(agent: &Assistant, before: usize, messages: u64) -> anyhow::Result<()> {
    let load = wait_for(
        "the agent to load the conversation Outpost shows",
        || async { Ok(loads(agent).get(before).cloned()) },
    )
    .await
    .with_context(|| agent.report())?;
    ensure!(
        load["messages"] == messages,
        "the agent loaded {load}, not {messages} messages"
    );
    Ok(())
}

async fn agents_scenario(
    driver: &Driver,
    agent: &Assistant,
    profile: &Profile,
) -> anyhow::Result<()> {
    let app = App::launch_with_lk_agent(agent).await?;
    app.say(HERON).await?;
    app.wait_assistant(&format!("You said: {HERON}")).await?;

    // New conversation: Outpost opens it at once; the agent's context starts empty.
    let before = loads(agent).len();
    app.click_button(".chat .top", "New conversation").await?;
    agent_loaded(agent, before, 0).await?;
    app.say("hello").await?;
    app.wait_assistant("Hello from the scripted agent.").await?;
    app.say("recall").await?;
    app.wait_assistant("was: “hello”").await?;

    // Continue the first: the agent reads it back (two messages) before the next turn.
    let before = loads(agent).len();
    continue_conversation(&app, HERON, HERON).await?;
    agent_loaded(agent, before, 2).await?;
    say_and_wait(&app, "recall the kingfisher", &format!("was: “{HERON}”")).await?;

    one_conversation(&app, HERON, "heron", "kingfisher").await?;
    app.quit(driver, &profile.config).await?;
    Ok(())
}
