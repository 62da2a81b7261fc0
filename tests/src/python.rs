//! The Python venvs: the official LiveKit SDK (`pip install livekit livekit-api
//! msgpack`), located by `OUTPOST_PYTHON` or `<workspace>/.venv/bin/python`; and the real
//! LiveKit Agents framework (`.venv-agents`, see [`agents_python`]).

use std::path::PathBuf;
use std::process::Command;

use anyhow::bail;

/// The workspace root (parent of the `tests` package).
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}

/// Directory of the Python interop scripts.
pub fn scripts_dir() -> PathBuf {
    workspace_root().join("tests").join("py")
}

/// The venv's python, checked to import `livekit.rtc` and `livekit.api`.
pub fn python() -> anyhow::Result<PathBuf> {
    let py = std::env::var_os("OUTPOST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    let advice = "set up the venv: python3 -m venv .venv && .venv/bin/pip install livekit livekit-api msgpack \
                  (or point OUTPOST_PYTHON at a python that has them)";
    if !py.exists() {
        bail!("no Python at {}; {advice}", py.display());
    }
    let ok = Command::new(&py)
        .args(["-c", "import livekit.rtc, livekit.api"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        bail!(
            "{} cannot import livekit.rtc / livekit.api; {advice}",
            py.display()
        );
    }
    Ok(py)
}

/// The venv's python with the real LiveKit Agents framework (`livekit-agents`, from
/// `tests/py/agents-requirements.txt`), located by `OUTPOST_AGENTS_PYTHON` or
/// `<workspace>/.venv-agents/bin/python`; checked to import `livekit.agents`.
pub fn agents_python() -> anyhow::Result<PathBuf> {
    let py = std::env::var_os("OUTPOST_AGENTS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv-agents/bin/python"));
    let advice = "set up the venv: scripts/setup.sh, or python3 -m venv .venv-agents && \
                  .venv-agents/bin/pip install -r tests/py/agents-requirements.txt \
                  (or point OUTPOST_AGENTS_PYTHON at a python that has livekit-agents)";
    if !py.exists() {
        bail!("no Python at {}; {advice}", py.display());
    }
    let ok = Command::new(&py)
        .args(["-c", "import livekit.agents, livekit.rtc"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        bail!(
            "{} cannot import livekit.agents / livekit.rtc; {advice}",
            py.display()
        );
    }
    Ok(py)
}
