//! End to end: giving a LiveKit Agents agent an image from the real app under Xvfb (the
//! `app_e2e.rs` harness), and a file from the secrets list refused.
//!
//! A real PNG (ImageMagick's `plasma:`, tens of KB: several byte-stream chunks) is dragged
//! from another X window onto the app (`Driver::drop_file`: a GTK drag source and xdotool,
//! real XDND). The chat shows it staged exactly as it will go: name, type, size, SHA-256
//! and the image. Sent (with no words), it reaches the real `AgentSession` of
//! `tests/py/lk_agent.py` as LiveKit documents for vision agents: a byte stream on the topic
//! `images` with the file's name and type, which the agent adds to its chat context as an
//! `ImageContent`; asked to "describe", its scripted LLM decodes that image from its chat
//! context and reports its size and SHA-256: byte for byte the file's. The history keeps
//! the file's name, type, size and hash with the message. Then `~/.ssh/id_ed25519` dropped
//! the same way is refused with a sentence naming the secrets list; nothing is staged and
//! the agent receives nothing more.
//!
//! Needs what `app_e2e.rs` needs plus `.venv-agents`, xdotool, python3-gi with GTK 3 (the
//! drag source) and ImageMagick.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use common::{App, Assistant, Driver, Profile, wait_for};
use serde_json::Value;

const ROOM: &str = "attach-app-e2e";

#[test]
fn an_image_dropped_in_the_chat_reaches_a_livekit_agent_byte_for_byte() {
    let _one = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // A real image, and a key in the app's own home (its secrets list covers ~/.ssh).
    let made = Command::new("/usr/bin/convert")
        .args(["-size", "180x120", "plasma:"])
        .arg(root.join(IMAGE))
        .status()
        .expect("ImageMagick's convert (apt-get install imagemagick)");
    assert!(made.success(), "convert failed");
    let ssh = Profile::new(root).unwrap().home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(
        ssh.join("id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n",
    )
    .unwrap();
    common::with_lk_agent(ROOM, root, |driver, agent, profile| {
        Box::pin(scenario(driver, agent, profile))
    });
}

/// The image's file name, in the test's folder.
const IMAGE: &str = "otter-plasma.png";

/// The files the agent received (byte streams on `images` or `files`).
fn received(agent: &Assistant) -> Vec<Value> {
    agent
        .events()
        .into_iter()
        .filter(|e| e["event"] == "image" || e["event"] == "file")
        .collect()
}

/// Where files are dropped: the middle of the chat.
const DROP_AT: (u32, u32) = (600, 380);

async fn scenario(driver: &Driver, agent: &Assistant, profile: &Profile) -> anyhow::Result<()> {
    let image = profile
        .config
        .parent()
        .context("the test folder")?
        .join(IMAGE);
    let key = profile.home.join(".ssh/id_ed25519");
    let bytes = std::fs::read(&image)?;
    let sha = outpost_protocol::sha256_hex(&bytes);
    let app = App::launch_with_lk_agent(agent).await?;

    // Dropped from another window: staged, shown exactly as it will go.
    let said = driver.drop_file(&image, DROP_AT).await?;
    ensure!(
        said.contains("sent file://"),
        "the drop never asked for the file: {said}"
    );
    let staged = app.wait_css("[data-testid=staged-files]").await?;
    let text = staged.text().await?;
    ensure!(
        text.contains("otter-plasma.png") && text.contains("image/png") && text.contains(&sha),
        "the preview shows: {text}"
    );
    ensure!(
        text.contains("LiveKit byte streams on the topic “images”"),
        "the preview says how it goes: {text}"
    );
    let shown = app
        .js("return document.querySelector('[data-testid=staged-files] img').src.length;")
        .await?;
    ensure!(
        shown.as_u64().unwrap_or(0) > bytes.len() as u64,
        "the image itself is shown: {shown}"
    );
    driver.screenshot(&app, "attach").await?;
    ensure!(
        received(agent).is_empty(),
        "sent before Send: {:?}",
        received(agent)
    );

    // Sent with no words: it goes to the agent on `images`, byte for byte.
    app.click_button("form.composer", "Send").await?;
    let got = wait_for("the agent to receive the image", || async {
        Ok(received(agent).into_iter().next())
    })
    .await
    .with_context(|| agent.report())?;
    ensure!(
        got["event"] == "image"
            && got["name"] == "otter-plasma.png"
            && got["mime"] == "image/png"
            && got["size"] == bytes.len()
            && got["sha256"] == sha.as_str()
            && got["attributes"]["outpost.sha256"] == sha.as_str(),
        "the agent received {got}"
    );
    app.wait_css("ul[aria-label='Files sent'] [data-testid=attachment]")
        .await?;
    // In its chat context, as an image: the scripted LLM decodes it from there.
    app.say("describe the picture").await?;
    let answer = app
        .wait_assistant(&format!("an image of {} bytes, sha256 {sha}", bytes.len()))
        .await?;
    ensure!(answer.contains("I see an image of"), "{answer}");

    // The secrets list: refused with a sentence, nothing staged, nothing sent.
    driver.drop_file(&key, DROP_AT).await?;
    let notice = app
        .wait_text(".notices .notice", "Outpost will not send id_ed25519")
        .await?;
    ensure!(
        notice.contains("~/.ssh is on the built-in secrets list"),
        "the refusal says why: {notice}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        app.find("[data-testid=staged-files]").await?.is_none(),
        "the key was staged"
    );
    ensure!(
        received(agent).len() == 1,
        "the agent received more: {:?}",
        received(agent)
    );

    // The history keeps what was sent with the message.
    app.open_screen("History").await?;
    app.click("ul[aria-label=Conversations] button.item")
        .await?;
    let kept = app
        .wait_css(".detail-body [data-testid=attachment]")
        .await?
        .attr("data-sha256")
        .await?;
    ensure!(
        kept.as_deref() == Some(sha.as_str()),
        "history keeps {kept:?}"
    );
    app.quit(driver, &profile.config).await?;
    Ok(())
}
