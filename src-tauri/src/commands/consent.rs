//! `consent_*`: answers to permission questions and remembered decisions.

use outpost_desktop::Desktop;
use outpost_desktop::contract::{Decision, RememberedDecision};
use tauri::State;

use crate::error::{CmdResult, err};

/// Answers an open question.
#[tauri::command]
pub fn consent_answer(
    desktop: State<'_, Desktop>,
    consent_id: String,
    decision: Decision,
) -> CmdResult<()> {
    desktop.answer_consent(&consent_id, decision).map_err(err)
}

/// The remembered "always" answers.
#[tauri::command]
pub fn consent_list_remembered(desktop: State<'_, Desktop>) -> Vec<RememberedDecision> {
    desktop.remembered()
}

/// Forgets one remembered answer.
#[tauri::command]
pub fn consent_revoke(desktop: State<'_, Desktop>, id: String) -> CmdResult<()> {
    desktop.revoke(&id).map_err(err)
}
