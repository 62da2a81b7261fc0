//! The command line of `outpost-room`: `serve` runs the room server, `token` mints
//! join tokens. Lives in the library so test harnesses can run the very same CLI.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::{Config, Keys, Server, TlsIdentity};
use clap::{Parser, Subcommand};

/// The environment variable `--keys` is also read from (`KEY:SECRET`).
pub const KEYS_ENV: &str = "OUTPOST_ROOM_KEYS";

/// LiveKit-compatible local room server for data (offline use and tests; production
/// uses LiveKit Cloud or livekit-server).
#[derive(Debug, Parser)]
#[command(name = "outpost-room", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the room server.
    Serve {
        /// Address to listen on (WebSocket signaling; WebRTC binds UDP on the same IP).
        #[arg(long, default_value = "127.0.0.1:7880")]
        bind: SocketAddr,
        /// API key pair; defaults to the dev pair devkey:secret. The environment keeps a
        /// secret out of process lists.
        #[arg(long, value_name = "KEY:SECRET", env = KEYS_ENV, hide_env_values = true)]
        keys: Option<Keys>,
        /// How long an empty room lives after its last participant left.
        #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
        empty_timeout: Duration,
        /// Client ping interval (whole seconds).
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        ping_interval: Duration,
        /// Silence after which a participant is removed (whole seconds).
        #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
        ping_timeout: Duration,
        /// IP for WebRTC host candidates when --bind is 0.0.0.0 (default: every
        /// non-loopback interface).
        #[arg(long)]
        udp_ip: Option<std::net::IpAddr>,
        /// Let clients resume a session (reconnect=1) this long after their signaling
        /// connection dropped; 0s (default) turns resume off and clients rejoin.
        #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
        resume_window: Duration,
        /// Make the subscriber peer connection primary (server offers it, data to
        /// clients goes over it), as livekit-server does.
        #[arg(long)]
        subscriber_primary: bool,
        /// Serve wss:// with this PEM certificate chain (needs --tls-key).
        #[arg(long, value_name = "PEM", requires = "tls_key")]
        tls_cert: Option<std::path::PathBuf>,
        /// PEM private key for --tls-cert.
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_key: Option<std::path::PathBuf>,
        /// Stop when standard input reaches its end: a parent that keeps the other end of
        /// a pipe open ties the server's life to its own, even if it crashes.
        #[arg(long)]
        exit_on_stdin_close: bool,
    },
    /// Print an access token that lets IDENTITY join ROOM.
    Token {
        /// Room name.
        #[arg(long)]
        room: String,
        /// Participant identity.
        #[arg(long)]
        identity: String,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
        /// Validity, e.g. 6h, 30m.
        #[arg(long, default_value = "6h", value_parser = humantime::parse_duration)]
        ttl: Duration,
        /// API key pair; defaults to the dev pair devkey:secret.
        #[arg(long, value_name = "KEY:SECRET", env = KEYS_ENV, hide_env_values = true)]
        keys: Option<Keys>,
        /// Participant kind claim: `agent` marks an assistant (others: standard, sip, …).
        #[arg(long, default_value = "")]
        kind: String,
    },
}

/// Parses the process arguments and runs the command.
pub fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Token {
            room,
            identity,
            name,
            ttl,
            keys,
            kind,
        } => {
            let keys = keys.unwrap_or_default();
            let token = keys.mint_with_kind(&room, &identity, name.as_deref(), ttl, &kind)?;
            #[allow(clippy::print_stdout)]
            {
                println!("{token}");
            }
            Ok(())
        }
        Command::Serve {
            bind,
            keys,
            empty_timeout,
            ping_interval,
            ping_timeout,
            udp_ip,
            resume_window,
            subscriber_primary,
            tls_cert,
            tls_key,
            exit_on_stdin_close,
        } => {
            let tls = match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(TlsIdentity::from_pem_files(&cert, &key)?),
                _ => None,
            };
            let dev = keys.is_none();
            let mut config = Config {
                keys: keys.unwrap_or_default(),
                empty_timeout,
                ping_interval,
                ping_timeout,
                resume_window,
                subscriber_primary,
                tls,
                ..Config::default()
            };
            if let Some(ip) = udp_ip {
                config.wire.udp_ip = ip;
            }
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                        "info,webrtc=warn,rtc=warn,rtc_dtls=error,rtc_ice=error,rtc_sctp=error"
                            .into()
                    }),
                )
                .with_writer(std::io::stderr)
                .init();
            let rt = tokio::runtime::Runtime::new().map_err(|source| Error::Io {
                what: "starting tokio".into(),
                source,
            })?;
            rt.block_on(serve(bind, config, dev, exit_on_stdin_close))
        }
    }
}

async fn serve(bind: SocketAddr, config: Config, dev: bool, stdin_tie: bool) -> Result<()> {
    let mut modes = Vec::new();
    if !config.resume_window.is_zero() {
        modes.push(format!(
            "resume window {}",
            humantime::format_duration(config.resume_window)
        ));
    }
    if config.subscriber_primary {
        modes.push("subscriber primary".to_owned());
    }
    let key = config.keys.key.clone();
    let secret = config.keys.secret.clone();
    let server = Server::bind(bind, config).await?;
    // A closed stdout must not take the server down, so write errors are ignored.
    let banner = format!(
        "outpost-room listening on {}{}\n{}\nfor offline use and tests; production uses LiveKit Cloud or livekit-server\n",
        server.url(),
        if modes.is_empty() {
            String::new()
        } else {
            format!(" ({})", modes.join(", "))
        },
        if dev {
            format!("dev keys: API key {key}, secret {secret} (use --keys KEY:SECRET to change)")
        } else {
            format!("API key {key}")
        }
    );
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(banner.as_bytes());
        let _ = out.flush();
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| Error::Io {
            what: "installing SIGTERM handler".into(),
            source,
        })?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(|source| Error::Io { what: "waiting for ctrl-c".into(), source })?,
        _ = term.recv() => {}
        () = outpost_sync::stdin_closed(), if stdin_tie => tracing::info!("standard input closed; stopping"),
    }
    let left = server.shutdown().await;
    tracing::info!(?left, "bye");
    Ok(())
}
