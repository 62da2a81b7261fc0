//! Reading the `mcpServers` block of another assistant's config file (Claude Desktop's
//! `claude_desktop_config.json`, and the files that copy its shape) into servers for
//! `mcp.toml`. Nothing is started or written here: the caller shows the result for review.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::config::{ConfigValue, ServerConfig, Transport, check_server_name, check_url};
use crate::error::{McpError, Result};

/// Largest file read (a config is a few KiB).
pub const MAX_IMPORT_BYTES: usize = 1 << 20;

/// What a file offers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Imported {
    /// Servers that can be added, by name, in the file's order; every value plain (the
    /// caller decides which go to the keyring).
    pub servers: Vec<(String, ServerConfig)>,
    /// One sentence per entry left out, naming it and why.
    pub skipped: Vec<String>,
}

/// Reads `text` as a Claude Desktop config: `{"mcpServers": {NAME: {"command", "args",
/// "env", "cwd"} | {"url", "headers", "type"?}}}`. A file that is not such an object is an
/// error; a bad entry is skipped with its reason, the others are kept.
pub fn claude_desktop(text: &str) -> Result<Imported> {
    if text.len() > MAX_IMPORT_BYTES {
        return Err(McpError::invalid(
            "import",
            format!(
                "the file is larger than {} KiB; this is not an MCP config",
                MAX_IMPORT_BYTES / 1024
            ),
        ));
    }
    let root: Value = serde_json::from_str(text)
        .map_err(|e| McpError::invalid("import", format!("the file is not JSON: {e}")))?;
    let Some(servers) = root.get("mcpServers") else {
        return Err(McpError::invalid(
            "import",
            "the file has no \"mcpServers\" object (is it claude_desktop_config.json?)",
        ));
    };
    let Some(servers) = servers.as_object() else {
        return Err(McpError::invalid(
            "import",
            "\"mcpServers\" is not an object of servers by name",
        ));
    };
    let mut out = Imported::default();
    for (name, entry) in servers {
        let shown: String = name.chars().take(64).collect();
        match one(name, entry) {
            Ok(cfg) => out.servers.push((name.clone(), cfg)),
            Err(why) => out.skipped.push(format!("'{shown}': {why}")),
        }
    }
    Ok(out)
}

fn strings(v: Option<&Value>, what: &str) -> std::result::Result<Vec<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("\"{what}\" holds something that is not a string"))
            })
            .collect(),
        Some(_) => Err(format!("\"{what}\" is not a list of strings")),
    }
}

fn values(
    v: Option<&Value>,
    what: &str,
) -> std::result::Result<BTreeMap<String, ConfigValue>, String> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                if k.is_empty() || k.contains(['=', '\0']) {
                    return Err(format!("\"{what}\" has a bad name '{k}'"));
                }
                match v {
                    Value::String(s) if !s.contains('\0') => {
                        Ok((k.clone(), ConfigValue::Plain(s.clone())))
                    }
                    _ => Err(format!("\"{what}\".{k} is not a string")),
                }
            })
            .collect(),
        Some(_) => Err(format!("\"{what}\" is not an object of strings")),
    }
}

fn one(name: &str, entry: &Value) -> std::result::Result<ServerConfig, String> {
    check_server_name(name).map_err(|e| e.to_string())?;
    let Some(obj) = entry.as_object() else {
        return Err("the entry is not an object".into());
    };
    let disabled = obj.get("disabled").and_then(Value::as_bool) == Some(true);
    let kind = obj.get("type").and_then(Value::as_str);
    let command = obj.get("command");
    let url = obj.get("url").or_else(|| obj.get("serverUrl"));
    let transport = match (command, url) {
        (Some(_), Some(_)) => return Err("it has both \"command\" and \"url\"".into()),
        (None, None) => return Err("it has neither \"command\" nor \"url\"".into()),
        (Some(c), None) => {
            let Some(command) = c.as_str().filter(|c| !c.trim().is_empty()) else {
                return Err("\"command\" is not a program name".into());
            };
            if command.contains('\0') {
                return Err("\"command\" is not a program name".into());
            }
            let cwd = match obj.get("cwd") {
                None | Some(Value::Null) => None,
                Some(Value::String(d)) if !d.is_empty() => Some(d.into()),
                Some(_) => return Err("\"cwd\" is not a folder path".into()),
            };
            Transport::Stdio {
                command: command.to_owned(),
                args: strings(obj.get("args"), "args")?,
                env: values(obj.get("env"), "env")?,
                cwd,
                // Sandboxed like any server; its needs (derived from the command, the
                // network for npx/uvx) show in the review and the server list.
                sandbox: crate::sandbox::Sandbox::default(),
            }
        }
        (None, Some(u)) => {
            if matches!(kind, Some("sse")) {
                return Err(
                    "it uses the legacy HTTP+SSE transport, which Outpost does not support".into(),
                );
            }
            let Some(url) = u.as_str() else {
                return Err("\"url\" is not a string".into());
            };
            check_url(url).map_err(|e| e.to_string())?;
            Transport::Http {
                url: url.to_owned(),
                headers: values(obj.get("headers"), "headers")?,
            }
        }
    };
    Ok(ServerConfig {
        enabled: !disabled,
        transport,
        protocol: None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_stdio_and_http_servers() {
        let text = r#"{
          "mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "github": {"command": "docker", "args": ["run", "-i"], "env": {"GITHUB_TOKEN": "t0ken"}},
            "remote": {"type": "http", "url": "https://mcp.example.invalid/mcp", "headers": {"X-A": "b"}},
            "off": {"command": "uvx", "args": ["mcp-server-time"], "disabled": true}
          },
          "globalShortcut": "Ctrl+Space"
        }"#;
        let got = claude_desktop(text).unwrap();
        assert!(got.skipped.is_empty(), "{:?}", got.skipped);
        let names: Vec<&str> = got.servers.iter().map(|(n, _)| n.as_str()).collect();
        // In the file's order.
        assert_eq!(names, ["filesystem", "github", "remote", "off"]);
        let gh = &got.servers[1].1;
        assert_eq!(gh.describe(), "docker run -i");
        match &gh.transport {
            Transport::Stdio { env, .. } => {
                assert_eq!(env["GITHUB_TOKEN"], ConfigValue::Plain("t0ken".into()));
            }
            Transport::Http { .. } => panic!("stdio expected"),
        }
        assert_eq!(
            got.servers[2].1.describe(),
            "https://mcp.example.invalid/mcp"
        );
        assert!(got.servers[2].1.enabled);
        assert!(!got.servers[3].1.enabled);
    }

    #[test]
    fn a_bad_file_is_an_error() {
        for (text, says) in [
            ("", "not JSON"),
            ("{", "not JSON"),
            ("[]", "no \"mcpServers\""),
            ("{\"servers\": {}}", "no \"mcpServers\""),
            ("{\"mcpServers\": []}", "not an object"),
            ("{\"mcpServers\": \"x\"}", "not an object"),
        ] {
            let e = claude_desktop(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let huge = format!(
            "{{\"mcpServers\": {{}}, \"x\": \"{}\"}}",
            "a".repeat(MAX_IMPORT_BYTES)
        );
        assert!(
            claude_desktop(&huge)
                .unwrap_err()
                .to_string()
                .contains("larger")
        );
    }

    #[test]
    fn bad_entries_are_skipped_with_their_reason() {
        let text = r#"{"mcpServers": {
            "ok": {"command": "node", "args": ["srv.js"]},
            "bad name!": {"command": "x"},
            "a__b": {"command": "x"},
            "notobj": 5,
            "both": {"command": "x", "url": "https://h.invalid/"},
            "neither": {"args": []},
            "emptycmd": {"command": "  "},
            "numargs": {"command": "x", "args": [1]},
            "argsstr": {"command": "x", "args": "a b"},
            "envnum": {"command": "x", "env": {"A": 1}},
            "envlist": {"command": "x", "env": ["A=1"]},
            "badcwd": {"command": "x", "cwd": 3},
            "ftp": {"url": "ftp://h.invalid/"},
            "rel": {"url": "/mcp"},
            "sse": {"type": "sse", "url": "https://h.invalid/sse"},
            "hdr": {"url": "https://h.invalid/", "headers": {"A": null}}
        }}"#;
        let got = claude_desktop(text).unwrap();
        assert_eq!(got.servers.len(), 1);
        assert_eq!(got.servers[0].0, "ok");
        let all = got.skipped.join("\n");
        for (name, why) in [
            ("bad name!", "may only contain"),
            ("a__b", "'__'"),
            ("notobj", "not an object"),
            ("both", "both"),
            ("neither", "neither"),
            ("emptycmd", "not a program"),
            ("numargs", "not a string"),
            ("argsstr", "not a list"),
            ("envnum", "env\".A is not a string"),
            ("envlist", "not an object of strings"),
            ("badcwd", "cwd"),
            ("ftp", "scheme"),
            ("rel", "url"),
            ("sse", "legacy"),
            ("hdr", "headers\".A"),
        ] {
            assert!(
                got.skipped
                    .iter()
                    .any(|s| s.starts_with(&format!("'{name}'")) && s.contains(why)),
                "{name}: {why} not in\n{all}"
            );
        }
        assert_eq!(got.skipped.len(), 15);
    }
}
