//! TLS for the HTTP listener (rustls, ring provider): `--tls-cert` and
//! `--tls-key` in PEM. ALPN offers `h2` and `http/1.1`, so SSE and long-polling
//! run over HTTP/2 with browsers (no six-connections-per-host limit) while
//! WebSocket upgrades arrive over `http/1.1` and use the same lean driver as on
//! plain sockets, through [`crate::conn::AsyncIo`].

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("cannot load {path}: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// rustls refused the certificate or key.
    #[error("invalid TLS certificate or key: {0}")]
    Config(#[from] rustls::Error),
}

/// Builds the acceptor from PEM files.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let pem_err = |path: &Path, e: &dyn std::fmt::Display| TlsError::Pem {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_err(cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(cert, &e))?;
    if certs.is_empty() {
        return Err(pem_err(cert, &"no certificate in file"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_err(key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The roots a TLS client trusts by default: Debian's bundle.
pub const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A TLS client configuration trusting the certificates of the PEM file
/// `roots` (for https webhooks).
pub fn client_config(roots: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let pem_err = |e: &dyn std::fmt::Display| TlsError::Pem {
        path: roots.to_path_buf(),
        reason: e.to_string(),
    };
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(roots).map_err(|e| pem_err(&e))? {
        store.add(cert.map_err(|e| pem_err(&e))?)?;
    }
    if store.is_empty() {
        return Err(pem_err(&"no certificate in file"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
