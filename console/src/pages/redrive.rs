//! Re-drive from the console: `GET /redrive/confirm` says how many rows a re-drive would move
//! (the same code's dry run), `POST /redrive` moves them (`shared::redrive::run`, what
//! `hookledger redrive` and the replay function's `redrive` input run) if the count is still
//! the one confirmed; else it refuses and shows the new count.
//!
//! Fields (query or form): `what` (`dead`: dead letters; `outbox`: dead outbox messages),
//! `source`, and either `event_id` (one event; for the outbox, its dead messages) or `since`
//! (and `until`): every one that went dead in that window (RFC 3339 or `datetime-local`, UTC).
//! The POST adds `confirmed` (the count the confirmation showed) and `csrf`.

use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use shared::doorbell::Doorbell;
use shared::redrive::{RedriveReport, RedriveSpec, Selection, Which};

use crate::auth::Csrf;
use crate::layout::{event_url, shell, url_with};
use crate::pages::{given, text};
use crate::{time_input, AppState, PageError};

/// The fields of a re-drive (see the module's docs).
#[derive(Debug, Default, Deserialize)]
pub struct RedriveForm {
    /// `dead` or `outbox`.
    pub what: Option<String>,
    /// The source.
    pub source: Option<String>,
    /// One event.
    pub event_id: Option<String>,
    /// Window start (dead_at).
    pub since: Option<String>,
    /// Window end (dead_at).
    pub until: Option<String>,
    /// The count confirmed (POST).
    pub confirmed: Option<String>,
    /// The CSRF token (POST).
    pub csrf: Option<String>,
}

/// A re-drive request, validated: the source, the spec as the CLI builds it, its selection.
#[derive(Debug)]
pub struct Request {
    /// The source.
    pub source: String,
    /// Whether it takes dead outbox messages.
    pub outbox: bool,
    /// The request as `hookledger redrive` would send it.
    pub spec: RedriveSpec,
    /// What it selects.
    pub selection: Selection,
}

impl RedriveForm {
    /// The request it names.
    ///
    /// # Errors
    /// [`PageError::BadInput`] naming the field.
    pub fn request(&self) -> Result<Request, PageError> {
        let outbox = match given(&self.what).as_deref() {
            Some("dead") => false,
            Some("outbox") => true,
            _ => return Err(PageError::bad("what", "dead or outbox")),
        };
        let source = text("source", given(&self.source))?
            .ok_or_else(|| PageError::bad("source", "give the source"))?;
        let time = |field, value: &Option<String>| {
            time_input::parse(field, value.as_deref()).map(|at| at.map(shared::timestamp::rfc3339))
        };
        let spec = RedriveSpec {
            status: Which::Dead,
            event_ids: text("event_id", given(&self.event_id))?.map(|id| vec![id]),
            event_type: None,
            since: time("since", &self.since)?,
            until: time("until", &self.until)?,
            outbox,
        };
        let selection = spec.selection()?;
        Ok(Request {
            source,
            outbox,
            spec,
            selection,
        })
    }

    /// The request's fields as query pairs (without `confirmed` and `csrf`).
    fn pairs(&self) -> Vec<(&'static str, String)> {
        [
            ("what", &self.what),
            ("source", &self.source),
            ("event_id", &self.event_id),
            ("since", &self.since),
            ("until", &self.until),
        ]
        .into_iter()
        .filter_map(|(name, value)| given(value).map(|v| (name, v)))
        .collect()
    }
}

/// Runs `request` through `shared::redrive::run`: a dry run (nothing written, no doorbell), or
/// the re-drive (rings the worker's doorbell when rows moved).
async fn run(
    state: &AppState,
    request: &Request,
    dry_run: bool,
) -> Result<RedriveReport, PageError> {
    let off = Doorbell::off();
    let doorbell = if dry_run { &off } else { &state.doorbell };
    Ok(shared::redrive::run(
        &state.pool,
        &state.settings.sources,
        &state.handlers,
        doorbell,
        &request.source,
        &request.selection,
        dry_run,
        || Duration::MAX,
        |_| {},
    )
    .await?)
}

/// What the request takes, in words.
fn describe(request: &Request) -> String {
    let what = if request.outbox {
        "dead outbox messages"
    } else {
        "dead letters"
    };
    match (&request.spec.event_ids, &request.spec.since) {
        (Some(ids), _) => format!("{} of {}/{}", what, request.source, ids.join(" ")),
        (None, Some(since)) => format!(
            "{what} of {} that went dead from {since}{}",
            request.source,
            request
                .spec
                .until
                .as_ref()
                .map(|u| format!(" until {u}"))
                .unwrap_or_else(|| " until now".to_owned())
        ),
        (None, None) => what.to_owned(),
    }
}

/// The confirmation's form: the same fields, the count, the CSRF token.
fn confirm_form(csrf: &Csrf, form: &RedriveForm, matched: u64) -> Markup {
    let csrf = csrf.value();
    html! {
        form method="post" action="/redrive" {
            @for (name, value) in form.pairs() { input type="hidden" name=(name) value=(value); }
            input type="hidden" name="confirmed" value=(matched);
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" { "Re-drive " (matched) }
        }
    }
}

/// The dry run's report as a list of what it would touch and what it leaves.
fn report_details(report: &RedriveReport) -> Markup {
    let listed = if report.status == "outbox" {
        &report.idempotency_keys
    } else {
        &report.event_ids
    };
    html! {
        @if !listed.is_empty() {
            p { (if report.dry_run { "Would move" } else { "Moved" })
                @if (listed.len() as u64) < report.matched { " (the first " (listed.len()) ")" } ":" }
            ul.mono { @for id in listed {
                @if report.status == "outbox" { li { (id) } } @else { li { a href=(event_url(&report.source, id)) { (id) } } }
            } }
        }
        @if report.no_payload > 0 { p.warn { (report.no_payload) " refused: no payload stored (the source keeps digests only)." } }
        @if !report.not_dead.is_empty() { p.note { "Not dead (left alone): " (report.not_dead.join(" ")) } }
        @if !report.not_found.is_empty() { p.note { "Not in the ledger: " (report.not_found.join(" ")) } }
    }
}

/// `GET /redrive/confirm`.
///
/// # Errors
/// 403 in read-only mode; 400 naming a bad field; 503 when the database fails.
pub async fn confirm(
    State(state): State<AppState>,
    csrf: Csrf,
    Query(form): Query<RedriveForm>,
) -> Result<Markup, PageError> {
    if state.config.read_only {
        return Err(PageError::Forbidden(
            "The console runs read-only: no re-drive.",
        ));
    }
    let request = form.request()?;
    let report = run(&state, &request, true).await?;
    let content = html! {
        h1 { "Re-drive: confirm" }
        p { "This re-drives the " (describe(&request)) "." }
        p #count { "It will touch " strong #matched { (report.matched) } " "
            (if request.outbox { "messages (back to pending for the worker's dispatch, same idempotency keys)" } else { "events (back to claimed: the worker runs each once)" }) "." }
        (report_details(&report))
        @if report.matched > 0 { (confirm_form(&csrf, &form, report.matched)) } @else { p { "Nothing to re-drive." } }
        p { a href=(url_with("/dead", &[("source", &request.source)])) { "Back to the dead letters" } }
    };
    Ok(shell("Re-drive", content, Some("/dead")))
}

/// `POST /redrive`.
///
/// # Errors
/// 403 in read-only mode or without the right CSRF token; 400 naming a bad field; 409 (a page)
/// when the count changed since the confirmation; 503 when the database fails.
pub async fn submit(
    State(state): State<AppState>,
    csrf: Csrf,
    Form(form): Form<RedriveForm>,
) -> Result<Response, PageError> {
    if state.config.read_only {
        return Err(PageError::Forbidden(
            "The console runs read-only: no re-drive.",
        ));
    }
    if !csrf.check(form.csrf.as_deref()) {
        return Err(PageError::Forbidden(
            "The form's CSRF token is missing or wrong: reload the confirmation page.",
        ));
    }
    let request = form.request()?;
    let confirmed = given(&form.confirmed)
        .and_then(|c| c.parse::<u64>().ok())
        .ok_or_else(|| PageError::bad("confirmed", "the count the confirmation showed"))?;
    let now = run(&state, &request, true).await?;
    if now.matched != confirmed {
        let content = html! {
            h1 { "Re-drive refused: the count changed" }
            p #count { "You confirmed " (confirmed) ", but the " (describe(&request)) " now number "
                strong #matched { (now.matched) } ". Nothing was re-driven." }
            (report_details(&now))
            @if now.matched > 0 { (confirm_form(&csrf, &form, now.matched)) }
        };
        return Ok((
            StatusCode::CONFLICT,
            shell("Re-drive refused", content, Some("/dead")),
        )
            .into_response());
    }
    let report = run(&state, &request, false).await?;
    let content = html! {
        h1 { "Re-drive done" }
        p #count { "Re-drove " strong #redriven { (report.redriven) } " of " (report.matched) " "
            (describe(&request)) "." }
        @if report.redriven < report.matched { p.warn { (report.matched - report.redriven) " were held by a delivery or a worker right now and left alone: try again later." } }
        (report_details(&report))
        p { a href=(url_with("/dead", &[("source", &request.source)])) { "Back to the dead letters" } }
    };
    Ok(shell("Re-drive done", content, Some("/dead")).into_response())
}
