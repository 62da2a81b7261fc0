//! The `outpost-room` binary: `serve` runs the room server, `token` mints join tokens.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use outpost_room::{Config, Keys, Server};

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
        /// API key pair; defaults to the dev pair devkey:secret.
        #[arg(long, value_name = "KEY:SECRET")]
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
        #[arg(long, value_name = "KEY:SECRET")]
        keys: Option<Keys>,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Token {
            room,
            identity,
            name,
            ttl,
            keys,
        } => {
            let keys = keys.unwrap_or_default();
            let token = keys.mint(&room, &identity, name.as_deref(), ttl)?;
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
        } => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                        "info,webrtc=warn,rtc=warn,rtc_dtls=error,rtc_ice=error,rtc_sctp=error"
                            .into()
                    }),
                )
                .with_writer(std::io::stderr)
                .init();
            let rt = tokio::runtime::Runtime::new().context("starting tokio")?;
            rt.block_on(serve(
                bind,
                keys,
                empty_timeout,
                ping_interval,
                ping_timeout,
                udp_ip,
            ))
        }
    }
}

async fn serve(
    bind: SocketAddr,
    keys: Option<Keys>,
    empty_timeout: Duration,
    ping_interval: Duration,
    ping_timeout: Duration,
    udp_ip: Option<std::net::IpAddr>,
) -> anyhow::Result<()> {
    let dev = keys.is_none();
    let mut config = Config {
        keys: keys.unwrap_or_default(),
        empty_timeout,
        ping_interval,
        ping_timeout,
        ..Config::default()
    };
    if let Some(ip) = udp_ip {
        config.wire.udp_ip = ip;
    }
    let key = config.keys.key.clone();
    let secret = config.keys.secret.clone();
    let server = Server::bind(bind, config).await?;
    #[allow(clippy::print_stdout)]
    {
        println!("outpost-room listening on {}", server.url());
        if dev {
            println!("dev keys: API key {key}, secret {secret} (use --keys KEY:SECRET to change)");
        } else {
            println!("API key {key}");
        }
        println!("for offline use and tests; production uses LiveKit Cloud or livekit-server");
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for ctrl-c")?,
        _ = term.recv() => {}
    }
    let left = server.shutdown().await;
    tracing::info!(?left, "bye");
    Ok(())
}
