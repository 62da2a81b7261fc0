//! `outpost-tls`: whom Outpost's TLS clients trust, in one place. The `wss://` signal
//! connection, token endpoints and TURN over TLS all verify servers with
//! [`client_config`]: the operating system's certificate store (through
//! `rustls-platform-verifier`; on Linux the distribution's bundle, which
//! `update-ca-certificates` maintains) plus the CA certificates a user added for a
//! server. A store that cannot be read falls back to the webpki (Mozilla) roots, so a
//! minimal container still reaches public servers.
//!
//! Each call builds a fresh verifier, which reads the store again: a CA added to or
//! removed from the system is seen by the next connection, without a restart.
//! [`explain`] turns a refused certificate into one sentence for the user.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use rustls::{CertificateError, ClientConfig};

pub use rustls;

/// A trust setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Added CA certificates that are not PEM certificates.
    #[error("trusted CA certificates: {0}")]
    BadCertificate(String),
    /// rustls refused the configuration.
    #[error("TLS setup: {0}")]
    Setup(String),
}

/// The CERTIFICATE blocks of `pems` (each a PEM text with one or more certificates).
/// Empty input gives an empty list; text without a certificate is an error.
pub fn parse_pems(pems: &[String]) -> Result<Vec<CertificateDer<'static>>, Error> {
    let mut out = Vec::new();
    for pem in pems {
        let before = out.len();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            out.push(
                cert.map_err(|e| Error::BadCertificate(format!("not a PEM certificate: {e}")))?,
            );
        }
        if out.len() == before {
            return Err(Error::BadCertificate("no CERTIFICATE block found".into()));
        }
    }
    Ok(out)
}

/// A client configuration trusting the system's certificate store plus `extra_pem` (CA
/// certificates in PEM), with ring and the safe default protocol versions.
pub fn client_config(extra_pem: &[String]) -> Result<Arc<ClientConfig>, Error> {
    let extra = parse_pems(extra_pem)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Setup(e.to_string()))?;
    let config = match rustls_platform_verifier::Verifier::new_with_extra_roots(
        extra.iter().cloned(),
        provider,
    ) {
        Ok(verifier) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth(),
        Err(e) => {
            // No readable system store (a bare container): the webpki roots keep
            // public servers reachable.
            tracing::warn!(
                "the system's certificate store is unusable ({e}); using the webpki roots"
            );
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for cert in extra {
                roots
                    .add(cert)
                    .map_err(|e| Error::BadCertificate(format!("unusable CA certificate: {e}")))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    Ok(Arc::new(config))
}

/// One sentence for a TLS failure found anywhere in `err`'s chain of sources (an
/// `io::Error` from a TLS stream, an HTTP client's error); `None` when none of it is a
/// rustls error.
pub fn explain(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(sentence(tls));
        }
        // `io::Error::source` skips the error it wraps; look inside.
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            if let Some(found) = explain(inner) {
                return Some(found);
            }
        }
        cur = e.source();
    }
    // Some clients keep only the text of the error they wrapped.
    let text = err.to_string();
    let mut cur = err.source();
    let mut all = text;
    while let Some(e) = cur {
        all.push_str(": ");
        all.push_str(&e.to_string());
        cur = e.source();
    }
    let cert = |c| Some(sentence(&rustls::Error::InvalidCertificate(c)));
    if all.contains("invalid peer certificate: UnknownIssuer") {
        return cert(CertificateError::UnknownIssuer);
    }
    if all.contains("invalid peer certificate: Expired") {
        return cert(CertificateError::Expired);
    }
    if all.contains("invalid peer certificate: NotValidForName") {
        return cert(CertificateError::NotValidForName);
    }
    None
}

/// The sentence for one rustls error.
pub fn sentence(err: &rustls::Error) -> String {
    let why = match err {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => {
                "its certificate is not issued by an authority this system trusts (add the CA to \
                 the system's certificate store, e.g. with update-ca-certificates, or to the \
                 trusted CAs for this server)"
                    .to_owned()
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "its certificate has expired".to_owned()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "its certificate is not valid yet (is this computer's clock right?)".to_owned()
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "its certificate is for another name".to_owned()
            }
            CertificateError::Revoked => "its certificate has been revoked".to_owned(),
            other => format!("its certificate is invalid ({other:?})"),
        },
        other => format!("the TLS handshake failed ({other})"),
    };
    format!("the server's certificate was refused: {why}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ca_pem() -> String {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn pems_parse_and_garbage_is_refused() {
        assert!(parse_pems(&[]).unwrap().is_empty());
        let two = format!("{}{}", ca_pem(), ca_pem());
        assert_eq!(parse_pems(&[two]).unwrap().len(), 2);
        assert!(parse_pems(&["not pem".into()]).is_err());
        let e = client_config(&[
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("trusted CA certificates"), "{e}");
        client_config(&[ca_pem()]).unwrap();
        client_config(&[]).unwrap();
    }

    #[test]
    fn refused_certificates_get_one_sentence() {
        let unknown = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, unknown);
        let s = explain(&io).unwrap();
        assert!(
            s.starts_with("the server's certificate was refused: "),
            "{s}"
        );
        assert!(s.contains("update-ca-certificates"), "{s}");
        assert!(!s.contains('\n'));
        let expired = rustls::Error::InvalidCertificate(CertificateError::Expired);
        assert!(sentence(&expired).contains("expired"));
        let other = std::io::Error::other("plain");
        assert_eq!(explain(&other), None);
        // Only the text left (an HTTP client that kept the message).
        let text = std::io::Error::other(
            "client error (Connect): invalid peer certificate: UnknownIssuer",
        );
        assert!(explain(&text).unwrap().contains("update-ca-certificates"));
    }
}
