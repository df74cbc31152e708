//! The ledger console (`hookledger_console`) in a real browser: headless Chromium from Debian's
//! packages (`hookledger_tests::browser`) clicks through the console over a ledger the receiver
//! and the worker wrote, re-drives a dead event through the confirmation page, and sees the
//! worker complete it. A PNG of every page lands in `console-screenshots/` of the target dir.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hookledger_console::{AccessToken, Console, ConsoleConfig};
use hookledger_tests::browser::{screenshot_dir, Browser};
use shared::doorbell::Doorbell;
use shared::handlers::Handler;

use crate::helpers::*;

/// The console's access token in this test (a known one, as `HOOKLEDGER_CONSOLE_TOKEN` gives).
const TOKEN: &str = "browser-test-console-token";

#[tokio::test]
async fn an_operator_clicks_from_the_overview_to_a_dead_event_redrives_it_and_the_worker_completes_it(
) {
    let started = Instant::now();
    let mut app = spawn_app().await;
    with_max_attempts(&mut app, 2);
    // Inline deliveries through the receiver: four orders paid, one delivered twice.
    for i in 0..4 {
        let delivery = stripe_payment(&format!("evt_paid_{i}"), &format!("ord_{i}"), 100 + i, NOW);
        assert_eq!(app.receive("stripe", &delivery).await.status, 200);
    }
    let again = app
        .receive("stripe", &stripe_payment("evt_paid_0", "ord_0", 100, NOW))
        .await;
    assert_eq!(again.outcome, "replayed");
    // A deferred event whose handler fails until it goes dead (two attempts allowed).
    let mut worker = worker_for(&app);
    let handler = Arc::new(FlakyHandler::default());
    handler.failing.store(true, Ordering::SeqCst);
    worker.worker.handlers.register(
        "stripe-deferred",
        "payment_intent.succeeded",
        handler.clone() as Arc<dyn Handler>,
    );
    let dead = deferred(payment_intent_body("evt_dead", "ord_dead", 500));
    assert_eq!(app.receive("stripe-deferred", &dead).await.status, 202);
    let mut at = SystemTime::now();
    for _ in 0..2 {
        worker.worker.drain(move || at, plenty).await.unwrap();
        at += Duration::from_secs(2 * 3600); // past any backoff
    }
    assert_eq!(row(&app, "evt_dead").await.0, "dead");
    // One more deferred event no worker has run yet: stuck past a short threshold.
    let waiting = deferred(payment_intent_body("evt_waiting", "ord_waiting", 700));
    assert_eq!(app.receive("stripe-deferred", &waiting).await.status, 202);
    let waiting_since = Instant::now();

    let token = AccessToken::new(TOKEN).unwrap();
    let console = Console::new(
        app.settings.clone(),
        app.receiver().pool.clone(),
        handlers::registry(&app.settings.sources),
        Doorbell::off(),
        ConsoleConfig {
            token: token.clone(),
            read_only: false,
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = console.url(addr);
    tokio::spawn(async move { console.serve(listener, std::future::pending()).await });

    let browser = Browser::start().await.unwrap();
    let shots = screenshot_dir();
    let shot = |name: &str| shots.join(format!("{name}.png"));

    // The URL `hookledger console` prints: the token becomes a cookie and leaves the address bar.
    browser.goto(&url).await.unwrap();
    assert_eq!(browser.url().await.unwrap(), format!("http://{addr}/"));
    browser.wait_for("svg.chart").await.unwrap();
    let figure =
        |source: &str, key: &str| format!("td[data-source=\"{source}\"][data-figure=\"{key}\"]");
    assert_eq!(
        browser
            .text_at(&figure("stripe-deferred", "dead_letters"))
            .await
            .unwrap(),
        "1"
    );
    assert_eq!(
        browser
            .text_at(&figure("stripe", "dead_letters"))
            .await
            .unwrap(),
        "0"
    );
    assert_eq!(
        browser
            .text_at("td[data-source=\"stripe\"][data-outcome=\"completed\"]")
            .await
            .unwrap(),
        "4"
    );
    browser.screenshot(&shot("overview")).await.unwrap();

    // Events, from the navigation.
    browser
        .click(&browser.link("Events").await.unwrap())
        .await
        .unwrap();
    let events = browser.wait_for("table#events").await.unwrap();
    let listed = browser.text(&events).await.unwrap();
    for id in ["evt_paid_0", "evt_paid_3", "evt_dead", "evt_waiting"] {
        assert!(listed.contains(id), "{id} not listed: {listed}");
    }
    browser.screenshot(&shot("events")).await.unwrap();

    // Stuck, with the threshold lowered in its form to one second.
    browser
        .click(&browser.link("Stuck").await.unwrap())
        .await
        .unwrap();
    let threshold = browser
        .wait_for("input[name=\"stuck_after_secs\"]")
        .await
        .unwrap();
    let past_threshold = Duration::from_millis(1_100);
    if let Some(wait) = past_threshold.checked_sub(waiting_since.elapsed()) {
        tokio::time::sleep(wait).await;
    }
    browser.type_into(&threshold, "1").await.unwrap();
    browser
        .click(&browser.find("form.filters button").await.unwrap())
        .await
        .unwrap();
    let stuck = browser.wait_for("table#stuck").await.unwrap();
    let stuck = browser.text(&stuck).await.unwrap();
    assert!(stuck.contains("evt_waiting"), "{stuck}");
    assert!(!stuck.contains("evt_dead"), "{stuck}");
    browser.screenshot(&shot("stuck")).await.unwrap();

    // Overview -> the dead-letter count -> the dead letters of that source.
    browser
        .click(&browser.link("Overview").await.unwrap())
        .await
        .unwrap();
    let count = browser
        .wait_for(&format!("{} a", figure("stripe-deferred", "dead_letters")))
        .await
        .unwrap();
    browser.click(&count).await.unwrap();
    let table = browser.wait_for("table#dead-events").await.unwrap();
    assert!(
        browser
            .url()
            .await
            .unwrap()
            .ends_with("/dead?source=stripe-deferred"),
        "{}",
        browser.url().await.unwrap()
    );
    let rows = browser.text(&table).await.unwrap();
    assert!(
        rows.contains("evt_dead") && rows.contains("downstream is down"),
        "{rows}"
    );
    browser.screenshot(&shot("dead")).await.unwrap();

    // -> the dead event.
    browser
        .click(&browser.link("evt_dead").await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        browser
            .text(&browser.wait_for("td#status").await.unwrap())
            .await
            .unwrap(),
        "dead"
    );
    assert_eq!(browser.text_at("td#attempts").await.unwrap(), "2");
    browser.screenshot(&shot("event")).await.unwrap();

    // -> the confirmation: one row, and the form carries the CSRF token.
    browser
        .click(&browser.link("Re-drive this dead letter…").await.unwrap())
        .await
        .unwrap();
    let matched = browser.wait_for("strong#matched").await.unwrap();
    assert_eq!(browser.text(&matched).await.unwrap(), "1");
    let csrf = browser.find("input[name=\"csrf\"]").await.unwrap();
    assert_eq!(
        browser.property(&csrf, "value").await.unwrap(),
        Some(hookledger_console::auth::csrf_token(&token))
    );
    assert_eq!(
        row(&app, "evt_dead").await.0,
        "dead",
        "a confirmation moves nothing"
    );
    browser.screenshot(&shot("confirm")).await.unwrap();

    // Re-drive: the button posts the form.
    browser
        .click(
            &browser
                .find("form[action=\"/redrive\"] button")
                .await
                .unwrap(),
        )
        .await
        .unwrap();
    let redriven = browser.wait_for("strong#redriven").await.unwrap();
    assert_eq!(browser.text(&redriven).await.unwrap(), "1");
    assert_eq!(row(&app, "evt_dead").await, ("claimed".to_owned(), 0, None));
    browser.screenshot(&shot("redrive-done")).await.unwrap();

    // The event again, from the list of what moved: back to the worker.
    browser
        .click(&browser.link("evt_dead").await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        browser
            .text(&browser.wait_for("td#status").await.unwrap())
            .await
            .unwrap(),
        "claimed"
    );

    // The cause is fixed; the worker's drain (re-driven rows are due at the database's now)
    // runs it once, and the reloaded page says so.
    handler.failing.store(false, Ordering::SeqCst);
    let later = SystemTime::now() + Duration::from_secs(5);
    let summary = worker.worker.drain(move || later, plenty).await.unwrap();
    assert_eq!(
        summary.completed, 2,
        "evt_dead and evt_waiting: {summary:?}"
    );
    browser.refresh().await.unwrap();
    assert_eq!(
        browser
            .text(&browser.wait_for("td#status").await.unwrap())
            .await
            .unwrap(),
        "completed"
    );
    let timeline = browser.text_at("table#timeline").await.unwrap();
    assert!(timeline.contains("re-driven by an operator"), "{timeline}");
    assert!(timeline.contains("completed"), "{timeline}");
    browser.screenshot(&shot("event-completed")).await.unwrap();
    assert_eq!(app.order_rows().await, 6);
    browser.quit().await.unwrap();

    for name in [
        "overview",
        "events",
        "event",
        "stuck",
        "dead",
        "confirm",
        "redrive-done",
        "event-completed",
    ] {
        let png = std::fs::read(shot(name)).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}.png");
        assert!(png.len() > 5_000, "{name}.png: {} bytes", png.len());
    }
    // Past libtest's capture, so `make test` shows where the pictures are.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "console screenshots: {} ({:.1} s)",
        shots.display(),
        started.elapsed().as_secs_f64()
    );
}
