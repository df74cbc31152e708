//! `privacy.json` and the `privacy.md` section of `dev/bench/RESULTS.md`, from what a run
//! [`Measured`].

use serde_json::{json, Value};
use shared::privacy::keys::DEFAULT_ROTATION;

use super::{Measured, Variant, REDACTED_POINTER};

/// `a ÷ b`; NaN when `b` is not positive.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

impl Measured {
    /// privacy.json: every figure, `command` the one that ran it.
    pub fn json(&self, command: &str) -> Value {
        let off = self.summaries[0];
        let stored_off = self.stored[0].payload_bytes;
        let off_rounds = self.variants[0].cpu_us_per_round();
        let mut per_variant = serde_json::Map::new();
        for ((v, s), st) in self.variants.iter().zip(&self.summaries).zip(&self.stored) {
            let rounds = v.cpu_us_per_round();
            let round_ratios: Vec<f64> = rounds
                .iter()
                .zip(&off_rounds)
                .map(|(a, b)| crate::round3(ratio(*a, *b)))
                .collect();
            per_variant.insert(
                v.key.to_owned(),
                json!({
                    "label": v.label,
                    "source": v.source,
                    "deliveries": s.deliveries,
                    "body_bytes": crate::round3(s.body_bytes),
                    "cpu_us": crate::round3(s.cpu_us),
                    "cpu_user_us": crate::round3(s.user_us),
                    "cpu_sys_us": crate::round3(s.sys_us),
                    "p50_ms": crate::round3(s.p50_ms),
                    "p99_ms": crate::round3(s.p99_ms),
                    "rps": crate::round3(s.rps),
                    "cpu_us_per_round": rounds.into_iter().map(crate::round3).collect::<Vec<_>>(),
                    "p99_ms_per_round": v.rounds.iter().map(|r| crate::round3(r.p99_ms)).collect::<Vec<_>>(),
                    "over_off": {
                        "cpu": crate::round3(ratio(s.cpu_us, off.cpu_us)),
                        "cpu_per_round": round_ratios,
                        "p50": crate::round3(ratio(s.p50_ms, off.p50_ms)),
                        "p99": crate::round3(ratio(s.p99_ms, off.p99_ms)),
                        "rps": crate::round3(ratio(s.rps, off.rps)),
                        "payload_bytes": crate::round3(ratio(st.payload_bytes, stored_off)),
                    },
                    "stored": {
                        "rows": st.rows,
                        "completed": st.completed,
                        "with_payload": st.with_payload,
                        "sealed": st.sealed,
                        "redacted": st.redacted,
                        "avg_payload_bytes": crate::round3(st.payload_bytes),
                    },
                }),
            );
        }
        json!({
            "command": command,
            "machine": crate::machine_facts(),
            "load_average_before": self.load.0,
            "load_average_after": self.load.1,
            "rounds": self.plan.rounds,
            "n_per_round": self.plan.n,
            "concurrency": self.plan.concurrency,
            "measured_secs": crate::round3(self.measured_s),
            "wrapper": "local master key",
            "wrapper_calls": {"generate": self.calls.generate, "unwrap": self.calls.unwrap},
            "opened_again": self.opened,
            "alone": {
                "calls": self.alone.calls,
                "body_bytes": self.alone.body_bytes,
                "payload_seal_median_ns": self.alone.seal_median_ns,
                "payload_seal_p99_ns": self.alone.seal_p99_ns,
                "response_seal_median_ns": self.alone.response_median_ns,
                "response_open_median_ns": self.alone.answer_median_ns,
                "payload_open_median_ns": self.alone.open_median_ns,
                "all_three_concurrent_cpu_us": crate::round3(self.alone.concurrent_cpu_us),
                "concurrency": self.alone.concurrency,
            },
            "variants": Value::Object(per_variant),
        })
    }

    /// The section of `dev/bench/RESULTS.md`, `command` the one that ran it.
    pub fn markdown(&self, command: &str) -> String {
        let plan = self.plan;
        let off = self.summaries[0];
        let stored_off = self.stored[0].payload_bytes;
        let x = |a: f64, b: f64| {
            let r = ratio(a, b);
            if r.is_finite() {
                format!("{r:.2}x")
            } else {
                "n/a".to_owned()
            }
        };
        let mut md = String::from(
            "## Payload privacy at rest: encryption and redaction per delivery (issue 28)\n\n",
        );
        md.push_str(&format!(
            "Command: `{}` ({:.0} s measured; load average {} before, {} after). One in-process \
             receiver (`shared::Receiver::receive` with the example order handler, pool of {}, \
             the limits on the database as deployed, one JSON log line per delivery to \
             /dev/null) with three inline Stripe sources identical but for one setting: \
             `stripe-off`; `stripe-on` with `\"encrypt_payload\": true` (its payload and its \
             handler's stored response sealed with AES-256-GCM under a data key wrapped by a \
             local master key, `PayloadKeys::local`: the envelope KMS would give, without KMS's \
             network call; a new event answers with the text it sealed, a retry opens the stored \
             one); `stripe-redact` with \
             `\"redact\": [\"{REDACTED_POINTER}\"]` and no encryption. Each gets {} new signed \
             `payment_intent.succeeded` deliveries (`bench::signed_deliveries`: {:.0} bytes of \
             JSON on average, as long for every variant) per round at C={}, in {} interleaved \
             rounds (every variant once per round, the first one rotating), after {} unmeasured \
             deliveries per variant (the data key made there). CPU: this process's getrusage \
             (`RUSAGE_SELF`, user + system, every thread) over each round ÷ its deliveries; \
             PostgreSQL's own CPU is not counted. Latency: `receive` called to reply, per \
             delivery, all rounds together. Throughput: deliveries ÷ the rounds' wall time. \
             PostgreSQL fsync=on, on the same machine.\n\n",
            command,
            self.measured_s,
            self.load.0,
            self.load.1,
            plan.concurrency,
            plan.n,
            off.body_bytes,
            plan.concurrency,
            plan.rounds,
            plan.concurrency,
        ));
        md.push_str(
            "| variant | deliveries | CPU µs per delivery (user + sys) | ÷ off | p50 ms | ÷ off \
             | p99 ms | ÷ off | deliveries/s | ÷ off | stored payload bytes per row | ÷ off |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for ((v, s), st) in self.variants.iter().zip(&self.summaries).zip(&self.stored) {
            md.push_str(&format!(
                "| {} (`{}`) | {} | {:.1} ({:.1} + {:.1}) | {} | {:.2} | {} | {:.2} | {} | {:.0} \
                 | {} | {:.1} | {} |\n",
                v.label,
                v.source,
                s.deliveries,
                s.cpu_us,
                s.user_us,
                s.sys_us,
                x(s.cpu_us, off.cpu_us),
                s.p50_ms,
                x(s.p50_ms, off.p50_ms),
                s.p99_ms,
                x(s.p99_ms, off.p99_ms),
                s.rps,
                x(s.rps, off.rps),
                st.payload_bytes,
                x(st.payload_bytes, stored_off),
            ));
        }
        self.rounds_table(&mut md, &x);
        md.push_str("\nWhat the ledger holds of the measured deliveries:\n\n");
        md.push_str(
            "| source | rows | completed | with a payload | sealed (begins `HLS1`) \
             | with `\"[redacted]\"` | body sent, bytes | stored payload, bytes per row \
             | stored − sent |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for ((v, s), st) in self.variants.iter().zip(&self.summaries).zip(&self.stored) {
            md.push_str(&format!(
                "| `{}` | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:+.1} |\n",
                v.source,
                st.rows,
                st.completed,
                st.with_payload,
                st.sealed,
                st.redacted,
                s.body_bytes,
                st.payload_bytes,
                st.payload_bytes - s.body_bytes,
            ));
        }
        md.push_str(&format!(
            "\nCalls to the master key's wrapper over the whole run (`Keyring::calls`; on the \
             KMS path these are KMS calls): {} data key made (`GenerateDataKey`) and {} \
             unwrapped (`Decrypt`) for {} sealed payloads (warm-up included): one data key per \
             execution environment and rotation period ({} s), made by the first seal. One \
             sealed payload read back and opened: {}. The envelope adds 36 + n + m bytes to the \
             payload (magic, wrapper kind, lengths, nonce and tag: 36; n the master key id, \
             here 5; m the wrapped data key, 60 under a local key); with KMS, n is the key id \
             as configured and m its CiphertextBlob, both longer (not measured here).\n\n",
            self.calls.generate,
            self.calls.unwrap,
            self.stored[1].sealed + plan.concurrency as i64,
            DEFAULT_ROTATION.as_secs(),
            if self.opened {
                "its event's JSON, as sent"
            } else {
                "**not its event's JSON**"
            },
        ));
        let a = self.alone;
        let extra_cpu = self.summaries[1].cpu_us - off.cpu_us;
        md.push_str(&format!(
            "What `stripe-on` seals and opens per new delivery, timed apart (no database, no \
             handler; {} calls of each after a warm-up, one thread, each call timed): the \
             payload ({} bytes) sealed, median {:.2} µs (p99 {:.2}); the handler's response \
             sealed in its stored form (`{{\"sealed\": \"<base64>\"}}`), median {:.2} µs; that \
             form opened (what answering a retry costs; a new event answers with the text it \
             sealed), median {:.2} µs. The three from {} tasks at once: {:.2} µs of CPU (a new \
             delivery pays the two seals), against the {:.1} µs more CPU per delivery measured \
             above with encryption on. Opening the payload again (the worker's and the console's side): \
             median {:.2} µs.\n\n",
            a.calls,
            a.body_bytes,
            a.seal_median_ns / 1000.0,
            a.seal_p99_ns / 1000.0,
            a.response_median_ns / 1000.0,
            a.answer_median_ns / 1000.0,
            a.concurrency,
            a.concurrent_cpu_us,
            extra_cpu,
            a.open_median_ns / 1000.0,
        ));
        md.push_str(
            "The machine is shared: compare the ratios within this run, and round by round. No \
             figure here is asserted by a test.\n",
        );
        md
    }

    /// CPU per delivery and p99 round by round, with the ratio to `off` of the same round.
    fn rounds_table(&self, md: &mut String, x: &dyn Fn(f64, f64) -> String) {
        let off = &self.variants[0];
        let cpu: Vec<Vec<f64>> = self
            .variants
            .iter()
            .map(Variant::cpu_us_per_round)
            .collect();
        md.push_str(
            "\nRound by round (÷ off in the same round; the first variant of round k is the k-th, \
             cyclically):\n\n| round | first |",
        );
        for v in &self.variants {
            md.push_str(&format!(" {} CPU µs |", v.key));
        }
        for v in &self.variants {
            md.push_str(&format!(" {} p99 ms |", v.key));
        }
        md.push_str("\n|---:|---|");
        md.push_str(&"---:|".repeat(2 * self.variants.len()));
        md.push('\n');
        for (r, off_round) in off.rounds.iter().enumerate() {
            let first = self.variants[r % self.variants.len()].key;
            md.push_str(&format!("| {} | {first} |", r + 1));
            for (i, row) in cpu.iter().enumerate() {
                if i == 0 {
                    md.push_str(&format!(" {:.1} |", row[r]));
                } else {
                    md.push_str(&format!(" {:.1} ({}) |", row[r], x(row[r], cpu[0][r])));
                }
            }
            for (i, v) in self.variants.iter().enumerate() {
                let p99 = v.rounds[r].p99_ms;
                if i == 0 {
                    md.push_str(&format!(" {p99:.1} |"));
                } else {
                    md.push_str(&format!(" {p99:.1} ({}) |", x(p99, off_round.p99_ms)));
                }
            }
            md.push('\n');
        }
    }
}
