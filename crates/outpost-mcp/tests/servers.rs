//! Discovery and a call for each pinned reference server, over stdio and Streamable HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use outpost_mcp::{CallOptions, ServerConfig, ServerStatus};
use serde_json::json;

#[tokio::test]
async fn everything_lists_its_tools_and_every_content_type_maps() {
    let logs = tempfile::tempdir().unwrap();
    let host = host(logs.path(), vec![], None);
    host.start("everything", everything()).unwrap();
    host.wait_running("everything", START).await.unwrap();
    let snap = host.snapshot();
    let state = &snap["everything"];
    assert_eq!(state.status, ServerStatus::Running);
    assert!(state.protocol_version.is_some());
    let names: Vec<&str> = state.tools.iter().map(|t| t.name.as_str()).collect();
    for want in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "trigger-long-running-operation",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let echo = host
        .find_tool("mcp__everything__echo")
        .expect("echo by Outpost name");
    assert_eq!(echo.name, "echo");
    assert!(!echo.description.is_empty());
    assert_eq!(
        echo.input_schema["properties"]["message"]["type"],
        json!("string")
    );
    let long = state
        .tools
        .iter()
        .find(|t| t.name == "trigger-long-running-operation")
        .unwrap();
    assert_eq!(long.hints.read_only, Some(true));
    assert_eq!(
        long.outpost_name,
        "mcp__everything__trigger-long-running-operation"
    );

    let out = host
        .call_outpost(
            "mcp__everything__echo",
            args(json!({"message": "hi"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert!(!out.is_error);
    assert_eq!(out.result["text"], json!("Echo: hi"));
    assert_eq!(
        out.result["content"],
        json!([{"type": "text", "text": "Echo: hi"}])
    );

    let sum = host
        .call(
            "everything",
            "get-sum",
            args(json!({"a": 2, "b": 3})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert!(
        sum.result["text"].as_str().unwrap().contains("is 5"),
        "{:?}",
        sum.result
    );

    let img = host
        .call(
            "everything",
            "get-tiny-image",
            None,
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    let image = img.result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap()
        .clone();
    assert_eq!(image["mimeType"], json!("image/png"));
    assert!(image["data"].as_str().unwrap().len() > 100);

    let sc = host
        .call(
            "everything",
            "get-structured-content",
            args(json!({"location": "Chicago"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert!(
        sc.result["structuredContent"]["temperature"].is_number(),
        "{:?}",
        sc.result
    );

    let links = host
        .call(
            "everything",
            "get-resource-links",
            args(json!({"count": 2})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    let link_blocks: Vec<_> = links.result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "resource_link")
        .collect();
    assert_eq!(link_blocks.len(), 2, "{:?}", links.result);
    assert!(link_blocks[0]["uri"].is_string());

    let reference = host
        .call(
            "everything",
            "get-resource-reference",
            args(json!({"resourceType": "Text", "resourceId": 1})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    let res = reference.result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "resource")
        .cloned();
    let res = res.unwrap_or_else(|| panic!("no embedded resource in {:?}", reference.result));
    assert!(
        res["uri"].is_string() && (res["text"].is_string() || res["blob"].is_string()),
        "{res}"
    );

    // The tool ran and failed: an MCP result with isError, not a protocol error.
    let bad = host
        .call(
            "everything",
            "get-sum",
            args(json!({"a": "x"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert!(
        bad.is_error && bad.result["isError"] == json!(true),
        "{:?}",
        bad.result
    );

    // A stdio server's stderr lands in its log.
    host.shutdown();
    assert!(logs.path().join("everything.log").exists());
}

#[tokio::test]
async fn filesystem_reads_a_file_in_its_folder() {
    let logs = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    std::fs::write(dir_path.join("note.txt"), "hello from outpost").unwrap();
    let conn = open("fs", &filesystem(&dir_path), &connect_options(logs.path())).await;
    let tools = conn.list_tools(START).await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "read_text_file"),
        "{tools:?}"
    );
    let out = conn
        .call(
            "read_text_file",
            args(json!({"path": dir_path.join("note.txt")})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert!(!out.is_error, "{:?}", out.result);
    assert!(
        out.result["text"]
            .as_str()
            .unwrap()
            .contains("hello from outpost")
    );
}

#[tokio::test]
async fn memory_stores_and_reads_back_an_entity() {
    let logs = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let conn = open("memory", &memory(&file), &connect_options(logs.path())).await;
    let tools = conn.list_tools(START).await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "create_entities"),
        "{tools:?}"
    );
    let created = conn
        .call(
            "create_entities",
            args(json!({"entities": [{"name": "Outpost", "entityType": "app", "observations": ["hosts MCP servers"]}]})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert!(!created.is_error, "{:?}", created.result);
    let graph = conn
        .call("read_graph", None, CallOptions::with_timeout(CALL))
        .await
        .unwrap();
    assert!(
        graph.result["text"]
            .as_str()
            .unwrap()
            .contains("hosts MCP servers"),
        "{:?}",
        graph.result
    );
    assert!(std::fs::read_to_string(&file).unwrap().contains("Outpost"));
}

#[tokio::test]
async fn time_server_from_pypi_answers() {
    let logs = tempfile::tempdir().unwrap();
    let conn = open("time", &time_server(), &connect_options(logs.path())).await;
    let tools = conn.list_tools(START).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"get_current_time") && names.contains(&"convert_time"),
        "{names:?}"
    );
    let out = conn
        .call(
            "get_current_time",
            args(json!({"timezone": "UTC"})),
            CallOptions::with_timeout(CALL),
        )
        .await
        .unwrap();
    assert!(!out.is_error, "{:?}", out.result);
    assert!(
        out.result["text"]
            .as_str()
            .unwrap()
            .contains("\"timezone\": \"UTC\""),
        "{:?}",
        out.result
    );
}

#[tokio::test]
async fn everything_over_streamable_http_on_loopback() {
    let (_child, url) = everything_http().await;
    let logs = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::http(url);
    if let outpost_mcp::Transport::Http { headers, .. } = &mut config.transport {
        headers.insert(
            "X-Outpost-Test".into(),
            outpost_mcp::ConfigValue::Plain("1".into()),
        );
    }
    let host = host(logs.path(), vec![], None);
    host.start("web", config).unwrap();
    host.wait_running("web", START).await.unwrap();
    assert!(
        host.snapshot()["web"]
            .tools
            .iter()
            .any(|t| t.name == "echo")
    );
    assert_eq!(host.snapshot()["web"].pid, None);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut opts = CallOptions::with_timeout(CALL);
    opts.progress = Some(tx);
    let out = host
        .call(
            "web",
            "trigger-long-running-operation",
            args(json!({"duration": 0.4, "steps": 2})),
            opts,
        )
        .await
        .unwrap();
    assert!(out.result["text"].as_str().unwrap().contains("completed"));
    let mut seen = 0;
    while rx.try_recv().is_ok() {
        seen += 1;
    }
    assert_eq!(seen, 2, "progress over HTTP");
    host.shutdown();
}

#[tokio::test]
async fn a_stdio_server_sees_only_safe_variables_and_its_own() {
    let logs = tempfile::tempdir().unwrap();
    let mut config = everything();
    if let outpost_mcp::Transport::Stdio { env, .. } = &mut config.transport {
        env.insert(
            "OUTPOST_TEST_VALUE".into(),
            outpost_mcp::ConfigValue::Plain("42".into()),
        );
    }
    let conn = open("ev", &config, &connect_options(logs.path())).await;
    let out = conn
        .call("get-env", None, CallOptions::with_timeout(CALL))
        .await
        .unwrap();
    let text = out.result["text"].as_str().unwrap();
    assert!(
        text.contains("OUTPOST_TEST_VALUE") && text.contains("\"42\""),
        "{text}"
    );
    assert!(text.contains("\"PATH\""), "{text}");
    // cargo sets this for the test process; the server must not inherit it.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    assert!(!text.contains("CARGO_MANIFEST_DIR"), "{text}");
}
