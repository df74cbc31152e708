//! The scheme model's configuration: [`GenericHmac`] as a source configures it (or a preset
//! fills it), the signature [`Encoding`] and [`SignatureFormat`], the [`TimestampUnit`], the
//! validation run once at start-up, and the [`Prepared`] form a [`crate::Verifier`] holds.

use http::HeaderName;

use super::template::{json_pointer, parse_template, Segment, Use, DEFAULT_SIGNED_PAYLOAD};
pub use crate::algorithm::Algorithm;
pub use crate::key::SecretEncoding;

/// What [`crate::Scheme::signature_header`] returns for [`crate::Scheme::GenericHmac`]: a
/// placeholder for logs, deliberately not a valid header name.
pub const CONFIGURED_HEADER: &str = "(configured per source)";

/// How a source writes the signature. Configuration names: `"hex"` (the default), `"base64"`,
/// `"base64url"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// Hex digits, lowercase or uppercase (providers differ). We sign lowercase.
    #[default]
    Hex,
    /// Standard base64 (`+/` alphabet), with or without `=` padding. We sign padded.
    Base64,
    /// URL-safe base64 (`-_` alphabet, RFC 4648 section 5), with or without padding. We sign
    /// unpadded.
    Base64url,
}

/// How the signature header (or body field) holds its signature(s).
///
/// JSON: `{"type": "plain"}` (the default: one signature, after the optional `prefix`),
/// `{"type": "pairs", "separator": ",", "assign": "=", "signature_key": "v1", "timestamp_key":
/// "t"}` (Stripe, Paddle: `key=value` entries, every `signature_key` entry a candidate) or
/// `{"type": "list", "separator": " ", "version": "v1,"}` (Standard Webhooks: entries that start
/// with `version` are candidates, others are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum SignatureFormat {
    /// One signature: the whole value after `prefix`.
    #[default]
    Plain,
    /// `key<assign>value` entries separated by `separator`, split at the first `assign`; an
    /// entry without `assign` or with an empty key is malformed.
    Pairs {
        /// Between entries, e.g. `","` (Stripe) or `";"` (Paddle).
        separator: String,
        /// Between a key and its value, e.g. `"="`.
        assign: String,
        /// The key of signature entries, e.g. `"v1"` (Stripe) or `"h1"` (Paddle); at most
        /// [`crate::MAX_SIGNATURES`] are considered.
        signature_key: String,
        /// The key of the timestamp entry, e.g. `"t"`; present at most once.
        #[serde(default)]
        timestamp_key: Option<String>,
    },
    /// Entries separated by `separator`; those starting with `version` carry a signature (the
    /// rest of the entry), others are ignored; at most [`crate::MAX_SIGNATURES`] are considered.
    List {
        /// Between entries, e.g. `" "`.
        separator: String,
        /// What a signature entry starts with, e.g. `"v1,"` or `"v1a,"`.
        version: String,
    },
}

/// How a timestamp is written. Configuration names: `"seconds"` (the default: unix seconds in
/// ASCII digits), `"milliseconds"` (unix milliseconds, HubSpot, Linear), `"rfc3339"`
/// (`2026-12-03T12:00:00.123456789Z`, Twitch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TimestampUnit {
    /// Unix seconds, ASCII digits.
    #[default]
    Seconds,
    /// Unix milliseconds, ASCII digits.
    Milliseconds,
    /// An RFC 3339 date-time in UTC (`Z`), fractional seconds allowed.
    Rfc3339,
}

/// What the body is, for the event id and type rules and the document a handler reads.
/// Configuration names: `"json"` (the default: a JSON object) and `"form"`
/// (`application/x-www-form-urlencoded`, whose fields become a JSON object of strings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BodyFormat {
    /// A JSON object.
    #[default]
    Json,
    /// A URL-encoded form.
    Form,
}

/// A delivery that carries several events (SendGrid, HubSpot): where the items are. Each item
/// becomes its own event, named by the model's event id and type rules read inside the item.
///
/// JSON: `{"items_pointer": ""}` (the body is a JSON array of event objects) or
/// `{"items_pointer": "/notificationItems", "event_pointer": "/NotificationRequestItem"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    /// RFC 6901 pointer to the array of items in the body; `""` when the body is the array.
    #[serde(default)]
    pub items_pointer: String,
    /// Pointer, inside each item, to the event object; absent when the item is the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_pointer: Option<String>,
    /// Whether each event object carries its own signature (Adyen): `signature_pointer` and the
    /// template's `{field:...}` are then read inside each event object, and every one must
    /// verify. Otherwise the whole body is signed once.
    #[serde(default)]
    pub signed_per_item: bool,
    /// The body answered (`text/plain`, status 200) once every item is durable, e.g.
    /// `"[accepted]"` (Adyen); absent: a JSON summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// Most items one batch may carry: bounds the work of one delivery (SendGrid posts up to
/// about a thousand events at once, HubSpot up to 100).
pub const MAX_BATCH_ITEMS: usize = 5_000;

/// A source's signing rules and event naming, as data: the **scheme model**. A
/// `generic-hmac` source configures it in the sources JSON (field names as below; unknown
/// fields are refused); every preset (Twilio, SendGrid, Discord, ...) is one of these, written in
/// [`crate::presets`].
///
/// Example: `{"signature_header": "X-Signature", "prefix": "sha256=", "event_id_pointer":
/// "/id"}` verifies `X-Signature: sha256=<hex of HMAC-SHA256(secret, body)>`.
///
/// Build a [`crate::Verifier`] with it ([`crate::Verifier::new`] runs [`GenericHmac::validate`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct GenericHmac {
    /// Name of the header that carries the signature, e.g. `"X-Signature"` (any case). Exactly
    /// one of this and `signature_pointer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_header: Option<String>,
    /// RFC 6901 pointer to the signature inside the JSON body (Mailgun:
    /// `"/signature/signature"`). The body is then read before the signature is checked, so
    /// only fields the template names are trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_pointer: Option<String>,
    /// How the signature value is structured; `plain` when absent.
    #[serde(default)]
    pub signature_format: SignatureFormat,
    /// The algorithm; `sha256` (HMAC-SHA256) when absent.
    #[serde(default)]
    pub algorithm: Algorithm,
    /// How each signature is written; `hex` when absent.
    #[serde(default)]
    pub encoding: Encoding,
    /// Text before the signature in a `plain` value, stripped before decoding, e.g.
    /// `"sha256="` (case-sensitive); a value without it is malformed. Non-empty visible ASCII.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// How an HMAC secret is written in the configuration; `utf8` when absent. Ignored for
    /// public keys.
    #[serde(default)]
    pub secret_encoding: SecretEncoding,
    /// Text stripped from the start of each configured key when present (Standard Webhooks:
    /// `"whsec_"`, `"whpk_"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// Name of a header that carries the signing time. At most one timestamp location (this,
    /// `timestamp_pointer`, or a `pairs` format's `timestamp_key`); the timestamp must be signed
    /// (`{timestamp}` in `signed_payload`, or the body for a body field) and is checked against
    /// the tolerance in both directions before any signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_header: Option<String>,
    /// RFC 6901 pointer to the signing time inside the JSON body (Linear:
    /// `"/webhookTimestamp"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_pointer: Option<String>,
    /// How the timestamp is written; `seconds` when absent.
    #[serde(default)]
    pub timestamp_unit: TimestampUnit,
    /// What is signed: a template over the request (see [`super::template`]), e.g.
    /// `"{timestamp}.{body}"` or `"{url}{form}"`. [`DEFAULT_SIGNED_PAYLOAD`] (`"{body}"`) when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_payload: Option<String>,
    /// What the body is; `json` when absent.
    #[serde(default)]
    pub body: BodyFormat,
    /// Header that carries the event id. Exactly one of this, `event_id_pointer` and `event_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id_header: Option<String>,
    /// RFC 6901 pointer to the event id in the body, e.g. `"/id"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id_pointer: Option<String>,
    /// The event id as a template of `{header:Name}`, `{field:/pointer}`, `{form:name}` and
    /// literal text, e.g. `"{form:MessageSid}:{form:MessageStatus}"` (Twilio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// Header that carries the event type. At most one of this, `event_type_pointer` and
    /// `event_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type_header: Option<String>,
    /// RFC 6901 pointer to the event type in the body, e.g. `"/type"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type_pointer: Option<String>,
    /// The event type as a template, like `event_id`, e.g. `"{field:/type}.{field:/action}"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Whether a `{field:...}` the signed content names signs as empty text when the body lacks
    /// it (Adyen: an absent `originalReference`); otherwise the delivery is refused.
    #[serde(default)]
    pub absent_fields_empty: bool,
    /// When one delivery carries several events: where they are ([`Batch`]). The event id and
    /// type rules then read each item (`{field:...}` pointers are relative to the event object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Batch>,
    /// Whether a signature must be written exactly as the provider writes it: lowercase hex
    /// only, base64 with its `=` padding only. Off by default (hex in either case, padding
    /// optional). The built-in Stripe, GitHub, Slack, Paddle, Shopify and Standard Webhooks
    /// presets set it: their providers' own libraries compare the text, so another spelling
    /// never comes from the provider.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict_encoding: bool,
    /// Header names read in place of others when those are absent: `{"svix-signature":
    /// "webhook-signature"}` reads a delivery without `webhook-signature` but with
    /// `svix-signature` as if it carried the latter's value under the former's name (Svix
    /// sends the Standard Webhooks headers under `svix-*` names). Each name is looked up on
    /// its own; a header present under its own name always wins. Keys and values are header
    /// names (any case).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub header_aliases: std::collections::BTreeMap<String, String>,
}

/// Where the timestamp is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TimestampAt {
    /// A header.
    Header(HeaderName),
    /// A JSON body field.
    Field(String),
    /// The `pairs` signature value's entry with this key.
    Pair(String),
}

/// Where the signature is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SignatureAt {
    /// A header.
    Header(HeaderName),
    /// A JSON body field.
    Field(String),
}

impl SignatureAt {
    /// The name used in errors and logs: the header's lowercase name, or `body <pointer>`.
    pub(crate) fn name(&self) -> String {
        match self {
            Self::Header(name) => name.as_str().to_owned(),
            Self::Field(pointer) => format!("body {pointer}"),
        }
    }
}

impl GenericHmac {
    /// Check the configuration as a whole, once, at start-up.
    ///
    /// Rules: exactly one signature location; every header name parses ([`http::HeaderName`])
    /// and pointers are RFC 6901; a `prefix` only with the `plain` format, non-empty visible
    /// ASCII; a `pairs` / `list` format's separators and keys non-empty; the templates use only
    /// their placeholders (see [`super::template`]); at most one timestamp location, and a
    /// timestamp is signed (`{timestamp}` in `signed_payload`, or its body field under a signed
    /// body); `{timestamp}` only with a timestamp location; the signed content covers the
    /// request's content (`{body}`, `{form}` or a `{field:...}`); `{form}` and `{form:...}`
    /// only with a `form` body; exactly one event id rule, at most one event type rule; an id
    /// or type the signature does not cover only when a timestamp is signed (without one, a
    /// captured delivery could be sent again under a new id for ever:
    /// docs/guide/providers.md, "What the signature covers"); `secret_encoding` only for an HMAC.
    ///
    /// # Errors
    ///
    /// The first rule broken, as a sentence naming the field (configuration values may be
    /// quoted; there is no secret in this struct).
    pub fn validate(&self) -> Result<(), String> {
        self.parse().map(|_| ())
    }

    /// Whether the event id and the event type this source reads are covered by its
    /// signature: every header, field or form value they read is part of the signed content
    /// (a `{field:...}` or form field is covered by a signed `{body}`).
    #[must_use]
    pub fn signs_id_and_type(&self) -> bool {
        self.parse().is_ok_and(|parsed| parsed.names_signed)
    }

    /// Whether the model has no event id, type or batch rule (the first six presets: their code
    /// names their events).
    pub(crate) fn names_nothing(&self) -> bool {
        [
            &self.event_id_header,
            &self.event_id_pointer,
            &self.event_id,
        ]
        .into_iter()
        .chain([
            &self.event_type_header,
            &self.event_type_pointer,
            &self.event_type,
        ])
        .all(Option::is_none)
            && self.batch.is_none()
    }

    /// [`GenericHmac::validate`], keeping what was parsed.
    pub(crate) fn parse(&self) -> Result<Parsed, String> {
        self.parse_with(Naming::Model)
    }

    /// [`GenericHmac::parse`], the event id and type rules read by the model (`Naming::Model`)
    /// or by the preset's own code (`Naming::Code`: the built-in Stripe, GitHub, Shopify, Slack,
    /// Paddle and Standard Webhooks presets, whose ids take shapes the model has no words for:
    /// Slack's three body kinds, GitHub's form payload; the model then holds no id or type rule
    /// and verifies only).
    pub(crate) fn parse_with(&self, naming: Naming) -> Result<Parsed, String> {
        for (from, to) in &self.header_aliases {
            let from = header_name("header_aliases", from)?;
            if from == header_name("header_aliases", to)? {
                return Err(format!("header_aliases maps {from} to itself"));
            }
        }
        let signature = match (&self.signature_header, &self.signature_pointer) {
            (Some(name), None) => SignatureAt::Header(header_name("signature_header", name)?),
            (None, Some(pointer)) => {
                json_pointer("signature_pointer", pointer)?;
                if self.body != BodyFormat::Json {
                    return Err("signature_pointer needs a json body".to_owned());
                }
                SignatureAt::Field(pointer.clone())
            }
            (Some(_), Some(_)) => {
                return Err(
                    "set only one of signature_header and signature_pointer, not both".to_owned(),
                )
            }
            (None, None) => {
                return Err("one of signature_header or signature_pointer is required".to_owned())
            }
        };
        if let Some(prefix) = &self.prefix {
            if prefix.is_empty() {
                return Err("prefix must not be empty (omit it instead)".to_owned());
            }
            if !prefix.bytes().all(|b| matches!(b, b' '..=b'~')) {
                return Err(format!(
                    "prefix {prefix:?} must be visible ASCII, as header values are"
                ));
            }
            if self.signature_format != SignatureFormat::Plain {
                return Err(
                    "prefix applies to the plain signature_format only (a list has its version)"
                        .to_owned(),
                );
            }
        }
        let pair_timestamp = match &self.signature_format {
            SignatureFormat::Plain => None,
            SignatureFormat::Pairs {
                separator,
                assign,
                signature_key,
                timestamp_key,
            } => {
                for (field, value) in [
                    ("separator", separator),
                    ("assign", assign),
                    ("signature_key", signature_key),
                ] {
                    if value.is_empty() {
                        return Err(format!("signature_format {field} must not be empty"));
                    }
                }
                if timestamp_key.as_ref().is_some_and(String::is_empty) {
                    return Err("signature_format timestamp_key must not be empty".to_owned());
                }
                if timestamp_key.as_ref() == Some(signature_key) {
                    return Err(
                        "signature_format timestamp_key must differ from signature_key".to_owned(),
                    );
                }
                timestamp_key.clone()
            }
            SignatureFormat::List { separator, version } => {
                if separator.is_empty() || version.is_empty() {
                    return Err(
                        "signature_format separator and version must not be empty".to_owned()
                    );
                }
                // An entry is `<name><delimiter><signature>`, the delimiter `version`'s last
                // character: a punctuation mark the separator does not contain, or no entry
                // could ever be read.
                let delimiter = version.chars().next_back().unwrap_or(',');
                if delimiter.is_alphanumeric() || separator.contains(delimiter) {
                    return Err(format!(
                        "signature_format version {version:?} must end with the delimiter \
                         between a version and its signature (e.g. \"v1,\"), a character that \
                         is not a letter or digit and that the separator {separator:?} does \
                         not contain"
                    ));
                }
                None
            }
        };
        let template = parse_template(
            "signed_payload",
            self.signed_payload
                .as_deref()
                .unwrap_or(DEFAULT_SIGNED_PAYLOAD),
            Use::Signed,
        )?;
        let token = self.algorithm == Algorithm::Token;
        if token
            && (self.signed_payload.is_some() || self.signature_format != SignatureFormat::Plain)
        {
            return Err(
                "algorithm token signs nothing: no signed_payload, plain format".to_owned(),
            );
        }
        let signs_body = template.contains(&Segment::Body) && !token;
        let signs_form = template.contains(&Segment::Form);
        if !token
            && !signs_body
            && !signs_form
            && !template.iter().any(|s| matches!(s, Segment::Field(_)))
        {
            return Err(
                "signed_payload must sign the request's content: {body}, {form} or a \
                        {field:/pointer}"
                    .to_owned(),
            );
        }
        if signs_form && self.body != BodyFormat::Form {
            return Err("{form} in signed_payload needs \"body\": \"form\"".to_owned());
        }
        if template.iter().any(|s| matches!(s, Segment::Field(_))) && self.body != BodyFormat::Json
        {
            return Err("{field:...} in signed_payload needs a json body".to_owned());
        }
        // The timestamp: at most one location, and signed.
        let mut locations = Vec::new();
        if let Some(name) = &self.timestamp_header {
            let name = header_name("timestamp_header", name)?;
            if matches!(&signature, SignatureAt::Header(s) if *s == name) {
                return Err("timestamp_header must differ from signature_header".to_owned());
            }
            locations.push(TimestampAt::Header(name));
        }
        if let Some(pointer) = &self.timestamp_pointer {
            json_pointer("timestamp_pointer", pointer)?;
            if self.body != BodyFormat::Json {
                return Err("timestamp_pointer needs a json body".to_owned());
            }
            locations.push(TimestampAt::Field(pointer.clone()));
        }
        if let Some(key) = pair_timestamp {
            locations.push(TimestampAt::Pair(key));
        }
        if locations.len() > 1 {
            return Err("set at most one timestamp location: timestamp_header, \
                        timestamp_pointer or the signature_format's timestamp_key"
                .to_owned());
        }
        let timestamp = locations.pop();
        let timestamp_in_template = template.contains(&Segment::Timestamp);
        match &timestamp {
            None if timestamp_in_template => {
                return Err(
                    "signed_payload uses {timestamp} but no timestamp location is set \
                            (timestamp_header, timestamp_pointer or a timestamp_key)"
                        .to_owned(),
                )
            }
            Some(TimestampAt::Field(pointer)) => {
                let covered = timestamp_in_template
                    || signs_body
                    || template.contains(&Segment::Field(pointer.clone()));
                if !covered {
                    return Err("timestamp_pointer is not signed: sign the body, or put \
                                {timestamp} in signed_payload"
                        .to_owned());
                }
            }
            Some(_) if !timestamp_in_template => {
                return Err(
                    "a timestamp is set but signed_payload does not use {timestamp}: an \
                            unsigned timestamp gives no replay protection"
                        .to_owned(),
                )
            }
            _ => {}
        }
        let signs_timestamp = timestamp.is_some();
        // Only chosen fields signed, and no timestamp: whatever else the body holds could be
        // changed on a captured delivery and sent again for ever. Adyen's items (each signed on
        // its own) are the one shape that does it by design.
        let per_item = self
            .batch
            .as_ref()
            .is_some_and(|batch| batch.signed_per_item);
        if !token && !signs_body && !signs_form && !signs_timestamp && !per_item {
            return Err(
                "signed_payload signs only fields of the body and no timestamp: the rest \
                        of the body could be changed and replayed for ever; sign {body}, or a \
                        timestamp"
                    .to_owned(),
            );
        }
        // A leading zero would let a variable part right before `{timestamp}` take or give a
        // digit under one signature: canonical digits are required there (and only there).
        let timestamp_canonical = template
            .windows(2)
            .any(|pair| pair[1] == Segment::Timestamp && !matches!(pair[0], Segment::Literal(_)));
        if naming == Naming::Code {
            if !self.names_nothing() {
                return Err(
                    "a preset whose code names its events has no id, type or batch rule".to_owned(),
                );
            }
            return Ok(Parsed {
                signature,
                timestamp,
                template,
                id: Vec::new(),
                event_type: None,
                names_signed: false,
                timestamp_canonical,
            });
        }
        // The event id and type.
        let id = naming_rule(
            "event_id",
            &self.event_id_header,
            &self.event_id_pointer,
            &self.event_id,
        )?
        .ok_or_else(|| {
            "one of event_id_header, event_id_pointer or event_id is required".to_owned()
        })?;
        let event_type = naming_rule(
            "event_type",
            &self.event_type_header,
            &self.event_type_pointer,
            &self.event_type,
        )?;
        for rule in std::iter::once(&id).chain(event_type.as_ref()) {
            for segment in rule {
                match segment {
                    Segment::FormField(_) if self.body != BodyFormat::Form => {
                        return Err(
                            "{form:...} in an event id or type needs \"body\": \"form\"".to_owned()
                        )
                    }
                    Segment::Field(_) if self.body != BodyFormat::Json => {
                        return Err(
                            "a body pointer in an event id or type needs a json body".to_owned()
                        )
                    }
                    _ => {}
                }
            }
        }
        let covered = |segment: &Segment| match segment {
            Segment::Literal(_) => true,
            Segment::Header(name) => template.contains(&Segment::Header(name.clone())),
            Segment::Field(pointer) => {
                signs_body || template.contains(&Segment::Field(pointer.clone()))
            }
            Segment::FormField(_) => signs_body || signs_form,
            Segment::Digest => signs_body,
            _ => false,
        };
        let names_signed = id.iter().chain(event_type.iter().flatten()).all(covered);
        // An id or type read from outside the signed content could be changed on a captured
        // delivery and the signature would still hold. The ledger keeps one event per body
        // for such a source (its replay guard), but only within its retention; without a
        // signed timestamp the same body would be accepted again, under a fresh id, once swept.
        // A token signs nothing: there is no signed content to read the id from, and the
        // ledger's replay guard (one event per body) is all there is; whoever holds the token
        // can send anything anyway.
        if !names_signed && !signs_timestamp && !token {
            let spelled = |prefix: &str, header: &Option<String>, pointer: &Option<String>| {
                if header.is_some() {
                    format!("{prefix}_header")
                } else if pointer.is_some() {
                    format!("{prefix}_pointer")
                } else {
                    prefix.to_owned()
                }
            };
            let field = if id.iter().all(covered) {
                spelled(
                    "event_type",
                    &self.event_type_header,
                    &self.event_type_pointer,
                )
            } else {
                spelled("event_id", &self.event_id_header, &self.event_id_pointer)
            };
            let pointer = if field.starts_with("event_type") {
                "event_type_pointer"
            } else {
                "event_id_pointer"
            };
            return Err(format!(
                "{field} is not covered by the signature and no timestamp is signed: anyone who \
                 saw one delivery could send its body again under a new event id or type, \
                 forever; read it from the signed body with {pointer}, or sign a timestamp \
                 (timestamp_header and {{timestamp}} in signed_payload)"
            ));
        }
        if let Some(batch) = &self.batch {
            if self.body != BodyFormat::Json {
                return Err("batch needs a json body".to_owned());
            }
            if !batch.items_pointer.is_empty() {
                json_pointer("batch items_pointer", &batch.items_pointer)?;
            }
            if let Some(pointer) = &batch.event_pointer {
                json_pointer("batch event_pointer", pointer)?;
            }
            if batch.signed_per_item {
                if self.signature_pointer.is_none() || timestamp.is_some() {
                    return Err(
                        "a batch signed per item reads its signature from each item: \
                                signature_pointer, and no timestamp"
                            .to_owned(),
                    );
                }
                if template
                    .iter()
                    .any(|s| !matches!(s, Segment::Literal(_) | Segment::Field(_)))
                {
                    return Err("a batch signed per item signs fields of each item: \
                                signed_payload may use only {field:...} and text"
                        .to_owned());
                }
            } else if !signs_body {
                return Err(
                    "a batch's items must be signed: put {body} in signed_payload".to_owned(),
                );
            }
        }
        if self.algorithm.is_public_key() && self.secret_encoding != SecretEncoding::Utf8 {
            return Err(format!(
                "secret_encoding applies to HMAC secrets; {} keys are public keys (PEM, base64 \
                 or hex)",
                self.algorithm.name()
            ));
        }
        Ok(Parsed {
            signature,
            timestamp,
            template,
            id,
            event_type,
            names_signed,
            timestamp_canonical,
        })
    }
}

/// Who reads a model's event id and type: the model's own rules, or the preset's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Naming {
    /// `event_id*` / `event_type*` (required), as for every configured source.
    Model,
    /// The preset's own code ([`crate::extract::extract`]); the model verifies only.
    Code,
}

/// One naming rule (event id or type) out of its three spellings, as template segments.
fn naming_rule(
    field: &str,
    header: &Option<String>,
    pointer: &Option<String>,
    template: &Option<String>,
) -> Result<Option<Vec<Segment>>, String> {
    let header_field = format!("{field}_header");
    let pointer_field = format!("{field}_pointer");
    match (header, pointer, template) {
        (None, None, None) => Ok(None),
        (Some(name), None, None) => Ok(Some(vec![Segment::Header(header_name(
            &header_field,
            name,
        )?)])),
        (None, Some(pointer), None) => {
            json_pointer(&pointer_field, pointer)?;
            Ok(Some(vec![Segment::Field(pointer.clone())]))
        }
        (None, None, Some(template)) => {
            let segments = parse_template(field, template, Use::Naming)?;
            if !segments.iter().any(|s| !matches!(s, Segment::Literal(_))) {
                return Err(format!(
                    "{field} {template:?} reads nothing from the delivery (every event would \
                     have the same {field})"
                ));
            }
            Ok(Some(segments))
        }
        _ => Err(format!(
            "set only one of {header_field}, {pointer_field} and {field}"
        )),
    }
}

/// Parse `value` (configuration field `field`) as an HTTP header name, normalised to lowercase.
///
/// # Errors
///
/// A sentence naming the field if it is empty or has characters a header name cannot have.
fn header_name(field: &str, value: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(value.as_bytes())
        .map_err(|_| format!("{field} {value:?} is not a valid HTTP header name"))
}

/// What [`GenericHmac::parse`] produces besides the configuration itself.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    /// Where the signature is.
    pub(crate) signature: SignatureAt,
    /// Where the timestamp is, if one is signed.
    pub(crate) timestamp: Option<TimestampAt>,
    /// `signed_payload`, split into segments.
    pub(crate) template: Vec<Segment>,
    /// The event id rule.
    pub(crate) id: Vec<Segment>,
    /// The event type rule, if any.
    pub(crate) event_type: Option<Vec<Segment>>,
    /// Whether every part of the id and type is covered by the signature.
    pub(crate) names_signed: bool,
    /// Whether the timestamp's digits must be canonical (no leading zero): a variable part
    /// comes right before `{timestamp}` in the signed content.
    pub(crate) timestamp_canonical: bool,
}

/// A validated [`GenericHmac`], ready for every delivery: header names parsed, templates split.
/// Built by [`crate::Verifier::new`].
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The configuration as given (validated).
    pub(crate) config: GenericHmac,
    /// What was parsed from it.
    pub(crate) parsed: Parsed,
    /// The signature's name in errors and logs ([`SignatureAt::name`]).
    signature_name: String,
    /// Who reads the event id and type.
    pub(crate) naming: Naming,
    /// `header_aliases`, parsed: (read this header, when that one is absent).
    pub(crate) aliases: Vec<(HeaderName, HeaderName)>,
}

impl Prepared {
    /// Validate `config` and keep what was parsed.
    ///
    /// # Errors
    ///
    /// As [`GenericHmac::validate`].
    pub(crate) fn new(config: GenericHmac) -> Result<Prepared, String> {
        Self::with_naming(config, Naming::Model)
    }

    /// A built-in preset's model (or one a caller only signs with): its events are named by
    /// code when it has no event id, type or batch rule ([`GenericHmac::names_nothing`]: the
    /// first six presets), else by the model.
    ///
    /// # Errors
    ///
    /// As [`GenericHmac::validate`].
    pub(crate) fn for_preset(config: GenericHmac) -> Result<Prepared, String> {
        let naming = if config.names_nothing() {
            Naming::Code
        } else {
            Naming::Model
        };
        Self::with_naming(config, naming)
    }

    /// [`Prepared::new`] with the event id and type read by `naming`.
    ///
    /// # Errors
    ///
    /// As [`GenericHmac::validate`].
    pub(crate) fn with_naming(config: GenericHmac, naming: Naming) -> Result<Prepared, String> {
        let parsed = config.parse_with(naming)?;
        let signature_name = parsed.signature.name();
        let aliases = config
            .header_aliases
            .iter()
            .map(|(from, to)| {
                Ok((
                    header_name("header_aliases", from)?,
                    header_name("header_aliases", to)?,
                ))
            })
            .collect::<Result<_, String>>()?;
        Ok(Prepared {
            config,
            parsed,
            signature_name,
            naming,
            aliases,
        })
    }

    /// The configuration as given.
    pub(crate) fn config(&self) -> &GenericHmac {
        &self.config
    }

    /// Whether a timestamp is signed.
    pub(crate) fn signs_timestamp(&self) -> bool {
        self.parsed.timestamp.is_some()
    }

    /// The signature header's name, lowercase, or `body <pointer>`: the name
    /// [`crate::VerifyError::MissingHeader`] carries and [`super::sign`] returns.
    pub(crate) fn signature_header(&self) -> &str {
        &self.signature_name
    }
}
