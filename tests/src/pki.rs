//! Throw-away TLS material for `wss://` tests: a CA made for the test and a server
//! certificate it signs for the server's IP address. Files are deleted on drop.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A test CA and one server certificate, as PEM text and as files.
#[derive(Debug)]
pub struct TestPki {
    /// The CA certificate (what clients must trust).
    pub ca_pem: String,
    /// The server certificate (leaf only).
    pub cert_pem: String,
    /// The server's private key (PKCS#8).
    pub key_pem: String,
    dir: PathBuf,
}

impl TestPki {
    /// A fresh CA and a certificate for `names` (IP addresses or DNS names).
    pub fn new(names: &[String]) -> anyhow::Result<Self> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "Outpost throw-away test CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut leaf = CertificateParams::new(names.to_vec())?;
        leaf.distinguished_name
            .push(DnType::CommonName, "outpost-room test server");
        let key = KeyPair::generate()?;
        let cert = leaf.signed_by(&key, &issuer)?;

        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("outpost-pki-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let pki = Self {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            dir,
        };
        std::fs::write(pki.ca_path(), &pki.ca_pem)?;
        std::fs::write(pki.cert_path(), &pki.cert_pem)?;
        std::fs::write(pki.key_path(), &pki.key_pem)?;
        Ok(pki)
    }

    /// The CA certificate file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The server certificate file.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.join("server.pem")
    }

    /// The server key file.
    pub fn key_path(&self) -> PathBuf {
        self.dir.join("server.key")
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A test CA in the system's certificate store, added the Debian way: a file in
/// `/usr/local/share/ca-certificates` and `update-ca-certificates`. Removed again (file
/// and bundle entry) on drop, which runs when the test panics too. One at a time in a
/// process: the store is shared.
#[derive(Debug)]
pub struct SystemCa {
    path: PathBuf,
    _one_at_a_time: std::sync::MutexGuard<'static, ()>,
}

static SYSTEM_STORE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn update_ca_certificates() -> anyhow::Result<()> {
    let out = std::process::Command::new("update-ca-certificates")
        .output()
        .context("running update-ca-certificates (Debian's ca-certificates, as root)")?;
    anyhow::ensure!(
        out.status.success(),
        "update-ca-certificates failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

impl SystemCa {
    /// Adds `pki`'s CA to the system's store.
    pub fn install(pki: &TestPki) -> anyhow::Result<Self> {
        let lock = outpost_sync::lock(&SYSTEM_STORE);
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = PathBuf::from("/usr/local/share/ca-certificates")
            .join(format!("outpost-test-{}-{n}.crt", std::process::id()));
        std::fs::write(&path, &pki.ca_pem)
            .with_context(|| format!("writing {}", path.display()))?;
        let ca = Self {
            path,
            _one_at_a_time: lock,
        };
        update_ca_certificates()?;
        Ok(ca)
    }

    /// Takes the CA out of the store now (drop does the same).
    pub fn remove(self) -> anyhow::Result<()> {
        let _ = std::fs::remove_file(&self.path);
        update_ca_certificates()
    }
}

impl Drop for SystemCa {
    fn drop(&mut self) {
        if self.path.exists() {
            let _ = std::fs::remove_file(&self.path);
            if let Err(e) = update_ca_certificates() {
                #[allow(clippy::print_stderr)]
                {
                    eprintln!("could not take the test CA out of the system's store: {e:#}");
                }
            }
        }
    }
}
