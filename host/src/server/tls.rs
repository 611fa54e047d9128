//! TLS for the admission port: rustls from PEM files, reloaded when they change (cert-manager and
//! Kubernetes Secrets rotate them in place). A reload that fails keeps the previous certificate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The certificate and key files, and the acceptor built from them.
pub struct Tls {
    cert_file: PathBuf,
    key_file: PathBuf,
    acceptor: ArcSwap<TlsAcceptor>,
    /// What the current acceptor was built from.
    loaded: std::sync::Mutex<Vec<u8>>,
}

impl Tls {
    /// Loads the certificate and key files.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Self> {
        let (config, contents) = server_config(cert_file, key_file)?;
        Ok(Self {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            acceptor: ArcSwap::from_pointee(TlsAcceptor::from(Arc::new(config))),
            loaded: std::sync::Mutex::new(contents),
        })
    }

    /// The acceptor of the certificate loaded last.
    pub fn acceptor(&self) -> Arc<TlsAcceptor> {
        self.acceptor.load_full()
    }

    /// The certificate and key files, whose change reloads them.
    pub fn files(&self) -> [&Path; 2] {
        [&self.cert_file, &self.key_file]
    }

    /// Reloads the files if their contents changed. `Ok(false)`: unchanged.
    pub fn reload(&self) -> Result<bool> {
        let (config, contents) = server_config(&self.cert_file, &self.key_file)?;
        let mut loaded = self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *loaded == contents {
            return Ok(false);
        }
        self.acceptor.store(Arc::new(TlsAcceptor::from(Arc::new(config))));
        *loaded = contents;
        Ok(true)
    }
}

fn server_config(cert_file: &Path, key_file: &Path) -> Result<(ServerConfig, Vec<u8>)> {
    let cert_pem = std::fs::read(cert_file)
        .with_context(|| format!("cannot read the certificate file {}", cert_file.display()))?;
    let key_pem = std::fs::read(key_file)
        .with_context(|| format!("cannot read the key file {}", key_file.display()))?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("invalid certificate file {}: {e}", cert_file.display()))?;
    if certs.is_empty() {
        return Err(anyhow!("the certificate file {} holds no certificate", cert_file.display()));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| anyhow!("invalid key file {}: {e}", key_file.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the certificate and key do not form a usable pair")?;
    // The API server speaks HTTP/2 to webhooks when offered; HTTP/1.1 for everything else.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut contents = cert_pem;
    contents.extend_from_slice(&key_pem);
    Ok((config, contents))
}
