//! What became of each kind of network path a connection could take (UDP, TCP, TURN over
//! UDP, TCP and TLS), for telling a user why nothing got through: which servers each was
//! tried against and what happened. Built from the connection's ICE statistics, the TURN
//! servers it was given and the tunnel's stream failures; the judgement is plain logic
//! over those facts ([`judge`]), tested without a connection.

use crate::ice::PathKind;
use crate::turn_tunnel::TunnelFailure;

/// One kind of path and how it fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAttempt {
    /// Which.
    pub kind: PathKind,
    /// The server addresses it was tried against (`host:port`, comma-separated).
    pub target: String,
    /// Whether a connectivity check over it succeeded.
    pub worked: bool,
    /// What happened, for people: `connected`, `no answer to 12 checks`, the reason a
    /// TURN stream failed...
    pub outcome: String,
}

impl std::fmt::Display for PathAttempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} to {}: {}", self.kind, self.target, self.outcome)
    }
}

/// A local candidate: its id and the path kind it stands for.
#[derive(Debug, Clone)]
pub(crate) struct Local {
    pub id: String,
    pub kind: PathKind,
}

/// A candidate pair's checks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pair {
    pub local_id: String,
    pub succeeded: bool,
    pub requests: u64,
}

/// Everything [`judge`] looks at.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    pub locals: Vec<Local>,
    pub pairs: Vec<Pair>,
    /// The other side's direct candidates, `host:port`, over UDP and over TCP (passive).
    pub remote_udp: Vec<String>,
    pub remote_tcp: Vec<String>,
    /// TURN servers by kind (`host:port`).
    pub turn: Vec<(PathKind, String)>,
    pub failures: Vec<TunnelFailure>,
}

/// How each kind of path the connection had fared, in libwebrtc's order of preference;
/// kinds with nothing to try (no candidate or server of that kind) are left out.
pub(crate) fn judge(f: &Facts) -> Vec<PathAttempt> {
    let kinds = [
        PathKind::Udp,
        PathKind::Tcp,
        PathKind::TurnUdp,
        PathKind::TurnTcp,
        PathKind::TurnTls,
    ];
    let mut out = Vec::new();
    for kind in kinds {
        let targets: Vec<String> = match kind {
            PathKind::Udp => f.remote_udp.clone(),
            PathKind::Tcp => f.remote_tcp.clone(),
            _ => f
                .turn
                .iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, t)| t.clone())
                .collect(),
        };
        if targets.is_empty() {
            continue;
        }
        let mut targets = targets;
        targets.sort();
        targets.dedup();
        let locals: Vec<&str> = f
            .locals
            .iter()
            .filter(|l| l.kind == kind)
            .map(|l| l.id.as_str())
            .collect();
        let pairs: Vec<&Pair> = f
            .pairs
            .iter()
            .filter(|p| locals.contains(&p.local_id.as_str()))
            .collect();
        let worked = pairs.iter().any(|p| p.succeeded);
        let requests: u64 = pairs.iter().map(|p| p.requests).sum();
        let failure = f
            .failures
            .iter()
            .rev()
            .find(|x| x.kind == kind && targets.contains(&x.server));
        let outcome = if worked {
            "connected".to_owned()
        } else if let (Some(failure), true) = (failure, locals.is_empty()) {
            failure.reason.clone()
        } else if locals.is_empty() {
            match kind {
                PathKind::Udp => "no local UDP address".to_owned(),
                PathKind::Tcp => "no local TCP address".to_owned(),
                _ => "the TURN server gave no relay (no answer, or it refused)".to_owned(),
            }
        } else if pairs.is_empty() {
            "not checked (nothing to pair it with)".to_owned()
        } else if requests == 0 {
            "no answer to connectivity checks".to_owned()
        } else {
            format!("no answer to {requests} connectivity checks")
        };
        out.push(PathAttempt {
            kind,
            target: targets.join(", "),
            worked,
            outcome,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(id: &str, kind: PathKind) -> Local {
        Local {
            id: id.into(),
            kind,
        }
    }

    #[test]
    fn every_kind_says_what_happened() {
        let f = Facts {
            locals: vec![
                local("u", PathKind::Udp),
                local("t", PathKind::Tcp),
                local("r", PathKind::TurnUdp),
            ],
            pairs: vec![
                Pair {
                    local_id: "u".into(),
                    succeeded: false,
                    requests: 7,
                },
                Pair {
                    local_id: "u".into(),
                    succeeded: false,
                    requests: 5,
                },
                Pair {
                    local_id: "t".into(),
                    succeeded: true,
                    requests: 1,
                },
            ],
            remote_udp: vec!["10.0.0.1:7882".into()],
            remote_tcp: vec!["10.0.0.1:7881".into(), "10.0.0.1:7881".into()],
            turn: vec![
                (PathKind::TurnUdp, "10.0.0.1:3478".into()),
                (PathKind::TurnTls, "turn.example:443".into()),
            ],
            failures: vec![TunnelFailure {
                kind: PathKind::TurnTls,
                server: "turn.example:443".into(),
                reason: "the server's certificate was refused: its certificate has expired".into(),
            }],
        };
        let got: Vec<String> = judge(&f).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "UDP to 10.0.0.1:7882: no answer to 12 connectivity checks",
                "TCP to 10.0.0.1:7881: connected",
                "TURN/UDP to 10.0.0.1:3478: not checked (nothing to pair it with)",
                "TURN/TLS to turn.example:443: the server's certificate was refused: its certificate has expired",
            ]
        );
        assert!(judge(&f)[1].worked);
        // Nothing offered, nothing to say.
        assert!(judge(&Facts::default()).is_empty());
        // A TURN server that never gave a relay.
        let f = Facts {
            turn: vec![(PathKind::TurnUdp, "10.0.0.1:3478".into())],
            ..Facts::default()
        };
        assert!(judge(&f)[0].outcome.contains("gave no relay"));
    }
}
