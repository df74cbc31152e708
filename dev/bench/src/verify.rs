//! `bench-verify` (`make bench PARTS=verify`): what one signature verification costs, per
//! algorithm of the scheme model, as a micro-benchmark in one process (no database, no HTTP).
//!
//! Each case is a [`Verifier`] built once (the model parsed and the key prepared by
//! [`Verifier::new`], as at the receiver's start-up) and a valid signed delivery; what is timed is
//! one full [`Verifier::verify_request`] of it: the signature header read and decoded, the
//! timestamp read and checked against the tolerance, the signed content `{timestamp}.{body}`
//! assembled, the signature checked. Algorithms: HMAC-SHA1, HMAC-SHA256, HMAC-SHA512, Ed25519,
//! ECDSA P-256 (SHA-256, DER) and RSA-2048 PKCS#1 v1.5 (SHA-256), all on the same model (base64
//! signature in `X-Signature`, unix seconds in `X-Timestamp`), and the Stripe preset for
//! comparison (`Stripe-Signature: t=...,v1=<hex>` over the same `{t}.{body}`). Bodies: the
//! JSON events of `dev/bench/fixtures/verify-rsa.json`, exactly 1,024 and 16,384 bytes; the RSA
//! signatures come from there too (hookledger signs Ed25519 and P-256 only; the fixture was
//! signed once by Python's `cryptography`, `dev/bench/fixtures/verify_rsa.py`).
//!
//! Every case is timed call by call (`Instant` around each call) in `--rounds` interleaved
//! rounds, so that a burst of load on the shared machine falls on every case alike; medians
//! and p99 are over all the samples of a case. The figures are compared as ratios within the
//! run (to HMAC-SHA256 on the same body), and as a share of the receiver's CPU per delivery
//! measured by the HTTP part (`dev/bench/results/http.json`, unique deliveries at C=32) when
//! that file exists. Writes `dev/bench/results/verify.json` and `verify.md`; `bench-report`
//! puts the section into `dev/bench/RESULTS.md`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use hookledger_verify::generic::{sign, Signer};
use hookledger_verify::{Algorithm, Encoding, GenericHmac, PrivateKey, Request, Scheme, Verifier};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Value};

#[derive(Parser, Debug)]
#[command(about = "signature verification per delivery, per algorithm: dev/bench/results/verify.*")]
struct Args {
    /// Measured seconds per case, split across the rounds.
    #[arg(long, default_value_t = 2.0)]
    secs: f64,
    /// Interleaved rounds (every case measured once per round).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// The bodies and the RSA-2048 key and signatures.
    #[arg(long, default_value = "dev/bench/fixtures/verify-rsa.json")]
    fixture: PathBuf,
    /// Where verify.json and verify.md are written.
    #[arg(long, default_value = "dev/bench/results")]
    out: PathBuf,
    /// The HTTP part's results, for the receiver's CPU per delivery (skipped when absent).
    #[arg(long, default_value = "dev/bench/results/http.json")]
    http_results: PathBuf,
    /// The concurrency of the HTTP part's unique scenario whose CPU per delivery is the base.
    #[arg(long, default_value_t = 32)]
    http_concurrency: u32,
}

/// Tolerance of every verifier, seconds (the deliveries are signed at the fixture's time,
/// which is passed as `now`).
const TOLERANCE_SECS: u64 = 300;
const HMAC_SECRET: &str = "bench-secret-0123456789abcdef0123456789abcdef";
/// RFC 8032 section 7.1, test 1: the Ed25519 secret key (a seed anyone can see; a benchmark's).
const ED25519_SEED_HEX: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
/// RFC 6979 appendix A.2.5: the P-256 private key.
const P256_SCALAR_HEX: &str = "c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721";
const STRIPE_SECRET: &str = "whsec_bench0123456789abcdef0123456789";

/// One measured case: a prepared verifier and a valid delivery for it.
struct Case {
    /// Row label, e.g. `"HMAC-SHA256"`.
    label: &'static str,
    /// JSON key, e.g. `"hmac-sha256"`.
    key: &'static str,
    /// `"1k"` or `"16k"`.
    size: &'static str,
    verifier: Verifier,
    headers: HeaderMap,
    body: Vec<u8>,
    samples: Vec<f64>,
}

/// The model every algorithm's case uses: base64 signature in `X-Signature` over
/// `{timestamp}.{body}`, unix seconds in `X-Timestamp`, event id and type from the body.
fn model(algorithm: Algorithm) -> GenericHmac {
    GenericHmac {
        signature_header: Some("X-Signature".into()),
        algorithm,
        encoding: Encoding::Base64,
        timestamp_header: Some("X-Timestamp".into()),
        signed_payload: Some("{timestamp}.{body}".into()),
        event_id_pointer: Some("/id".into()),
        event_type_pointer: Some("/type".into()),
        ..GenericHmac::default()
    }
}

fn header_map(pairs: &[(String, String)]) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.insert(
            HeaderName::from_bytes(name.as_bytes()).with_context(|| format!("header {name}"))?,
            HeaderValue::from_str(value).with_context(|| format!("value of {name}"))?,
        );
    }
    Ok(headers)
}

/// The cases of one body, in table order.
fn cases_of(size: &'static str, entry: &Value, fixture: &Value, ts: i64) -> Result<Vec<Case>> {
    let body = entry["body"]
        .as_str()
        .context("fixture body")?
        .as_bytes()
        .to_vec();
    let none = HeaderMap::new();
    let mut cases = Vec::new();
    for (label, key, algorithm) in [
        ("HMAC-SHA1", "hmac-sha1", Algorithm::Sha1),
        ("HMAC-SHA256", "hmac-sha256", Algorithm::Sha256),
        ("HMAC-SHA512", "hmac-sha512", Algorithm::Sha512),
    ] {
        let verifier = Verifier::new(
            Scheme::GenericHmac,
            &[HMAC_SECRET],
            TOLERANCE_SECS,
            Some(model(algorithm)),
        )?;
        let headers = header_map(&verifier.sign(0, "", ts, &body))?;
        cases.push(Case::new(label, key, size, verifier, headers, &body));
    }
    for (label, key, algorithm, secret) in [
        ("Ed25519", "ed25519", Algorithm::Ed25519, ED25519_SEED_HEX),
        (
            "ECDSA P-256",
            "ecdsa-p256",
            Algorithm::EcdsaP256Sha256,
            P256_SCALAR_HEX,
        ),
    ] {
        let private = PrivateKey::parse(algorithm, secret, None).map_err(anyhow::Error::msg)?;
        let config = model(algorithm);
        let signed = sign(
            &config,
            Signer::Private(&private),
            &Request::post(&none, &body),
            ts,
        )
        .map_err(anyhow::Error::msg)?;
        let verifier = Verifier::new(
            Scheme::GenericHmac,
            &[&private.public_key_base64()],
            TOLERANCE_SECS,
            Some(config),
        )?;
        cases.push(Case::new(
            label,
            key,
            size,
            verifier,
            header_map(&signed)?,
            &body,
        ));
    }
    let rsa_pem = fixture["rsa2048_public_pem"]
        .as_str()
        .context("fixture rsa2048_public_pem")?;
    let rsa_signature = entry["rsa_signature_base64"]
        .as_str()
        .context("fixture rsa_signature_base64")?;
    let verifier = Verifier::new(
        Scheme::GenericHmac,
        &[rsa_pem],
        TOLERANCE_SECS,
        Some(model(Algorithm::RsaPkcs1Sha256)),
    )?;
    let headers = header_map(&[
        ("x-timestamp".into(), ts.to_string()),
        ("x-signature".into(), rsa_signature.to_owned()),
    ])?;
    cases.push(Case::new(
        "RSA-2048 PKCS#1 v1.5",
        "rsa-2048",
        size,
        verifier,
        headers,
        &body,
    ));
    let verifier = Verifier::new(Scheme::Stripe, &[STRIPE_SECRET], TOLERANCE_SECS, None)?;
    let headers = header_map(&verifier.sign(0, "", ts, &body))?;
    cases.push(Case::new(
        "Stripe preset (pairs, hex, HMAC-SHA256)",
        "stripe",
        size,
        verifier,
        headers,
        &body,
    ));
    Ok(cases)
}

impl Case {
    fn new(
        label: &'static str,
        key: &'static str,
        size: &'static str,
        verifier: Verifier,
        headers: HeaderMap,
        body: &[u8],
    ) -> Case {
        Case {
            label,
            key,
            size,
            verifier,
            headers,
            body: body.to_vec(),
            samples: Vec::new(),
        }
    }

    /// Verify once, untimed: the delivery must be valid.
    fn check(&self, now: i64) -> Result<()> {
        self.verifier
            .verify_request(&Request::post(&self.headers, &self.body), now)
            .map(drop)
            .map_err(|error| anyhow::anyhow!("{} {}: {error}", self.label, self.size))
    }

    /// Verify for `budget` (after a short warm-up), timing each call; returns failures.
    fn run(&mut self, now: i64, budget: Duration) -> u64 {
        let request = Request::post(&self.headers, &self.body);
        for _ in 0..20 {
            let _ = black_box(self.verifier.verify_request(black_box(&request), now));
        }
        let mut failures = 0;
        let start = Instant::now();
        while start.elapsed() < budget {
            let t0 = Instant::now();
            let outcome = self.verifier.verify_request(black_box(&request), now);
            let ns = t0.elapsed().as_nanos() as f64;
            if black_box(outcome).is_err() {
                failures += 1;
            }
            self.samples.push(ns);
        }
        failures
    }
}

/// The median cost of `Instant::now()` + `elapsed()` alone, ns (included in every sample).
fn timer_overhead_ns() -> f64 {
    let mut samples: Vec<f64> = (0..100_000)
        .map(|_| {
            let t0 = Instant::now();
            black_box(());
            t0.elapsed().as_nanos() as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    bench::percentile(&samples, 0.5)
}

/// The receiver's CPU per delivery from the HTTP part: (user µs, user + sys µs).
fn delivery_cpu(args: &Args) -> Option<(f64, f64)> {
    let http: Value =
        serde_json::from_str(&std::fs::read_to_string(&args.http_results).ok()?).ok()?;
    let r = &http["receiver"]["unique"][args.http_concurrency.to_string()];
    let user = r["cpu_user_us"].as_f64()?;
    let sys = r["cpu_sys_us"].as_f64()?;
    Some((user, user + sys))
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.rounds == 0 || args.secs <= 0.0 {
        bail!("--rounds and --secs must be positive");
    }
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(&args.fixture)
            .with_context(|| format!("reading {}", args.fixture.display()))?,
    )?;
    let ts = fixture["timestamp"].as_i64().context("fixture timestamp")?;
    let mut cases = Vec::new();
    for size in ["1k", "16k"] {
        cases.extend(cases_of(size, &fixture["bodies"][size], &fixture, ts)?);
    }
    for case in &cases {
        case.check(ts)?;
    }
    let overhead = timer_overhead_ns();
    let budget = Duration::from_secs_f64(args.secs / f64::from(args.rounds));
    let started = Instant::now();
    let mut failures = 0;
    for _ in 0..args.rounds {
        for case in &mut cases {
            failures += case.run(ts, budget);
        }
    }
    if failures > 0 {
        bail!("{failures} verifications failed during the measurement");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = delivery_cpu(&args);

    let mut rows = Vec::new();
    for case in &mut cases {
        case.samples.sort_by(f64::total_cmp);
    }
    let median_of = |key: &str, size: &str| {
        cases
            .iter()
            .find(|c| c.key == key && c.size == size)
            .map(|c| bench::percentile(&c.samples, 0.5))
    };
    let mut results = serde_json::Map::new();
    for case in &cases {
        let median = bench::percentile(&case.samples, 0.5);
        let p99 = bench::percentile(&case.samples, 0.99);
        let base = median_of("hmac-sha256", case.size).unwrap_or(median);
        let ratio = median / base;
        let share_total = cpu.map(|(_, total)| median / 1000.0 / total * 100.0);
        let share_user = cpu.map(|(user, _)| median / 1000.0 / user * 100.0);
        let entry = results
            .entry(case.key.to_owned())
            .or_insert_with(|| json!({"label": case.label}));
        entry[case.size] = json!({
            "body_bytes": case.body.len(),
            "samples": case.samples.len(),
            "median_ns": bench::round3(median),
            "p99_ns": bench::round3(p99),
            "ratio_to_hmac_sha256": bench::round3(ratio),
            "share_of_delivery_cpu_pct": share_total.map(bench::round3),
            "share_of_delivery_user_cpu_pct": share_user.map(bench::round3),
        });
        rows.push((case, median, p99, ratio, share_total, share_user));
    }
    let command = format!(
        "make bench PARTS=verify, which runs <target>/release/bench-verify --secs {} --rounds {}",
        args.secs, args.rounds
    );
    let out = json!({
        "command": command,
        "machine": bench::machine_facts(),
        "model": model(Algorithm::Sha256),
        "timer_overhead_ns": overhead,
        "measured_secs": bench::round3(elapsed),
        "delivery_cpu": cpu.map(|(user, total)| json!({
            "source": format!("{} receiver unique C={}", args.http_results.display(), args.http_concurrency),
            "user_us": user,
            "user_sys_us": bench::round3(total),
        })),
        "cases": Value::Object(results),
    });
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        args.out.join("verify.json"),
        serde_json::to_string_pretty(&out)? + "\n",
    )?;

    let mut md = String::from("## Signature verification per delivery (micro-benchmark)\n\n");
    md.push_str(&format!(
        "Command: `{command}` ({elapsed:.0} s measured). One full `Verifier::verify_request` of a \
         valid delivery per sample, in one process: the verifier built once (model parsed, key \
         prepared, as at start-up), then the signature header decoded, the timestamp checked \
         against the tolerance, `{{timestamp}}.{{body}}` assembled and the signature checked. \
         Every algorithm on the same model (base64 signature in `X-Signature`, unix seconds in \
         `X-Timestamp`); Stripe is its preset (a `pairs` header, lowercase hex) over the same `{{t}}.{{body}}`. \
         Bodies: JSON events of exactly 1,024 and 16,384 bytes \
         (`dev/bench/fixtures/verify-rsa.json`, whose RSA-2048 signatures Python's \
         `cryptography` made). Each call timed alone (timer overhead {overhead:.0} ns, \
         included), {} interleaved rounds, {:.1} s per case in all.\n\n",
        args.rounds, args.secs
    ));
    match cpu {
        Some((user, total)) => md.push_str(&format!(
            "Share of a delivery's CPU: the median over the receiver's CPU per delivery in the \
             HTTP part (`{}`, unique deliveries at C={}: {total:.1} µs user+sys, of which \
             {user:.1} µs user). That figure already includes one Stripe verification of a \
             ~400-byte body, and comes from the HTTP part's run, not this one. A share above \
             100% means the verification alone costs more CPU than a whole Stripe delivery \
             through the receiver does.\n\n",
            args.http_results.display(),
            args.http_concurrency
        )),
        None => md.push_str(&format!(
            "Share of a delivery's CPU: not computed (`{}` not found; run the http part).\n\n",
            args.http_results.display()
        )),
    }
    md.push_str(
        "| algorithm | body | samples | median ns | p99 ns | ÷ HMAC-SHA256 (median, same body) \
         | % of delivery CPU (user+sys) | % of delivery user CPU |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let pct = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.1}%"));
    for (case, median, p99, ratio, share_total, share_user) in rows {
        md.push_str(&format!(
            "| {} | {} B | {} | {median:.0} | {p99:.0} | {ratio:.2}x | {} | {} |\n",
            case.label,
            case.body.len(),
            case.samples.len(),
            pct(share_total),
            pct(share_user)
        ));
    }
    md.push_str(
        "\nThe machine is shared: compare the ratios within this run. No figure here is \
         asserted by a test.\n",
    );
    std::fs::write(args.out.join("verify.md"), &md)?;
    print!("{md}");
    eprintln!(
        "bench-verify: wrote {}/verify.json and verify.md",
        args.out.display()
    );
    Ok(())
}
