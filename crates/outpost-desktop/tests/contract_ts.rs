//! `ui/src/lib/generated/contract.ts` is what the contract types declare (ts-rs): this test
//! fails when it is stale. `OUTPOST_WRITE_CONTRACT=1 cargo test -p outpost-desktop --test
//! contract_ts` writes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

#[test]
fn the_generated_typescript_contract_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui/src/lib/generated/contract.ts");
    let want = outpost_desktop::contract::typescript();
    if std::env::var_os("OUTPOST_WRITE_CONTRACT").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: run `OUTPOST_WRITE_CONTRACT=1 cargo test -p outpost-desktop --test \
         contract_ts` and commit it",
        path.display()
    );
}

/// A closed set takes only its own spellings: a settings answer with another `authMode` or
/// folder `access` is refused when it is read (the Tauri command's argument), with the
/// accepted values named; the wire spellings are the ones stored and shown before.
#[test]
fn closed_sets_keep_their_spellings_and_refuse_others() {
    use outpost_desktop::contract::{
        AssistantState, ConnectionSettings, ElicitationAction, ExecutionMode, FolderScope,
        StatusEvent,
    };
    assert_eq!(
        serde_json::from_value::<ElicitationAction>(serde_json::json!("decline")).unwrap(),
        ElicitationAction::Decline
    );
    let err = serde_json::from_value::<ElicitationAction>(serde_json::json!("maybe")).unwrap_err();
    assert!(err.to_string().contains("accept"), "{err}");
    let connection = |mode: &str| {
        serde_json::json!({"authMode": mode, "livekitUrl": "", "tokenEndpoint": "",
                           "room": "", "identity": ""})
    };
    let ok: ConnectionSettings = serde_json::from_value(connection("endpoint")).unwrap();
    assert_eq!(
        serde_json::to_value(&ok).unwrap()["authMode"],
        serde_json::json!("endpoint")
    );
    let err = serde_json::from_value::<ConnectionSettings>(connection("password")).unwrap_err();
    assert!(err.to_string().contains("token"), "{err}");
    let err =
        serde_json::from_value::<FolderScope>(serde_json::json!({"path": "/x", "access": "maybe"}))
            .unwrap_err();
    assert!(err.to_string().contains("allow"), "{err}");
    let status = StatusEvent {
        state: AssistantState::UsingTool,
        tool_use_id: None,
        detail: None,
    };
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        serde_json::json!({"state": "using_tool"})
    );
    assert_eq!(
        serde_json::to_value(ExecutionMode::Either).unwrap(),
        serde_json::json!("either")
    );
    let err = serde_json::from_value::<StatusEvent>(serde_json::json!({"state": "dreaming"}))
        .unwrap_err();
    assert!(err.to_string().contains("using_tool"), "{err}");
}
