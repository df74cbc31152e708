//! Erasure from the console (issue 28): the event page's Forget form leads to
//! `GET /forget/confirm`, which says what would be erased (the same code's dry run), and
//! `POST /forget` erases it (`shared::forget`, what `hookledger forget` and the replay
//! function's `forget` input run) if the count is still the one confirmed; else it refuses and
//! shows the new count.
//!
//! Fields (query or form): `source`, `event_id`, `scope` (`event`: this event; `subject`:
//! every event of its data subject, found by the subject hash this event was claimed with, so
//! the identifier is never typed into the console), `by` (who asks: recorded in the history
//! with `(console)`, or `(console: <sub>)` behind the authorizer) and `reason`. The POST adds
//! `confirmed` (the count the confirmation showed) and `csrf`.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form};
use maud::{html, Markup};
use serde::Deserialize;
use shared::forget::{Erasure, ForgetReport, Target};

use crate::auth::{Csrf, Principal};
use crate::layout::{event_url, shell};
use crate::pages::{given, text};
use crate::{AppState, PageError};

/// The fields of an erasure (see the module's docs).
#[derive(Debug, Default, Deserialize)]
pub struct ForgetForm {
    /// The source.
    pub source: Option<String>,
    /// The event at hand.
    pub event_id: Option<String>,
    /// `event` (default) or `subject`.
    pub scope: Option<String>,
    /// Who asks.
    pub by: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// The count confirmed (POST).
    pub confirmed: Option<String>,
    /// The CSRF token (POST).
    pub csrf: Option<String>,
}

/// An erasure, validated.
#[derive(Debug)]
struct Request {
    source: String,
    event_id: String,
    subject: bool,
    target: Target,
    erasure: Erasure,
}

impl ForgetForm {
    /// The request it names; for `scope=subject`, the event's subject read from the ledger.
    async fn request(
        &self,
        state: &AppState,
        principal: Option<&Principal>,
    ) -> Result<Request, PageError> {
        let source = text("source", given(&self.source))?
            .ok_or_else(|| PageError::bad("source", "give the source"))?;
        let event_id = text("event_id", given(&self.event_id))?
            .ok_or_else(|| PageError::bad("event_id", "give the event"))?;
        let subject = match given(&self.scope).as_deref() {
            None | Some("event") => false,
            Some("subject") => true,
            Some(_) => return Err(PageError::bad("scope", "event or subject")),
        };
        let by = given(&self.by).ok_or_else(|| {
            PageError::bad("by", "say who asks for the erasure (your name, a ticket)")
        })?;
        // Where it was asked: the console, and who the authorizer let in.
        let by = match principal {
            Some(principal) => format!("{by} (console: {})", principal.sub),
            None => format!("{by} (console)"),
        };
        let erasure = Erasure::new(&by, given(&self.reason).as_deref())?;
        let target = if subject {
            shared::forget::subject_of(&state.pool, &source, &event_id)
                .await?
                .ok_or_else(|| {
                    PageError::bad(
                        "scope",
                        "this event names no data subject (its source has no \"subject\", or \
                         its payload did not name one): forget it alone",
                    )
                })?
        } else {
            Target::Event {
                source: source.clone(),
                event_id: event_id.clone(),
            }
        };
        Ok(Request {
            source,
            event_id,
            subject,
            target,
            erasure,
        })
    }

    /// The request's fields as hidden form pairs (without `confirmed` and `csrf`).
    fn pairs(&self) -> Vec<(&'static str, String)> {
        [
            ("source", &self.source),
            ("event_id", &self.event_id),
            ("scope", &self.scope),
            ("by", &self.by),
            ("reason", &self.reason),
        ]
        .into_iter()
        .filter_map(|(name, value)| given(value).map(|v| (name, v)))
        .collect()
    }
}

/// The event page's Forget form (a GET to the confirmation): who asks, why, and whether to
/// take every event of the event's data subject (offered when `source` names subjects).
pub fn form(state: &AppState, source: &str, event_id: &str) -> Markup {
    let names_subjects = state
        .settings
        .sources
        .get(source)
        .is_some_and(|s| s.subject.is_some());
    html! {
        details #forget {
            summary { "Forget (erase the payloads)…" }
            form method="get" action="/forget/confirm" {
                input type="hidden" name="source" value=(source);
                input type="hidden" name="event_id" value=(event_id);
                @if names_subjects {
                    p {
                        label { input type="radio" name="scope" value="event" checked; " this event" }
                        " "
                        label { input type="radio" name="scope" value="subject"; " every event of its data subject" }
                    }
                }
                p { label { "Asked by " input type="text" name="by" required maxlength="150"; } }
                p { label { "Reason " input type="text" name="reason" maxlength="1000"; } }
                button type="submit" { "Review the erasure…" }
            }
        }
    }
}

/// What the request takes, in words (no identifier: a subject is named by its event).
fn describe(request: &Request) -> String {
    if request.subject {
        format!(
            "every event of the data subject of {}/{}",
            request.source, request.event_id
        )
    } else {
        format!("the event {}/{}", request.source, request.event_id)
    }
}

/// The confirmation's form: the same fields, the count, the CSRF token.
fn confirm_form(csrf: &Csrf, form: &ForgetForm, erasable: u64) -> Markup {
    html! {
        form method="post" action="/forget" {
            @for (name, value) in form.pairs() { input type="hidden" name=(name) value=(value); }
            input type="hidden" name="confirmed" value=(erasable);
            input type="hidden" name="csrf" value=(csrf.value());
            button type="submit" { "Forget " (erasable) }
        }
    }
}

/// The unfinished events a report names, with links.
fn unfinished(report: &ForgetReport) -> Markup {
    html! {
        @if report.unfinished_count > 0 {
            p.warn #unfinished { (report.unfinished_count) " unfinished (claimed, processing, failed, or with an outbox message to dispatch) keep their payload, which the worker needs: forget again once they finish." }
            ul.mono { @for id in &report.unfinished { li { a href=(event_url(&report.source, id)) { (id) } } } }
        }
    }
}

fn refuse_read_only(state: &AppState) -> Result<(), PageError> {
    if state.config.read_only {
        return Err(PageError::Forbidden(
            "The console runs read-only: no erasure.",
        ));
    }
    Ok(())
}

/// `GET /forget/confirm`.
///
/// # Errors
/// 403 in read-only mode; 400 naming a bad field; 503 when the database fails.
pub async fn confirm(
    State(state): State<AppState>,
    csrf: Csrf,
    principal: Option<Extension<Principal>>,
    Query(form): Query<ForgetForm>,
) -> Result<Markup, PageError> {
    refuse_read_only(&state)?;
    let request = form.request(&state, principal.as_deref()).await?;
    let report =
        shared::forget::run_target(&state.pool, &request.target, &request.erasure, true).await?;
    let content = html! {
        h1 { "Forget: confirm" }
        p { "This erases the stored payload, the stored response, the last error, the values in the history and the outbox payloads of " (describe(&request)) ". The key, status, digests and times stay: a provider's retry is still answered as a duplicate, and nothing runs twice. It cannot be undone." }
        p #count { "It will erase " strong #erasable { (report.erased) } " of " (report.events) " events and " (report.outbox_messages) " outbox messages." }
        (unfinished(&report))
        @if report.erased > 0 { (confirm_form(&csrf, &form, report.erased)) } @else { p { "Nothing to erase." } }
        p { a href=(event_url(&request.source, &request.event_id)) { "Back to the event" } }
    };
    Ok(shell("Forget", content, None))
}

/// `POST /forget`.
///
/// # Errors
/// 403 in read-only mode or without the right CSRF token; 400 naming a bad field; 409 (a page)
/// when the count changed since the confirmation; 503 when the database fails.
pub async fn submit(
    State(state): State<AppState>,
    csrf: Csrf,
    principal: Option<Extension<Principal>>,
    Form(form): Form<ForgetForm>,
) -> Result<Response, PageError> {
    refuse_read_only(&state)?;
    if !csrf.check(form.csrf.as_deref()) {
        return Err(PageError::Forbidden(
            "The form's CSRF token is missing or wrong: reload the confirmation page.",
        ));
    }
    let request = form.request(&state, principal.as_deref()).await?;
    let confirmed = given(&form.confirmed)
        .and_then(|c| c.parse::<u64>().ok())
        .ok_or_else(|| PageError::bad("confirmed", "the count the confirmation showed"))?;
    let now =
        shared::forget::run_target(&state.pool, &request.target, &request.erasure, true).await?;
    if now.erased != confirmed {
        let content = html! {
            h1 { "Forget refused: the count changed" }
            p #count { "You confirmed " (confirmed) ", but " (describe(&request)) " now has "
                strong #erasable { (now.erased) } " events to erase. Nothing was erased." }
            (unfinished(&now))
            @if now.erased > 0 { (confirm_form(&csrf, &form, now.erased)) }
        };
        return Ok((StatusCode::CONFLICT, shell("Forget refused", content, None)).into_response());
    }
    let report =
        shared::forget::run_target(&state.pool, &request.target, &request.erasure, false).await?;
    let content = html! {
        h1 { "Forget done" }
        p #count { "Erased " strong #erased { (report.erased) } " events and emptied "
            strong #emptied { (report.outbox_messages) } " outbox messages of " (describe(&request)) "." }
        (unfinished(&report))
        @if !report.done { p.warn { "Stopped after its batches: review and confirm again for the rest." } }
        p { a href=(event_url(&request.source, &request.event_id)) { "Back to the event" } }
    };
    Ok(shell("Forget done", content, None).into_response())
}
