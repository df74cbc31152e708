//! hookledger's ledger console: what happened to every event, and re-drive, in the browser.
//! Server-rendered HTML (maud), no JavaScript; served by `hookledger console` (the operator
//! CLI), which reads the same `DATABASE_URL` and sources as the functions, or by the `console`
//! function behind API Gateway's JWT authorizer (`functions/console`, template parameter
//! `ConsoleJwtIssuer`).
//!
//! # Routes
//!
//! | route | what |
//! |---|---|
//! | `GET /` | overview: events per minute by status, per source (SVG, `?hours=` 1 to 48, default 6), and the auditor's figures live (`shared::audit::peek`) |
//! | `GET /events` | the ledger, newest first, with each event's outcome: `source`, `status`, `outcome` (`shared::ledger::EventOutcome`), `event_type`, `from`, `until` (claimed_at; RFC 3339 or `datetime-local`, UTC), `id_prefix` (with a `source`); keyset pages of [`pages::events::PAGE_SIZE`] (`after`, an opaque cursor) |
//! | `GET /events/{source}/{event_id}` | one event (path segments percent-encoded): its outcome and origin, timeline, stored response, payload (behind `<details>`, never for a source that keeps digests only), outbox messages; the Forget form ([`pages::forget`]) unless read-only |
//! | `GET /stuck` | the auditor's stuck list (`shared::audit::stuck_list`, what `hookledger stuck` prints) |
//! | `GET /dead` | dead letters and dead outbox messages (`source`, `since`, `until`: dead_at), with re-drive links |
//! | `GET /rejected` | the deliveries the receiver refused, per source and reason, over the last 24 hours and 7 days, and when each was last seen (`shared::rejected`, what `hookledger rejected` prints) |
//! | `GET /redrive/confirm` | how many rows a re-drive would move (the same code's dry run): `what` (`dead` or `outbox`), `source`, and `event_id` or `since` (+ `until`) |
//! | `POST /redrive` | the re-drive itself (`shared::redrive::run`, as `hookledger redrive`): the same fields, `confirmed` (the count confirmed) and `csrf`; refused when the count changed |
//! | `GET /forget/confirm` | what an erasure would take (the same code's dry run), from the event page's Forget form: `source`, `event_id`, `scope` (`event` or `subject`: every event of its data subject), `by`, `reason` |
//! | `POST /forget` | the erasure itself (`shared::forget`, as `hookledger forget`): the same fields, `confirmed` (the count confirmed) and `csrf`; refused when the count changed |
//! | `GET /style.css` | the stylesheet |
//!
//! # Security
//!
//! Every route needs the access token ([`auth`]): `?token=` once (sets an HttpOnly,
//! SameSite=Strict session cookie named after the port, [`auth::cookie_name`], whose value is
//! not the token, and redirects to the same URL without it), then the cookie or
//! `Authorization: Bearer`; else 401. Behind API Gateway ([`Auth::Authorizer`]) every route
//! needs the principal of a validated JWT instead (else 401), admitted by the deployment's
//! allow rule (else 403). POSTs carry a CSRF token (403
//! without it). In read-only
//! mode ([`ConsoleConfig::read_only`]) there is no re-drive and no erasure: no buttons, and
//! the POST routes and their confirmations answer 403. Every response has `Cache-Control: no-store`, `X-Frame-Options: DENY`, a
//! `Content-Security-Policy` of `default-src 'none'` (the stylesheet and images from self, forms
//! to self) and `Referrer-Policy: no-referrer`. One log line per request: method, route
//! template, status, duration (never the query string).
//!
//! # Start it against a database
//!
//! ```text
//! DATABASE_URL=postgres://USER:PASSWORD@HOST/DB \
//! HOOKLEDGER_SOURCES_FILE=events/sources.local.json \
//!   cargo run -p hookledger-handlers --bin hookledger -- console [--bind 127.0.0.1:8470] [--read-only]
//! ```
//!
//! (any of the CLI's sources: `HOOKLEDGER_SOURCES`, `HOOKLEDGER_SOURCES_FILE`,
//! `HOOKLEDGER_SOURCES_SECRET_ARN`; `HOOKLEDGER_CONSOLE_TOKEN` fixes the token). On a
//! throwaway PostgreSQL: `scripts/with-postgres.sh sh -c 'cargo run -p hookledger-handlers --bin hookledger --
//! migrate && HOOKLEDGER_SOURCES_FILE=events/sources.local.json cargo run -p cli --bin
//! hookledger -- console'`. It prints `hookledger console: http://127.0.0.1:8470/?token=...`:
//! open that URL.
//!
//! # Use from Rust
//!
//! ```no_run
//! # async fn serve(settings: shared::Settings, pool: shared::db::Pool, registry: shared::handler::Registry) -> std::io::Result<()> {
//! use hookledger_console::{AccessToken, Auth, Console, ConsoleConfig};
//! let console = Console::new(
//!     settings,
//!     pool,
//!     registry,
//!     shared::doorbell::Doorbell::off(),
//!     ConsoleConfig { auth: Auth::Token(AccessToken::random()?), read_only: false },
//! );
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! println!("{}", console.url(listener.local_addr()?));
//! console.serve(listener, std::future::pending()).await
//! # }
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use shared::db::Pool;
use shared::doorbell::Doorbell;
use shared::handler::Registry;
use shared::Settings;

pub mod auth;
pub mod chart;
pub mod error;
pub mod layout;
pub mod pages;
pub mod queries;
pub mod time_input;

pub use auth::{AccessToken, Auth};
pub use error::PageError;

/// The default address of `hookledger console`.
pub const DEFAULT_BIND: &str = "127.0.0.1:8470";

/// How the console runs.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// How requests prove who they are: the access token, or API Gateway's JWT authorizer.
    pub auth: Auth,
    /// No re-drive and no erasure: no buttons, and the POST routes answer 403.
    pub read_only: bool,
}

/// What every handler reads: the settings, the pool, the handlers and the worker's doorbell
/// (for re-drive), the mode.
#[derive(Debug)]
pub struct State {
    /// The settings, as the functions read them.
    pub settings: Settings,
    /// The database.
    pub pool: Pool,
    /// The handlers (a re-drive of ignored events checks a handler exists; kept for the same
    /// call as the CLI's).
    pub handlers: Registry,
    /// Rung after a re-drive moved rows.
    pub doorbell: Doorbell,
    /// Token and mode.
    pub config: ConsoleConfig,
}

/// Shared state of the console's handlers.
pub type AppState = Arc<State>;

/// The console: build it once, then [`Console::router`] or [`Console::serve`].
#[derive(Debug, Clone)]
pub struct Console {
    state: AppState,
}

impl Console {
    /// A console over `pool` with `settings` (its sources and audit thresholds), `handlers`
    /// and `doorbell` (what a re-drive calls, as the CLI's `redrive` does).
    pub fn new(
        settings: Settings,
        pool: Pool,
        handlers: Registry,
        doorbell: Doorbell,
        config: ConsoleConfig,
    ) -> Self {
        Self {
            state: Arc::new(State {
                settings,
                pool,
                handlers,
                doorbell,
                config,
            }),
        }
    }

    /// The URL to open: `http://ADDR/?token=TOKEN` with the access token, `http://ADDR/`
    /// behind the authorizer.
    pub fn url(&self, addr: SocketAddr) -> String {
        match &self.state.config.auth {
            Auth::Token(token) => format!("http://{addr}/?token={}", token.expose()),
            Auth::Authorizer(..) => format!("http://{addr}/"),
        }
    }

    /// The router: every route of the module's table behind [`auth::authenticate`], the
    /// security headers and the request log. With [`Auth::Token`] the session cookie is bound
    /// to the port the console listens on, which this router does not know (it uses port 0):
    /// serve that mode with [`Console::serve`].
    pub fn router(&self) -> Router {
        self.router_on(0)
    }

    /// [`Console::router`] for a console listening on `port` (the [`auth::ListenPort`] of every
    /// request).
    fn router_on(&self, port: u16) -> Router {
        let state = self.state.clone();
        Router::new()
            .route("/", get(pages::overview::page))
            .route("/events", get(pages::events::page))
            .route("/events/{source}/{event_id}", get(pages::event::page))
            .route("/stuck", get(pages::stuck::page))
            .route("/dead", get(pages::dead::page))
            .route("/rejected", get(pages::rejected::page))
            .route("/redrive/confirm", get(pages::redrive::confirm))
            .route("/redrive", post(pages::redrive::submit))
            .route("/forget/confirm", get(pages::forget::confirm))
            .route("/forget", post(pages::forget::submit))
            .route("/style.css", get(layout::stylesheet))
            .fallback(pages::not_found)
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                auth::authenticate,
            ))
            .layer(axum::middleware::from_fn(layout::security_headers))
            .layer(axum::middleware::from_fn(layout::log_request))
            .layer(axum::Extension(auth::ListenPort(port)))
            .with_state(state)
    }

    /// Serves [`Console::router`] on `listener` until `shutdown` resolves, then finishes the
    /// requests in flight (graceful shutdown). The session cookie is bound to the listener's
    /// port ([`auth::cookie_name`]).
    ///
    /// # Errors
    /// When the listener's address cannot be read, or accepting connections fails.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let port = listener.local_addr()?.port();
        axum::serve(listener, self.router_on(port))
            .with_graceful_shutdown(shutdown)
            .await
    }
}
