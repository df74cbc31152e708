//! Payload identity: what a provider keeps identical across the retries of one event, hashed.
//!
//! The ledger answers a delivery whose event id it already holds by comparing payloads: the
//! same payload gets the stored response, a different one gets 409 ("event id reused with a
//! different body"). Comparing the SHA-256 of the whole raw body is too strict for providers
//! that render the delivery envelope anew at each attempt: Stripe's `pending_webhooks` counts
//! the endpoints that have not yet acknowledged the event, so with two endpoints subscribed a
//! retry after a lost response carries a different body, gets 409, and so does every later
//! retry for the three days Stripe keeps trying.
//!
//! This module computes, per [`Scheme`], a **payload identity**: a SHA-256 over what the
//! provider documents as stable across retries of one event, leaving out only what it
//! documents as varying per delivery. [`rule`] holds the table, each provider's rule with its
//! source beside it. [`payload_hashes`] returns the identity together with the full-body
//! digest, which the ledger keeps for audit.
//!
//! Two rules exist ([`IdentityRule`]):
//!
//! - [`IdentityRule::FullBody`]: the identity *is* the full-body digest (GitHub, Shopify, Slack,
//!   Standard Webhooks / Svix, generic HMAC);
//! - [`IdentityRule::TopLevelMembersExcept`]: the body must be a JSON object; the identity is a
//!   SHA-256 over its top-level members except the listed delivery members, each member taken
//!   as its **raw bytes** from the body (never re-serialised), sorted by key, length-framed
//!   (Stripe: `pending_webhooks`; Paddle: `notification_id`).
//!
//! Pure: no I/O, no clock, no logging.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::extract::json_error;
use crate::Scheme;

/// Length of a digest or an identity: SHA-256, 32 bytes.
pub const IDENTITY_LEN: usize = 32;

/// Domain-separation prefix of a [`IdentityRule::TopLevelMembersExcept`] identity, hashed
/// first. The `v1` names this framing; a different framing must change it, so identities from
/// different framings never compare equal by construction.
const MEMBERS_TAG: &[u8] = b"hookledger payload identity v1: top-level members\n";

/// How many top-level members a Stripe or Paddle envelope has, with room to spare (Stripe's
/// Event has 9 to 11, Paddle's notification 5): the member list's initial capacity.
const TYPICAL_MEMBERS: usize = 16;

/// How the payload identity of a scheme is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityRule {
    /// The provider resends the same bytes: identity = SHA-256 of the whole raw body, equal to
    /// the digest. Any body (JSON, form, anything) is accepted.
    FullBody,
    /// The provider re-renders these top-level members at each delivery: identity = SHA-256
    /// over every other top-level member of the body's JSON object. The listed members are
    /// left out whatever their value, and whether present or not.
    ///
    /// Framing, hashed in order: a fixed domain-separation tag
    /// (`"hookledger payload identity v1: top-level members\n"`), then for each kept member in
    /// ascending byte order of its key: the key's length as a big-endian `u64`, the key, the
    /// value's length as a big-endian `u64`, the value.
    ///
    /// - The key is the *decoded* member name (UTF-8, JSON escapes resolved), so
    ///   `"pending\u005fwebhooks"` is `pending_webhooks` and is left out too.
    /// - The value is its raw bytes exactly as in the body, from its first byte to its last
    ///   (the whitespace around it, and around the `:` and `,`, is not part of it). Any byte
    ///   change inside a kept value, whitespace inside a nested object included, changes the
    ///   identity; reordering the top-level members or changing the whitespace between them
    ///   does not.
    /// - Length prefixes make the framing injective: every member frames as
    ///   `len(key) key len(value) value`, which parses back one way only, so two different
    ///   member lists never frame to the same bytes.
    TopLevelMembersExcept(&'static [&'static str]),
}

/// The identity rule of `scheme`, with the provider's documented behaviour and its source.
///
/// | scheme | rule | what varies between attempts |
/// |---|---|---|
/// | Stripe | members except `pending_webhooks` | `pending_webhooks` |
/// | Paddle Billing | members except `notification_id` | `notification_id` (replays, destinations) |
/// | GitHub | full body | nothing in the body |
/// | Shopify | full body | nothing in the body |
/// | Slack | full body | nothing in the body (retry headers only) |
/// | Standard Webhooks / Svix | full body | nothing in the body (attempt timestamp is a header) |
/// | Linear | members except `webhookTimestamp` | `webhookTimestamp` |
/// | Mailgun | members except `signature` | `signature` (timestamp, token) |
/// | Intercom | members except `delivery_attempts`, `delivery_status`, `delivered_at` | those |
/// | HubSpot (per batch item) | members except `attemptNumber` | `attemptNumber` |
/// | SendGrid (per batch item) | full item | nothing |
/// | Twilio, Square, Zoom, Discord, Twitch, Standard Webhooks v1a | full body | nothing in the body |
/// | generic HMAC | full body | unknown provider: nothing may vary |
#[must_use]
pub const fn rule(scheme: Scheme) -> IdentityRule {
    match scheme {
        // Stripe renders the Event at each delivery attempt. The Event object's
        // `pending_webhooks` is the "number of webhooks that haven't been successfully
        // delivered (for example, to return a 20x response) to the URLs you specify"
        // (docs.stripe.com/api/events/object): it falls as other endpoints acknowledge, so it
        // differs between attempts whenever more than one endpoint subscribes to the event.
        // Every other member is fixed when the event is created: `id`, `object`, `type`,
        // `created`, `livemode`, `account`, `context`; `request` is "the API request that
        // triggers the event"; `data` and `api_version`: "The contents of data never change,
        // so this value remains static regardless of the API version currently in use" (same
        // page, `api_version`). Stripe resends for up to three days in live mode
        // (docs.stripe.com/webhooks, "Automatic retries";
        // docs.stripe.com/webhooks/process-undelivered-events). So only `pending_webhooks`
        // is left out.
        Scheme::Stripe => IdentityRule::TopLevelMembersExcept(&["pending_webhooks"]),
        // Paddle Billing: "An event and a notification are distinct: one event can produce
        // multiple notifications if you have multiple destinations subscribed to the same
        // event type, each with its own notification_id"; `event_id` is the deduplication key
        // (developer.paddle.com/webhooks/about/how-webhooks-work). Replaying a notification
        // "creates a new notification entity for the replay, related to the same `event_id`",
        // with a new `notification_id` (developer.paddle.com/api-reference/notifications/
        // replay-notification). The payload's top level is `event_id`, `event_type`,
        // `occurred_at`, `notification_id` and `data` (a snapshot of the entity when the
        // event occurred). Automatic retries resend the same notification; a replay, or a
        // second destination pointing at the same source, carries another `notification_id`
        // for the same event. So `notification_id` is left out.
        Scheme::Paddle => IdentityRule::TopLevelMembersExcept(&["notification_id"]),
        // GitHub does not retry by itself; a redelivery (UI or REST API, deliveries of the
        // past 3 days) resends the recorded delivery: "If you request a redelivery, the
        // X-GitHub-Delivery header will be the same as in the original delivery"
        // (docs.github.com/en/webhooks/using-webhooks/best-practices-for-using-webhooks;
        // docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/
        // redelivering-webhooks). The payload has no per-attempt member. Form-encoded
        // deliveries (`payload=<json>`) are resent the same way.
        Scheme::Github => IdentityRule::FullBody,
        // Shopify: "When webhooks are retried, they will be delivered with the original
        // payload from the time they were triggered" (shopify.dev/changelog/
        // updates-to-webhook-retry-mechanism, 2024-09-10; 8 retries over 4 hours).
        // `X-Shopify-Event-Id` is the same on every delivery of the event
        // (shopify.dev/docs/apps/build/webhooks/ignore-duplicates).
        Scheme::Shopify => IdentityRule::FullBody,
        // Slack Events API: a retry (up to 3, after a failure or a 3 s timeout) is marked by
        // the `X-Slack-Retry-Num` and `X-Slack-Retry-Reason` headers; the body is the same
        // event, same `event_id` (docs.slack.dev/apis/events-api, "Retries"; Slack's
        // maintainers: "the Slack API server resends the same event up to 3 times",
        // github.com/slackapi/python-slack-events-api/issues/84). Slash commands and
        // interactivity payloads are not retried: the user sees an error instead.
        Scheme::Slack => IdentityRule::FullBody,
        // Standard Webhooks 1.0.0, "Webhook metadata": the message id "remains the same no
        // matter how many times a webhook that has failed is retried"; what changes per
        // attempt is the attempt timestamp, sent in the `webhook-timestamp` header (signed,
        // not part of the body), while the payload's own `timestamp` is when the event
        // occurred (github.com/standard-webhooks/standard-webhooks, spec/standard-webhooks.md).
        // Svix, which follows it, resends the stored message.
        Scheme::StandardWebhooks => IdentityRule::FullBody,
        // A configured HMAC source can be any provider: nothing is known to vary, so nothing
        // is left out (the strictest rule).
        Scheme::GenericHmac => IdentityRule::FullBody,
        // Linear stamps each attempt: `webhookTimestamp` is "the time the payload was sent"
        // (linear.app/developers/webhooks); the rest is the event.
        Scheme::Linear => IdentityRule::TopLevelMembersExcept(&["webhookTimestamp"]),
        // Mailgun signs each attempt anew: the `signature` object (timestamp, token,
        // signature) is per attempt; `event-data` is the event (documentation.mailgun.com,
        // "Securing webhooks").
        Scheme::Mailgun => IdentityRule::TopLevelMembersExcept(&["signature"]),
        // Intercom's notification counts its attempts: `delivery_attempts`, `delivery_status`
        // and `delivered_at` change between them, the rest is the notification
        // (developers.intercom.com, "Webhook models: notification").
        Scheme::Intercom => IdentityRule::TopLevelMembersExcept(&[
            "delivery_attempts",
            "delivery_status",
            "delivered_at",
        ]),
        // Twilio resends the same parameters (only a connection override retries), Square,
        // Zoom and Twitch the same body (their per-attempt values are headers), Discord never
        // retries, and Standard Webhooks v1a is Standard Webhooks: nothing is left out.
        // HubSpot counts its attempts in each event: `attemptNumber` (developers.hubspot.com,
        // "Webhooks API: event payloads"); a batch item's identity leaves it out.
        Scheme::Hubspot => IdentityRule::TopLevelMembersExcept(&["attemptNumber"]),
        // SendGrid resends the same events (their `sg_event_id`s are fixed).
        Scheme::Sendgrid => IdentityRule::FullBody,
        // GitLab resends the recorded request ("Resend request" keeps `Idempotency-Key`).
        Scheme::Gitlab => IdentityRule::FullBody,
        // Adyen resends the same notification item (per batch item).
        Scheme::Adyen => IdentityRule::FullBody,
        // Meta resends the same entries (per batch item).
        Scheme::Meta => IdentityRule::FullBody,
        Scheme::Twilio
        | Scheme::Square
        | Scheme::Zoom
        | Scheme::Discord
        | Scheme::Twitch
        | Scheme::StandardWebhooksV1a => IdentityRule::FullBody,
    }
}

/// The top-level members `scheme` leaves out of the identity: `["pending_webhooks"]` for
/// Stripe, `["notification_id"]` for Paddle, empty for the full-body schemes.
#[must_use]
pub const fn delivery_members(scheme: Scheme) -> &'static [&'static str] {
    match rule(scheme) {
        IdentityRule::FullBody => &[],
        IdentityRule::TopLevelMembersExcept(members) => members,
    }
}

/// The two hashes the ledger keeps for a delivery, 32 bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHashes {
    /// SHA-256 of the whole raw body: `payload_digest`, kept for audit.
    pub digest: [u8; IDENTITY_LEN],
    /// The payload identity ([`rule`]): what a later delivery of the same event id must match
    /// to be answered with the stored response. Equal to `digest` for
    /// [`IdentityRule::FullBody`] schemes.
    pub identity: [u8; IDENTITY_LEN],
}

/// Why a payload identity could not be computed. Only
/// [`IdentityRule::TopLevelMembersExcept`] schemes can fail; the receiver answers 400 with
/// [`IdentityError::reason`] (the body is authentic but not a well-formed envelope).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The body is not a single JSON object (invalid JSON, another JSON type, trailing
    /// content). The text is a log-safe summary ([`json_error`]): no payload content.
    #[error("body is not a JSON object: {0}")]
    NotJsonObject(String),
    /// A top-level member name appears more than once (after decoding escapes).
    ///
    /// RFC 8259 §4 says names "SHOULD be unique" and that with duplicates the behaviour of
    /// receivers is unpredictable: the handler's JSON parser keeps the last value, another
    /// keeps the first, so which value the identity should stand for is ambiguous. Stripe and
    /// Paddle never send duplicates (and `extract` already refuses a duplicate `id`/`type` for
    /// Stripe), so refusing costs nothing real and removes the ambiguity.
    #[error("a top-level member appears more than once")]
    DuplicateMember,
}

impl IdentityError {
    /// A short fixed reason, safe to send to the provider.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            IdentityError::NotJsonObject(_) => "body is not a JSON object",
            IdentityError::DuplicateMember => "duplicate top-level member",
        }
    }
}

/// The digest and the payload identity of `body`, a delivery signed with `scheme`.
///
/// `body` is the raw request body (bytes as received, the same bytes the signature covers).
/// Full-body schemes hash it once and return the digest twice. Member schemes parse it once
/// (serde_json, borrowing every value as a [`RawValue`]) and hash it twice; the only
/// allocations are the member list (one `Vec`, 16 entries before it grows)
/// and any member name that contains a JSON escape.
///
/// # Errors
/// For [`IdentityRule::TopLevelMembersExcept`] schemes: [`IdentityError::NotJsonObject`] when
/// the body is not one JSON object, [`IdentityError::DuplicateMember`] when a top-level name
/// repeats. Full-body schemes never fail.
pub fn payload_hashes(scheme: Scheme, body: &[u8]) -> Result<PayloadHashes, IdentityError> {
    let digest: [u8; IDENTITY_LEN] = Sha256::digest(body).into();
    let identity = match rule(scheme) {
        IdentityRule::FullBody => digest,
        IdentityRule::TopLevelMembersExcept(excluded) => members_identity(body, excluded)?,
    };
    Ok(PayloadHashes { digest, identity })
}

/// The payload identity of `body` alone ([`payload_hashes`] without the digest).
///
/// # Errors
/// As [`payload_hashes`].
pub fn payload_identity(scheme: Scheme, body: &[u8]) -> Result<[u8; IDENTITY_LEN], IdentityError> {
    match rule(scheme) {
        IdentityRule::FullBody => Ok(Sha256::digest(body).into()),
        IdentityRule::TopLevelMembersExcept(excluded) => members_identity(body, excluded),
    }
}

/// [`IdentityRule::TopLevelMembersExcept`]: parse, sort, refuse duplicates, hash.
fn members_identity(body: &[u8], excluded: &[&str]) -> Result<[u8; IDENTITY_LEN], IdentityError> {
    let Members(mut members) = serde_json::from_slice(body)
        .map_err(|error| IdentityError::NotJsonObject(json_error(&error)))?;
    members.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if members.windows(2).any(|pair| pair[0].0 == pair[1].0) {
        return Err(IdentityError::DuplicateMember);
    }
    Ok(hash_members(members.iter().filter_map(|(key, value)| {
        (!excluded.contains(&key.as_ref())).then_some((key.as_bytes(), value.get().as_bytes()))
    })))
}

/// Hashes already sorted `(key, raw value)` pairs with the framing of
/// [`IdentityRule::TopLevelMembersExcept`].
fn hash_members<'a, I>(members: I) -> [u8; IDENTITY_LEN]
where
    I: Iterator<Item = (&'a [u8], &'a [u8])>,
{
    let mut hasher = Sha256::new();
    hasher.update(MEMBERS_TAG);
    for (key, value) in members {
        hasher.update(frame_len(key.len()));
        hasher.update(key);
        hasher.update(frame_len(value.len()));
        hasher.update(value);
    }
    hasher.finalize().into()
}

/// A length as the framing's big-endian `u64`.
fn frame_len(len: usize) -> [u8; 8] {
    // usize is at most 64 bits on every target Rust supports.
    (len as u64).to_be_bytes()
}

/// The top-level members of a JSON object, in body order: decoded name, raw value.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(TYPICAL_MEMBERS);
        while let Some(Name(name)) = map.next_key()? {
            let value: &'de RawValue = map.next_value()?;
            members.push((name, value));
        }
        Ok(Members(members))
    }
}

/// A member name: borrowed from the body when it has no escape, decoded otherwise.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(NameVisitor)
    }
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = Name<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, name: &'de str) -> Result<Self::Value, E> {
        Ok(Name(Cow::Borrowed(name)))
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Self::Value, E> {
        Ok(Name(Cow::Owned(name.to_owned())))
    }

    fn visit_string<E: serde::de::Error>(self, name: String) -> Result<Self::Value, E> {
        Ok(Name(Cow::Owned(name)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// Docs example of a Stripe Event (docs.stripe.com/api/events/object), shortened, with the
    /// given `pending_webhooks` value and `data.object.status`.
    fn stripe_event(pending: u32, status: &str) -> String {
        format!(
            concat!(
                r#"{{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","#,
                r#""api_version":"2019-02-19","created":1686089970,"#,
                r#""data":{{"object":{{"id":"seti_1NG8Du2eZvKYlo2C9XMqbR0x","#,
                r#""object":"setup_intent","metadata":{{}},"status":"{status}"}}}},"#,
                r#""livemode":false,"pending_webhooks":{pending},"#,
                r#""request":{{"id":null,"idempotency_key":null}},"#,
                r#""type":"setup_intent.created"}}"#
            ),
            pending = pending,
            status = status,
        )
    }

    fn stripe(body: &str) -> [u8; 32] {
        payload_identity(Scheme::Stripe, body.as_bytes()).unwrap()
    }

    #[test]
    fn a_stripe_retry_that_differs_only_in_pending_webhooks_has_the_same_identity() {
        let first = stripe_event(2, "requires_confirmation");
        let retry = stripe_event(1, "requires_confirmation");
        let first_hashes = payload_hashes(Scheme::Stripe, first.as_bytes()).unwrap();
        let retry_hashes = payload_hashes(Scheme::Stripe, retry.as_bytes()).unwrap();
        assert_eq!(first_hashes.identity, retry_hashes.identity);
        // The full-body digest still tells the two bodies apart (audit).
        assert_ne!(first_hashes.digest, retry_hashes.digest);
        assert_eq!(
            first_hashes.digest,
            <[u8; 32]>::from(Sha256::digest(first.as_bytes()))
        );
    }

    #[test]
    fn pending_webhooks_absent_or_present_does_not_matter() {
        let with = r#"{"id":"evt_1","type":"a.b","pending_webhooks":3,"data":{"object":{}}}"#;
        let without = r#"{"id":"evt_1","type":"a.b","data":{"object":{}}}"#;
        assert_eq!(stripe(with), stripe(without));
    }

    #[test]
    fn a_one_byte_change_in_data_object_changes_the_identity() {
        let first = stripe_event(1, "requires_confirmation");
        let other = stripe_event(1, "requires_confirmatioN");
        assert_eq!(first.len(), other.len());
        assert_ne!(stripe(&first), stripe(&other));
    }

    #[test]
    fn member_order_and_whitespace_between_members_do_not_matter() {
        let compact = r#"{"id":"evt_1","type":"a.b","data":{"object":{"x":1}}}"#;
        let spread = "\r\n { \"data\" :\t{\"object\":{\"x\":1}} ,\n \"type\": \"a.b\" , \"id\":\"evt_1\" }\n";
        assert_eq!(stripe(compact), stripe(spread));
    }

    #[test]
    fn whitespace_inside_a_kept_member_matters() {
        // Raw bytes, not a re-serialisation: Stripe sends one rendering, and a different one
        // is a different body.
        let compact = r#"{"id":"evt_1","data":{"object":{"x":1}}}"#;
        let spaced = r#"{"id":"evt_1","data":{"object":{"x": 1}}}"#;
        assert_ne!(stripe(compact), stripe(spaced));
        // So does the spelling of a number.
        assert_ne!(
            stripe(r#"{"id":"evt_1","created":1}"#),
            stripe(r#"{"id":"evt_1","created":1.0}"#)
        );
    }

    #[test]
    fn member_names_are_compared_decoded() {
        let plain = r#"{"id":"evt_1","pending_webhooks":1}"#;
        let escaped = r#"{"\u0069d":"evt_1","pending\u005fwebhooks":7}"#;
        assert_eq!(stripe(plain), stripe(escaped));
    }

    #[test]
    fn a_body_that_is_not_one_json_object_is_refused() {
        for body in [
            &b"[1,2]"[..],
            b"\"evt\"",
            b"null",
            b"",
            b"{\"id\":",
            b"{\"id\":1} {}",
            b"{\"id\":tru}",
            b"id=1&type=x",
        ] {
            assert!(
                matches!(
                    payload_identity(Scheme::Stripe, body),
                    Err(IdentityError::NotJsonObject(_))
                ),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(
            IdentityError::NotJsonObject(String::new()).reason(),
            "body is not a JSON object"
        );
    }

    #[test]
    fn the_error_summary_carries_no_payload_content() {
        let Err(IdentityError::NotJsonObject(summary)) =
            payload_identity(Scheme::Stripe, br#"{"secret_name": sk_live_123}"#)
        else {
            panic!("expected an error");
        };
        assert!(!summary.contains("sk_live"), "{summary}");
    }

    #[test]
    fn duplicate_top_level_members_are_refused() {
        for body in [
            r#"{"id":"evt_1","id":"evt_2"}"#,
            r#"{"id":"evt_1","pending_webhooks":1,"pending_webhooks":2}"#,
            r#"{"id":"evt_1","\u0069d":"evt_1"}"#,
        ] {
            assert_eq!(
                payload_identity(Scheme::Stripe, body.as_bytes()),
                Err(IdentityError::DuplicateMember),
                "{body}"
            );
        }
        // Nested duplicates are part of a raw value: not our concern, hashed as they are.
        assert!(payload_identity(Scheme::Stripe, br#"{"data":{"a":1,"a":2}}"#).is_ok());
    }

    #[test]
    fn an_empty_object_has_an_identity() {
        assert_eq!(stripe("{}"), stripe(" { } "));
        assert_ne!(stripe("{}"), stripe(r#"{"id":"evt_1"}"#));
        // Leaving out the only member gives the empty object's identity.
        assert_eq!(stripe("{}"), stripe(r#"{"pending_webhooks":0}"#));
    }

    #[test]
    fn paddle_leaves_out_the_notification_id_only() {
        let body = |notification: &str, status: &str| {
            format!(
                concat!(
                    r#"{{"event_id":"evt_01h2b06f69w9aw3eymqs1dfa2q","event_type":"payout.created","#,
                    r#""occurred_at":"2023-06-01T13:30:38.138984Z","notification_id":"{n}","#,
                    r#""data":{{"id":"payout_01gsz4vmqbjk3x4vvtafffd540","status":"{s}"}}}}"#
                ),
                n = notification,
                s = status
            )
        };
        let paddle = |b: String| payload_identity(Scheme::Paddle, b.as_bytes()).unwrap();
        let original = paddle(body("ntf_01h2b06f84qsjzdw8rywe3j4gt", "unpaid"));
        let replay = paddle(body("ntf_01h46h1s2zabpkdks7yt4vkgkc", "unpaid"));
        let changed = paddle(body("ntf_01h2b06f84qsjzdw8rywe3j4gt", "paid"));
        assert_eq!(original, replay);
        assert_ne!(original, changed);
        // Paddle does not leave out Stripe's field, nor Stripe Paddle's.
        let with_pending = br#"{"event_id":"e","pending_webhooks":1}"#;
        let without_pending = br#"{"event_id":"e"}"#;
        assert_ne!(
            payload_identity(Scheme::Paddle, with_pending),
            payload_identity(Scheme::Paddle, without_pending)
        );
        assert_ne!(
            stripe(r#"{"id":"e","notification_id":"a"}"#),
            stripe(r#"{"id":"e","notification_id":"b"}"#)
        );
    }

    #[test]
    fn full_body_schemes_use_the_digest_and_accept_any_body() {
        let bodies: [&[u8]; 4] = [
            br#"{"id":"evt_1","pending_webhooks":1}"#,
            br#"{"pending_webhooks":1,"id":"evt_1"}"#,
            b"payload=%7B%22zen%22%3A%22x%22%7D",
            b"[not json",
        ];
        for scheme in [
            Scheme::Github,
            Scheme::Shopify,
            Scheme::Slack,
            Scheme::StandardWebhooks,
            Scheme::GenericHmac,
        ] {
            assert_eq!(rule(scheme), IdentityRule::FullBody);
            assert!(delivery_members(scheme).is_empty());
            for body in bodies {
                let hashes = payload_hashes(scheme, body).unwrap();
                let digest: [u8; 32] = Sha256::digest(body).into();
                assert_eq!(
                    hashes,
                    PayloadHashes {
                        digest,
                        identity: digest
                    }
                );
                assert_eq!(payload_identity(scheme, body).unwrap(), digest);
            }
            // Reordering is a different body for them.
            assert_ne!(
                payload_identity(scheme, bodies[0]),
                payload_identity(scheme, bodies[1])
            );
        }
    }

    #[test]
    fn the_rule_table_names_each_delivery_member() {
        assert_eq!(delivery_members(Scheme::Stripe), ["pending_webhooks"]);
        assert_eq!(delivery_members(Scheme::Paddle), ["notification_id"]);
    }

    #[test]
    fn the_framing_is_unambiguous() {
        let hash = |members: &[(&[u8], &[u8])]| hash_members(members.iter().copied());
        let cat = |parts: &[&[u8]]| parts.concat();
        let one = frame_len(1);
        // Each pair of lists below frames to the same bytes once one of the two length prefixes
        // is dropped.
        assert_ne!(hash(&[]), hash(&[(b"", b"")]));
        assert_ne!(hash(&[(b"a", b"12")]), hash(&[(b"a", b"1"), (b"2", b"")]));
        // Key length: "a" | len(v) | v  ==  ("a" | len(v) | "p") | len("w") | "w".
        let v = cat(&[b"p", &one, b"w"]);
        let key = cat(&[b"a", &frame_len(v.len()), b"p"]);
        assert_ne!(hash(&[(b"a", &v)]), hash(&[(&key, b"w")]));
        // Value length: "v" | len("b") | "b" | "q" | len("c") | "c" | "z", split two ways.
        let tail = cat(&[b"q", &one, b"c", b"z"]);
        let head = cat(&[b"v", &one, b"b", b"q"]);
        assert_ne!(
            hash(&[(b"a", b"v"), (b"b", &tail)]),
            hash(&[(b"a", &head), (b"c", b"z")])
        );
        // The member schemes' identity is never the full-body digest of the same bytes.
        let body = br#"{"id":"evt_1"}"#;
        assert_ne!(
            payload_identity(Scheme::Stripe, body),
            payload_identity(Scheme::Github, body)
        );
    }

    /// A JSON value, rendered with arbitrary spacing inside (the raw bytes that matter).
    fn json_value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            any::<bool>().prop_map(|b| b.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            "[ -~]{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4).prop_map(|map| {
                    let members: Vec<String> = map
                        .iter()
                        .map(|(k, v)| format!("{}: {v}", serde_json::to_string(k).unwrap()))
                        .collect();
                    format!("{{{}}}", members.join(", "))
                }),
            ]
        })
    }

    /// Top-level members other than `pending_webhooks`: distinct names, raw values.
    fn kept_members() -> impl Strategy<Value = BTreeMap<String, String>> {
        proptest::collection::btree_map(
            "[a-z_]{1,10}".prop_filter("delivery member", |k| k != "pending_webhooks"),
            json_value(),
            0..8,
        )
    }

    /// Renders `members` (plus `pending_webhooks` at `position` when given) as a JSON object,
    /// in the order given, with `pad` between tokens.
    fn render(members: &[(&String, &String)], pending: Option<(usize, u64)>, pad: &str) -> String {
        let mut parts: Vec<String> = members
            .iter()
            .map(|(k, v)| {
                format!(
                    "{pad}{}{pad}:{pad}{v}{pad}",
                    serde_json::to_string(k).unwrap()
                )
            })
            .collect();
        if let Some((position, value)) = pending {
            let at = position % (parts.len() + 1);
            parts.insert(
                at,
                format!("{pad}\"pending_webhooks\"{pad}:{pad}{value}{pad}"),
            );
        }
        format!("{pad}{{{}}}{pad}", parts.join(","))
    }

    proptest! {
        #[test]
        fn the_identity_ignores_pending_webhooks_member_order_and_spacing(
            members in kept_members(),
            first in proptest::option::of((any::<usize>(), any::<u64>())),
            second in proptest::option::of((any::<usize>(), any::<u64>())),
            rotate in any::<usize>(),
            pad in "[ \t\r\n]{0,3}",
        ) {
            let in_order: Vec<(&String, &String)> = members.iter().collect();
            let mut reordered = in_order.clone();
            if !reordered.is_empty() {
                let by = rotate % reordered.len();
                reordered.rotate_left(by);
                reordered.reverse();
            }
            let a = render(&in_order, first, "");
            let b = render(&reordered, second, &pad);
            prop_assert_eq!(stripe(&a), stripe(&b), "{} vs {}", a, b);
        }

        #[test]
        fn distinct_kept_members_never_share_an_identity(
            left in kept_members(),
            right in kept_members(),
            pending in any::<u64>(),
        ) {
            let a = render(&left.iter().collect::<Vec<_>>(), Some((0, pending)), "");
            let b = render(&right.iter().collect::<Vec<_>>(), Some((1, pending)), " ");
            prop_assert_eq!(left == right, stripe(&a) == stripe(&b), "{} vs {}", a, b);
        }

        #[test]
        fn a_changed_byte_inside_a_kept_value_changes_the_identity(
            members in kept_members().prop_filter("non-empty", |m| !m.is_empty()),
            pick in any::<usize>(),
            replacement in json_value(),
        ) {
            let (key, value) = members.iter().nth(pick % members.len()).unwrap();
            prop_assume!(&replacement != value);
            let mut changed = members.clone();
            changed.insert(key.clone(), replacement);
            let a = render(&members.iter().collect::<Vec<_>>(), None, "");
            let b = render(&changed.iter().collect::<Vec<_>>(), None, "");
            prop_assert_ne!(stripe(&a), stripe(&b));
        }
    }
}
