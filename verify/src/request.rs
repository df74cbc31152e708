//! [`Request`]: what a scheme may sign besides the body: the method, the URL as the provider
//! saw it, and the headers.

use http::HeaderMap;

/// One delivery as received, for verification.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The HTTP method, uppercase (`"POST"`; Meta's subscription check is a `"GET"`).
    pub method: &'a str,
    /// The URL as the provider requested it: scheme, host, path and query, e.g.
    /// `https://hooks.example.com/webhooks/twilio?x=1`. Empty when unknown (a template that
    /// signs `{url}` then fails with [`crate::VerifyError::MissingConfig`]).
    pub url: &'a str,
    /// The request headers (looked up case-insensitively).
    pub headers: &'a HeaderMap,
    /// The exact raw body bytes.
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A `POST` of `body` with `headers` and no known URL: enough for every scheme that does not
    /// sign the URL.
    #[must_use]
    pub fn post(headers: &'a HeaderMap, body: &'a [u8]) -> Self {
        Self {
            method: "POST",
            url: "",
            headers,
            body,
        }
    }
}
