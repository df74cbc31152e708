//! The built-in targets' senders through `Dispatcher::dispatch`: `forward` against local
//! endpoints that verify every request with the official Standard Webhooks libraries (Python,
//! `tests/interop/forward_server.py` and the book's `tests/interop/forward_receiver.py`; Node,
//! the book's `tests/interop/node/forward-receiver.mjs`), and `sqs` (FIFO and standard) and
//! `eventbridge` against the local AWS emulator (moto), all started by `make test`.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use futures_util::{stream, StreamExt};
use serde_json::{json, Value};
use shared::config::targets::{Target, TargetSpec};
use shared::outbox::{DispatchError, Dispatcher, Message};

pub(crate) const SECRET: &str = "whsec_aG9va2xlZGdlciBmb3J3YXJkIHRlc3Qga2V5IDAwMDE=";
const OTHER_SECRET: &str = "whsec_c29tZWJvZHkgZWxzZSdzIGZvcndhcmQga2V5IDAwMDI=";

fn python() -> String {
    std::env::var("HOOKLEDGER_TOOLS_PYTHON").expect(
        "HOOKLEDGER_TOOLS_PYTHON: run with make test (its venv has the standardwebhooks library)",
    )
}

fn interop_dir() -> PathBuf {
    hookledger_tests::repo_root().join("tests/interop")
}

/// A child process killed (and reaped) when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Kills the server and returns what it printed.
    fn output(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            stdout.read_to_string(&mut out).unwrap();
        }
        out
    }
}

/// `tests/interop/forward_server.py`, recording every request to `record`.
pub(crate) fn forward_server(record: &std::path::Path) -> Server {
    let mut child = Command::new(python())
        .arg(interop_dir().join("forward_server.py"))
        .args(["--quiet", "--record"])
        .arg(record)
        .env("HOOKLEDGER_FORWARD_SECRET", SECRET)
        .stdout(Stdio::piped())
        .spawn()
        .expect("forward_server.py does not start");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = serde_json::from_str::<Value>(&line)
        .unwrap_or_else(|e| panic!("forward_server.py printed {line:?}: {e}"))["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap();
    Server { child, port }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A snippet server quoted in the book (`FORWARD_SECRET`, `PORT`), once it accepts connections.
fn snippet_server(mut command: Command) -> Server {
    let port = free_port();
    let child = command
        .env("FORWARD_SECRET", SECRET)
        .env("PORT", port.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the snippet server does not start");
    let mut server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!("the snippet server exited: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the snippet server never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

fn forward_target(port: u16, path: &str, secret: &str, timeout_ms: u64) -> Target {
    let spec: TargetSpec = serde_json::from_value(json!({
        "type": "forward",
        "name": "service",
        "url": format!("http://127.0.0.1:{port}{path}"),
        "secret": secret,
        "timeout_ms": timeout_ms,
    }))
    .unwrap();
    Target::from_spec(spec).unwrap()
}

fn message(source: &str, event_id: &str, event_type: &str, payload: &[u8]) -> Message {
    Message {
        source: source.into(),
        event_id: event_id.into(),
        event_type: event_type.into(),
        n: 1,
        target: "service".into(),
        payload: payload.to_vec(),
        content_type: "application/json".into(),
        verified_body: false,
        attempts: 0,
        created_at: SystemTime::now(),
    }
}

/// The requests `forward_server.py` recorded.
pub(crate) fn recorded(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `record.jsonl` in a fresh scratch folder, removed (with what the test wrote there) on drop.
pub(crate) struct Record {
    path: PathBuf,
    _dir: crate::helpers::Scratch,
}

impl std::ops::Deref for Record {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

pub(crate) fn scratch(name: &str) -> Record {
    let dir = crate::helpers::Scratch::new(&format!("targets-{name}"));
    Record {
        path: dir.0.join("record.jsonl"),
        _dir: dir,
    }
}

#[tokio::test]
async fn a_thousand_forwards_each_verify_once_with_the_official_python_library() {
    let record = scratch("thousand");
    let server = forward_server(&record);
    let target = forward_target(server.port, "/hooks", SECRET, 10_000);
    let dispatcher = Dispatcher::new();
    // Bodies as providers send them: JSON with non-ASCII text, forms, a big one, and ids with
    // characters no header carries as they are (percent-encoded in the headers).
    let messages: Vec<Message> = (0..1000)
        .map(|i| {
            let (event_id, content_type, body) = match i % 5 {
                0 => (
                    format!("evt_{i:04}"),
                    "application/json",
                    json!({"id": format!("evt_{i:04}"), "note": "caf\u{e9} \u{2603} \u{1f600}", "amount": 12345678901234567890_u64}).to_string(),
                ),
                1 => (format!("Ev{i:04}"), "application/x-www-form-urlencoded", format!("token=t&text=hello+{i}&user=U1")),
                2 => (format!("evt {i} caf\u{e9}"), "application/json", format!("{{\"n\":{i}}}")),
                3 => (format!("msg_{i}"), "application/json", "x".repeat(64 * 1024 + i)),
                _ => (format!("evt_%{i}"), "text/plain; charset=utf-8", format!("line one\r\nline two {i}\n")),
            };
            Message {
                n: 1 + (i % 3) as i32,
                content_type: content_type.into(),
                ..message("acme", &event_id, "invoice.paid", body.as_bytes())
            }
        })
        .collect();
    let started = Instant::now();
    let results: Vec<_> = stream::iter(messages.iter())
        .map(|m| dispatcher.dispatch(&target, m, SystemTime::now()))
        .buffer_unordered(16)
        .collect()
        .await;
    let elapsed = started.elapsed();
    for result in &results {
        assert_eq!(
            result.as_ref().map(|d| d.status),
            Ok(Some(204)),
            "{result:?}"
        );
    }
    drop(server);

    let requests = recorded(&record);
    assert_eq!(requests.len(), 1000, "one request per message, no more");
    let mut ids = HashSet::new();
    let by_key: BTreeMap<String, &Message> = messages
        .iter()
        .map(|m| {
            (
                shared::outbox::forward::header_text(&m.idempotency_key()).into_owned(),
                m,
            )
        })
        .collect();
    assert_eq!(by_key.len(), 1000);
    for request in &requests {
        assert_eq!(request["verified"], true, "{}", request["error"]);
        let id = request["webhook_id"].as_str().unwrap().to_owned();
        let m = by_key
            .get(&id)
            .unwrap_or_else(|| panic!("unexpected webhook-id {id}"));
        let body = base64::engine::general_purpose::STANDARD
            .decode(request["body_b64"].as_str().unwrap())
            .unwrap();
        assert!(body == m.payload, "{id}: the body changed");
        let headers = &request["headers"];
        assert_eq!(headers["content-type"], m.content_type.as_str());
        assert_eq!(headers["hookledger-source"], "acme");
        assert_eq!(
            headers["hookledger-event-id"],
            shared::outbox::forward::header_text(&m.event_id).as_ref()
        );
        assert_eq!(headers["hookledger-event-type"], "invoice.paid");
        assert_eq!(headers["hookledger-attempt"], "1");
        assert!(headers["user-agent"]
            .as_str()
            .unwrap()
            .starts_with("hookledger/"));
        assert_eq!(request["path"], "/hooks");
        assert!(ids.insert(id.clone()), "{id} received twice");
    }
    assert_eq!(ids.len(), 1000);
    eprintln!("1000 forwards (16 at a time) in {elapsed:?}");
}

/// One dispatch to `forward_server.py` at `path` (`timeout_ms`), and what the server recorded.
async fn forward_once(
    path: &str,
    timeout_ms: u64,
) -> (
    Result<shared::outbox::Dispatched, DispatchError>,
    Vec<Value>,
    Duration,
) {
    let record = scratch("once");
    let server = forward_server(&record);
    let target = forward_target(server.port, path, SECRET, timeout_ms);
    let m = message("acme", "evt_once", "invoice.paid", br#"{"id":"evt_once"}"#);
    let started = Instant::now();
    let result = Dispatcher::new()
        .dispatch(&target, &m, SystemTime::now())
        .await;
    let elapsed = started.elapsed();
    drop(server);
    (result, recorded(&record), elapsed)
}

#[tokio::test]
async fn a_500_is_retryable_with_its_status() {
    let (result, requests, _) = forward_once("/status/500?body=down+for+maintenance", 5_000).await;
    let error = result.unwrap_err();
    assert!(
        matches!(&error, DispatchError::Retryable { status: Some(500), retry_after: None, reason } if reason.contains("down for maintenance")),
        "{error:?}"
    );
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["verified"], true);
}

#[tokio::test]
async fn a_429_with_retry_after_is_retryable_after_that_wait() {
    let (result, _, _) = forward_once("/status/429?retry_after=7", 5_000).await;
    assert!(
        matches!(
            result,
            Err(DispatchError::Retryable { status: Some(429), retry_after: Some(wait), .. }) if wait == Duration::from_secs(7)
        ),
        "{result:?}"
    );
    let date = httpdate_in(Duration::from_secs(120));
    let (result, _, _) = forward_once(&format!("/status/503?retry_after={date}"), 5_000).await;
    let Err(DispatchError::Retryable {
        status: Some(503),
        retry_after: Some(wait),
        ..
    }) = result
    else {
        panic!("{result:?}")
    };
    assert!(
        wait <= Duration::from_secs(120) && wait >= Duration::from_secs(110),
        "{wait:?}"
    );
}

/// An HTTP-date `after` from now, form-encoded for a query string.
fn httpdate_in(after: Duration) -> String {
    let date = httpdate::fmt_http_date(SystemTime::now() + after);
    form_urlencoded::byte_serialize(date.as_bytes()).collect()
}

#[tokio::test]
async fn a_400_is_fatal_with_its_status_and_an_excerpt_of_the_answer() {
    let body = format!(
        "{{\"error\":\"unknown invoice\",\"padding\":\"{}\"}}",
        "p".repeat(5000)
    );
    let query: String = form_urlencoded::byte_serialize(body.as_bytes()).collect();
    let (result, requests, _) = forward_once(&format!("/status/400?body={query}"), 5_000).await;
    let Err(DispatchError::Fatal { reason, status }) = result else {
        panic!("{result:?}")
    };
    assert_eq!(status, Some(400));
    assert!(
        reason.starts_with("HTTP 400 Bad Request: {\"error\":\"unknown invoice\""),
        "{reason}"
    );
    assert!(
        reason.len() < 600 && reason.ends_with("..."),
        "bounded: {} bytes",
        reason.len()
    );
    assert!(
        !reason.contains("whsec_") && !reason.contains("evt_once\"}"),
        "{reason}"
    );
    assert_eq!(requests.len(), 1);
}

#[tokio::test]
async fn a_server_that_never_answers_is_retryable_within_the_timeout() {
    let (result, requests, elapsed) = forward_once("/hang", 700).await;
    assert!(
        matches!(&result, Err(DispatchError::Retryable { status: None, reason, .. }) if reason.contains("700 ms")),
        "{result:?}"
    );
    assert!(elapsed >= Duration::from_millis(700), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(700 + 1500),
        "the timeout held: {elapsed:?}"
    );
    assert_eq!(requests.len(), 1, "the request arrived");
}

#[tokio::test]
async fn a_redirect_is_fatal_and_not_followed() {
    let (result, requests, _) = forward_once("/status/302?location=/elsewhere", 5_000).await;
    assert!(
        matches!(&result, Err(DispatchError::Fatal { status: Some(302), reason }) if reason.contains("redirects are not followed")),
        "{result:?}"
    );
    assert_eq!(requests.len(), 1, "the Location was not followed");
    // The default dispatcher does not follow redirects either.
    let record = scratch("default");
    let server = forward_server(&record);
    let target = forward_target(
        server.port,
        "/status/307?location=/elsewhere",
        SECRET,
        5_000,
    );
    let m = message("acme", "evt_default", "", b"{}");
    let result = Dispatcher::default()
        .dispatch(&target, &m, SystemTime::now())
        .await;
    assert!(
        matches!(
            result,
            Err(DispatchError::Fatal {
                status: Some(307),
                ..
            })
        ),
        "{result:?}"
    );
    drop(server);
    assert_eq!(recorded(&record).len(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_retryable() {
    let target = forward_target(free_port(), "/", SECRET, 2_000);
    let m = message("acme", "evt_refused", "t", b"{}");
    let result = Dispatcher::new()
        .dispatch(&target, &m, SystemTime::now())
        .await;
    let Err(DispatchError::Retryable {
        reason,
        status: None,
        ..
    }) = result
    else {
        panic!("{result:?}")
    };
    assert!(
        !reason.contains("127.0.0.1:"),
        "no URL in the reason: {reason}"
    );
}

/// Sends the book's snippet server three messages, one of them twice, and one signed with
/// another secret; returns what it printed.
async fn drive_snippet(server: Server) -> String {
    let good = forward_target(server.port, "/", SECRET, 5_000);
    let wrong = forward_target(server.port, "/", OTHER_SECRET, 5_000);
    let dispatcher = Dispatcher::new();
    let messages = [
        message(
            "stripe",
            "evt_1",
            "invoice.paid",
            br#"{"id":"evt_1","note":"caf\u00e9"}"#,
        ),
        message(
            "stripe",
            "evt_2",
            "invoice.voided",
            "{\"id\":\"evt_2\",\"note\":\"\u{2603}\"}".as_bytes(),
        ),
        Message {
            content_type: "application/x-www-form-urlencoded".into(),
            ..message("slack", "Ev3", "slash_command", b"token=t&text=hello+world")
        },
    ];
    for m in messages.iter().chain([&messages[0]]) {
        let result = dispatcher.dispatch(&good, m, SystemTime::now()).await;
        assert_eq!(result.map(|d| d.status), Ok(Some(204)));
    }
    // A built-in target's message reshaped by its transform: the receiver verifies the
    // transformed bytes, which the forward signed.
    let mut transformed = forward_target(server.port, "/", SECRET, 5_000);
    transformed.transform = Some(
        shared::expression::Transform::compile("{event: id, amount: body.data.amount}").unwrap(),
    );
    let reshaped = Message {
        verified_body: true,
        ..message(
            "stripe",
            "evt_4",
            "charge.refunded",
            br#"{"id":"evt_4","data":{"amount":1200}}"#,
        )
    };
    let result = dispatcher
        .dispatch(&transformed, &reshaped, SystemTime::now())
        .await;
    assert_eq!(result.map(|d| d.status), Ok(Some(204)));
    let forged = message("stripe", "evt_forged", "invoice.paid", b"{}");
    let result = dispatcher
        .dispatch(&wrong, &forged, SystemTime::now())
        .await;
    assert!(
        matches!(
            result,
            Err(DispatchError::Fatal {
                status: Some(401),
                ..
            })
        ),
        "{result:?}"
    );
    server.output()
}

fn assert_snippet_output(output: &str) {
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(
        lines,
        [
            "received stripe:evt_1:1 invoice.paid",
            "received stripe:evt_2:1 invoice.voided",
            "received slack:Ev3:1 slash_command",
            "received stripe:evt_4:1 charge.refunded",
            "rejected stripe:evt_forged:1 No matching signature found",
        ],
        "{output}"
    );
}

#[tokio::test]
async fn the_readme_python_receiver_verifies_forwards_and_sees_each_once() {
    let mut command = Command::new(python());
    command.arg(interop_dir().join("forward_receiver.py"));
    let output = drive_snippet(snippet_server(command)).await;
    assert_snippet_output(&output);
}

#[tokio::test]
async fn the_readme_node_receiver_verifies_forwards_with_the_official_node_library() {
    let dir = interop_dir().join("node");
    assert!(
        dir.join("node_modules/standardwebhooks").is_dir(),
        "{}/node_modules is not installed: run with make test (npm ci)",
        dir.display()
    );
    let node = std::env::var("HOOKLEDGER_TOOLS_NODE").unwrap_or_else(|_| "node".into());
    let mut command = Command::new(node);
    command
        .arg(dir.join("forward-receiver.mjs"))
        .current_dir(&dir);
    let output = drive_snippet(snippet_server(command)).await;
    assert_snippet_output(&output);
}

// ---- SQS and EventBridge against moto ----

async fn aws_config() -> aws_config::SdkConfig {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL: run with make test (it starts the moto emulator)"
    );
    shared::aws::load().await
}

fn unique(name: &str) -> String {
    format!(
        "{name}-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000_000
    )
}

async fn create_queue(sqs: &aws_sdk_sqs::Client, name: &str, fifo: bool) -> String {
    let mut call = sqs.create_queue().queue_name(name);
    if fifo {
        call = call.attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true");
    }
    call.send().await.unwrap().queue_url.unwrap()
}

async fn receive_all(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
) -> Vec<aws_sdk_sqs::types::Message> {
    let mut all = Vec::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_attribute_names("All")
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        let batch = out.messages.unwrap_or_default();
        if batch.is_empty() {
            return all;
        }
        for m in &batch {
            sqs.delete_message()
                .queue_url(queue_url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
        all.extend(batch);
    }
}

fn sqs_target(queue_url: &str, group: Option<&str>) -> Target {
    let mut spec = json!({"type": "sqs", "name": "queue", "queue_url": queue_url});
    if let Some(group) = group {
        spec["message_group_id"] = json!(group);
    }
    Target::from_spec(serde_json::from_value(spec).unwrap()).unwrap()
}

fn attribute(m: &aws_sdk_sqs::types::Message, name: &str) -> Option<String> {
    m.message_attributes()
        .and_then(|a| a.get(name))
        .and_then(|v| v.string_value())
        .map(str::to_owned)
}

fn system_attribute(
    m: &aws_sdk_sqs::types::Message,
    name: aws_sdk_sqs::types::MessageSystemAttributeName,
) -> Option<String> {
    m.attributes().and_then(|a| a.get(&name)).cloned()
}

#[tokio::test]
async fn a_fifo_queue_gets_each_message_once_with_its_key_group_and_ids() {
    use aws_sdk_sqs::types::MessageSystemAttributeName as System;
    let config = aws_config().await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queue_url = create_queue(&sqs, &format!("{}.fifo", unique("orders")), true).await;
    let dispatcher = Dispatcher::new();

    let target = sqs_target(&queue_url, None);
    let first = message(
        "stripe",
        "evt_fifo_1",
        "invoice.paid",
        br#"{"id":"evt_fifo_1","note":"caf\u00e9"}"#,
    );
    // The same message twice (a dispatch retried after a crash), then its event's second message.
    let a = dispatcher
        .dispatch(&target, &first, SystemTime::now())
        .await
        .unwrap();
    let b = dispatcher
        .dispatch(&target, &first, SystemTime::now())
        .await
        .unwrap();
    assert!(a.receipt.is_some() && b.receipt.is_some());
    let second = Message {
        n: 2,
        ..first.clone()
    };
    dispatcher
        .dispatch(&target, &second, SystemTime::now())
        .await
        .unwrap();
    // An event id too long for a deduplication id, twice: deduplicated on its hash.
    let long_id = format!("evt_{}", "l".repeat(150));
    let long = message("stripe", &long_id, "invoice.paid", b"{}");
    dispatcher
        .dispatch(&target, &long, SystemTime::now())
        .await
        .unwrap();
    dispatcher
        .dispatch(&target, &long, SystemTime::now())
        .await
        .unwrap();
    // Another group, configured.
    let grouped = sqs_target(&queue_url, Some("tenant-7"));
    let third = message("stripe", "evt_fifo_3", "", b"{\"id\":\"evt_fifo_3\"}");
    dispatcher
        .dispatch(&grouped, &third, SystemTime::now())
        .await
        .unwrap();

    let received = receive_all(&sqs, &queue_url).await;
    let keys: Vec<String> = received
        .iter()
        .map(|m| attribute(m, "hookledger-idempotency-key").unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "stripe:evt_fifo_1:1".to_owned(),
            "stripe:evt_fifo_1:2".to_owned(),
            format!("stripe:{long_id}:1"),
            "stripe:evt_fifo_3:1".to_owned(),
        ],
        "each message once, in order"
    );
    let m = &received[0];
    assert_eq!(m.body(), Some(r#"{"id":"evt_fifo_1","note":"caf\u00e9"}"#));
    assert_eq!(attribute(m, "hookledger-source").as_deref(), Some("stripe"));
    assert_eq!(
        attribute(m, "hookledger-event-id").as_deref(),
        Some("evt_fifo_1")
    );
    assert_eq!(
        attribute(m, "hookledger-event-type").as_deref(),
        Some("invoice.paid")
    );
    assert_eq!(
        system_attribute(m, System::MessageGroupId).as_deref(),
        Some("stripe")
    );
    assert_eq!(
        system_attribute(m, System::MessageDeduplicationId).as_deref(),
        Some("stripe:evt_fifo_1:1")
    );
    assert_eq!(
        system_attribute(&received[2], System::MessageDeduplicationId),
        Some(shared::outbox::sqs::deduplication_id(&format!(
            "stripe:{long_id}:1"
        )))
    );
    let last = &received[3];
    assert_eq!(
        system_attribute(last, System::MessageGroupId).as_deref(),
        Some("tenant-7")
    );
    assert_eq!(
        attribute(last, "hookledger-event-type"),
        None,
        "no type, no attribute"
    );
}

#[tokio::test]
async fn a_standard_queue_gets_the_body_unchanged_with_the_ids() {
    let config = aws_config().await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queue_url = create_queue(&sqs, &unique("events"), false).await;
    let target = sqs_target(&queue_url, Some("ignored-on-standard-queues"));
    let body = "token=t&text=caf%C3%A9+\u{2603}";
    let m = Message {
        content_type: "application/x-www-form-urlencoded".into(),
        ..message("slack", "Ev1", "slash_command", body.as_bytes())
    };
    let dispatched = Dispatcher::new()
        .dispatch(&target, &m, SystemTime::now())
        .await
        .unwrap();
    let received = receive_all(&sqs, &queue_url).await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body(), Some(body));
    assert_eq!(received[0].message_id(), dispatched.receipt.as_deref());
    assert_eq!(
        attribute(&received[0], "hookledger-idempotency-key").as_deref(),
        Some("slack:Ev1:1")
    );
    assert_eq!(
        attribute(&received[0], "hookledger-event-type").as_deref(),
        Some("slash_command")
    );
}

#[tokio::test]
async fn a_queue_that_does_not_exist_or_a_body_sqs_refuses_is_fatal() {
    let config = aws_config().await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let real = create_queue(&sqs, &unique("exists"), false).await;
    let missing = real.replace("exists", "missing");
    let dispatcher = Dispatcher::new();
    let m = message("stripe", "evt_missing", "t", b"{}");
    let result = dispatcher
        .dispatch(&sqs_target(&missing, None), &m, SystemTime::now())
        .await;
    assert!(
        matches!(&result, Err(DispatchError::Fatal { reason, .. }) if reason.contains("SendMessage")),
        "{result:?}"
    );
    let binary = message("stripe", "evt_binary", "t", b"\x00\x01");
    let result = dispatcher
        .dispatch(&sqs_target(&real, None), &binary, SystemTime::now())
        .await;
    assert!(
        matches!(result, Err(DispatchError::Fatal { status: None, .. })),
        "{result:?}"
    );
    let too_big = message("stripe", "evt_big", "t", &vec![b'a'; 256 * 1024]);
    let result = dispatcher
        .dispatch(&sqs_target(&real, None), &too_big, SystemTime::now())
        .await;
    assert!(
        matches!(result, Err(DispatchError::Fatal { status: None, .. })),
        "{result:?}"
    );
    assert!(receive_all(&sqs, &real).await.is_empty());
}

#[tokio::test]
async fn an_eventbridge_event_reaches_a_rule_s_queue_with_the_ids_in_its_detail() {
    let config = aws_config().await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let events = aws_sdk_eventbridge::Client::new(&config);
    let bus = unique("hookledger-bus");
    events.create_event_bus().name(&bus).send().await.unwrap();
    let queue_url = create_queue(&sqs, &unique("bus-events"), false).await;
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
        .clone();
    let rule = unique("to-queue");
    events
        .put_rule()
        .name(&rule)
        .event_bus_name(&bus)
        .event_pattern(json!({"source": ["hookledger.stripe", "acme.payments"]}).to_string())
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule(&rule)
        .event_bus_name(&bus)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("queue")
                .arn(&queue_arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();

    let target = Target::from_spec(
        serde_json::from_value(json!({"type": "eventbridge", "name": "bus", "event_bus": bus}))
            .unwrap(),
    )
    .unwrap();
    let body = br#"{"id":"evt_bus_1","object":"event","amount":12345678901234567890}"#;
    let m = Message {
        n: 2,
        ..message("stripe", "evt_bus_1", "invoice.paid", body)
    };
    let dispatched = Dispatcher::new()
        .dispatch(&target, &m, SystemTime::now())
        .await
        .unwrap();
    assert!(dispatched.receipt.is_some());
    // A form body and a configured detail source.
    let sourced = Target::from_spec(
        serde_json::from_value(json!({"type": "eventbridge", "name": "bus2", "event_bus": bus, "detail_source": "acme.payments"}))
            .unwrap(),
    )
    .unwrap();
    let form = message("slack", "Ev9", "", b"token=t&text=hi");
    Dispatcher::new()
        .dispatch(&sourced, &form, SystemTime::now())
        .await
        .unwrap();

    let received = receive_all(&sqs, &queue_url).await;
    assert_eq!(
        received.len(),
        2,
        "moto routed both events through the rule"
    );
    let envelopes: Vec<Value> = received
        .iter()
        .map(|r| serde_json::from_str(r.body().unwrap()).unwrap())
        .collect();
    let stripe = envelopes
        .iter()
        .find(|e| e["source"] == "hookledger.stripe")
        .unwrap();
    assert_eq!(stripe["detail-type"], "invoice.paid");
    assert_eq!(stripe["id"].as_str(), dispatched.receipt.as_deref());
    let detail = &stripe["detail"];
    assert_eq!(detail["source"], "stripe");
    assert_eq!(detail["event_id"], "evt_bus_1");
    assert_eq!(detail["event_type"], "invoice.paid");
    assert_eq!(detail["idempotency_key"], "stripe:evt_bus_1:2");
    assert_eq!(detail["payload"]["id"], "evt_bus_1");
    assert_eq!(detail["payload"]["object"], "event");
    let slack = envelopes
        .iter()
        .find(|e| e["source"] == "acme.payments")
        .unwrap();
    assert_eq!(slack["detail-type"], "webhook");
    assert_eq!(slack["detail"]["payload"], "token=t&text=hi");
    assert_eq!(slack["detail"]["idempotency_key"], "slack:Ev9:1");
}

#[tokio::test]
async fn an_oversized_eventbridge_event_is_fatal() {
    let target = Target::from_spec(
        serde_json::from_value(json!({"type": "eventbridge", "name": "bus"})).unwrap(),
    )
    .unwrap();
    let _config = aws_config().await;
    let big = format!("\"{}\"", "a".repeat(256 * 1024));
    let m = message("stripe", "evt_big", "t", big.as_bytes());
    let result = Dispatcher::new()
        .dispatch(&target, &m, SystemTime::now())
        .await;
    assert!(
        matches!(result, Err(DispatchError::Fatal { status: None, .. })),
        "{result:?}"
    );
}

// ---- the demo's forward source (`make demo`) ----

/// The demo's `acme-forward` source: its event file is accepted, and its forward target, read
/// by the demo's own shell functions, points at the local endpoint the demo starts, which
/// prints a verified line with the webhook-id. (The worker's dispatch in between is the outbox
/// worker's, tested with it.)
#[tokio::test]
async fn the_demo_forward_source_and_endpoint_work_as_make_demo_runs_them() {
    use shared::config::targets::TargetKind;

    let app = crate::helpers::spawn_app().await;
    let event =
        hookledger_tests::EventFile::load("receiver/acme-forward-invoice-paid.json").unwrap();
    let now = event.signed_at().unwrap();
    let response = receiver::handler::handle_at(&app.state, event.request().unwrap(), now)
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);

    let sources =
        shared::Sources::from_json(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    let source = sources.get("acme-forward").unwrap();
    let target = source.target("billing-service").unwrap();
    assert!(target.event_types.matches("invoice.paid"));
    let TargetKind::Forward { url, .. } = &target.kind else {
        panic!("{target:?}")
    };

    // The demo's own functions: the target it finds, the endpoint it starts, the lines it prints.
    let root = hookledger_tests::repo_root();
    let python_dir = std::path::Path::new(&python()).parent().unwrap().to_owned();
    let path = format!(
        "{}:{}",
        python_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let found = Command::new("bash")
        .arg("-c")
        .arg(". scripts/demo-lib.sh; demo_forward_target events/sources.local.json")
        .current_dir(&root)
        .output()
        .unwrap();
    let found = String::from_utf8(found.stdout).unwrap();
    let (port, secret) = found.trim().split_once(' ').unwrap();
    assert_eq!(port, url.port().unwrap().to_string());
    let demo = scratch("demo");
    let log = demo.with_file_name("forward.log");
    let test_port = free_port();
    let started = Command::new("bash")
        .arg("-c")
        .arg(format!(
            ". scripts/demo-lib.sh; demo_forward_endpoint {test_port} \"$SECRET\" \"$LOG\""
        ))
        .env("PATH", &path)
        .env("SECRET", secret)
        .env("LOG", &log)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let pid: i32 = String::from_utf8(started.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The endpoint's process group, ended however the test ends.
    struct Group(i32);
    impl Drop for Group {
        fn drop(&mut self) {
            let _ = Command::new("kill")
                .arg("--")
                .arg(format!("-{}", self.0))
                .status();
        }
    }
    let _group = Group(pid);

    let TargetKind::Forward { key, timeout, .. } = &target.kind else {
        unreachable!()
    };
    let endpoint = url::Url::parse(&format!("http://127.0.0.1:{test_port}{}", url.path())).unwrap();
    let m = Message {
        target: target.name.clone(),
        ..message(
            "acme-forward",
            "msg_2pHookledgerForward01",
            "invoice.paid",
            event.body().unwrap().as_ref(),
        )
    };
    let sent = shared::outbox::forward::send(
        &reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        &endpoint,
        key,
        *timeout,
        &m,
        SystemTime::now(),
    )
    .await;
    assert_eq!(sent.map(|d| d.status), Ok(Some(204)));
    let report = Command::new("bash")
        .arg("-c")
        .arg(". scripts/demo-lib.sh; demo_forward_report \"$LOG\"")
        .env("LOG", &log)
        .current_dir(&root)
        .output()
        .unwrap();
    let report = String::from_utf8(report.stdout).unwrap();
    assert!(
        report.starts_with(
            "  verified webhook-id=acme-forward:msg_2pHookledgerForward01:1 event-type=invoice.paid attempt=1"
        ),
        "{report}"
    );
    assert_eq!(report.lines().count(), 1, "{report}");
}

/// The book's forwarding chapter quotes both receivers whole, as the tests run them.
#[test]
fn the_book_quotes_the_tested_receivers_verbatim() {
    let root = hookledger_tests::repo_root();
    let page = "docs/guide/forwarding.md";
    let book = std::fs::read_to_string(root.join(page)).unwrap();
    for (file, fence) in [
        ("tests/interop/forward_receiver.py", "```python\n"),
        ("tests/interop/node/forward-receiver.mjs", "```js\n"),
    ] {
        let snippet = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(
            book.contains(&format!("{fence}{snippet}```\n")),
            "{page} must quote {file} whole, as the tests run it"
        );
    }
}

#[tokio::test]
async fn a_thousand_events_of_a_forward_source_reach_the_service_once_each_verified() {
    use crate::helpers::{
        plenty, spawn_app_with_sources, stripe_body, worker_for, NOW, STRIPE_SECRET,
    };

    let record = scratch("thousand-events");
    let server = forward_server(&record);
    let (app, _) = spawn_app_with_sources(json!([{
        "name": "forwarded", "scheme": "stripe", "secrets": [STRIPE_SECRET],
        "targets": [{"name": "service", "type": "forward",
                     "url": format!("http://127.0.0.1:{}/hooks", server.port),
                     "secret": SECRET, "timeout_ms": 10_000}],
    }]))
    .await;
    let body = |i: usize| {
        json!({"id": format!("evt_fw_{i:04}"), "object": "event", "type": "invoice.paid",
               "created": NOW, "data": {"object": {"id": format!("in_{i}"), "amount_paid": i}}})
        .to_string()
        .into_bytes()
    };
    // 1,000 events, and the provider's retries of the first 200 of them.
    let deliveries: Vec<_> = (0..1000)
        .chain(0..200)
        .map(|i| stripe_body(body(i), NOW))
        .collect();
    let replies: Vec<_> = stream::iter(deliveries.iter())
        .map(|d| app.receive("forwarded", d))
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(
        replies.iter().all(|r| r.status == 200),
        "every delivery answered 200"
    );
    assert_eq!(app.count("SELECT count(*) FROM outbox").await, 1000);

    let worker = worker_for(&app);
    let at = SystemTime::now() + Duration::from_secs(1);
    let summary = worker.worker.drain(move || at, plenty).await.unwrap();
    assert_eq!(summary.outbox.delivered, 1000, "{summary:?}");
    drop(server);

    let requests = recorded(&record);
    assert_eq!(requests.len(), 1000, "one request per event, no more");
    let mut seen = HashSet::new();
    for request in &requests {
        assert_eq!(request["verified"], true, "{}", request["error"]);
        let id = request["webhook_id"].as_str().unwrap();
        assert!(seen.insert(id.to_owned()), "{id} arrived twice");
        let i: usize = id
            .strip_prefix("forwarded:evt_fw_")
            .and_then(|rest| rest.strip_suffix(":1"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unexpected webhook-id {id}"));
        let sent = base64::engine::general_purpose::STANDARD
            .decode(request["body_b64"].as_str().unwrap())
            .unwrap();
        assert!(
            sent == body(i),
            "{id}: the provider's body changed on the way"
        );
        assert_eq!(request["headers"]["hookledger-event-type"], "invoice.paid");
    }
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE status = 'delivered' AND attempts = 1")
            .await,
        1000
    );
}
