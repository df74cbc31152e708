//! The SDK's HTTP client against local servers: what goes out, what comes back, how each
//! failure is classified for the SDK's retries, and a SigV4 signature checked on the wire.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A Lambda client over [`crate::aws::loader`] at `endpoint`, with test credentials.
async fn lambda_at(endpoint: &str) -> aws_sdk_lambda::Client {
    let config = crate::aws::loader()
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_lambda::config::Credentials::new(
            "AKIDREVIEW",
            "secret",
            None,
            None,
            "review",
        ))
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_timeout(Duration::from_secs(20))
                .build(),
        )
        .load()
        .await;
    aws_sdk_lambda::Client::new(&config)
}

fn connector(read_timeout: Option<Duration>) -> SharedHttpConnector {
    SharedHttpConnector::new(Connector::new((Some(Duration::from_secs(5)), read_timeout)))
}

fn request(url: &str, body: &'static str) -> HttpRequest {
    let request = http::Request::builder()
        .method("POST")
        .uri(url)
        .header("content-type", "application/x-amz-json-1.1")
        .header("content-length", body.len())
        .body(SdkBody::from(body))
        .expect("a request");
    HttpRequest::try_from(request).expect("an SDK request")
}

/// Reads one request (headers and a `content-length` body) from `stream`.
async fn read_request(stream: &mut tokio::net::TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = stream.read(&mut buffer).await.expect("read");
        seen.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&seen).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| line.strip_prefix("content-length: "))
                .map_or(0, |n| n.trim().parse::<usize>().expect("a length"));
            if seen.len() >= end + 4 + length || n == 0 {
                return text;
            }
        }
        if n == 0 {
            return text;
        }
    }
}

/// A server on 127.0.0.1 that reads one request, writes `answer` and closes: its URL (no
/// trailing slash) and the request it read.
async fn answer_once(answer: Vec<u8>) -> (String, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let seen = read_request(&mut stream).await;
        stream.write_all(&answer).await.expect("write");
        seen
    });
    (url, server)
}

#[tokio::test]
async fn a_request_goes_out_with_its_headers_and_body_and_the_answer_comes_back() {
    let (url, server) = answer_once(
        b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.1\r\ncontent-length: 30\r\n\r\n{\"__type\":\"NotFoundException\"}".to_vec(),
    )
    .await;
    let response = connector(None)
        .call(request(&format!("{url}/"), r#"{"SecretId":"a"}"#))
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(
        response.headers().get("content-type"),
        Some("application/x-amz-json-1.1")
    );
    let body = aws_smithy_types::byte_stream::ByteStream::new(response.into_body())
        .collect()
        .await
        .expect("the body")
        .into_bytes();
    assert_eq!(&body[..], &b"{\"__type\":\"NotFoundException\"}"[..]);
    let seen = server.await.expect("the server");
    assert!(seen.starts_with("POST / HTTP/1.1\r\n"), "{seen}");
    assert!(seen.contains("content-length: 16\r\n"), "{seen}");
    assert!(seen.ends_with(r#"{"SecretId":"a"}"#), "{seen}");
}

#[tokio::test]
async fn a_server_that_never_answers_is_a_timeout_for_the_sdks_retries() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let _server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(stream);
    });
    let error = connector(Some(Duration::from_millis(200)))
        .call(request(&url, "{}"))
        .await
        .expect_err("no answer");
    assert!(error.is_timeout(), "{error:?}");
}

#[tokio::test]
async fn a_refused_connection_is_io_so_the_sdk_retries_it() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    drop(listener);
    let error = connector(None)
        .call(request(&url, "{}"))
        .await
        .expect_err("refused");
    assert!(error.is_io(), "{error:?}");
}

/// The TLS handshake runs through OpenSSL with the system's trust store: a certificate no
/// CA of it signed is refused before any byte of the request is sent.
#[tokio::test]
async fn a_certificate_the_system_store_does_not_trust_is_refused() {
    use openssl::asn1::Asn1Time;
    use openssl::hash::MessageDigest;
    use openssl::pkey::PKey;
    use openssl::rsa::Rsa;
    use openssl::x509::{X509NameBuilder, X509};

    let key = PKey::from_rsa(Rsa::generate(2048).expect("a key")).expect("a key");
    let mut name = X509NameBuilder::new().expect("a name");
    name.append_entry_by_text("CN", "127.0.0.1").expect("CN");
    let name = name.build();
    let mut certificate = X509::builder().expect("a builder");
    certificate.set_version(2).expect("v3");
    certificate.set_subject_name(&name).expect("subject");
    certificate.set_issuer_name(&name).expect("issuer");
    certificate.set_pubkey(&key).expect("key");
    certificate
        .set_not_before(&Asn1Time::days_from_now(0).expect("now"))
        .expect("not before");
    certificate
        .set_not_after(&Asn1Time::days_from_now(1).expect("tomorrow"))
        .expect("not after");
    certificate
        .sign(&key, MessageDigest::sha256())
        .expect("sign");
    let certificate = certificate.build();
    let identity = native_tls::Identity::from_pkcs8(
        &certificate.to_pem().expect("pem"),
        &key.private_key_to_pem_pkcs8().expect("pkcs8"),
    )
    .expect("an identity");
    let acceptor = tokio_native_tls::TlsAcceptor::from(
        native_tls::TlsAcceptor::new(identity).expect("an acceptor"),
    );

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("https://{}/", listener.local_addr().expect("addr"));
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        // The client gives up in the handshake: no request is read.
        acceptor.accept(stream).await.is_ok()
    });
    let error = connector(None)
        .call(request(&url, "{}"))
        .await
        .expect_err("an untrusted certificate");
    assert!(error.is_io(), "{error:?}");
    assert!(
        crate::error_chain::error_chain(&error).contains("certificate verify failed"),
        "{}",
        crate::error_chain::error_chain(&error)
    );
    assert!(
        !server.await.expect("the server"),
        "the handshake completed"
    );
}

/// A server that closes the first connection after reading its request (no answer: hyper's
/// `IncompleteMessage`, what a keep-alive connection the server timed out looks like, or an
/// execution environment thawed after its pooled connection died), then answers 202.
///
/// The SDK's own hyper client classifies `IncompleteMessage` as a transient error and the
/// standard retry policy retries it (aws-smithy-http-client-1.5.2/src/client.rs:723-726).
#[tokio::test]
async fn a_connection_closed_before_the_answer_is_retried_by_the_sdk() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let _ = read_request(&mut stream).await;
            if n == 0 {
                drop(stream);
            } else {
                let _ = stream
                    .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        }
    });
    let outcome = lambda_at(&url)
        .await
        .invoke()
        .function_name("arn:aws:lambda:us-east-1:123456789012:function:worker")
        .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
        .payload(aws_sdk_lambda::primitives::Blob::new("{}"))
        .send()
        .await;
    assert!(
        outcome.is_ok(),
        "not retried after {} request(s): {}",
        requests.load(Ordering::SeqCst),
        crate::error_chain::error_chain(&outcome.unwrap_err())
    );
}

/// The SDK's default client ignores `HTTP_PROXY`/`HTTPS_PROXY` (its proxy is off unless
/// configured); reqwest reads them at every client build, with no loopback bypass. This test
/// runs itself again in a child process with `HTTP_PROXY` set (so this process's environment
/// is left alone), where it makes one Invoke at an endpoint nothing listens on; a request
/// reaching the proxy fails it.
#[test]
fn aws_calls_do_not_go_through_http_proxy() {
    const NAME: &str = "aws::http_client::tests::aws_calls_do_not_go_through_http_proxy";
    if std::env::var_os("PROXY_PROBE_CHILD").is_some() {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        runtime.block_on(async {
            let _ = lambda_at("http://127.0.0.1:9")
                .await
                .invoke()
                .function_name("worker")
                .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
                .send()
                .await;
        });
        return;
    }
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = proxy.local_addr().expect("addr").port();
    proxy.set_nonblocking(true).expect("nonblocking");
    let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([NAME, "--exact", "--test-threads=1"])
        .env("HTTP_PROXY", format!("http://127.0.0.1:{port}"))
        .env("PROXY_PROBE_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the child");
    let started = Instant::now();
    let mut request_line = None;
    let mut child_done = false;
    while started.elapsed() < Duration::from_secs(30) {
        match proxy.accept() {
            Ok((mut stream, _)) => {
                use std::io::{Read, Write};
                stream.set_nonblocking(false).expect("blocking");
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .expect("timeout");
                let mut buffer = [0u8; 4096];
                let n = stream.read(&mut buffer).unwrap_or(0);
                let text = String::from_utf8_lossy(&buffer[..n]).to_string();
                request_line = text.lines().next().map(str::to_owned);
                let _ = stream.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n");
                break;
            }
            Err(_) => {
                if child.try_wait().expect("wait").is_some() {
                    child_done = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    let status = child.wait().expect("the child's status");
    assert_eq!(
        request_line, None,
        "the AWS call went to HTTP_PROXY (127.0.0.1:{port}) instead of the endpoint"
    );
    assert!(
        child_done && status.success(),
        "the probe did not finish: {status:?}"
    );
}

/// The request as it arrives on the wire still carries a valid SigV4 signature (recomputed
/// here from the wire bytes, as the service does): reqwest's `Url` round trip, hyper's `host`,
/// reqwest's added `accept`, the `content-length` all leave the signed parts alone. Lambda's
/// path carries a percent-encoded ARN and the query a `$`.
#[tokio::test]
async fn the_wire_request_verifies_under_sigv4() {
    use hmac::{Hmac, KeyInit, Mac};
    use sha2::{Digest, Sha256};
    fn hmac(key: &[u8], data: &str) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("key");
        mac.update(data.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
    fn encode(s: &str, keep_slash: bool) -> String {
        let mut out = String::new();
        for b in s.bytes() {
            let c = b as char;
            if c.is_ascii_alphanumeric() || "-_.~".contains(c) || (keep_slash && c == '/') {
                out.push(c);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    let (url, server) =
        answer_once(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec()).await;
    let _ = lambda_at(&url)
        .await
        .invoke()
        .function_name("arn:aws:lambda:us-east-1:123456789012:function:worker")
        .qualifier("$LATEST")
        .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
        .payload(aws_sdk_lambda::primitives::Blob::new("{\"é\": \"a b\"}"))
        .send()
        .await;
    let wire = server.await.expect("the server");
    let (head, body) = wire.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.lines();
    let mut request_line = lines.next().expect("a request line").split(' ');
    let (method, target) = (request_line.next().unwrap(), request_line.next().unwrap());
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').expect("a header");
            (n.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let authorization = header("authorization");
    let signed = authorization
        .split("SignedHeaders=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_owned();
    let signature = authorization.split("Signature=").nth(1).unwrap().to_owned();
    let scope = authorization
        .split("Credential=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .split_once('/')
        .unwrap()
        .1
        .to_owned();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (encode(&k, false), encode(&v, false)))
        .collect();
    params.sort();
    let canonical_query = params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let canonical_headers: String = signed
        .split(';')
        .map(|n| format!("{n}:{}\n", header(n)))
        .collect();
    let payload = hex::encode(Sha256::digest(body.as_bytes()));
    let canonical = format!(
        "{method}\n{}\n{canonical_query}\n{canonical_headers}\n{signed}\n{payload}",
        encode(path, true)
    );
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
        header("x-amz-date"),
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let mut parts = scope.split('/');
    let key = hmac(b"AWS4secret", parts.next().unwrap());
    let key = hmac(&key, parts.next().unwrap());
    let key = hmac(&key, parts.next().unwrap());
    let key = hmac(&key, "aws4_request");
    assert_eq!(
        hex::encode(hmac(&key, &to_sign)),
        signature,
        "wire:\n{wire}\ncanonical:\n{canonical}"
    );
}

/// The doorbell's boxed source (`DoorbellError::Invoke`) keeps the service's code and message
/// in its cause chain: what `error_chain` prints of it, and what `%error` alone prints.
#[tokio::test]
async fn a_failed_invoke_keeps_the_services_code_and_message_in_its_chain() {
    let body = r#"{"Type":"User","message":"Function not found: arn:aws:lambda:us-east-1:123456789012:function:worker"}"#;
    let (url, _server) = answer_once(
        format!(
            "HTTP/1.1 404 Not Found\r\nx-amzn-errortype: ResourceNotFoundException\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
    .await;
    let error = lambda_at(&url)
        .await
        .invoke()
        .function_name("worker")
        .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
        .send()
        .await
        .expect_err("not found");
    let error = crate::doorbell::DoorbellError::Invoke {
        function: "worker".to_owned(),
        source: Box::new(error),
    };
    let chain = crate::error_chain::error_chain(&error);
    assert!(chain.contains("ResourceNotFoundException"), "{chain}");
    assert!(chain.contains("Function not found"), "{chain}");
    // What the receiver logs (`%error`, shared/src/receive/receiver.rs:503):
    assert_eq!(error.to_string(), "invoke worker");
}
