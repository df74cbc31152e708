//! Replay: pull back, from the provider's API, the events a source missed (an outage, a
//! disabled endpoint), and run each through the same claim path as a verified delivery, so
//! nothing runs twice. The replay function (`functions/replay`) and the operator CLI
//! (`hookledger replay`) both call [`Replayer::run`].
//!
//! | provider (scheme) | what replay reads | what it does with each event |
//! |---|---|---|
//! | Stripe (`stripe`) | `GET /v1/events?created[gte]&created[lte]&limit=100&starting_after[&delivery_success]`, newest first, with `api_key` | [`Receiver::replay`]: claim and apply (inline) or accept for the worker (deferred), marked `replayed_at` |
//! | Paddle Billing (`paddle`) | `GET /events?order_by=id[DESC]&per_page=200&after`, newest first, with `api_key`; filtered by `occurred_at` here (the API has no time filter) | [`Receiver::replay`], as Stripe |
//! | GitHub (`github`) | the `github_hook`'s deliveries, `GET .../deliveries?per_page=100&cursor` (cursor from the `Link` header), newest first | each GUID in the window once: absent from the ledger (or an inline dead letter) is redelivered by GitHub (`POST .../deliveries/{id}/attempts`), signed, to the receiver; replay itself writes no row |
//!
//! **Authentication.** An event enters the ledger only through a verified signature (the
//! receiver) or an authenticated read of the provider's API (here): there is no token that
//! skips verification on the receiver. API-fetched events are not signature-checked (the API
//! read is the authentication); GitHub's redeliveries come back signed and are verified as
//! usual.
//!
//! **Duplicates.** A key already in the ledger is a duplicate whatever its bytes: the API
//! renders events anew (Stripe's `pending_webhooks`, Paddle's missing `notification_id`), so
//! the delivery's digest check does not apply to replayed events ([`crate::ledger::NewEvent`]'s
//! `replayed`). A dead letter is never retaken by replay (that is [`crate::redrive`]'s job),
//! except that GitHub redelivers an inline dead event, which the receiver then runs again.
//!
//! **The window** is `since <= event time <= until` (Stripe `created`, Paddle `occurred_at`,
//! GitHub `delivered_at`); `until` defaults to now. It may not reach further back than the
//! source's replay look-back (`replay_lookback_days`, [`crate::retention`]): a key older than
//! that may have been swept, so an event replayed from before it could run twice.
//!
//! **Time.** [`Replayer::run`] starts no request and no event with less than
//! [`ReplayOptions::margin`] of the invocation left, and returns `next_cursor`: the same request
//! with `starting_after = next_cursor` continues exactly there (Stripe and Paddle: the last
//! event handled; GitHub: its own cursor, `gh:{delivery id}:{page cursor}`). `next_cursor` is
//! `null` once the window is done.
//!
//! **Provider errors.** 401 and 403 stop the run with an error naming the source and the
//! credential's setting (never its value); 429, 5xx and connection failures are retried
//! [`ReplayOptions::max_retries`] times with exponential backoff, honouring `Retry-After`
//! seconds up to [`ReplayOptions::retry_after_cap`]; a page that is not the documented list
//! shape stops the run. A failed run carries the report of what was done and the cursor to
//! resume from ([`ReplayError::report`]).
//!
//! Invariant: `fetched = new + duplicates + redelivered + failed`.

pub mod github;
mod http;
mod paddle;
mod stripe;

use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::config::SourceConfig;
use crate::receive::Outcome;
use crate::timestamp::{parse_rfc3339, rfc3339};
use crate::Receiver;
use hookledger_verify::Scheme;

pub use self::http::retry_wait;

/// Start no request or event with less invocation time left than this (default).
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(10);

/// One provider request's timeout (default): well inside [`DEFAULT_MARGIN`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(8);

/// Retries of one request after a 429, a 5xx or a connection failure (default).
pub const DEFAULT_MAX_RETRIES: u32 = 4;

/// First retry delay without `Retry-After`; doubles per retry (default).
pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(500);

/// Longest wait honoured from a `Retry-After` header, and longest backoff (default).
pub const DEFAULT_RETRY_AFTER_CAP: Duration = Duration::from_secs(30);

/// One replay, as the function's input and the CLI's flags give it:
/// `{"source": "stripe", "since": "2026-12-01T09:00:00Z", "until": "2026-12-01T10:00:00Z",
/// "dry_run": false, "starting_after": "evt_...", "delivery_success": false}`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// The configured source (`stripe`, `paddle` or `github` scheme).
    pub source: String,
    /// Window start (inclusive), RFC 3339; not before now minus the source's replay look-back.
    pub since: String,
    /// Window end (inclusive), RFC 3339; now when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Count what would happen and write nothing (GitHub: request no redelivery).
    #[serde(default)]
    pub dry_run: bool,
    /// Continue a stopped run: the `next_cursor` it returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_after: Option<String>,
    /// Stripe only: `false` lists only events whose delivery to some endpoint has not
    /// succeeded (pending or failed), `true` only those delivered; all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_success: Option<bool>,
}

/// What a replay did (in a dry run: would do). `fetched = new + duplicates + redelivered +
/// failed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Events in the window read from the API (GitHub: distinct delivery GUIDs).
    pub fetched: u64,
    /// Events not in the ledger, now claimed and applied (inline: `processed`, `ignored` or
    /// kept `dead`) or accepted for the worker (deferred); a dry run's "would be new".
    pub new: u64,
    /// Events already in the ledger (any status), left alone.
    pub duplicates: u64,
    /// GitHub: deliveries GitHub was asked to redeliver (a dry run's "would redeliver").
    pub redelivered: u64,
    /// Events that could not be replayed (unidentifiable, database or handler failure, a
    /// refused redelivery): each is logged; run the window again to retry them.
    pub failed: u64,
    /// Where to continue (`starting_after`), or `null` once the window is done.
    pub next_cursor: Option<String>,
}

/// Limits of one run (see the module's "Time" and "Provider errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Start no request or event with less invocation time left.
    pub margin: Duration,
    /// One request's timeout (capped at 80 % of the margin, so it ends inside it).
    pub request_timeout: Duration,
    /// Retries of one request after a 429, a 5xx or a connection failure.
    pub max_retries: u32,
    /// First retry delay without `Retry-After`; doubles per retry.
    pub backoff_base: Duration,
    /// Longest wait honoured from `Retry-After`, and longest backoff.
    pub retry_after_cap: Duration,
}

impl Default for ReplayOptions {
    /// 10 s margin, 8 s request timeout, 4 retries from 500 ms, `Retry-After` up to 30 s.
    fn default() -> Self {
        Self {
            margin: DEFAULT_MARGIN,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            backoff_base: DEFAULT_BACKOFF_BASE,
            retry_after_cap: DEFAULT_RETRY_AFTER_CAP,
        }
    }
}

/// Why a replay was refused or stopped; [`ReplayError::report`] says how far it got. Its text
/// and causes are its kind's ([`ReplayErrorKind`]).
#[derive(Debug)]
pub struct ReplayError {
    /// What went wrong (boxed: the error stays small on the `Ok` path).
    pub kind: Box<ReplayErrorKind>,
    /// What was done before (all zero for a refused request), with `next_cursor` = where to
    /// resume (the request's own `starting_after` when nothing was done).
    pub report: ReplayReport,
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.kind, f)
    }
}

/// Transparent: the kind's causes, not the kind (whose text is already this error's).
impl std::error::Error for ReplayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.kind)
    }
}

/// What went wrong in a replay. Messages name sources and settings, never a credential's value;
/// a transport or database failure is the `source`. A refusal ([`ReplayErrorKind::is_refusal`])
/// is fatal to the request: fix it and ask again; anything else stopped a run that the same
/// request with `starting_after = next_cursor` resumes (a rejected credential once it is
/// fixed, a malformed page once the API answers correctly).
#[derive(Debug, thiserror::Error)]
pub enum ReplayErrorKind {
    /// The request is malformed (bad time, `until` before `since`, a cursor of another
    /// provider): the message says what to change.
    #[error("{0}")]
    Invalid(String),
    /// No such source in the configuration.
    #[error("source {0:?} is not configured")]
    UnknownSource(String),
    /// A source of a scheme without a replayable API.
    #[error("source {name:?} has scheme {scheme}: replay is supported for stripe, paddle and github sources")]
    Unsupported {
        /// The source.
        name: String,
        /// Its scheme.
        scheme: &'static str,
    },
    /// The source lacks what replay needs (`api_key`, `github_hook`).
    #[error("source {name:?} cannot be replayed: {problem}")]
    NotConfigured {
        /// The source.
        name: String,
        /// What to configure.
        problem: String,
    },
    /// `since` is before now minus the source's replay look-back.
    #[error("source {name:?}: since {since} is further back than the replay look-back allows (replay_lookback_days: {lookback_days} days); the earliest allowed since is {earliest}")]
    BeyondLookBack {
        /// The source.
        name: String,
        /// The request's `since`.
        since: String,
        /// The look-back, whole days.
        lookback_days: u64,
        /// Now minus the look-back, RFC 3339.
        earliest: String,
    },
    /// The provider refused the credential (401 or 403).
    #[error("source {name:?}: the provider refused the credential in {setting} (HTTP {status}): check that it is current and allowed to {allowed}")]
    Unauthorized {
        /// The source.
        name: String,
        /// The HTTP status.
        status: u16,
        /// The setting holding the credential (`api_key`, or the GitHub App's).
        setting: &'static str,
        /// What the credential must be allowed to do.
        allowed: &'static str,
    },
    /// A page that is not the provider's documented list shape.
    #[error("source {name:?}: malformed page from the provider's API ({detail}); the run stopped: resume from next_cursor once the API answers correctly")]
    MalformedPage {
        /// The source.
        name: String,
        /// What was wrong (never the page's content).
        detail: String,
    },
    /// The provider answered an error that retrying will not fix (4xx), or kept failing
    /// after every retry (429, 5xx).
    #[error("source {name:?}: the provider answered HTTP {status} after {attempts} attempt(s): {message}")]
    Provider {
        /// The source.
        name: String,
        /// The last HTTP status.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// The provider's error message, when it gave one (credential values scrubbed).
        message: String,
    },
    /// The provider's API could not be reached after every retry (the run stopped: resume
    /// from `next_cursor` later).
    #[error("source {name:?}: cannot reach the provider's API after {attempts} attempt(s)")]
    Unreachable {
        /// The source.
        name: String,
        /// Attempts made.
        attempts: u32,
        /// The last transport error (it names the URL, which carries no credential).
        #[source]
        cause: reqwest::Error,
    },
    /// The invocation's time ran out before a single event was handled (or while waiting to
    /// retry): invoke again with the same request.
    #[error("source {name:?}: the invocation's time ran short before anything was replayed; invoke again with the same request")]
    OutOfTime {
        /// The source.
        name: String,
    },
    /// No database connection for GitHub's lookups (retryable: resume from `next_cursor`).
    #[error("source {name:?}: no database connection")]
    NoConnection {
        /// The source.
        name: String,
        /// The pool's error.
        #[source]
        cause: crate::db::NoConnection,
    },
    /// The ledger could not be read (GitHub's lookups; retryable: resume from `next_cursor`).
    #[error("source {name:?}: the ledger could not be read")]
    Database {
        /// The source.
        name: String,
        /// The database's error.
        #[source]
        cause: crate::ledger::LedgerError,
    },
    /// The HTTP client could not be built (TLS initialisation; fatal).
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
}

impl ReplayErrorKind {
    /// Whether the request was refused before any provider request: an invalid input, an
    /// unknown or unsupported source, a missing credential, a window beyond the look-back.
    /// Nothing was read or written; resuming cannot help, fixing the request does.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ReplayErrorKind::Invalid(_)
                | ReplayErrorKind::UnknownSource(_)
                | ReplayErrorKind::Unsupported { .. }
                | ReplayErrorKind::NotConfigured { .. }
                | ReplayErrorKind::BeyondLookBack { .. }
        )
    }
}

impl ReplayErrorKind {
    fn into_error(self, report: ReplayReport) -> ReplayError {
        ReplayError {
            kind: Box::new(self),
            report,
        }
    }
}

/// The replay window, validated against the source's look-back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Start, inclusive.
    pub since: SystemTime,
    /// End, inclusive.
    pub until: SystemTime,
}

impl Window {
    /// Whether `at` is inside the window.
    pub fn contains(&self, at: SystemTime) -> bool {
        self.since <= at && at <= self.until
    }

    /// Validates `request`'s window for `config` at `now`.
    ///
    /// # Errors
    /// [`ReplayErrorKind::Invalid`] for a time that is not RFC 3339 or an `until` before
    /// `since`; [`ReplayErrorKind::BeyondLookBack`] for a `since` before `now` minus the
    /// source's `replay_lookback` ([`crate::retention::SourceRetention`]).
    pub fn check(
        config: &SourceConfig,
        request: &ReplayRequest,
        now: SystemTime,
    ) -> Result<Self, ReplayErrorKind> {
        let since = parse_rfc3339(&request.since)
            .map_err(|why| ReplayErrorKind::Invalid(format!("since: {why}")))?;
        let until = match &request.until {
            Some(until) => parse_rfc3339(until)
                .map_err(|why| ReplayErrorKind::Invalid(format!("until: {why}")))?,
            None => now,
        };
        if until < since {
            return Err(ReplayErrorKind::Invalid(format!(
                "until ({}) is before since ({})",
                rfc3339(until),
                rfc3339(since)
            )));
        }
        let lookback = config.retention.replay_lookback;
        let earliest = now.checked_sub(lookback).unwrap_or(SystemTime::UNIX_EPOCH);
        if since < earliest {
            return Err(ReplayErrorKind::BeyondLookBack {
                name: config.name.clone(),
                since: request.since.clone(),
                lookback_days: lookback.as_secs() / 86_400,
                earliest: rfc3339(earliest),
            });
        }
        Ok(Self { since, until })
    }
}

/// serde_json's error category, without the input its message may quote.
pub(crate) fn json_problem(error: &serde_json::Error) -> &'static str {
    match error.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "missing or mistyped fields",
        serde_json::error::Category::Eof => "truncated JSON",
    }
}

/// Replays windows of events; built once per execution environment (one HTTP client, its
/// connections reused across runs).
#[derive(Debug, Clone)]
pub struct Replayer {
    client: reqwest::Client,
    options: ReplayOptions,
}

impl Replayer {
    /// A replayer with `options` and its own HTTP client (native TLS).
    ///
    /// # Errors
    /// [`ReplayErrorKind::Client`] when the TLS backend cannot initialise.
    pub fn new(options: ReplayOptions) -> Result<Self, ReplayError> {
        let client = crate::https::client_builder()
            .user_agent(concat!("hookledger-replay/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(options.request_timeout)
            // The providers' list APIs do not redirect: client_builder answers a redirect as a
            // failed request rather than following it with the credential.
            .build()
            .map_err(|e| ReplayErrorKind::Client(e).into_error(ReplayReport::default()))?;
        Ok(Self { client, options })
    }

    /// The limits this replayer runs with.
    pub fn options(&self) -> &ReplayOptions {
        &self.options
    }

    /// Replays `request` through `receiver` (its sources, pool, handlers and doorbell):
    /// validates the source and window, pages the provider's API, hands each Stripe or Paddle
    /// event to [`Receiver::replay`] (or asks GitHub to redeliver), calls `progress` with the
    /// counts so far after each page, and stops starting requests and events once
    /// `remaining()` is below the margin (`next_cursor` then says where to continue). Logs one
    /// `replay_run` line with the counts, whatever the result; each event's own line is
    /// logged by [`Receiver::replay`] (GitHub: a `replay` line per GUID).
    ///
    /// # Errors
    /// [`ReplayError`], whose `report` counts what was done and whose `next_cursor` is where
    /// to resume; see [`ReplayErrorKind`] for the cases.
    pub async fn run(
        &self,
        receiver: &Receiver,
        request: &ReplayRequest,
        remaining: impl Fn() -> Duration + Send + Sync,
        mut progress: impl FnMut(&ReplayReport) + Send,
    ) -> Result<ReplayReport, ReplayError> {
        let started = Instant::now();
        let mut run = Run {
            receiver,
            request,
            options: &self.options,
            client: &self.client,
            remaining: &remaining,
            progress: &mut progress,
            report: ReplayReport {
                next_cursor: request.starting_after.clone(),
                ..ReplayReport::default()
            },
            handled: 0,
            seen: std::collections::HashSet::new(),
        };
        let result = run.run().await;
        let report = run.report;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let (stopped, error) = match &result {
            Ok(()) if report.next_cursor.is_none() => ("done", String::new()),
            Ok(()) => ("out_of_time", String::new()),
            // A request refused before any provider request (bad input, configuration) is the
            // operator's to fix and already their answer: not an error in the log.
            Err(kind) if kind.is_refusal() => ("refused", kind.to_string()),
            Err(kind) => ("error", crate::error_chain::error_chain(kind)),
        };
        let next_cursor = report.next_cursor.as_deref().unwrap_or("");
        let until = request.until.as_deref().unwrap_or("");
        if stopped == "error" {
            tracing::error!(
                source = request.source.as_str(),
                since = request.since.as_str(),
                until,
                dry_run = request.dry_run,
                fetched = report.fetched,
                new = report.new,
                duplicates = report.duplicates,
                redelivered = report.redelivered,
                failed = report.failed,
                next_cursor,
                stopped,
                elapsed_ms,
                error = error.as_str(),
                "replay_run"
            );
        } else {
            tracing::info!(
                source = request.source.as_str(),
                since = request.since.as_str(),
                until,
                dry_run = request.dry_run,
                fetched = report.fetched,
                new = report.new,
                duplicates = report.duplicates,
                redelivered = report.redelivered,
                failed = report.failed,
                next_cursor,
                stopped,
                elapsed_ms,
                error = error.as_str(),
                "replay_run"
            );
        }
        match result {
            Ok(()) => Ok(report),
            Err(kind) => Err(kind.into_error(report)),
        }
    }
}

/// One run's state, shared by the providers' loops.
pub(crate) struct Run<'a> {
    pub(crate) receiver: &'a Receiver,
    pub(crate) request: &'a ReplayRequest,
    pub(crate) options: &'a ReplayOptions,
    pub(crate) client: &'a reqwest::Client,
    remaining: &'a (dyn Fn() -> Duration + Send + Sync),
    progress: &'a mut (dyn FnMut(&ReplayReport) + Send),
    /// The counts so far; `next_cursor` is always where to resume.
    pub(crate) report: ReplayReport,
    /// Events (or GUIDs) handled so far, including those skipped as outside the window.
    handled: u64,
    /// What this run has read already: event ids (Stripe, Paddle) or page cursors (GitHub). A
    /// page that brings nothing new means the provider's cursor did not advance: the run stops
    /// as on a malformed page instead of reading the same page forever.
    seen: std::collections::HashSet<String>,
}

impl Run<'_> {
    async fn run(&mut self) -> Result<(), ReplayErrorKind> {
        let Some(config) = self.receiver.sources.get(&self.request.source) else {
            return Err(ReplayErrorKind::UnknownSource(self.request.source.clone()));
        };
        if !matches!(
            config.scheme,
            Scheme::Stripe | Scheme::Paddle | Scheme::Github
        ) {
            return Err(ReplayErrorKind::Unsupported {
                name: config.name.clone(),
                scheme: config.scheme.name(),
            });
        }
        if self.request.delivery_success.is_some() && config.scheme != Scheme::Stripe {
            return Err(ReplayErrorKind::Invalid(
                "delivery_success applies to stripe sources only".to_owned(),
            ));
        }
        let window = Window::check(&config, self.request, SystemTime::now())?;
        match config.scheme {
            Scheme::Stripe => stripe::replay(self, &config, window).await,
            Scheme::Paddle => paddle::replay(self, &config, window).await,
            _ => github::replay(self, &config, window).await,
        }
    }

    /// Whether too little time is left to start another request or event.
    pub(crate) fn out_of_time(&self) -> bool {
        (self.remaining)() < self.options.margin
    }

    /// Time left in the invocation.
    pub(crate) fn remaining(&self) -> Duration {
        (self.remaining)()
    }

    /// Stops for lack of time: a normal early stop once something was handled (the report's
    /// `next_cursor` says where to continue), an error before anything was.
    pub(crate) fn stop_for_time(&self, source: &str) -> Result<(), ReplayErrorKind> {
        if self.handled == 0 {
            Err(ReplayErrorKind::OutOfTime {
                name: source.to_owned(),
            })
        } else {
            Ok(())
        }
    }

    /// Records that one event (or GUID) was handled, with the cursor that resumes after it.
    pub(crate) fn handled(&mut self, cursor: String) {
        self.handled += 1;
        self.report.next_cursor = Some(cursor);
    }

    /// Whether `key` (an event id, or a page cursor) is new to this run; remembers it.
    pub(crate) fn first_sight(&mut self, key: &str) -> bool {
        self.seen.insert(key.to_owned())
    }

    /// Calls the progress callback with the counts so far.
    pub(crate) fn progress(&mut self) {
        (self.progress)(&self.report);
    }

    /// Replays one page of an event list (Stripe, Paddle): `events` as (event id, whether it is
    /// in the window, its raw JSON), in the API's order. Refuses a page that cannot be paged on
    /// (`has_more` with nothing, or with only events this run read already: the cursor did not
    /// advance), finds the page's known keys in one read ([`Run::known`]), then replays or
    /// counts each new in-window event and moves the cursor past it. `Ok(false)` when time ran
    /// short part-way (the cursor says where to continue).
    ///
    /// # Errors
    /// [`ReplayErrorKind::MalformedPage`] as said.
    pub(crate) async fn replay_page(
        &mut self,
        config: &SourceConfig,
        events: Vec<(String, bool, &serde_json::value::RawValue)>,
        has_more: bool,
    ) -> Result<bool, ReplayErrorKind> {
        let malformed = |detail: &str| ReplayErrorKind::MalformedPage {
            name: config.name.clone(),
            detail: detail.to_owned(),
        };
        if events.is_empty() && has_more {
            return Err(malformed("has_more is true on an empty page"));
        }
        let fresh: Vec<_> = events
            .into_iter()
            .filter(|(id, _, _)| self.first_sight(id))
            .collect();
        if fresh.is_empty() && has_more {
            return Err(malformed(
                "the page repeats events already read: the cursor did not advance",
            ));
        }
        let ids: Vec<String> = fresh.iter().map(|(id, _, _)| id.clone()).collect();
        let known = self.known(config, &ids).await;
        for (id, in_window, raw) in fresh {
            if self.out_of_time() {
                self.progress();
                return Ok(false);
            }
            if in_window {
                if known.contains(&id) {
                    self.known_duplicate(config, &id);
                } else {
                    self.replay_event(config, raw.get().as_bytes()).await;
                }
            }
            self.handled(id);
        }
        Ok(true)
    }

    /// Which of `ids` (one page's events) `config`'s ledger holds already, in one read: those
    /// are duplicates whatever their bytes, status or age (see [`Receiver::replay`]), so they
    /// are counted without a claim each (the claim of a known key costs two round trips: its
    /// INSERT, then the lookup). An empty set when the read fails: every event then goes
    /// through the claim, which decides alone.
    pub(crate) async fn known(
        &self,
        config: &SourceConfig,
        ids: &[String],
    ) -> std::collections::HashSet<String> {
        let Ok(conn) = self.receiver.pool.get().await else {
            return Default::default();
        };
        match crate::ledger::lookup_many(&conn, &config.name, ids).await {
            Ok(rows) => rows.into_keys().collect(),
            Err(_) => Default::default(),
        }
    }

    /// Counts an event [`Run::known`] found in the ledger as a duplicate, with the `replay`
    /// log line [`Receiver::replay`] would have written.
    pub(crate) fn known_duplicate(&mut self, config: &SourceConfig, event_id: &str) {
        self.report.fetched += 1;
        self.report.duplicates += 1;
        tracing::info!(
            source = config.name.as_str(),
            event_id,
            outcome = Outcome::Duplicate.as_str(),
            status = 200,
            dry_run = self.request.dry_run,
            replayed = true,
            "replay"
        );
    }

    /// Hands one API-fetched event (its raw JSON) to [`Receiver::replay`] and counts its
    /// outcome.
    pub(crate) async fn replay_event(&mut self, config: &SourceConfig, body: &[u8]) {
        self.report.fetched += 1;
        let reply = self
            .receiver
            .replay(config, body, self.request.dry_run)
            .await;
        match reply.outcome {
            Outcome::Processed
            | Outcome::Ignored
            | Outcome::Dead
            | Outcome::Accepted
            | Outcome::New
                if reply.status < 400 =>
            {
                self.report.new += 1
            }
            Outcome::Duplicate if reply.status < 400 => self.report.duplicates += 1,
            _ => self.report.failed += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Sources;

    fn source() -> std::sync::Arc<SourceConfig> {
        let sources = Sources::from_json(
            r#"[{"name": "pay", "scheme": "stripe", "secrets": ["whsec_x"],
                 "replay_lookback_days": 3, "retention_days": 30}]"#,
        )
        .unwrap();
        sources.get("pay").unwrap().clone()
    }

    fn request(since: &str, until: Option<&str>) -> ReplayRequest {
        ReplayRequest {
            source: "pay".to_owned(),
            since: since.to_owned(),
            until: until.map(str::to_owned),
            dry_run: false,
            starting_after: None,
            delivery_success: None,
        }
    }

    #[test]
    fn the_window_may_not_reach_past_the_look_back_nor_end_before_it_starts() {
        let now = parse_rfc3339("2026-12-10T12:00:00Z").unwrap();
        let config = source();
        let window = Window::check(&config, &request("2026-12-08T00:00:00Z", None), now).unwrap();
        assert_eq!(window.until, now);
        assert!(window.contains(now));
        let e = Window::check(&config, &request("2026-12-07T11:59:59Z", None), now).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("\"pay\""), "{text}");
        assert!(text.contains("replay_lookback_days"), "{text}");
        assert!(
            text.contains("earliest allowed since is 2026-12-07T12:00:00"),
            "{text}"
        );
        let e = Window::check(
            &config,
            &request("2026-12-09T00:00:00Z", Some("2026-12-08T00:00:00Z")),
            now,
        )
        .unwrap_err();
        assert!(e.to_string().contains("before since"), "{e}");
        let e = Window::check(&config, &request("yesterday", None), now).unwrap_err();
        assert!(e.to_string().starts_with("since:"), "{e}");
    }

    #[test]
    fn the_request_and_report_have_the_documented_json() {
        let request: ReplayRequest =
            serde_json::from_str(r#"{"source": "s", "since": "2026-12-01T00:00:00Z"}"#).unwrap();
        assert!(!request.dry_run);
        assert!(serde_json::from_str::<ReplayRequest>(
            r#"{"source": "s", "since": "x", "sinse": "y"}"#
        )
        .is_err());
        let report = ReplayReport {
            fetched: 3,
            new: 1,
            duplicates: 1,
            redelivered: 0,
            failed: 1,
            next_cursor: None,
        };
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            serde_json::json!({"fetched": 3, "new": 1, "duplicates": 1, "redelivered": 0,
                               "failed": 1, "next_cursor": null})
        );
    }
}
