//! The verdict and the findings, computed from this run's numbers.

use std::fmt::Write as _;

use shared::config::SweepSettings;

use crate::audit::AuditTimes;
use crate::phases::Phase;
use crate::traffic::pct;

/// The target's verdict in one line: the default batched sweep's claim p99 against the first
/// no-sweep phase's.
pub fn verdict_line(phases: &[Phase]) -> String {
    let (Some(base), Some(sweep)) = (phases.first(), phases.get(1)) else {
        return String::new();
    };
    let (b, s) = (pct(&base.samples.new, 0.99), pct(&sweep.samples.new, 0.99));
    let rise = (s / b - 1.0) * 100.0;
    format!(
        "target (batched sweep raises claim p99 by at most 20%): {} ({:.2} ms -> {:.2} ms, {:+.0}%)",
        if rise <= 20.0 { "MET" } else { "NOT MET" },
        b,
        s,
        rise
    )
}

/// The verdict section: the verdict line and each phase's p99 against the first no-sweep
/// phase and the control.
pub fn verdict_section(phases: &[Phase]) -> String {
    let mut md = format!("\n## Verdict\n\n{}\n\n", verdict_line(phases));
    let quiet = |name: &str| phases.iter().find(|p| p.name == name);
    let (Some(base), control) = (quiet("no sweep"), quiet("no sweep (control, after)")) else {
        return md;
    };
    let b99 = pct(&base.samples.new, 0.99);
    let c99 = control.map_or(f64::NAN, |c| pct(&c.samples.new, 0.99));
    let _ = writeln!(
        md,
        "Each phase against the first no-sweep phase ({b99:.2} ms) and the control at the end \
         ({c99:.2} ms); WAL written per second of the phase:\n"
    );
    let _ = writeln!(
        md,
        "| phase | p99 ms | vs no sweep | vs control | WAL MB/s | full-page images/s |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
    for p in phases {
        let p99 = pct(&p.samples.new, 0.99);
        let secs = p.window.as_secs_f64();
        let _ = writeln!(
            md,
            "| {} | {p99:.2} | {:+.0}% | {:+.0}% | {:.1} | {:.0} |",
            p.name,
            (p99 / b99 - 1.0) * 100.0,
            (p99 / c99 - 1.0) * 100.0,
            p.stats.lsn_bytes / 1_048_576.0 / secs,
            p.stats.wal_fpi as f64 / secs
        );
    }
    md
}

/// The findings, computed from the numbers of this run.
pub fn findings_section(phases: &[Phase], audits: &[AuditTimes]) -> String {
    let mut md = "\n## Findings (computed by the program from this run's numbers)\n\n".to_owned();
    let p99 = |p: &Phase| pct(&p.samples.new, 0.99);
    let Some(base) = phases.first() else {
        return md;
    };
    let b99 = p99(base);
    if let Some(control) = phases
        .iter()
        .find(|p| p.name.starts_with("no sweep (control"))
    {
        let c99 = p99(control);
        let drift = (c99 / b99 - 1.0) * 100.0;
        let _ = writeln!(
            md,
            "- **Noise.** The two no-sweep phases (first and last, same traffic) had claim p99 \
             {b99:.2} ms and {c99:.2} ms ({drift:+.0}%). {}",
            if drift.abs() > 20.0 {
                "That difference is itself larger than the 20% target: read a sweep phase's \
                 rise against both."
            } else {
                "Within the 20% target: the comparison below is meaningful."
            }
        );
    }
    let defaults = SweepSettings::default();
    let mut candidates = Vec::new();
    for p in phases
        .iter()
        .filter(|p| p.name.starts_with("batched sweep"))
    {
        let Some(d) = &p.deletion else { continue };
        let rise = (p99(p) / b99 - 1.0) * 100.0;
        let rate = d.rows as f64 / d.secs;
        let met = rise <= 20.0;
        let _ = writeln!(
            md,
            "- **{}**: claim p99 {:.2} ms ({rise:+.0}% vs no sweep: {}), p99.9 {:.2} ms; deleted \
             {} rows in {:.1} s ({rate:.0} rows/s, {:.0} per 5 minutes at that rate), WAL \
             {:.1} MB/s, {} requested checkpoints; stopped `{}`{}.",
            p.name,
            p99(p),
            if met { "target MET" } else { "target NOT MET" },
            pct(&p.samples.new, 0.999),
            d.rows,
            d.secs,
            rate * 300.0,
            p.stats.lsn_bytes / 1_048_576.0 / p.window.as_secs_f64(),
            p.stats.checkpoints_req,
            d.stopped,
            if d.stopped == "Done" {
                format!(
                    " after {:.1} s of the {:.0} s phase (measured only while it ran)",
                    p.window.as_secs_f64(),
                    p.planned.as_secs_f64()
                )
            } else {
                String::new()
            }
        );
        if met && rate >= 1000.0 {
            candidates.push((p, rise, rate));
        }
    }
    match candidates.iter().max_by(|a, b| a.2.total_cmp(&b.2)) {
        Some((p, rise, rate)) => {
            let _ = writeln!(
                md,
                "- **Recommendation.** Of the sweeps that met the target and still delete at \
                 least 1,000 rows/s (300,000 per 5-minute run), the fastest is **{}**: claim p99 \
                 {rise:+.0}% over no sweep at {rate:.0} rows/s.",
                p.name
            );
        }
        None => {
            let best = phases
                .iter()
                .filter(|p| p.name.starts_with("batched sweep"))
                .min_by(|a, b| p99(a).total_cmp(&p99(b)));
            let _ = writeln!(
                md,
                "- **No sweep variant met the target** with at least 1,000 rows/s.{}",
                best.map_or(String::new(), |p| format!(
                    " The lowest claim p99 was {} ({:.2} ms, {:+.0}%).",
                    p.name,
                    p99(p),
                    (p99(p) / b99 - 1.0) * 100.0
                ))
            );
        }
    }
    let _ = writeln!(
        md,
        "- **Rows per run.** A run deletes at most `max_batches` × `batch_size` rows \
         (shared default {} × {} = {}; the bench lifts `max_batches` so only time stops it): \
         with 1,000-row batches the default {} batches is 100,000 rows per run, below 300,000, \
         so a smaller batch needs `max_batches` ≥ 300.",
        defaults.max_batches,
        defaults.batch_size,
        u64::from(defaults.max_batches) * defaults.batch_size as u64,
        defaults.max_batches
    );
    if let Some(p) = phases.iter().find(|p| p.name == "single unbatched DELETE") {
        if let Some(d) = &p.deletion {
            let _ = writeln!(
                md,
                "- **Single unbatched DELETE**: {} rows in {:.1} s ({:.0} rows/s); claim p99 over \
                 its {:.0} s window {:.2} ms, p99.9 {:.2} ms, max {:.1} ms; WAL {:.0} MB.",
                d.rows,
                d.secs,
                d.rows as f64 / d.secs,
                p.window.as_secs_f64(),
                p99(p),
                pct(&p.samples.new, 0.999),
                pct(&p.samples.new, 1.0),
                p.stats.lsn_bytes / 1_048_576.0
            );
        }
    }
    if let Some(last) = audits.last() {
        let slow: Vec<String> = last
            .statements
            .iter()
            .filter(|s| s.median_ms > 10.0 || s.p95_ms > 10.0)
            .map(|s| format!("`{}` ({:.1} ms median)", s.name, s.median_ms))
            .collect();
        let slowest = last
            .statements
            .iter()
            .max_by(|x, y| x.p95_ms.total_cmp(&y.p95_ms));
        let _ = writeln!(
            md,
            "- **Auditor at {} rows**: {}; the whole `peek` (every statement, four sources) \
             median {:.1} ms, p95 {:.1} ms.",
            last.rows,
            if slow.is_empty() {
                format!(
                    "every statement under 10 ms (slowest p95: {})",
                    slowest.map_or(String::new(), |s| format!(
                        "`{}` {:.2} ms",
                        s.name, s.p95_ms
                    ))
                )
            } else {
                format!("over 10 ms: {}", slow.join(", "))
            },
            last.peek_median_ms,
            last.peek_p95_ms
        );
    }
    md
}
