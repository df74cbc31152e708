//! GitLab: no signature; `X-Gitlab-Token` carries the webhook's secret token as configured,
//! compared in constant time (GitLab docs, "Webhooks: secret token",
//! <https://docs.gitlab.com/user/project/integrations/webhooks/#create-a-webhook>).
//!
//! - The token proves the request comes from whoever holds it; nothing of the request is
//!   signed. The ledger's replay guard keeps one event per body for the source, and the token's
//!   secrecy is the whole defence: send it over HTTPS only, rotate it like a secret.
//! - The id is `Idempotency-Key` (GitLab 17.4 and later: the same on every retry and manual
//!   resend of one event); the type is `X-Gitlab-Event` (`Push Hook`, `Merge Request Hook`...).
//! - GitLab does not retry on its own schedule (a failing hook is disabled for a while); a
//!   manual "Resend request" reaches the last two days: the horizon is 48 hours.

use super::Preset;
use crate::generic::{Algorithm, GenericHmac};
use crate::Scheme;

pub(super) fn preset() -> Preset {
    Preset {
        scheme: Scheme::Gitlab,
        provider: "GitLab",
        model: Some(GenericHmac {
            signature_header: Some("X-Gitlab-Token".into()),
            algorithm: Algorithm::Token,
            event_id_header: Some("Idempotency-Key".into()),
            event_type_header: Some("X-Gitlab-Event".into()),
            ..GenericHmac::default()
        }),
        signed: "nothing: `X-Gitlab-Token` is the shared token",
        event_id: "header `Idempotency-Key` (not signed)",
        event_type: "header `X-Gitlab-Event` (not signed)",
        retry_horizon_hours: 48,
        default_tolerance_secs: None,
        handshake: None,
        batch: false,
        replay: false,
        source: "https://docs.gitlab.com/user/project/integrations/webhooks/",
    }
}
