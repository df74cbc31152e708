//! The HTTPS client every outbound call is built from: the AWS APIs ([`crate::aws`]), the
//! outbox's forward targets, the providers' list APIs (replay) and CloudFormation's response
//! URL (the migrate function). One TLS stack, OpenSSL through native-tls, the one PostgreSQL
//! connections already use (postgres-native-tls), so a function links one crypto library.
//!
//! Building a native-tls connector parses the system's trust store (about 140 certificates,
//! a few milliseconds of CPU), so it is built once per process ([`tls_connector`]) and every
//! client shares it.

use std::sync::OnceLock;

/// The process's TLS connector for HTTPS: the system's trust store (what `openssl-probe`
/// finds, as native-tls loads it), built on first use and shared.
///
/// # Errors
/// native-tls's error when OpenSSL cannot build a connector (it cannot initialise); kept, so
/// every later call returns it again without trying.
pub fn tls_connector() -> Result<native_tls::TlsConnector, &'static native_tls::Error> {
    static CONNECTOR: OnceLock<Result<native_tls::TlsConnector, native_tls::Error>> =
        OnceLock::new();
    CONNECTOR
        .get_or_init(native_tls::TlsConnector::new)
        .as_ref()
        .cloned()
}

/// A reqwest builder on the shared [`tls_connector`] that never follows a redirect (a target
/// or API that redirects is answered as a failed request, not followed with its credentials).
/// The caller adds its timeouts and user agent.
///
/// When the shared connector could not be built, the builder is left to build its own: its
/// `build()` tries OpenSSL once more and reports the error if it fails again.
pub fn client_builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    match tls_connector() {
        Ok(connector) => builder.use_preconfigured_tls(connector),
        Err(_) => builder,
    }
}
