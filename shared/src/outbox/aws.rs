//! What an AWS SDK error means for an outbox message (`sqs`, `eventbridge`): retry later, or
//! dead at once.
//!
//! The SDK has already retried throttling, 5xx and transient network errors a few times with
//! its own backoff (standard retry mode) before an error reaches us; the outbox then retries
//! the message on its own schedule.

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use super::excerpt::excerpt;
use super::DispatchError;

/// Service error codes that mean "try again later" whatever the HTTP status (throttling and
/// the services' internal errors; SQS, EventBridge and KMS names).
const RETRYABLE_CODES: &[&str] = &[
    "RequestThrottled",
    "ThrottlingException",
    "Throttling",
    "ThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "KmsThrottled",
    "KMS.ThrottlingException",
    "InternalError",
    "InternalFailure",
    "InternalException",
    "ServiceUnavailable",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// Whether a service error code means "try again later".
pub(crate) fn code_is_retryable(code: &str) -> bool {
    RETRYABLE_CODES.contains(&code)
}

/// Classifies an SDK error of operation `operation` (`SendMessage`, `PutEvents`):
///
/// - the request could not be built: fatal (this message can never be sent as it is);
/// - a timeout, a dispatch failure (connection refused, DNS, TLS, I/O) or an unparseable
///   answer: retryable (the request may or may not have arrived: the idempotency key covers a
///   repeat);
/// - a service error: retryable when its code is a throttling or internal error
///   ([`RETRYABLE_CODES`]) or its HTTP status is 429 or 5xx; fatal otherwise. Fatal covers a
///   queue or bus that does not exist, access denied (IAM or KMS), a disabled KMS key and an
///   invalid parameter: configuration an operator must fix, after which they re-drive the dead
///   messages. Retrying those for `max_attempts` would only delay the same verdict.
///
/// The reason holds the operation, the error code and the service's message, bounded like an
/// answer excerpt; never the payload.
pub(crate) fn classify<E>(operation: &str, error: &SdkError<E, HttpResponse>) -> DispatchError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let status = error.raw_response().map(|r| r.status().as_u16());
    match error {
        SdkError::ConstructionFailure(_) => DispatchError::Fatal {
            reason: bounded(&format!(
                "{operation} could not be built: {}",
                DisplayErrorContext(error)
            )),
            status: None,
        },
        SdkError::TimeoutError(_) => DispatchError::Retryable {
            reason: format!("{operation} timed out"),
            status: None,
            retry_after: None,
        },
        SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => DispatchError::Retryable {
            reason: bounded(&format!(
                "{operation} failed: {}",
                DisplayErrorContext(error)
            )),
            status,
            retry_after: None,
        },
        SdkError::ServiceError(service) => {
            let err = service.err();
            let code = err.code().unwrap_or("unknown");
            let message = err.message().unwrap_or("");
            let reason = bounded(&format!("{operation}: {code}: {message}"));
            if code_is_retryable(code) || status.is_some_and(|s| s == 429 || s >= 500) {
                DispatchError::Retryable {
                    reason,
                    status,
                    retry_after: None,
                }
            } else {
                DispatchError::Fatal { reason, status }
            }
        }
        _ => DispatchError::Retryable {
            reason: bounded(&format!(
                "{operation} failed: {}",
                DisplayErrorContext(error)
            )),
            status,
            retry_after: None,
        },
    }
}

/// `text` bounded and escaped as an answer excerpt.
fn bounded(text: &str) -> String {
    excerpt(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::operation::send_message::SendMessageError;
    use aws_sdk_sqs::types::error::{QueueDoesNotExist, RequestThrottled};
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    fn response(status: u16) -> HttpResponse {
        HttpResponse::new(StatusCode::try_from(status).unwrap(), SdkBody::empty())
    }

    fn service(error: SendMessageError, status: u16) -> SdkError<SendMessageError, HttpResponse> {
        SdkError::service_error(error, response(status))
    }

    fn unhandled(code: &str, status: u16) -> SdkError<SendMessageError, HttpResponse> {
        let meta = ErrorMetadata::builder()
            .code(code)
            .message("the service says no")
            .build();
        service(SendMessageError::generic(meta), status)
    }

    #[test]
    fn throttling_and_server_errors_are_retryable() {
        let throttled = RequestThrottled::builder()
            .message("slow down")
            .meta(ErrorMetadata::builder().code("RequestThrottled").build())
            .build();
        let error = classify(
            "SendMessage",
            &service(SendMessageError::RequestThrottled(throttled), 400),
        );
        assert!(
            matches!(
                error,
                DispatchError::Retryable {
                    status: Some(400),
                    ..
                }
            ),
            "{error:?}"
        );
        for (code, status) in [
            ("InternalError", 500),
            ("ServiceUnavailable", 503),
            ("Whatever", 502),
            ("Whatever", 429),
            ("ThrottlingException", 400),
        ] {
            let error = classify("SendMessage", &unhandled(code, status));
            assert!(
                matches!(error, DispatchError::Retryable { .. }),
                "{code}: {error:?}"
            );
            assert_eq!(error.status(), Some(status));
        }
    }

    #[test]
    fn configuration_errors_are_fatal_and_say_what_the_service_said() {
        let missing = QueueDoesNotExist::builder()
            .message("The specified queue does not exist.")
            .meta(ErrorMetadata::builder().code("QueueDoesNotExist").build())
            .build();
        let error = classify(
            "SendMessage",
            &service(SendMessageError::QueueDoesNotExist(missing), 400),
        );
        let DispatchError::Fatal { reason, status } = error else {
            panic!("{error:?}")
        };
        assert_eq!(status, Some(400));
        assert!(
            reason.contains("SendMessage") && reason.contains("QueueDoesNotExist"),
            "{reason}"
        );
        for code in [
            "AccessDenied",
            "InvalidParameterValue",
            "KmsAccessDenied",
            "KMS.DisabledException",
        ] {
            let error = classify("SendMessage", &unhandled(code, 400));
            assert!(
                matches!(error, DispatchError::Fatal { .. }),
                "{code}: {error:?}"
            );
        }
    }

    #[test]
    fn timeouts_and_dispatch_failures_are_retryable() {
        let timeout: SdkError<SendMessageError, HttpResponse> =
            SdkError::timeout_error("operation timeout");
        assert!(matches!(
            classify("SendMessage", &timeout),
            DispatchError::Retryable { status: None, .. }
        ));
        let dispatch: SdkError<SendMessageError, HttpResponse> = SdkError::dispatch_failure(
            aws_sdk_sqs::error::ConnectorError::io("connection refused".into()),
        );
        assert!(matches!(
            classify("SendMessage", &dispatch),
            DispatchError::Retryable { .. }
        ));
        let build: SdkError<SendMessageError, HttpResponse> =
            SdkError::construction_failure("missing QueueUrl");
        assert!(matches!(
            classify("SendMessage", &build),
            DispatchError::Fatal { .. }
        ));
    }

    #[test]
    fn a_long_service_message_is_bounded() {
        let meta = ErrorMetadata::builder()
            .code("InvalidParameterValue")
            .message("x\n".repeat(10_000))
            .build();
        let error = classify(
            "SendMessage",
            &service(SendMessageError::generic(meta), 400),
        );
        let DispatchError::Fatal { reason, .. } = error else {
            panic!()
        };
        assert!(reason.len() <= super::super::MAX_EXCERPT_BYTES && !reason.contains('\n'));
    }
}
