//! A real OAuth setup for the sign-in tests: oidc-provider (a certified OpenID/OAuth
//! server, with dynamic registration and PKCE) in front of an MCP server on the official
//! TypeScript SDK's bearer-auth support (tests/mcp/oauth), and a browser program that logs
//! in through Debian's Chromium.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context as _, ensure};

/// oidc-provider and the TypeScript SDK's bearer-auth MCP server (tests/mcp/oauth) on
/// loopback, and a browser program for `OUTPOST_BROWSER` that runs Chromium through them.
#[derive(Debug)]
pub struct OAuthServers {
    children: Vec<Child>,
    /// The MCP server's URL (Streamable HTTP, bearer tokens required).
    pub mcp_url: String,
    /// A program that opens a URL the way a user would (`OUTPOST_BROWSER`).
    pub browser: PathBuf,
}

impl OAuthServers {
    /// Starts both servers on loopback ports of their own (in the calling thread's
    /// network namespace) and writes the browser program into `dir`.
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/oauth");
        let port = || -> anyhow::Result<u16> {
            Ok(std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port())
        };
        let (as_port, rs_port) = (port()?, port()?);
        let mcp_url = format!("http://127.0.0.1:{rs_port}/mcp");
        let mut me = Self {
            children: Vec::new(),
            mcp_url: mcp_url.clone(),
            browser: dir.join("browser.sh"),
        };
        for (script, env) in [
            (
                "as.mjs",
                vec![
                    ("AS_PORT", as_port.to_string()),
                    ("RESOURCE", mcp_url.clone()),
                ],
            ),
            (
                "rs.mjs",
                vec![
                    ("RS_PORT", rs_port.to_string()),
                    ("AS_URL", format!("http://127.0.0.1:{as_port}")),
                ],
            ),
        ] {
            let mut cmd = Command::new("node");
            cmd.arg(scripts.join(script))
                .current_dir(&scripts)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            for (k, v) in env {
                cmd.env(k, v);
            }
            let mut child = cmd.spawn().with_context(|| format!("node {script}"))?;
            let mut line = String::new();
            let mut out = BufReader::new(child.stdout.take().context("stdout")?);
            out.read_line(&mut line)?;
            // Read on (each request is a line), so its writes never meet a closed pipe.
            std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
            me.children.push(child);
            ensure!(
                line.starts_with("ready"),
                "{script} did not start: {line:?}"
            );
        }
        std::fs::write(
            &me.browser,
            format!(
                "#!/bin/sh\nexec node {:?} \"$1\" >/dev/null 2>&1\n",
                scripts.join("browser.mjs")
            ),
        )?;
        std::fs::set_permissions(
            &me.browser,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )?;
        Ok(me)
    }
}

impl Drop for OAuthServers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
