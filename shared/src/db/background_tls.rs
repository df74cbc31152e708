//! The pool's TLS connector, built on a background thread so that a cold start does not wait
//! for it.
//!
//! Building a native-tls connector loads the system trust store: OpenSSL parses every
//! certificate of the distribution's bundle (about 140 on Debian and Amazon Linux 2023, a few
//! milliseconds of CPU), even when a CA file or the compiled-in RDS CAs then replace it
//! ([`super::tls_connector`]). The thread's allocator arena keeps what it freed; the receiver
//! gives it back once the pool's first connection is open (functions/receiver/src/heap.rs). The
//! first delivery needs it only when it opens the pool's first connection, so
//! [`BackgroundTls::start`] begins the build on its own thread while the runtime starts and
//! polls for the first event, and the first connect waits for it (or builds it itself if the
//! thread could not start). Measured by `bench-cold` (dev/bench/results/cold.md).

use std::sync::{Arc, OnceLock};

use postgres_native_tls::MakeTlsConnector;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::tls::MakeTlsConnect;

use crate::config::DatabaseSettings;

/// The connector, or why it could not be built (shared: every connect fails with it).
type Built = Result<MakeTlsConnector, Arc<super::DbError>>;

/// A [`MakeTlsConnect`] whose connector ([`super::tls_connector`] for the settings) is built
/// once per process, on a background thread started by [`BackgroundTls::start`]. A build
/// failure (a CA file that cannot be read or parsed) fails every connect with its reason.
#[derive(Clone)]
pub(crate) struct BackgroundTls {
    inner: Arc<Inner>,
}

struct Inner {
    settings: DatabaseSettings,
    built: OnceLock<Built>,
    /// Set to `true` once `built` is (by whichever thread built it).
    ready: tokio::sync::watch::Sender<bool>,
}

impl Inner {
    fn get(&self) -> &Built {
        // Blocks while another thread (the background one) builds it.
        let built = self
            .built
            .get_or_init(|| super::tls_connector(&self.settings).map_err(Arc::new));
        self.ready.send_replace(true);
        built
    }
}

impl BackgroundTls {
    /// Starts building the connector for `settings` on a thread of its own.
    pub(crate) fn start(settings: &DatabaseSettings) -> Self {
        let inner = Arc::new(Inner {
            settings: settings.clone(),
            built: OnceLock::new(),
            ready: tokio::sync::watch::Sender::new(false),
        });
        let background = inner.clone();
        let spawned = std::thread::Builder::new()
            .name("db-tls-build".to_owned())
            .spawn(move || {
                let _ = background.get();
            });
        if let Err(error) = spawned {
            tracing::debug!(%error, "cannot build the TLS connector in the background; building it at the first connect");
            // Nothing will build it in the background: nobody should wait for that.
            inner.ready.send_replace(true);
        }
        Self { inner }
    }

    /// Waits, without blocking the runtime, until the connector is built (or its build
    /// failed), so a connect started after it never blocks a runtime thread on the build.
    pub(crate) async fn ready(&self) {
        let mut ready = self.inner.ready.subscribe();
        // Err: the sender is gone, which cannot happen while `self` holds it.
        let _ = ready.wait_for(|built| *built).await;
    }
}

impl<S> MakeTlsConnect<S> for BackgroundTls
where
    S: AsyncRead + AsyncWrite + Unpin + 'static + Send,
{
    type Stream = <MakeTlsConnector as MakeTlsConnect<S>>::Stream;
    type TlsConnect = <MakeTlsConnector as MakeTlsConnect<S>>::TlsConnect;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Self::TlsConnect, Self::Error> {
        match self.inner.get() {
            Ok(connector) => <MakeTlsConnector as MakeTlsConnect<S>>::make_tls_connect(
                &mut connector.clone(),
                domain,
            )
            .map_err(Into::into),
            // Its own text says what failed ("cannot load CA certificates from ..."), its
            // source why.
            Err(error) => Err(Box::new(error.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error and its sources, one line.
    fn chain(error: &dyn std::error::Error) -> String {
        let mut text = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }

    #[tokio::test]
    async fn the_pool_is_built_before_its_tls_connector_and_a_bad_ca_file_fails_each_connect() {
        // A server that accepts and says nothing: the connector is needed once the socket is
        // open, so the CA file's problem is what the connect reports.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let mut settings =
            DatabaseSettings::with_url(format!("postgres://hookledger@127.0.0.1:{port}/x"));
        settings.ca_file = Some("/nonexistent/hookledger-ca.pem".into());
        let pool = crate::db::pool(&settings)
            .expect("building the pool does not wait for (or fail on) the TLS connector");
        for _ in 0..2 {
            let error = pool
                .get()
                .await
                .map(|_| ())
                .expect_err("no connection without a connector");
            let text = chain(&error);
            assert!(
                text.contains("cannot load CA certificates from /nonexistent/hookledger-ca.pem"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_good_connector_is_built_once_and_shared_by_clones() {
        let settings = DatabaseSettings::with_url("postgres://hookledger@127.0.0.1:1/x");
        let tls = BackgroundTls::start(&settings);
        let mut clone = tls.clone();
        assert!(
            MakeTlsConnect::<tokio::net::TcpStream>::make_tls_connect(&mut clone, "localhost")
                .is_ok()
        );
        assert!(tls.inner.built.get().is_some_and(|built| built.is_ok()));
    }
}
