//! End to end: the real `outpost-app` under Xvfb hosts the user's MCP server and offers
//! its tools to an assistant. `mcp.toml` in the app's config folder names the pinned
//! `@modelcontextprotocol/server-everything` (tests/mcp, nobody here wrote it); the app
//! starts it when it connects. The example Python assistant (official LiveKit SDK,
//! `examples/python-agent/agent.py --scenario`) finds `mcp__everything__echo` in the
//! catalogue with `serverName` set and calls it; the policy's default for an MCP tool is
//! ask, so the consent dialog opens and names the server with its claims; Allow once, and
//! the echo reaches the assistant. The card and the history show the server, and history
//! search finds the call by the server's name. Then the assistant calls server-everything's
//! `trigger-elicitation-request`: the server's question appears as a form naming it, the
//! user fills in the required name and submits, and the tool's result carries the answer;
//! asked again, the user declines, and the tool's result says the user declined.
//! Then, in Settings → Tool servers, the user opens the server's tools (each with the
//! server's claims) and sets echo to Allow and get-sum to Deny: the next echo runs
//! without a dialog and get-sum is denied. Last, the pane shows the server running with
//! its tools and its stderr log, and switching it off and on stops and restarts it in the
//! live session. Issue 28: the consent dialog and the pane say what the server may touch
//! (sandboxed, none of the user's folders, no network), and a server added from the pane
//! (the reference filesystem server, with a folder to write) runs sandboxed, the pane
//! showing its folder. Same namespaces and harness as
//! `app_e2e.rs`.
//!
//! Needs what `app_e2e.rs` needs plus the MCP reference servers (`npm ci` in tests/mcp,
//! `setup_test_peers` in scripts/setup.sh) and `node`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use anyhow::{Context as _, ensure};
use common::{App, Assistant, Bed, Driver, wait_for};
use outpost_tests::lkclient::in_netns;
use outpost_tests::server::ServerKind;
use serde_json::json;

const ROOM: &str = "mcp-app-e2e";
const ECHO: &str = "mcp__everything__echo";
const WORDS: &str = "kestrel over the quarry";
const ELICIT: &str = "mcp__everything__trigger-elicitation-request";
const SUM: &str = "mcp__everything__get-sum";

#[test]
fn official_sdk_assistant_calls_an_mcp_tool_through_the_app() {
    let _one = common::serial();
    let everything = common::workspace_root()
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        everything.exists(),
        "{} is missing: run scripts/setup.sh and setup_test_peers (npm ci in tests/mcp)",
        everything.display()
    );
    // No rule for the server or the tool in its policy: an MCP tool asks.
    let bed = Bed::new(ServerKind::Room, ROOM).unwrap();
    let (root, profile) = (bed.root.clone(), bed.profile.clone());
    let config = profile.config.clone();
    std::fs::write(
        config.join("mcp.toml"),
        format!(
            "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
            everything.display().to_string()
        ),
    )
    .unwrap();
    let steps = json!([
        {"op": "wait_user", "text": "Echo something with your MCP tool", "wait_ms": 120_000},
        {"name": "catalogue", "op": "expect_tool", "toolName": ECHO,
         "fields": {"serverName": "everything"}},
        {"name": "m-echo", "op": "request", "id": "m-echo", "toolName": ECHO,
         "parameters": {"message": WORDS}, "wait_ms": 300_000,
         "expect": {"success": true, "result": {"text": format!("Echo: {WORDS}"),
                                                 "isError": false}}},
        {"op": "say", "text": "The MCP server echoed it back."},
        // server-everything registers its elicitation tool after `initialized` (the app
        // declares elicitation): in the hello, or by a ToolsChanged.
        {"op": "wait_user", "text": "Now ask me something", "wait_ms": 120_000},
        {"name": "elicit tool", "op": "wait_tool", "toolName": ELICIT, "wait_ms": 60_000},
        {"name": "m-elicit", "op": "request", "id": "m-elicit", "toolName": ELICIT,
         "parameters": {}, "wait_ms": 300_000,
         "expect": {"success": true, "result": {"isError": false}}},
        {"op": "say", "text": "Thanks for filling in the form."},
        {"op": "wait_user", "text": "Ask me once more", "wait_ms": 120_000},
        {"name": "m-elicit-no", "op": "request", "id": "m-elicit-no", "toolName": ELICIT,
         "parameters": {}, "wait_ms": 300_000,
         "expect": {"success": true, "result": {"isError": false}}},
        {"op": "say", "text": "Fine, you declined."},
        // Per-tool rules set in Settings → Tool servers: echo allowed (no dialog; nobody
        // would answer one), get-sum denied.
        {"op": "wait_user", "text": "Use the rules I set", "wait_ms": 300_000},
        {"name": "m-echo-allowed", "op": "request", "id": "m-echo-allowed", "toolName": ECHO,
         "parameters": {"message": "no dialog"}, "wait_ms": 60_000,
         "expect": {"success": true, "result": {"text": "Echo: no dialog"}}},
        {"name": "m-sum-denied", "op": "request", "id": "m-sum-denied", "toolName": SUM,
         "parameters": {"a": 1, "b": 2}, "wait_ms": 60_000,
         "expect": {"success": false, "errorCode": "permission_denied",
                    "errorMessageContains": SUM}},
        {"op": "say", "text": "The rules worked."}
    ]);
    let env = profile.env(Some(&bed.token));
    let server_ns = bed.pair.server_ns.clone();
    let client_ns = bed.pair.client_ns.clone();
    let url = bed.server.url.clone();
    let logs = root.join("logs");
    let mcp_log = profile.data.join("mcp-logs/everything.log");
    let outcome = in_netns(&client_ns.clone(), move || async move {
        let driver = Driver::start(&client_ns, &logs, &env).await?;
        let mut assistant = Assistant::start(&server_ns, &url, ROOM, &steps, &root)?;
        let r = scenario(&mut assistant, &config).await;
        let r = App::quit_after(r, &driver, &config).await;
        r.map_err(|e| {
            e.context(format!(
                "--- driver and app log ---\n{}\n--- {}\n--- everything.log\n{}",
                driver.log(),
                assistant.report(),
                std::fs::read_to_string(&mcp_log).unwrap_or_default()
            ))
        })
    });
    drop(bed);
    outcome.unwrap_or_else(|e| common::fail(&e));
}

/// Chooses `value` in the `<select>` matching `css`, as a user does (a `change` event).
async fn choose(app: &App, css: &str, value: &str) -> anyhow::Result<()> {
    app.wait_css(css).await?;
    let r = app
        .js(&format!(
            "const s = document.querySelector({css:?}); s.value = {value:?}; \
             s.dispatchEvent(new Event('change', {{ bubbles: true }})); return s.value;"
        ))
        .await?;
    ensure!(r == value, "{css} did not take {value}: {r}");
    Ok(())
}

async fn scenario(assistant: &mut Assistant, config: &std::path::Path) -> anyhow::Result<App> {
    wait_for("the assistant to join", || async {
        Ok(assistant
            .events()
            .into_iter()
            .find(|e| e["event"] == "ready"))
    })
    .await
    .with_context(|| assistant.report())?;
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;

    app.say("Echo something with your MCP tool").await?;
    let o = assistant.outcome("catalogue").await?;
    ensure!(o["ok"] == true, "the catalogue step: {o}");

    // The question names the server, shows what the server claims and the arguments.
    let (text, _) = app.wait_consent().await?;
    ensure!(
        text.contains("everything"),
        "the dialog does not name the server: {text}"
    );
    ensure!(
        text.contains(ECHO) || text.contains("echo"),
        "dialog: {text}"
    );
    ensure!(
        text.contains(WORDS),
        "the dialog does not show the arguments: {text}"
    );
    // And what the server may touch (issue 28): sandboxed, none of the user's folders
    // (the policy allows none), no network.
    ensure!(
        text.contains("sandboxed: none of your folders; no network"),
        "the dialog does not say what the server may touch: {text}"
    );
    app.answer_consent("Allow once").await?;
    let card = app
        .wait_card("m-echo", "completed", |c| c["id"] == "m-echo")
        .await?;
    let card_text = card["text"].as_str().unwrap_or_default();
    ensure!(card_text.contains("MCP · everything"), "the card: {card}");
    let o = assistant.outcome("m-echo").await?;
    ensure!(
        o["ok"] == true && o["success"] == true,
        "the assistant got {o}"
    );
    app.wait_assistant("The MCP server echoed it back.").await?;

    // Elicitation: the server asks the user through the app; the form names it, the
    // user fills in the required field and submits; the tool's result says so.
    app.say("Now ask me something").await?;
    app.wait_consent().await?;
    app.answer_consent("Allow once").await?;
    let form = app.wait_css("[data-testid=elicitation-form]").await?;
    let text = form.text().await?;
    ensure!(
        text.contains("MCP · everything"),
        "the form does not name the server: {text}"
    );
    ensure!(
        text.contains("Please provide inputs"),
        "the form does not show the server's message: {text}"
    );
    app.wait_css("[data-testid=elicitation-form] input[type=text]")
        .await?
        .send_keys("Ada Lovelace")
        .await?;
    app.click_button("[data-testid=elicitation-form]", "Submit")
        .await?;
    let card = app
        .wait_card("m-elicit", "completed", |c| c["id"] == "m-elicit")
        .await?;
    ensure!(
        card["text"]
            .as_str()
            .is_some_and(|t| t.contains("Ada Lovelace")),
        "the card does not show the answer: {card}"
    );
    let o = assistant.outcome("m-elicit").await?;
    ensure!(o["ok"] == true, "the assistant got {o}");
    app.wait_assistant("Thanks for filling in the form.")
        .await?;

    // Declined from the form: the server is told, and says so in its result.
    app.say("Ask me once more").await?;
    app.wait_consent().await?;
    app.answer_consent("Allow once").await?;
    app.wait_css("[data-testid=elicitation-form]").await?;
    app.click_button("[data-testid=elicitation-form]", "Decline")
        .await?;
    let card = app
        .wait_card("m-elicit-no", "completed", |c| c["id"] == "m-elicit-no")
        .await?;
    ensure!(
        card["text"]
            .as_str()
            .is_some_and(|t| t.contains("declined")),
        "the card does not show the refusal: {card}"
    );
    let o = assistant.outcome("m-elicit-no").await?;
    ensure!(o["ok"] == true, "the assistant got {o}");
    app.wait_assistant("Fine, you declined.").await?;

    // Settings → Tool servers → Tools of everything: each tool with the server's claims
    // and its rule; echo set to Allow, get-sum to Deny, written to policy.toml.
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Tool servers").await?;
    let row = "[data-testid=mcp-server][data-name=everything]";
    app.wait_css(&format!("{row}[data-status=running]")).await?;
    // The TypeScript reference server does not speak 2026-07-28: the row says what it got.
    app.wait_text(row, "MCP 2025-11-25").await?;
    app.click_button(row, "Tools").await?;
    let tool = |name: &str| {
        format!("[aria-label='Tools of everything'] [data-testid=mcp-tool][data-name={name}]")
    };
    app.wait_css(&format!("{}[data-effective=ask]", tool("echo")))
        .await?;
    app.wait_text(&tool("echo"), "everything claims").await?;
    choose(&app, &format!("{} select", tool("echo")), "allow").await?;
    app.wait_css(&format!("{}[data-effective=allow]", tool("echo")))
        .await?;
    choose(&app, &format!("{} select", tool("get-sum")), "deny").await?;
    app.wait_css(&format!("{}[data-effective=deny]", tool("get-sum")))
        .await?;
    let policy = std::fs::read_to_string(config.join("policy.toml"))?;
    // The keys as the policy file writes them (bare when they can be).
    let has = |key: &str, rule: &str| {
        policy.contains(&format!("{key} = \"{rule}\""))
            || policy.contains(&format!("\"{key}\" = \"{rule}\""))
    };
    ensure!(
        has(ECHO, "allow") && has(SUM, "deny"),
        "policy.toml: {policy}"
    );
    app.open_screen("Chat").await?;
    app.say("Use the rules I set").await?;
    app.wait_card("m-echo-allowed", "completed", |c| {
        c["id"] == "m-echo-allowed"
    })
    .await?;
    let o = assistant.outcome("m-echo-allowed").await?;
    ensure!(
        o["ok"] == true,
        "allowed by the pane's rule, the assistant got {o}"
    );
    let o = assistant.outcome("m-sum-denied").await?;
    ensure!(
        o["ok"] == true,
        "denied by the pane's rule, the assistant got {o}"
    );
    app.wait_assistant("The rules worked.").await?;
    ensure!(
        app.consent_dialog().await?.is_none(),
        "a consent dialog opened for a tool the pane allowed or denied"
    );
    let status = assistant.finish().await?;
    ensure!(
        status.success(),
        "the assistant's scenario failed ({status})"
    );

    // History: search by the server's name finds the call; the card there names it.
    app.open_screen("History").await?;
    app.wait_css("#history-search")
        .await?
        .send_keys("everything")
        .await?;
    app.wait_text("ul[aria-label='Search results']", "everything")
        .await?;
    app.click("ul[aria-label='Search results'] button.item")
        .await?;
    wait_for("the history card naming the server", || async {
        let cards = app.tool_cards().await?;
        Ok(cards.into_iter().find(|c| {
            c["text"]
                .as_str()
                .is_some_and(|t| t.contains("MCP · everything"))
        }))
    })
    .await?;

    // Settings → Tool servers, in the live session: the server runs with its tools; its
    // stderr log is shown; switched off it stops, switched on it runs again.
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Tool servers").await?;
    let row = "[data-testid=mcp-server][data-name=everything]";
    app.wait_css(&format!("{row}[data-status=running]")).await?;
    app.wait_text(row, " tools").await?;
    app.click_button(row, "Log").await?;
    app.wait_text("[data-testid=mcp-log]", "--- started")
        .await?;
    app.click(&format!("{row} input[type=checkbox]")).await?;
    app.wait_css(&format!("{row}[data-status=disabled]"))
        .await?;
    app.click(&format!("{row} input[type=checkbox]")).await?;
    app.wait_css(&format!("{row}[data-status=running]"))
        .await
        .context("re-enabled, the server runs again")?;
    // Its sandbox is shown with it (issue 28).
    app.wait_text(
        &format!("{row} [data-testid=mcp-sandbox][data-state=sandboxed]"),
        "no network",
    )
    .await?;

    // A sandboxed server added from Settings: the reference filesystem server on a
    // folder the form lets it write; it starts in the live session, sandboxed, and the
    // list says what it may touch.
    let shared = config.parent().context("the test folder")?.join("shared");
    std::fs::create_dir_all(&shared)?;
    let shared = shared.canonicalize()?.display().to_string();
    let fs_js = common::workspace_root()
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let form = "form[aria-label='Add a tool server']";
    app.wait_css(&format!("{form} #mcp-name"))
        .await?
        .send_keys("files")
        .await?;
    app.wait_css(&format!("{form} #mcp-command"))
        .await?
        .send_keys("node")
        .await?;
    app.wait_css(&format!("{form} #mcp-args"))
        .await?
        .send_keys(&format!("{} {shared}", fs_js.display()))
        .await?;
    app.wait_css(&format!("{form} #mcp-write"))
        .await?
        .send_keys(&shared)
        .await?;
    app.click_button(form, "Add server").await?;
    let files = "[data-testid=mcp-server][data-name=files]";
    app.wait_css(&format!("{files}[data-status=running]"))
        .await
        .context("the added server runs")?;
    app.wait_text(
        &format!("{files} [data-testid=mcp-sandbox][data-state=sandboxed]"),
        &format!("reads and writes {shared}; no network"),
    )
    .await?;
    let mcp = std::fs::read_to_string(config.join("mcp.toml"))?;
    ensure!(
        mcp.contains("[servers.files]") && mcp.contains(&format!("write = [\"{shared}\"]")),
        "mcp.toml: {mcp}"
    );
    Ok(app)
}
