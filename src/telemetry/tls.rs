//! TLS of trace export. Most hosted tracing backends take OTLP over HTTPS only, so an
//! `https://` endpoint is checked against the system's roots plus the CA file of
//! `OTEL_EXPORTER_OTLP[_TRACES]_CERTIFICATE`, and mutual TLS presents
//! `OTEL_EXPORTER_OTLP[_TRACES]_CLIENT_CERTIFICATE` with `_CLIENT_KEY` — the variables
//! the OpenTelemetry specification names (a signal's own variable wins).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why the TLS of trace export cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{variable}: cannot read {} as PEM: {problem}", path.display())]
    Pem {
        /// The variable naming the file.
        variable: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A client certificate without its key, or a key without its certificate.
    #[error(
        "mutual TLS needs both OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and \
         OTEL_EXPORTER_OTLP_CLIENT_KEY (or their _TRACES_ forms); only {given} is set"
    )]
    HalfIdentity {
        /// The one that is set.
        given: &'static str,
    },
    /// rustls refused the configuration (e.g. a key that does not match the certificate).
    #[error("TLS configuration refused: {0}")]
    Config(#[from] rustls::Error),
    /// Neither the system nor the CA file gave a root to check the collector against.
    #[error(
        "no root certificate to check the collector against: the system has none; set \
         OTEL_EXPORTER_OTLP_CERTIFICATE to the collector's CA file"
    )]
    NoRoots,
}

/// The files trace export reads for TLS, as the environment names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificates (PEM) trusted besides the system's.
    pub certificate: Option<PathBuf>,
    /// The client certificate chain (PEM) of mutual TLS.
    pub client_certificate: Option<PathBuf>,
    /// Its private key (PEM).
    pub client_key: Option<PathBuf>,
}

impl TlsFiles {
    /// Reads the variables through `var` (the process environment, in production).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> TlsFiles {
        let read = |names: [&str; 2]| {
            names.into_iter().find_map(|name| {
                let value = var(name)?;
                let value = value.trim();
                (!value.is_empty()).then(|| PathBuf::from(value))
            })
        };
        TlsFiles {
            certificate: read([
                "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
            ]),
            client_certificate: read([
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            ]),
            client_key: read([
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
                "OTEL_EXPORTER_OTLP_CLIENT_KEY",
            ]),
        }
    }

    /// The rustls configuration: the system's roots and the CA file's, and the client
    /// identity if one is given. Fails on a file that cannot be used, naming it, and — for
    /// an `https` endpoint — when there is no root at all.
    pub fn client_config(&self, https: bool) -> Result<rustls::ClientConfig, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        if https {
            // Unreadable system stores are skipped: a CA file may still give the roots.
            let system = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(system.certs);
        }
        if let Some(path) = &self.certificate {
            let certificates = certificates("OTEL_EXPORTER_OTLP_CERTIFICATE", path)?;
            let (added, _) = roots.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(pem_error(
                    "OTEL_EXPORTER_OTLP_CERTIFICATE",
                    path,
                    "no CA certificate in it",
                ));
            }
        }
        if https && roots.is_empty() {
            return Err(TlsError::NoRoots);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
        let config = match (&self.client_certificate, &self.client_key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = certificates("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|error| {
                    pem_error("OTEL_EXPORTER_OTLP_CLIENT_KEY", key, error.to_string())
                })?;
                builder.with_client_auth_cert(chain, key)?
            }
            (Some(_), None) => {
                return Err(TlsError::HalfIdentity {
                    given: "the client certificate",
                });
            }
            (None, Some(_)) => {
                return Err(TlsError::HalfIdentity {
                    given: "the client key",
                });
            }
        };
        Ok(config)
    }
}

/// Every certificate of a PEM file; at least one.
fn certificates(
    variable: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|error| pem_error(variable, path, error.to_string()))?;
    if certificates.is_empty() {
        return Err(pem_error(variable, path, "no certificate in it"));
    }
    Ok(certificates)
}

fn pem_error(variable: &'static str, path: &Path, problem: impl Into<String>) -> TlsError {
    TlsError::Pem {
        variable,
        path: path.to_owned(),
        problem: problem.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(vars: &[(&str, &str)]) -> TlsFiles {
        TlsFiles::from_env(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn the_signals_own_variables_win_and_blank_ones_are_unset() {
        let tls = files(&[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/general/ca.pem"),
            ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "/traces/ca.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", " "),
            ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/traces/key.pem"),
        ]);
        assert_eq!(
            tls,
            TlsFiles {
                certificate: Some("/traces/ca.pem".into()),
                client_certificate: None,
                client_key: Some("/traces/key.pem".into()),
            }
        );
        assert_eq!(files(&[]), TlsFiles::default());
    }

    #[test]
    fn a_file_that_cannot_be_used_is_named() {
        let dir = std::env::temp_dir().join(format!("tidal-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        for (tls, expected) in [
            (
                TlsFiles {
                    certificate: Some(dir.join("missing.pem")),
                    ..TlsFiles::default()
                },
                "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read",
            ),
            (
                TlsFiles {
                    certificate: Some(empty.clone()),
                    ..TlsFiles::default()
                },
                "empty.pem as PEM: no certificate in it",
            ),
            (
                TlsFiles {
                    client_key: Some(empty.clone()),
                    ..TlsFiles::default()
                },
                "only the client key is set",
            ),
        ] {
            let error = tls.client_config(true).map(drop).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
