//! GitHub: list the `github_hook`'s deliveries, `GET {hook}/deliveries?per_page=100[&cursor=..]`
//! (newest first; the next page's `cursor` comes from the `Link` header's `rel="next"`), where
//! `{hook}` is `/repos/{owner}/{name}/hooks/{id}`, `/orgs/{org}/hooks/{id}` or `/app/hook`. Each
//! delivery has `id`, `guid` (the `X-GitHub-Delivery` header, the ledger's event id),
//! `delivered_at`, `redelivery`, `status_code`, `event` and `action`; redeliveries share their
//! original's GUID, so each GUID in the window is considered once:
//!
//! | ledger row for the GUID | replay |
//! |---|---|
//! | none (or past retention) | asks GitHub to redeliver: `POST {hook}/deliveries/{id}/attempts` (202) |
//! | `dead`, inline source | redeliver: the receiver runs an inline dead letter again |
//! | anything else (completed; deferred and pending or dead) | duplicate |
//!
//! GitHub then resends the delivery, signed, to the receiver, which verifies and claims it as
//! usual: replay itself writes no ledger row. A dry run counts "would redeliver" and sends no
//! `POST`. Repository and organisation hooks authenticate with the source's `api_key` (a
//! token, `Authorization: Bearer`); an App's hook with a JWT (RS256; `iss` the app id, `iat`
//! now - 60 s, `exp` now + 9 min) signed with `github_hook.app_private_key` and made afresh
//! every few minutes.
//!
//! The cursor is `gh:{last delivery id handled}:{page cursor}`: a stopped run fetches the same
//! page again and skips what it already handled (ids only fall down the list).

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::HeaderMap;
use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::http::{send, Credential, Failure};
use super::{json_problem, ReplayErrorKind, Run, Window};
use crate::config::{GithubHook, GithubHookTarget, Mode, SourceConfig};
use crate::github_app::app_jwt;
use crate::ledger::{self, Expiry, Status};
use crate::receive::Outcome;

/// Deliveries per page (GitHub's maximum).
pub const PAGE_SIZE: u32 = 100;

/// What GitHub's REST API asks every request to send.
const HEADERS: &[(&str, &str)] = &[
    ("accept", "application/vnd.github+json"),
    ("x-github-api-version", "2022-11-28"),
];

/// A JWT is made afresh once it is this old (it is valid for 10 minutes, from 1 minute back).
const JWT_REFRESH: Duration = Duration::from_secs(240);

/// The `cursor` parameter of the `Link` header's `rel="next"` URL: `Ok(None)` on the last
/// page.
///
/// # Errors
/// A `rel="next"` link without a `cursor` parameter.
pub(crate) fn next_page_cursor(headers: &HeaderMap) -> Result<Option<String>, &'static str> {
    for value in headers.get_all(reqwest::header::LINK) {
        let Ok(value) = value.to_str() else {
            return Err("the Link header is not text");
        };
        for link in value.split(',') {
            let Some((target, params)) = link.split_once(';') else {
                continue;
            };
            let is_next = params.split(';').any(|param| {
                let param = param.trim().replace(' ', "");
                param == "rel=\"next\"" || param == "rel=next"
            });
            if !is_next {
                continue;
            }
            let target = target.trim().trim_start_matches('<').trim_end_matches('>');
            let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
            return match form_urlencoded::parse(query.as_bytes())
                .find(|(name, _)| name == "cursor")
                .map(|(_, value)| value.into_owned())
                .filter(|cursor| !cursor.is_empty())
            {
                Some(cursor) => Ok(Some(cursor)),
                None => Err("the Link header's next page has no cursor"),
            };
        }
    }
    Ok(None)
}

#[derive(Deserialize)]
struct Delivery {
    id: u64,
    guid: String,
    delivered_at: String,
    #[serde(default)]
    redelivery: bool,
    #[serde(default)]
    status_code: Option<i64>,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    action: Option<String>,
}

/// Where a run starts: the page and the last delivery id already handled on it.
fn parse_cursor(cursor: Option<&str>) -> Result<(Option<String>, Option<u64>), ReplayErrorKind> {
    let Some(cursor) = cursor else {
        return Ok((None, None));
    };
    let invalid = || {
        ReplayErrorKind::Invalid(
            "starting_after for a github source is a cursor a replay returned (gh:...)".to_owned(),
        )
    };
    let rest = cursor.strip_prefix("gh:").ok_or_else(invalid)?;
    let (id, page) = rest.split_once(':').ok_or_else(invalid)?;
    let id: u64 = id.parse().map_err(|_| invalid())?;
    Ok(((!page.is_empty()).then(|| page.to_owned()), Some(id)))
}

/// The `Authorization` for the hook's requests; an App's JWT made afresh when it ages.
struct Auth<'a> {
    hook: &'a GithubHook,
    token: Option<&'a SecretString>,
    jwt: Option<(String, Instant)>,
}

impl Auth<'_> {
    fn credential(&mut self) -> Result<Credential<'_>, ReplayErrorKind> {
        let setting = self.hook.credential_setting();
        let allowed = "read the webhook's deliveries and request redeliveries";
        match &self.hook.target {
            GithubHookTarget::App {
                app_id,
                private_key,
            } => {
                let fresh = self
                    .jwt
                    .as_ref()
                    .is_some_and(|(_, made)| made.elapsed() < JWT_REFRESH);
                if !fresh {
                    let jwt = app_jwt(*app_id, private_key, SystemTime::now()).map_err(|e| {
                        ReplayErrorKind::NotConfigured {
                            name: String::new(),
                            problem: format!("github_hook.app_private_key: {e}"),
                        }
                    })?;
                    self.jwt = Some((jwt, Instant::now()));
                }
                let jwt = self.jwt.as_ref().map(|(jwt, _)| jwt.as_str()).unwrap_or("");
                Ok(Credential {
                    authorization: format!("Bearer {jwt}"),
                    // Short-lived, but a credential all the same: scrubbed from messages.
                    secret: jwt,
                    setting,
                    allowed,
                    headers: HEADERS,
                })
            }
            _ => {
                let token = self.token.map(|t| t.expose_secret()).unwrap_or("");
                Ok(Credential {
                    authorization: format!("Bearer {token}"),
                    secret: token,
                    setting,
                    allowed,
                    headers: HEADERS,
                })
            }
        }
    }
}

pub(crate) async fn replay(
    run: &mut Run<'_>,
    config: &SourceConfig,
    window: Window,
) -> Result<(), ReplayErrorKind> {
    let source = config.name.as_str();
    let Some(hook) = &config.github_hook else {
        return Err(ReplayErrorKind::NotConfigured {
            name: source.to_owned(),
            problem: "set github_hook: {\"repository\": \"owner/name\", \"hook_id\": ..} or \
                      {\"organization\": ..} with api_key, or {\"app_id\": .., \
                      \"app_private_key\": ..}"
                .to_owned(),
        });
    };
    let token = match (&hook.target, &config.api) {
        (GithubHookTarget::App { .. }, _) => None,
        (_, Some(api)) => Some(&api.key),
        (_, None) => {
            return Err(ReplayErrorKind::NotConfigured {
                name: source.to_owned(),
                problem: "set api_key: a token for the github_hook".to_owned(),
            })
        }
    };
    let mut auth = Auth {
        hook,
        token,
        jwt: None,
    };
    let (mut page_cursor, mut skip_from) = parse_cursor(run.request.starting_after.as_deref())?;
    let deliveries_url = format!("{}{}/deliveries", hook.base_url, hook.path());
    let mut seen: HashSet<String> = HashSet::new();
    let with_source = |kind: ReplayErrorKind| match kind {
        ReplayErrorKind::NotConfigured { problem, .. } => ReplayErrorKind::NotConfigured {
            name: source.to_owned(),
            problem,
        },
        other => other,
    };
    loop {
        let mut query = vec![("per_page", PAGE_SIZE.to_string())];
        if let Some(cursor) = &page_cursor {
            query.push(("cursor", cursor.clone()));
        }
        let credential = auth.credential().map_err(with_source)?;
        let response = match send(
            run,
            source,
            &credential,
            Method::GET,
            &deliveries_url,
            &query,
        )
        .await
        {
            Ok(response) => response,
            Err(Failure::OutOfTime) => return run.stop_for_time(source),
            Err(Failure::Error(kind)) => return Err(kind),
        };
        let malformed = |detail: &str| ReplayErrorKind::MalformedPage {
            name: source.to_owned(),
            detail: detail.to_owned(),
        };
        let deliveries: Vec<Delivery> = serde_json::from_slice(&response.body).map_err(|e| {
            malformed(&format!(
                "HTTP {}: not a list of deliveries ({})",
                response.status,
                json_problem(&e)
            ))
        })?;
        let next = next_page_cursor(&response.headers).map_err(malformed)?;
        let mut parsed = Vec::with_capacity(deliveries.len());
        for (index, delivery) in deliveries.into_iter().enumerate() {
            let at = crate::timestamp::parse_rfc3339(&delivery.delivered_at).map_err(|_| {
                malformed(&format!("[{index}].delivered_at is not an RFC 3339 time"))
            })?;
            if delivery.guid.is_empty() {
                return Err(malformed(&format!("[{index}].guid is empty")));
            }
            parsed.push((at, delivery));
        }
        if parsed.is_empty() && next.is_some() {
            return Err(malformed("a next page after an empty page"));
        }
        let conn = run
            .receiver
            .pool
            .get()
            .await
            .map_err(|e| ReplayErrorKind::NoConnection {
                name: source.to_owned(),
                cause: e.into(),
            })?;
        // The page's GUIDs in the ledger, in one read rather than one per delivery.
        let guids: Vec<String> = parsed
            .iter()
            .filter(|(at, _)| window.contains(*at))
            .map(|(_, delivery)| delivery.guid.clone())
            .collect();
        let rows = ledger::lookup_many(&conn, source, &guids)
            .await
            .map_err(|cause| ReplayErrorKind::Database {
                name: source.to_owned(),
                cause,
            })?;
        let here = page_cursor.clone().unwrap_or_default();
        let mut reached_since = false;
        for (at, delivery) in parsed {
            if skip_from.is_some_and(|last| delivery.id >= last) {
                continue;
            }
            if run.out_of_time() {
                run.progress();
                return run.stop_for_time(source);
            }
            let cursor = format!("gh:{}:{here}", delivery.id);
            if at < window.since {
                reached_since = true;
            }
            if !window.contains(at) || !seen.insert(delivery.guid.clone()) {
                run.handled(cursor);
                continue;
            }
            let row = rows.get(&delivery.guid);
            let expiry = Expiry {
                retention: config.retention.retention,
                now: SystemTime::now(),
            };
            let redeliver = match &row {
                None => true,
                Some(row) if row.is_expired(&expiry) => true,
                Some(row) => row.status == Status::Dead && config.mode == Mode::Inline,
            };
            let status = row.as_ref().map_or("absent", |row| row.status.as_str());
            let outcome = if !redeliver {
                run.report.duplicates += 1;
                Outcome::Duplicate.as_str()
            } else if run.request.dry_run {
                run.report.redelivered += 1;
                "would_redeliver"
            } else {
                let url = format!("{deliveries_url}/{}/attempts", delivery.id);
                let credential = auth.credential().map_err(with_source)?;
                match send(run, source, &credential, Method::POST, &url, &[]).await {
                    Ok(_) => {
                        run.report.redelivered += 1;
                        "redelivered"
                    }
                    // A refusal of this one delivery (GitHub keeps deliveries redeliverable for
                    // a few days): count it and go on.
                    // A refusal of this one delivery (GitHub keeps deliveries redeliverable for
                    // a few days), or a request whose answer was lost (a 5xx, a timeout: GitHub
                    // may have accepted it, so it is not sent again): count it and go on; a
                    // later run asks again for what is still missing.
                    Err(Failure::Error(ReplayErrorKind::Provider {
                        status, message, ..
                    })) if (400..600).contains(&status) => {
                        tracing::error!(
                            source,
                            event_id = delivery.guid.as_str(),
                            delivery_id = delivery.id,
                            status,
                            error = message.as_str(),
                            "replay: GitHub refused the redelivery"
                        );
                        run.report.failed += 1;
                        "redelivery_refused"
                    }
                    Err(Failure::Error(ReplayErrorKind::Unreachable { cause, .. })) => {
                        tracing::error!(
                            source,
                            event_id = delivery.guid.as_str(),
                            delivery_id = delivery.id,
                            error = %crate::error_chain::error_chain(&cause),
                            "replay: the redelivery request got no answer"
                        );
                        run.report.failed += 1;
                        "redelivery_unanswered"
                    }
                    Err(Failure::OutOfTime) => {
                        // Not asked: the cursor still points before this delivery.
                        seen.remove(&delivery.guid);
                        run.progress();
                        return run.stop_for_time(source);
                    }
                    Err(Failure::Error(kind)) => return Err(kind),
                }
            };
            run.report.fetched += 1;
            tracing::info!(
                source,
                event_id = delivery.guid.as_str(),
                event_type = delivery.event.as_deref().unwrap_or(""),
                action = delivery.action.as_deref().unwrap_or(""),
                delivery_id = delivery.id,
                redelivery = delivery.redelivery,
                status_code = delivery.status_code.unwrap_or(0),
                ledger_status = status,
                outcome,
                dry_run = run.request.dry_run,
                replayed = true,
                "replay"
            );
            run.handled(cursor);
        }
        drop(conn);
        skip_from = None;
        match next {
            Some(next) if !reached_since => {
                // A next page already read this run (a Link pointing back): stop, do not loop.
                run.first_sight(&format!("page:{here}"));
                if !run.first_sight(&format!("page:{next}")) {
                    return Err(ReplayErrorKind::MalformedPage {
                        name: source.to_owned(),
                        detail: "the Link header's next page was read already: the cursor did \
                                 not advance"
                            .to_owned(),
                    });
                }
                run.progress();
                page_cursor = Some(next);
            }
            _ => {
                run.report.next_cursor = None;
                run.progress();
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn the_next_cursor_comes_from_the_link_headers_next_url() {
        let mut headers = HeaderMap::new();
        assert_eq!(next_page_cursor(&headers), Ok(None));
        headers.insert(
            reqwest::header::LINK,
            HeaderValue::from_static(
                "<https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100&cursor=v1_9%3D>; \
                 rel=\"next\", <https://api.github.com/x?cursor=first>; rel=\"first\"",
            ),
        );
        assert_eq!(next_page_cursor(&headers), Ok(Some("v1_9=".to_owned())));
        headers.insert(
            reqwest::header::LINK,
            HeaderValue::from_static("<https://api.github.com/x?cursor=a>; rel=\"prev\""),
        );
        assert_eq!(next_page_cursor(&headers), Ok(None));
        headers.insert(
            reqwest::header::LINK,
            HeaderValue::from_static("<https://api.github.com/x?page=2>; rel=\"next\""),
        );
        assert!(next_page_cursor(&headers).is_err());
    }

    #[test]
    fn cursors_round_trip_and_foreign_ones_are_refused() {
        assert_eq!(parse_cursor(None).unwrap(), (None, None));
        assert_eq!(parse_cursor(Some("gh:42:")).unwrap(), (None, Some(42)));
        assert_eq!(
            parse_cursor(Some("gh:42:v1:abc")).unwrap(),
            (Some("v1:abc".to_owned()), Some(42))
        );
        for bad in ["evt_1", "gh:x:", "gh:42"] {
            assert!(parse_cursor(Some(bad)).is_err(), "{bad}");
        }
    }
}
