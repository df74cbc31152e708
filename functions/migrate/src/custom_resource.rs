//! The CloudFormation custom resource protocol (AWS CloudFormation User Guide, "Custom resource
//! request objects" and "Custom resource response objects"): the request Lambda receives, and
//! the response, an HTTPS `PUT` of JSON to the request's presigned S3 `ResponseURL` with an
//! empty `Content-Type` (a presigned URL's signature fails on any other), which CloudFormation
//! waits for (up to an hour) before going on or rolling back.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Map, Value};

/// `RequestType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestType {
    /// The resource is created (first deploy).
    Create,
    /// Its properties changed (or a rollback brings back the old ones: `ResourceProperties`
    /// then holds the OLD template's values).
    Update,
    /// The resource is deleted (stack deletion, or replaced by a new physical id).
    Delete,
}

/// A custom resource request, as CloudFormation sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `RequestType`.
    pub request_type: RequestType,
    /// `ResponseURL`: the presigned S3 URL to `PUT` the answer to.
    pub response_url: String,
    /// `StackId`.
    pub stack_id: String,
    /// `RequestId`.
    pub request_id: String,
    /// `LogicalResourceId`, e.g. `Schema`.
    pub logical_resource_id: String,
    /// `PhysicalResourceId` (absent on Create).
    pub physical_resource_id: Option<String>,
    /// `ResourceType`, e.g. `Custom::HookledgerSchema`.
    pub resource_type: String,
    /// `ResourceProperties` (every scalar a string); `{}` when absent.
    pub resource_properties: Value,
    /// `OldResourceProperties` (Update only).
    pub old_resource_properties: Option<Value>,
}

/// Why a request could not be read. Without a `ResponseURL` nothing can be answered (the
/// invocation fails; CloudFormation times out); with one, the caller answers FAILED.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("not a custom resource request: {problem}")]
pub struct BadRequest {
    /// What is missing or wrong (a field name).
    pub problem: String,
    /// The fields that could be read, to answer FAILED with.
    pub partial: Option<Box<Request>>,
}

impl Request {
    /// Reads a request from the invocation's JSON.
    ///
    /// # Errors
    /// [`BadRequest`]: `partial` is set when `ResponseURL` was readable (the other identifiers
    /// then default to empty strings).
    pub fn from_value(value: &Value) -> Result<Self, BadRequest> {
        let text = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
        let Some(response_url) = text("ResponseURL") else {
            return Err(BadRequest {
                problem: "no ResponseURL".to_owned(),
                partial: None,
            });
        };
        let request_type = match text("RequestType").as_deref() {
            Some("Create") => Some(RequestType::Create),
            Some("Update") => Some(RequestType::Update),
            Some("Delete") => Some(RequestType::Delete),
            _ => None,
        };
        let request = Self {
            request_type: request_type.unwrap_or(RequestType::Create),
            response_url,
            stack_id: text("StackId").unwrap_or_default(),
            request_id: text("RequestId").unwrap_or_default(),
            logical_resource_id: text("LogicalResourceId").unwrap_or_default(),
            physical_resource_id: text("PhysicalResourceId"),
            resource_type: text("ResourceType").unwrap_or_default(),
            resource_properties: value
                .get("ResourceProperties")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
            old_resource_properties: value.get("OldResourceProperties").cloned(),
        };
        let missing = ["StackId", "RequestId", "LogicalResourceId"]
            .into_iter()
            .find(|name| text(name).is_none());
        let problem = match (request_type, missing) {
            (None, _) => Some("RequestType is not Create, Update or Delete".to_owned()),
            (_, Some(name)) => Some(format!("no {name}")),
            _ => None,
        };
        match problem {
            Some(problem) => Err(BadRequest {
                problem,
                partial: Some(Box::new(request)),
            }),
            None => Ok(request),
        }
    }
}

/// Which `ResponseURL`s the function answers to ([`check_response_url`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseUrls {
    /// CloudFormation's pre-signed S3 URLs only: what `main.rs` uses, always.
    CloudFormation,
    /// For tests only: also `http` or `https` to `127.0.0.1`, `::1` or `localhost` (a local
    /// fake S3). Set in code by a test that builds the resource itself; no event field and no
    /// environment variable turns it on.
    AlsoLoopbackForTests,
}

/// Why a `ResponseURL` was refused (a fixed text: the URL is the invoker's, never logged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ResponseURL is not CloudFormation's pre-signed S3 URL: {0}")]
pub struct UrlRefused(pub &'static str);

/// Whether `url` is where CloudFormation wants a custom resource's answer: `https` on the
/// default port, no user information, and a host
/// `cloudformation-custom-resource-response-<region>.<s3 endpoint>`, where the region is
/// written without dashes (`useast1`) and the endpoint is `s3.amazonaws.com`,
/// `s3.<region>.amazonaws.com` or `s3-<region>.amazonaws.com` (`.amazonaws.com.cn` in the
/// China partition; GovCloud regions are `us-gov-...`). Source: the AWS CloudFormation User
/// Guide, "Custom resource request objects" (`ResponseURL`: "The response URL identifies a
/// presigned S3 bucket"), whose examples are of these forms. Checked before any work, so an
/// invoker that is not CloudFormation neither gets an answer elsewhere nor makes the function
/// migrate or provision logins on its behalf.
///
/// # Errors
/// [`UrlRefused`] naming the rule that failed.
pub fn check_response_url(url: &str, allowed: ResponseUrls) -> Result<(), UrlRefused> {
    let url = reqwest::Url::parse(url).map_err(|_| UrlRefused("not a URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlRefused("user information"));
    }
    let host = url.host_str().unwrap_or("");
    if allowed == ResponseUrls::AlsoLoopbackForTests
        && matches!(url.scheme(), "http" | "https")
        && shared::loopback::is_loopback_host(host)
    {
        return Ok(());
    }
    if url.scheme() != "https" {
        return Err(UrlRefused("not https"));
    }
    if url.port().is_some() {
        return Err(UrlRefused("not the default port"));
    }
    let Some(endpoint) = host
        .strip_prefix("cloudformation-custom-resource-response-")
        .and_then(|rest| rest.split_once('.'))
        .filter(|(bucket_region, _)| {
            !bucket_region.is_empty()
                && bucket_region
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        .map(|(_, endpoint)| endpoint)
    else {
        return Err(UrlRefused("not CloudFormation's response bucket"));
    };
    let region = |name: &str| {
        !name.is_empty()
            && name.contains('-')
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let s3 = endpoint
        .strip_suffix(".amazonaws.com")
        .or_else(|| endpoint.strip_suffix(".amazonaws.com.cn"))
        .is_some_and(|s3| {
            s3 == "s3"
                || s3.strip_prefix("s3.").is_some_and(region)
                || s3.strip_prefix("s3-").is_some_and(region)
        });
    if !s3 {
        return Err(UrlRefused("not an S3 endpoint"));
    }
    Ok(())
}

/// `Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// The resource is in the requested state.
    Success,
    /// It is not: CloudFormation fails the operation and rolls back.
    Failed,
}

/// The longest `Reason` sent (CloudFormation shows it in the stack's events; the whole response
/// must stay under 4,096 bytes).
pub const MAX_REASON_CHARS: usize = 500;

/// A custom resource response.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Response {
    /// `SUCCESS` or `FAILED`.
    pub status: Status,
    /// Why, for a failure (at most [`MAX_REASON_CHARS`]); a short summary otherwise.
    pub reason: String,
    /// The resource's physical id (the same on every answer: a new one would make
    /// CloudFormation Delete the old one).
    pub physical_resource_id: String,
    /// Copied from the request.
    pub stack_id: String,
    /// Copied from the request.
    pub request_id: String,
    /// Copied from the request.
    pub logical_resource_id: String,
    /// Whether `Data` is masked in `Fn::GetAtt` output (never: nothing secret is in it).
    pub no_echo: bool,
    /// String values readable with `Fn::GetAtt`.
    pub data: Map<String, Value>,
}

impl Response {
    /// The answer to `request` with `status`, `reason` (truncated to [`MAX_REASON_CHARS`]) and
    /// `data`, for the resource `physical_resource_id`.
    pub fn to(
        request: &Request,
        physical_resource_id: &str,
        status: Status,
        reason: &str,
        data: Map<String, Value>,
    ) -> Self {
        let reason = match reason.char_indices().nth(MAX_REASON_CHARS) {
            Some((end, _)) => format!("{}...", &reason[..end]),
            None => reason.to_owned(),
        };
        Self {
            status,
            reason,
            physical_resource_id: physical_resource_id.to_owned(),
            stack_id: request.stack_id.clone(),
            request_id: request.request_id.clone(),
            logical_resource_id: request.logical_resource_id.clone(),
            no_echo: false,
            data,
        }
    }
}

/// How many times [`send`] tries the `PUT`.
pub const SEND_ATTEMPTS: u32 = 4;

/// Why the answer could not be delivered ([`send`]): the last attempt's failure. The
/// invocation fails with it; CloudFormation then waits for the resource's timeout.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The answer does not serialise (a bug: fatal, nothing was sent).
    #[error("the response does not serialise")]
    Serialise(#[source] serde_json::Error),
    /// The response URL answered something other than 2xx (retried up to [`SEND_ATTEMPTS`]).
    #[error("the response URL answered {0}")]
    Refused(reqwest::StatusCode),
    /// The `PUT` got no answer (retried up to [`SEND_ATTEMPTS`]); the transport error, without
    /// the URL (its query holds the presigned signature).
    #[error("cannot PUT the response")]
    Unreachable(#[source] reqwest::Error),
    /// No time was left before the deadline for a (first) attempt.
    #[error("no attempt made: no time left")]
    NoTime,
}

/// `PUT`s `response` to `url` with an empty `Content-Type`, retrying a failed attempt (no
/// answer, or not 2xx) up to [`SEND_ATTEMPTS`] times with a growing pause (0.5 s, 1 s, 2 s),
/// every attempt bounded by what is left before `deadline`.
///
/// # Errors
/// [`SendError`]: the last attempt's failure (status or transport error, without the URL's
/// query, which holds the presigned signature) once the attempts or the time ran out.
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    response: &Response,
    deadline: SystemTime,
) -> Result<(), SendError> {
    let body = serde_json::to_vec(response).map_err(SendError::Serialise)?;
    let mut last = SendError::NoTime;
    for attempt in 0..SEND_ATTEMPTS {
        if attempt > 0 {
            let pause = Duration::from_millis(500 << (attempt - 1));
            if shared::invocation::remaining(deadline) <= pause {
                break;
            }
            tokio::time::sleep(pause).await;
        }
        let left = shared::invocation::remaining(deadline);
        if left.is_zero() {
            break;
        }
        let result = client
            .put(url)
            .header(reqwest::header::CONTENT_TYPE, "")
            .header(reqwest::header::CONTENT_LENGTH, body.len())
            .body(body.clone())
            .timeout(left.min(Duration::from_secs(10)))
            .send()
            .await;
        last = match result {
            Ok(answer) if answer.status().is_success() => return Ok(()),
            Ok(answer) => SendError::Refused(answer.status()),
            Err(error) => SendError::Unreachable(error.without_url()),
        };
        tracing::warn!(
            attempt = attempt + 1,
            error = %shared::error_chain::error_chain(&last),
            "custom resource response not taken"
        );
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_parses_and_a_response_has_the_documented_fields() {
        let value = json!({
            "RequestType": "Update", "ResponseURL": "https://s3/x?sig", "StackId": "arn:stack",
            "RequestId": "r1", "LogicalResourceId": "Schema", "PhysicalResourceId": "p",
            "ResourceType": "Custom::HookledgerSchema",
            "ResourceProperties": {"Version": "2"}, "OldResourceProperties": {"Version": "1"}
        });
        let request = Request::from_value(&value).unwrap();
        assert_eq!(request.request_type, RequestType::Update);
        assert_eq!(
            request.old_resource_properties,
            Some(json!({"Version": "1"}))
        );
        let response = Response::to(&request, "p", Status::Failed, &"x".repeat(900), Map::new());
        let json = serde_json::to_value(&response).unwrap();
        for field in [
            "Status",
            "Reason",
            "PhysicalResourceId",
            "StackId",
            "RequestId",
            "LogicalResourceId",
            "NoEcho",
            "Data",
        ] {
            assert!(json.get(field).is_some(), "{field}");
        }
        assert_eq!(json["Status"], "FAILED");
        assert!(response.reason.len() <= MAX_REASON_CHARS + 3);
    }

    #[test]
    fn only_cloudformations_presigned_s3_urls_are_answered() {
        let cfn = ResponseUrls::CloudFormation;
        for url in [
            "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/arn%3Aaws%3Acloudformation%3Aus-east-1%3A123456789012%3Astack/h/1%7CSchema%7Cr1?X-Amz-Signature=abc",
            "https://cloudformation-custom-resource-response-useast2.s3.us-east-2.amazonaws.com/x?s",
            "https://cloudformation-custom-resource-response-euwest1.s3-eu-west-1.amazonaws.com/x",
            "https://cloudformation-custom-resource-response-usgovwest1.s3.us-gov-west-1.amazonaws.com/x",
            "https://cloudformation-custom-resource-response-cnnorth1.s3.cn-north-1.amazonaws.com.cn/x",
        ] {
            assert_eq!(check_response_url(url, cfn), Ok(()), "{url}");
        }
        for url in [
            "http://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
            "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com:8443/x",
            "https://u:p@cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
            "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com.evil.example/x",
            "https://cloudformation-custom-resource-response-useast1.evil.example/x",
            "https://cloudformation-custom-resource-response-.s3.amazonaws.com/x",
            "https://my-bucket.s3.amazonaws.com/x",
            "https://s3.amazonaws.com/cloudformation-custom-resource-response-useast1/x",
            "https://cloudformation-custom-resource-response-useast1.s3.evil.amazonaws.com/x",
            "https://cloudformation-custom-resource-response-useast1.s3.us_east.amazonaws.com/x",
            "https://169.254.169.254/latest/meta-data/",
            "http://127.0.0.1:9000/cfn/response",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(check_response_url(url, cfn).is_err(), "{url}");
        }
        let tests = ResponseUrls::AlsoLoopbackForTests;
        assert_eq!(
            check_response_url("http://127.0.0.1:9000/cfn/response", tests),
            Ok(())
        );
        assert!(check_response_url("http://10.0.0.1:9000/cfn/response", tests).is_err());
    }

    #[test]
    fn without_a_response_url_nothing_can_be_answered() {
        let error = Request::from_value(&json!({"RequestType": "Create"})).unwrap_err();
        assert!(error.partial.is_none());
        let error =
            Request::from_value(&json!({"ResponseURL": "u", "RequestType": "Nope"})).unwrap_err();
        assert!(error.partial.is_some());
    }
}
