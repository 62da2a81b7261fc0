//! End to end (issue 28): a remote MCP server that uses OAuth, added and signed in to from
//! Settings → Tool servers in the real `outpost-app` under Xvfb, with nothing of ours on the
//! other side: oidc-provider as the authorization server, an MCP server on the official
//! TypeScript SDK's bearer-auth support (tests/mcp/oauth), Debian's Chromium as the user's
//! browser (`OUTPOST_BROWSER`), and GNOME Keyring as the system keyring on the app's own
//! session bus. The app is connected (a room on `outpost-room`), so the added server
//! starts at once: it answers 401, and the pane says it needs a sign-in. **Sign in** opens
//! the browser, which logs in and agrees; the pane then says "Signed in", the server runs
//! with the new token (MCP 2025-11-25, its `whoami` tool listed). **Sign out** revokes the
//! tokens, and the server needs a sign-in again. `mcp.toml` holds no token byte.
//!
//! Needs what `mcp_app_e2e.rs` needs plus Chromium, gnome-keyring and the OAuth test
//! servers' packages (`npm ci` in tests/mcp/oauth); scripts/setup.sh installs them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use anyhow::{Context as _, ensure};
use common::{App, Bed, Driver};
use outpost_tests::keyring::SecretService;
use outpost_tests::lkclient::in_netns;
use outpost_tests::oauth::OAuthServers;
use outpost_tests::server::ServerKind;

const ROOM: &str = "mcp-sign-in-e2e";
const SERVER: &str = "remote";

#[test]
fn a_remote_server_is_added_and_signed_in_from_settings() {
    let _one = common::serial();
    let bed = Bed::new(ServerKind::Room, ROOM).unwrap();
    let (root, profile, token) = (bed.root.clone(), bed.profile.clone(), bed.token.clone());
    let client_ns = bed.pair.client_ns.clone();
    let outcome = in_netns(&client_ns.clone(), move || async move {
        // In the app's namespace: its loopback is where the browser, the authorization
        // server and the app's redirect listener meet.
        let oauth = OAuthServers::start(&root)?;
        let mut env = profile.keyring_env(Some(&token));
        env.push(("OUTPOST_BROWSER", oauth.browser.clone().into_os_string()));
        let driver = Driver::start(&client_ns, &root.join("logs"), &env).await?;
        // The system keyring, on the bus the app will use, before the app asks for it.
        let keyring = SecretService::join(&root.join("keyring"), driver.bus())?;
        let r = scenario(&oauth.mcp_url, &profile.config).await;
        let r = App::quit_after(r, &driver, &profile.config).await;
        drop(keyring);
        drop(oauth);
        driver.with_log(r, None)
    });
    drop(bed);
    outcome.unwrap_or_else(|e| common::fail(&e));
}

async fn scenario(mcp_url: &str, config: &std::path::Path) -> anyhow::Result<App> {
    let app = App::launch().await?;
    app.wait_text("[data-testid=connection-state]", "Connected")
        .await?;
    app.open_screen("Settings").await?;
    app.click_button(".subnav", "Tool servers").await?;

    // Added from the form: a URL server. In the live session it starts and meets a 401.
    let form = "form[aria-label='Add a tool server']";
    app.wait_css(&format!("{form} #mcp-name"))
        .await?
        .send_keys(SERVER)
        .await?;
    app.click(&format!("{form} input[type=radio][value=http]"))
        .await?;
    app.wait_css(&format!("{form} #mcp-url"))
        .await?
        .send_keys(mcp_url)
        .await?;
    app.click_button(form, "Add server").await?;
    let row = format!("[data-testid=mcp-server][data-name={SERVER}]");
    app.wait_css(&format!(
        "{row} [data-testid=mcp-sign-in][data-state=needed]"
    ))
    .await
    .context("the pane says the server needs a sign-in")?;
    app.wait_text(&row, "Needs you to sign in").await?;

    // Sign in: the browser logs in and agrees; the server runs with the token.
    app.click_button(&row, "Sign in").await?;
    app.wait_css(&format!(
        "{row} [data-testid=mcp-sign-in][data-state=signed_in]"
    ))
    .await
    .context("signed in through the browser")?;
    app.wait_css(&format!("{row}[data-status=running]"))
        .await
        .context("the signed-in server runs")?;
    app.wait_text(&row, "MCP 2025-11-25").await?;
    app.click_button(&row, "Tools").await?;
    app.wait_css(&format!(
        "[aria-label='Tools of {SERVER}'] [data-testid=mcp-tool][data-name=whoami]"
    ))
    .await
    .context("its tools are listed with the token")?;
    let mcp = std::fs::read_to_string(config.join("mcp.toml"))?;
    ensure!(
        mcp.contains(&format!("[servers.{SERVER}]"))
            && !mcp.contains("token")
            && !mcp.contains("Bearer"),
        "mcp.toml: {mcp}"
    );

    // Sign out: revoked and deleted; the server needs a sign-in again.
    app.click_button(&row, "Sign out").await?;
    app.wait_css(&format!(
        "{row} [data-testid=mcp-sign-in][data-state=needed], \
         {row} [data-testid=mcp-sign-in][data-state=not_signed_in]"
    ))
    .await
    .context("signed out")?;
    app.wait_css(&format!(
        "{row} [data-testid=mcp-sign-in][data-state=needed]"
    ))
    .await
    .context("after the sign-out the server needs a sign-in again")?;
    Ok(app)
}
