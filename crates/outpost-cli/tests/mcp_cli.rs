//! `outpost mcp add|list|remove|tools` as a user runs them: real process, a throw-away
//! config and data directory, secrets in memory (never the machine's keyring).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Dirs {
    config: tempfile::TempDir,
    data: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Self {
        Self {
            config: tempfile::tempdir().unwrap(),
            data: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_outpost"))
            .arg("mcp")
            .args(args)
            .env("OUTPOST_CONFIG_DIR", self.config.path())
            .env("OUTPOST_DATA_DIR", self.data.path())
            .env("OUTPOST_SECRETS", "memory")
            .output()
            .unwrap()
    }

    fn file(&self) -> String {
        std::fs::read_to_string(self.config.path().join("mcp.toml")).unwrap_or_default()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn everything() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup.sh",
        p.display()
    );
    p
}

#[test]
fn add_list_remove_round_trip() {
    let d = Dirs::new();
    let js = everything().display().to_string();
    let out = d.run(&[
        "add",
        "ev",
        "--plain-env",
        "LOG_LEVEL=debug",
        "--cwd",
        "/tmp",
        "--",
        "node",
        &js,
        "stdio",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("added MCP server 'ev'"));
    let file = d.file();
    assert!(
        file.contains("command = \"node\"") && file.contains("LOG_LEVEL = \"debug\""),
        "{file}"
    );

    let out = d.run(&[
        "add",
        "web",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--plain-header",
        "X-Trace=1",
        "--disabled",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = d.run(&["list"]);
    assert!(out.status.success());
    let listing = text(&out.stdout);
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 2, "{listing}");
    assert_eq!(
        lines[0],
        format!("ev\tenabled\tstdio\tsandboxed\tnode {js} stdio")
    );
    assert_eq!(
        lines[1],
        "web\tdisabled\thttp\tremote\thttp://127.0.0.1:9/mcp"
    );

    // The same name twice, a bad name, a bad URL, nothing to run: invalid input (2).
    for args in [
        vec!["add", "ev", "--", "node"],
        vec!["add", "a__b", "--", "node"],
        vec!["add", "x", "--url", "ftp://h/"],
        vec!["add", "x"],
        vec!["add", "x", "--env", "NOEQUALS", "--", "node"],
        vec!["add", "x", "--plain-env", "NOEQUALS", "--", "node"],
        vec![
            "add",
            "x",
            "--env",
            "A=1",
            "--plain-env",
            "A=2",
            "--",
            "node",
        ],
    ] {
        let out = d.run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }

    let out = d.run(&["remove", "ev"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!d.file().contains("[servers.ev]"));
    let out = d.run(&["remove", "ev"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no MCP server named 'ev'"));
}

#[test]
fn values_are_never_written_without_plain() {
    let d = Dirs::new();
    // Whatever the name: an innocent-looking one too.
    for var in ["GITHUB_TOKEN=ghp_supersecret", "GH_PAT=ghp_supersecret"] {
        let out = d.run(&["add", "gh", "--env", var, "--", "node", "x.js"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        let name = var.split('=').next().unwrap();
        assert!(
            err.contains(&format!("the value of {name} goes to the keyring"))
                && err.contains("--plain-env"),
            "{err}"
        );
        assert!(!err.contains("ghp_supersecret"));
        assert!(!d.file().contains("ghp_supersecret"), "nothing was written");
        assert!(!d.file().contains("[servers.gh]"));
    }

    let out = d.run(&[
        "add",
        "web",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--header",
        "Authorization=Bearer abc",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!d.file().contains("Bearer abc"));

    let out = d.run(&[
        "add",
        "gh",
        "--plain",
        "--env",
        "GITHUB_TOKEN=ghp_supersecret",
        "--",
        "node",
        "x.js",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("plain text"));
    assert!(d.file().contains("GITHUB_TOKEN = \"ghp_supersecret\""));
    // `list` never prints values.
    assert!(!text(&d.run(&["list"]).stdout).contains("ghp_supersecret"));
}

/// Issue 28: a stdio server's sandbox set with `add` and `sandbox`, written to mcp.toml,
/// and what it may touch printed; an HTTP server has none; bad values are invalid input.
#[test]
fn sandbox_settings_are_set_and_shown() {
    let d = Dirs::new();
    let js = everything().display().to_string();
    let refs = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let refs_path = refs.path().canonicalize().unwrap().display().to_string();
    let out_path = out_dir.path().canonicalize().unwrap().display().to_string();
    let out = d.run(&[
        "add",
        "ev",
        "--network",
        "on",
        "--folders",
        "read",
        "--read",
        &refs_path,
        "--",
        "node",
        &js,
        "stdio",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = d.file();
    for line in [
        "network = true".to_owned(),
        "folders = \"read\"".to_owned(),
        format!("read = [\"{refs_path}\"]"),
    ] {
        assert!(file.contains(&line), "{line} not in:\n{file}");
    }
    let listing = text(&d.run(&["list"]).stdout);
    assert!(listing.contains("\tsandboxed+network\t"), "{listing}");
    let out = d.run(&["sandbox", "ev", "--network", "off", "--write", &out_path]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    if shown.starts_with("sandboxed") {
        assert!(shown.contains("no network"), "{shown}");
        assert!(
            shown.contains(&format!("read-write\t{out_path}\twrite in mcp.toml")),
            "{shown}"
        );
        assert!(
            shown.contains(&format!("read\t{refs_path}\tread in mcp.toml")),
            "{shown}"
        );
        // The server's own program: the reference servers' node_modules.
        assert!(shown.contains("node_modules\tthe program"), "{shown}");
        assert!(shown.contains("network\toff in mcp.toml"), "{shown}");
    } else {
        // A kernel without Landlock: not started until the user agrees.
        assert!(shown.contains("Landlock"), "{shown}");
    }
    assert!(d.file().contains("network = false"));
    // Still confirmed: changed through Outpost.
    let listing = text(&d.run(&["list"]).stderr);
    assert!(!listing.contains("outside Outpost"), "{listing}");
    for args in [
        vec!["sandbox", "ev", "--network", "maybe"],
        vec!["sandbox", "ev", "--read", "relative/x"],
        vec!["sandbox", "nosuch"],
        vec![
            "add",
            "web",
            "--url",
            "http://127.0.0.1:9/",
            "--network",
            "on",
        ],
    ] {
        let out = d.run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = d.run(&["sandbox", "ev", "--clear-paths", "--sandbox", "off"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("NOT sandboxed"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
    let file = d.file();
    assert!(
        file.contains("sandbox = \"off\"") && !file.contains("write ="),
        "{file}"
    );
}

#[test]
fn tools_lists_each_server_and_reports_the_one_that_fails() {
    let d = Dirs::new();
    let js = everything().display().to_string();
    assert!(
        d.run(&["add", "ev", "--", "node", &js, "stdio"])
            .status
            .success()
    );
    assert!(
        d.run(&[
            "add",
            "broken",
            "--",
            "sh",
            "-c",
            "echo 'no config found' >&2; exit 4"
        ])
        .status
        .success()
    );
    assert!(
        d.run(&["add", "off", "--disabled", "--", "sh", "-c", "exit 5"])
            .status
            .success()
    );

    let out = d.run(&["tools"]);
    assert_eq!(out.status.code(), Some(1), "a server failed");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(stdout.starts_with("[ev]\n"), "{stdout}");
    let echo = stdout.lines().find(|l| l.starts_with("mcp__ev__echo\t"));
    assert_eq!(echo.map(|l| l.split('\t').count()), Some(2), "{stdout}");
    assert!(stdout.contains("mcp__ev__get-sum\t"), "{stdout}");
    assert!(
        !stdout.contains("[broken]") && !stdout.contains("[off]"),
        "{stdout}"
    );
    assert!(
        stderr.contains("MCP server 'broken' could not start")
            && stderr.contains("exited with status 4")
            && stderr.contains("no config found"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("'off'"),
        "disabled servers are not started: {stderr}"
    );
    assert!(d.data.path().join("mcp-logs/ev.log").exists());

    let out = d.run(&["tools", "ev"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("[ev]\nmcp__ev__"));

    let out = d.run(&["tools", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Without a reachable Secret Service (a D-Bus address that leads nowhere), `add` refuses to
/// write a secret-looking value and says why; nothing reaches the file.
#[cfg(target_os = "linux")]
#[test]
fn no_keyring_means_a_clear_refusal() {
    let d = Dirs::new();
    let out = Command::new(env!("CARGO_BIN_EXE_outpost"))
        .args(["mcp", "add", "x", "--env", "API_KEY=k-123", "--", "node"])
        .env("OUTPOST_CONFIG_DIR", d.config.path())
        .env_remove("OUTPOST_SECRETS")
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/outpost-test-bus",
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("the value of API_KEY cannot be stored in the keyring"),
        "{err}"
    );
    assert!(
        err.contains("keyring is not available") && err.contains("--plain"),
        "{err}"
    );
    assert!(!err.contains("k-123"));
    assert!(d.file().is_empty(), "nothing was written");
}

/// The venv's Python with the official MCP SDK (`OUTPOST_PYTHON`, else the workspace's
/// `.venv`).
fn python() -> PathBuf {
    let p = std::env::var_os("OUTPOST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup.sh",
        p.display()
    );
    p
}

/// Issue 30, finding 11: an MCP server's tool description carries terminal escapes (an
/// OSC 52 clipboard write, a screen clear, a carriage return forging a status line, an
/// OSC 8 link, an 8-bit CSI); `outpost mcp tools` prints none of them raw.
#[test]
fn tool_descriptions_reach_the_terminal_without_escapes() {
    let d = Dirs::new();
    let server =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/hostile_text_server.py");
    let py = python().display().to_string();
    let script = server.display().to_string();
    assert!(d.run(&["add", "evil", "--", &py, &script]).status.success());
    let out = d.run(&["tools", "evil"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("mcp__evil__add\tAdds numbers."), "{stdout}");
    for bad in ["\u{1b}", "\u{7}", "\r", "\u{9b}"] {
        assert!(!stdout.contains(bad), "{bad:?} reached stdout: {stdout:?}");
    }
    assert!(
        stdout.contains("␛]52;c;ZXZpbA==␇"),
        "shown, not obeyed: {stdout:?}"
    );
}
