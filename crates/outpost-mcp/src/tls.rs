//! rustls's process-wide crypto provider, installed before any HTTPS client is built
//! (the Streamable HTTP transport's and the OAuth client's).

/// Makes sure a rustls crypto provider (ring, like the rest of Outpost) is installed before
/// reqwest builds a client: reqwest is built without one of its own.
pub(crate) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may win the race; either way a provider is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
