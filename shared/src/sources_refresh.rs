//! Secret rotation without a redeploy: the receiver's sources, re-read after a failed
//! verification (at most once per interval) and once they are older than a maximum age.
//!
//! [`crate::config::Settings`] reads the sources once per cold start. After a rotation in Secrets
//! Manager a warm receiver would answer 401 to every delivery signed with the new secret until
//! its execution environment is recycled, and some providers (GitHub) never retry a failed
//! delivery. So the receiver holds its sources in a [`LiveSources`]: every delivery reads the
//! current snapshot once (an atomic load, no lock), and when a signature matches none of the
//! source's secrets the receiver calls [`LiveSources::reverify`], which
//!
//! 1. re-reads the sources secret (or file) unless it was re-read less than
//!    [`DEFAULT_MIN_REFRESH_INTERVAL`](crate::config::DEFAULT_MIN_REFRESH_INTERVAL) (60 s, `HOOKLEDGER_SOURCES_REFRESH_SECS`) ago in this
//!    execution environment. Only one re-read runs at a time: failures that arrive while one
//!    is in flight wait for it and then use its result, they never start another. A flood of
//!    bad signatures therefore costs at most one Secrets Manager call per interval;
//! 2. installs what it read if it parses and validates like a cold start would
//!    ([`Sources::from_json`]); otherwise it logs why (never a value) and the sources already
//!    loaded stay in force;
//! 3. verifies the delivery once more, against the source's current configuration, when that
//!    differs from the one that just failed.
//!
//! The first failed verification after a cold start may re-read at once (the cold start's own
//! read does not count), so a rotation right after a cold start costs one 401 at most.
//!
//! A failed verification alone would never retire a secret: someone signing with a leaked
//! secret the operator removed never fails, so nothing would re-read. So the receiver also calls
//! [`LiveSources::refresh_if_stale`] before it looks a delivery's source up: once the last
//! re-read (or the cold start) is [`DEFAULT_SOURCES_MAX_AGE`](crate::config::DEFAULT_SOURCES_MAX_AGE)
//! (300 s, `HOOKLEDGER_SOURCES_MAX_AGE_SECS`) old, that delivery re-reads the sources before it
//! is verified, so a removed secret verifies at most the max age after its removal (while the
//! sources can be read; a failed read keeps the sources in force, is logged, and the next
//! delivery past another max age tries again). The check is a clock read and an atomic load;
//! the one delivery that finds the sources stale pays for the read, and deliveries that arrive
//! while any re-read is in flight do not wait for it: they use the sources in force.
//!
//! Each re-read is logged (`sources re-read`, with its outcome and `why`: `max_age`,
//! `no_signature_matched`, or `requested` by a job) and counted as the EMF metric
//! `secrets_refreshed` (dimension `source`: the source whose delivery triggered it). Of the
//! failed verifications only signature mismatches trigger a re-read: a missing or malformed
//! header, or a stale timestamp, is not something a new secret explains.
//!
//! `HOOKLEDGER_SOURCES` (the function's environment) cannot change without a redeploy and is
//! never re-read.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

use crate::config::{ConfigError, SourceConfig, Sources, SourcesOrigin, SourcesReload};
use crate::secrets::Secrets;
use hookledger_verify::{Verified, VerifyError};

/// Longest a re-read may take (a Secrets Manager call, or reading the file), after which it
/// counts as failed and the current sources stay: 5 s. Deliveries waiting on it wait no longer.
pub const REFRESH_TIMEOUT: Duration = Duration::from_secs(5);

/// A monotonic clock for the refresh interval, injectable for tests.
pub trait Clock: Send + Sync {
    /// Time elapsed since an arbitrary, fixed origin; never goes backwards.
    fn now(&self) -> Duration;
}

/// The real clock: [`Instant`] since the clock was made.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to (tests): starts at zero.
#[derive(Debug, Default)]
pub struct ManualClock {
    millis: AtomicU64,
}

impl ManualClock {
    /// Moves the clock forward by `by` (millisecond resolution).
    pub fn advance(&self, by: Duration) {
        let millis = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.millis.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.millis.load(Ordering::SeqCst))
    }
}

/// Where a [`Refresher`] re-reads the sources JSON from.
#[derive(Clone)]
pub enum RefreshFrom {
    /// The current version of a Secrets Manager secret (`HOOKLEDGER_SOURCES_SECRET_ARN`).
    Secret {
        /// The client, built once per execution environment.
        secrets: Secrets,
        /// The secret's ARN or name.
        arn: String,
    },
    /// A file (`HOOKLEDGER_SOURCES_FILE`), re-read whole.
    File(PathBuf),
}

impl fmt::Debug for RefreshFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Secret { arn, .. } => f.debug_tuple("Secret").field(arn).finish(),
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

impl RefreshFrom {
    fn kind(&self) -> &'static str {
        match self {
            Self::Secret { .. } => "secret",
            Self::File(_) => "file",
        }
    }

    /// The current text. Fails only with [`ConfigError::Secrets`] or
    /// [`ConfigError::SourcesFile`] (retryable: the next re-read tries again), whose causes
    /// quote no value.
    async fn read(&self) -> Result<SecretString, ConfigError> {
        match self {
            Self::Secret { secrets, arn } => Ok(secrets.secret_string(arn).await?),
            // Small and local: a blocking read is fine.
            Self::File(path) => std::fs::read_to_string(path)
                .map(SecretString::from)
                .map_err(|source| ConfigError::SourcesFile {
                    path: path.clone(),
                    source,
                }),
        }
    }
}

/// What a call to [`LiveSources::refresh`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refreshed {
    /// These sources are not refreshable (`HOOKLEDGER_SOURCES`, or built in code).
    Off,
    /// The last re-read (possibly one this call waited for) was less than the interval ago
    /// (for [`LiveSources::refresh_if_stale`]: less than the max age ago): nothing was read.
    TooSoon,
    /// Another re-read was in flight ([`LiveSources::refresh_if_stale`] does not wait for it):
    /// nothing was read, the sources in force are used.
    InFlight,
    /// Re-read; the same text as the sources in force, which stay.
    Unchanged,
    /// Re-read and installed: deliveries from now on see the new sources.
    Changed,
    /// Re-read, but it does not parse or validate: logged, and the sources in force stay.
    Invalid,
    /// The read failed or timed out: logged, and the sources in force stay.
    Failed,
}

#[derive(Debug, Default)]
struct Gate {
    /// Clock time of the last re-read started; `None` before the first.
    last_read: Option<Duration>,
    /// SHA-256 of the text of the sources installed by the last re-read that changed them.
    installed: Option<[u8; 32]>,
}

/// Why a re-read runs: the `why` of its log line.
#[derive(Debug, Clone, Copy)]
enum Why {
    Requested,
    NoSignatureMatched,
    MaxAge,
}

impl Why {
    fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::NoSignatureMatched => "no_signature_matched",
            Self::MaxAge => "max_age",
        }
    }
}

/// Re-reads the sources JSON, rate-limited and one at a time; held by a [`LiveSources`].
pub struct Refresher {
    from: RefreshFrom,
    min_interval: Duration,
    max_age: Duration,
    clock: Arc<dyn Clock>,
    /// Clock time (milliseconds) of the last re-read started, or of the refresher's making
    /// before the first: what [`LiveSources::refresh_if_stale`] reads without the gate.
    last_read_millis: AtomicU64,
    /// Held for the whole of a re-read: single flight, and callers that queue behind it see
    /// its `last_read` and do not read again.
    gate: tokio::sync::Mutex<Gate>,
    reads: AtomicU64,
}

impl fmt::Debug for Refresher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refresher")
            .field("from", &self.from)
            .field("min_interval", &self.min_interval)
            .field("max_age", &self.max_age)
            .field("reads", &self.reads())
            .finish_non_exhaustive()
    }
}

impl Refresher {
    /// A refresher reading `from` after failed verifications at most once per `min_interval`,
    /// and once the sources are [`DEFAULT_SOURCES_MAX_AGE`](crate::config::DEFAULT_SOURCES_MAX_AGE)
    /// old (see [`Self::with_max_age`]), on the real clock. The sources it starts with count
    /// as read now.
    pub fn new(from: RefreshFrom, min_interval: Duration) -> Self {
        let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::default());
        Self {
            from,
            min_interval,
            max_age: crate::config::DEFAULT_SOURCES_MAX_AGE,
            last_read_millis: AtomicU64::new(millis(clock.now())),
            clock,
            gate: tokio::sync::Mutex::new(Gate::default()),
            reads: AtomicU64::new(0),
        }
    }

    /// The same refresher on `clock` (tests: a [`ManualClock`]); the sources it starts with
    /// count as read at `clock`'s now.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.last_read_millis = AtomicU64::new(millis(clock.now()));
        self.clock = clock;
        self
    }

    /// The same refresher with sources re-read by [`LiveSources::refresh_if_stale`] once they
    /// are `max_age` old.
    #[must_use]
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// The refresher `reload` calls for: `None` for [`SourcesOrigin::Inline`], a file reader
    /// for a file, and for a secret a reader through `secrets` (or, when `None`, a client made
    /// from the environment, see [`Secrets::from_env`]).
    pub async fn for_reload(reload: &SourcesReload, secrets: Option<Secrets>) -> Option<Self> {
        let from = match &reload.origin {
            SourcesOrigin::Inline => return None,
            SourcesOrigin::File(path) => RefreshFrom::File(path.clone()),
            SourcesOrigin::Secret(arn) => RefreshFrom::Secret {
                secrets: match secrets {
                    Some(secrets) => secrets,
                    None => Secrets::from_env().await,
                },
                arn: arn.clone(),
            },
        };
        Some(Self::new(from, reload.min_interval).with_max_age(reload.max_age))
    }

    /// How many re-reads this refresher has started (failed and timed-out ones included):
    /// for a secret, the Secrets Manager calls it made.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// The least time between two re-reads after failed verifications.
    pub fn min_interval(&self) -> Duration {
        self.min_interval
    }

    /// The age at which a delivery re-reads the sources before it is verified.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// How long ago the last re-read started (or the refresher was made), from the atomic
    /// mirror: no lock.
    fn age(&self) -> Duration {
        self.clock.now().saturating_sub(Duration::from_millis(
            self.last_read_millis.load(Ordering::SeqCst),
        ))
    }
}

/// `at` in whole milliseconds (saturating).
fn millis(at: Duration) -> u64 {
    u64::try_from(at.as_millis()).unwrap_or(u64::MAX)
}

/// The receiver's sources: a snapshot read once per delivery without locking, replaced whole
/// by a refresh. Clones share the snapshot and the refresher.
#[derive(Clone)]
pub struct LiveSources {
    current: Arc<ArcSwap<Sources>>,
    refresher: Option<Arc<Refresher>>,
}

impl fmt::Debug for LiveSources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveSources")
            .field("current", &self.current.load())
            .field("refresher", &self.refresher)
            .finish()
    }
}

impl Default for LiveSources {
    fn default() -> Self {
        Self::fixed(Sources::default())
    }
}

impl From<Sources> for LiveSources {
    fn from(sources: Sources) -> Self {
        Self::fixed(sources)
    }
}

impl LiveSources {
    /// `sources`, never re-read.
    pub fn fixed(sources: Sources) -> Self {
        Self {
            current: Arc::new(ArcSwap::from_pointee(sources)),
            refresher: None,
        }
    }

    /// `sources` (as read at cold start), re-read through `refresher` after failed
    /// verifications.
    pub fn refreshing(sources: Sources, refresher: Refresher) -> Self {
        Self {
            current: Arc::new(ArcSwap::from_pointee(sources)),
            refresher: Some(Arc::new(refresher)),
        }
    }

    /// The source called `name` in the current snapshot, if configured. One atomic load.
    pub fn get(&self, name: &str) -> Option<Arc<SourceConfig>> {
        self.current.load().get(name).cloned()
    }

    /// The current snapshot of every source.
    pub fn current(&self) -> Arc<Sources> {
        self.current.load_full()
    }

    /// The sources as `settings` read them, refreshing from their file or secret when they came
    /// from one (`HOOKLEDGER_SOURCES` itself is never re-read): what every function runs with.
    pub async fn from_settings(settings: &crate::config::Settings) -> Self {
        match Refresher::for_reload(&settings.sources_reload, None).await {
            Some(refresher) => Self::refreshing(settings.sources.clone(), refresher),
            None => Self::fixed(settings.sources.clone()),
        }
    }

    /// The refresher, if these sources are refreshable (for its counters).
    pub fn refresher(&self) -> Option<&Refresher> {
        self.refresher.as_deref()
    }

    /// Re-reads the sources now unless the last re-read was less than the interval ago, or
    /// waits for the one in flight; `trigger` (a source name) is logged and is the metric's
    /// dimension. Never fails: a failed or invalid read is logged and the current sources stay.
    pub async fn refresh(&self, trigger: &str) -> Refreshed {
        self.refresh_because(trigger, Why::Requested).await
    }

    async fn refresh_because(&self, trigger: &str, why: Why) -> Refreshed {
        let Some(refresher) = &self.refresher else {
            return Refreshed::Off;
        };
        let mut gate = refresher.gate.lock().await;
        let now = refresher.clock.now();
        if gate
            .last_read
            .is_some_and(|last| now.saturating_sub(last) < refresher.min_interval)
        {
            return Refreshed::TooSoon;
        }
        self.read(refresher, &mut gate, now, trigger, why).await
    }

    /// What a delivery calls before it looks its source up: when the sources in force were read
    /// (at cold start or by the last re-read) at least the max age ago, re-reads them now,
    /// unless a re-read is already in flight, which this call does not wait for
    /// ([`Refreshed::InFlight`]: the sources in force are used). Otherwise
    /// [`Refreshed::TooSoon`] at the cost of a clock read and an atomic load. Never fails, as
    /// [`Self::refresh`].
    pub async fn refresh_if_stale(&self, trigger: &str) -> Refreshed {
        let Some(refresher) = &self.refresher else {
            return Refreshed::Off;
        };
        if refresher.age() < refresher.max_age {
            return Refreshed::TooSoon;
        }
        let Ok(mut gate) = refresher.gate.try_lock() else {
            return Refreshed::InFlight;
        };
        // A re-read that finished between the load and the lock has made the sources fresh.
        if refresher.age() < refresher.max_age {
            return Refreshed::TooSoon;
        }
        let now = refresher.clock.now();
        self.read(refresher, &mut gate, now, trigger, Why::MaxAge)
            .await
    }

    /// Re-reads now, holding the gate: records the read, reads (bounded by
    /// [`REFRESH_TIMEOUT`]), installs what parses and differs from the sources in force.
    async fn read(
        &self,
        refresher: &Refresher,
        gate: &mut Gate,
        now: Duration,
        trigger: &str,
        why: Why,
    ) -> Refreshed {
        gate.last_read = Some(now);
        refresher
            .last_read_millis
            .store(millis(now), Ordering::SeqCst);
        refresher.reads.fetch_add(1, Ordering::SeqCst);
        crate::telemetry::count(crate::telemetry::MetricName::SecretsRefreshed, trigger, 1);
        let from = refresher.from.kind();
        let why = why.as_str();
        let text = match tokio::time::timeout(REFRESH_TIMEOUT, refresher.from.read()).await {
            Ok(Ok(text)) => text,
            Ok(Err(error)) => {
                tracing::error!(
                    source = trigger,
                    from,
                    why,
                    outcome = "failed",
                    // A read's causes (the file's I/O error, Secrets Manager's refusal) quote no
                    // value, unlike a parse's (below: its own words only).
                    error = crate::error_chain::error_chain(&error),
                    "sources re-read; keeping the sources in force"
                );
                return Refreshed::Failed;
            }
            Err(_) => {
                tracing::error!(
                    source = trigger,
                    from,
                    why,
                    outcome = "failed",
                    error = format!("timed out after {} ms", REFRESH_TIMEOUT.as_millis()),
                    "sources re-read; keeping the sources in force"
                );
                return Refreshed::Failed;
            }
        };
        let digest: [u8; 32] = Sha256::digest(text.expose_secret().as_bytes()).into();
        if gate.installed == Some(digest) {
            tracing::info!(
                source = trigger,
                from,
                why,
                outcome = "unchanged",
                "sources re-read"
            );
            return Refreshed::Unchanged;
        }
        match Sources::from_json(text.expose_secret()) {
            Ok(sources) => {
                let count = sources.iter().count();
                self.current.store(Arc::new(sources));
                gate.installed = Some(digest);
                tracing::info!(
                    source = trigger,
                    from,
                    why,
                    outcome = "changed",
                    sources = count,
                    "sources re-read"
                );
                Refreshed::Changed
            }
            Err(error) => {
                tracing::error!(
                    source = trigger,
                    from,
                    why,
                    outcome = "invalid",
                    error = error.to_string(),
                    "sources re-read; keeping the sources in force"
                );
                Refreshed::Invalid
            }
        }
    }

    /// After `stale` (the configuration of `source` that this delivery was verified against)
    /// failed with `error`: when the error is a signature mismatch, [`Self::refresh`] (rate
    /// limited) and verify once more against the source's configuration now in force, if it
    /// differs from `stale`. Returns that configuration and the verification when the delivery
    /// now verifies; `None` otherwise (answer 401 with `error`).
    pub async fn reverify(
        &self,
        source: &str,
        stale: &Arc<SourceConfig>,
        error: &VerifyError,
        request: &hookledger_verify::Request<'_>,
        now: i64,
    ) -> Option<(Arc<SourceConfig>, Verified)> {
        if self.refresher.is_none() || !matches!(error, VerifyError::NoSignatureMatched) {
            return None;
        }
        self.refresh_because(source, Why::NoSignatureMatched).await;
        let fresh = self.get(source)?;
        if Arc::ptr_eq(&fresh, stale) {
            return None;
        }
        let verified = fresh.verifier.verify_request(request, now).ok()?;
        Some((fresh, verified))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_MIN_REFRESH_INTERVAL;

    const OLD: &str = r#"[{"name": "gh", "scheme": "github", "secrets": ["old-secret"]}]"#;
    const NEW: &str =
        r#"[{"name": "gh", "scheme": "github", "secrets": ["new-secret", "old-secret"]}]"#;

    struct Fixture {
        dir: PathBuf,
        clock: Arc<ManualClock>,
        live: LiveSources,
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    impl Fixture {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("hookledger-refresh-{}-{tag}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("sources.json");
            std::fs::write(&path, OLD).unwrap();
            let clock = Arc::new(ManualClock::default());
            let refresher = Refresher::new(RefreshFrom::File(path), DEFAULT_MIN_REFRESH_INTERVAL)
                .with_clock(clock.clone());
            let live = LiveSources::refreshing(Sources::from_json(OLD).unwrap(), refresher);
            Self { dir, clock, live }
        }

        fn write(&self, json: &str) {
            std::fs::write(self.dir.join("sources.json"), json).unwrap();
        }

        fn reads(&self) -> u64 {
            self.live.refresher().unwrap().reads()
        }

        fn secrets_of_gh(&self) -> usize {
            self.live.get("gh").unwrap().verifier.key_count()
        }
    }

    fn github_delivery(secret: &str, body: &[u8]) -> http::HeaderMap {
        let key =
            hookledger_verify::SigningKey::new(hookledger_verify::Scheme::Github, secret).unwrap();
        let mut headers = http::HeaderMap::new();
        for (name, value) in
            hookledger_verify::sign(hookledger_verify::Scheme::Github, &key, "", 0, body)
        {
            headers.insert(
                http::HeaderName::try_from(name).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    #[tokio::test]
    async fn a_refresh_installs_new_sources_and_then_waits_out_the_interval() {
        let f = Fixture::new("interval");
        f.write(NEW);
        assert_eq!(f.live.refresh("gh").await, Refreshed::Changed);
        assert_eq!(f.secrets_of_gh(), 2);
        assert_eq!(f.reads(), 1);
        f.write(OLD);
        f.clock
            .advance(DEFAULT_MIN_REFRESH_INTERVAL - Duration::from_millis(1));
        assert_eq!(f.live.refresh("gh").await, Refreshed::TooSoon);
        assert_eq!(f.secrets_of_gh(), 2);
        assert_eq!(f.reads(), 1);
        f.clock.advance(Duration::from_millis(1));
        assert_eq!(f.live.refresh("gh").await, Refreshed::Changed);
        assert_eq!(f.secrets_of_gh(), 1);
        assert_eq!(f.reads(), 2);
        f.clock.advance(DEFAULT_MIN_REFRESH_INTERVAL);
        assert_eq!(f.live.refresh("gh").await, Refreshed::Unchanged);
        assert_eq!(f.reads(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_failures_share_one_refresh() {
        let f = Fixture::new("concurrent");
        f.write(NEW);
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                let live = f.live.clone();
                tokio::spawn(async move { live.refresh("gh").await })
            })
            .collect();
        let mut changed = 0;
        for task in tasks {
            match task.await.unwrap() {
                Refreshed::Changed => changed += 1,
                Refreshed::TooSoon => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(changed, 1);
        assert_eq!(f.reads(), 1);
        assert_eq!(f.secrets_of_gh(), 2);
    }

    #[tokio::test]
    async fn invalid_or_unreadable_sources_keep_the_old_ones() {
        let f = Fixture::new("invalid");
        // A data error whose serde_json message would quote the secret.
        f.write(r#"[{"name": "gh", "scheme": "github", "secrets": "leaked-secret"}]"#);
        assert_eq!(f.live.refresh("gh").await, Refreshed::Invalid);
        assert_eq!(f.secrets_of_gh(), 1);
        f.clock.advance(DEFAULT_MIN_REFRESH_INTERVAL);
        f.write(r#"[{"name": "gh", "scheme": "github", "secrets": []}]"#);
        assert_eq!(f.live.refresh("gh").await, Refreshed::Invalid);
        f.clock.advance(DEFAULT_MIN_REFRESH_INTERVAL);
        std::fs::remove_file(f.dir.join("sources.json")).unwrap();
        assert_eq!(f.live.refresh("gh").await, Refreshed::Failed);
        assert_eq!(f.secrets_of_gh(), 1);
        assert_eq!(f.reads(), 3);
    }

    #[test]
    fn invalid_json_is_described_without_its_values() {
        let error =
            Sources::from_json(r#"[{"name": "gh", "scheme": "github", "secrets": "s3cr3t"}]"#)
                .unwrap_err();
        // ConfigError's own Display redacts what serde_json quotes.
        let text = error.to_string();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("line 1"), "{text}");
    }

    #[tokio::test]
    async fn reverify_accepts_the_new_secret_only_after_a_signature_mismatch() {
        let f = Fixture::new("reverify");
        let body = br#"{"zen":"rotate"}"#;
        let headers = github_delivery("new-secret", body);
        let stale = f.live.get("gh").unwrap();
        let error = stale.verifier.verify(&headers, body, 0).unwrap_err();
        assert_eq!(error, VerifyError::NoSignatureMatched);
        assert!(f
            .live
            .reverify(
                "gh",
                &stale,
                &error,
                &hookledger_verify::Request::post(&headers, body),
                0
            )
            .await
            .is_none());
        f.write(NEW);
        f.clock.advance(DEFAULT_MIN_REFRESH_INTERVAL);
        let missing = VerifyError::MissingHeader("x-hub-signature-256".into());
        assert!(f
            .live
            .reverify(
                "gh",
                &stale,
                &missing,
                &hookledger_verify::Request::post(&headers, body),
                0
            )
            .await
            .is_none());
        assert_eq!(f.reads(), 1, "a missing header does not re-read");
        let (fresh, verified) = f
            .live
            .reverify(
                "gh",
                &stale,
                &error,
                &hookledger_verify::Request::post(&headers, body),
                0,
            )
            .await
            .unwrap();
        assert_eq!(verified.key_index, 0);
        assert_eq!(fresh.verifier.key_count(), 2);
        assert_eq!(f.reads(), 2);
    }

    #[tokio::test]
    async fn sources_past_the_max_age_are_re_read_before_a_delivery_without_any_failure() {
        let f = Fixture::new("max-age");
        let max_age = f.live.refresher().unwrap().max_age();
        assert_eq!(max_age, crate::config::DEFAULT_SOURCES_MAX_AGE);
        // The old secret removed (only a new one left).
        f.write(r#"[{"name": "gh", "scheme": "github", "secrets": ["new-secret"]}]"#);
        f.clock.advance(max_age - Duration::from_millis(1));
        assert_eq!(f.live.refresh_if_stale("gh").await, Refreshed::TooSoon);
        assert_eq!(f.reads(), 0);
        let body = br#"{"zen":"leaked"}"#;
        let headers = github_delivery("old-secret", body);
        assert!(f
            .live
            .get("gh")
            .unwrap()
            .verifier
            .verify(&headers, body, 0)
            .is_ok());
        f.clock.advance(Duration::from_millis(1));
        assert_eq!(f.live.refresh_if_stale("gh").await, Refreshed::Changed);
        assert_eq!(f.reads(), 1);
        assert_eq!(
            f.live.get("gh").unwrap().verifier.verify(&headers, body, 0),
            Err(VerifyError::NoSignatureMatched)
        );
        // Fresh again for another max age; a failed verification right after it is within the
        // interval and reads nothing more.
        assert_eq!(f.live.refresh_if_stale("gh").await, Refreshed::TooSoon);
        assert_eq!(f.live.refresh("gh").await, Refreshed::TooSoon);
        f.clock.advance(max_age);
        assert_eq!(f.live.refresh_if_stale("gh").await, Refreshed::Unchanged);
        assert_eq!(f.reads(), 2);
    }

    #[tokio::test]
    async fn a_stale_check_does_not_wait_for_a_re_read_in_flight() {
        let f = Fixture::new("in-flight");
        f.clock.advance(crate::config::DEFAULT_SOURCES_MAX_AGE);
        let refresher = f.live.refresher().unwrap();
        // A re-read in flight holds the gate.
        let held = refresher.gate.lock().await;
        assert_eq!(f.live.refresh_if_stale("gh").await, Refreshed::InFlight);
        drop(held);
        assert_eq!(f.live.refresh_if_stale("gh").await, Refreshed::Changed);
        assert_eq!(f.reads(), 1);
        // A shorter max age, as HOOKLEDGER_SOURCES_MAX_AGE_SECS sets it.
        let dir = f.dir.join("sources.json");
        let clock = Arc::new(ManualClock::default());
        let live = LiveSources::refreshing(
            Sources::from_json(OLD).unwrap(),
            Refresher::new(RefreshFrom::File(dir), DEFAULT_MIN_REFRESH_INTERVAL)
                .with_clock(clock.clone())
                .with_max_age(Duration::from_secs(2)),
        );
        clock.advance(Duration::from_secs(1));
        assert_eq!(live.refresh_if_stale("gh").await, Refreshed::TooSoon);
        clock.advance(Duration::from_secs(1));
        assert_eq!(live.refresh_if_stale("gh").await, Refreshed::Changed);
    }

    #[tokio::test]
    async fn fixed_sources_never_refresh() {
        let live = LiveSources::fixed(Sources::from_json(OLD).unwrap());
        assert_eq!(live.refresh("gh").await, Refreshed::Off);
        assert_eq!(live.refresh_if_stale("gh").await, Refreshed::Off);
        assert!(live.refresher().is_none());
    }
}
