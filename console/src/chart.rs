//! The overview's chart, drawn here as SVG text: events per minute of one source, stacked by
//! outcome, with axes, labels and a legend. Every text is escaped ([`escape`]).

use std::fmt::Write;
use std::time::{Duration, SystemTime};

/// The outcomes the chart stacks, bottom first, with their colours: an event's status now.
pub const OUTCOMES: [(&str, &str); 5] = [
    ("completed", "#3f9b57"),
    ("failed", "#e0a030"),
    ("dead", "#c23b3b"),
    ("processing", "#5b8fd6"),
    ("claimed", "#9bb7e0"),
];

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 190.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = 130.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 26.0;

/// One chart's data: per minute from `start`, the count of each of [`OUTCOMES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The first minute.
    pub start: SystemTime,
    /// Per minute, oldest first: counts in the order of [`OUTCOMES`].
    pub minutes: Vec<[u64; 5]>,
}

impl Series {
    /// `minutes` empty minutes from `start`.
    pub fn new(start: SystemTime, minutes: usize) -> Self {
        Self {
            start,
            minutes: vec![[0; 5]; minutes],
        }
    }

    /// Adds `count` events of `status` in the minute starting at `minute` (ignored outside the
    /// series, or for a status not in [`OUTCOMES`]).
    pub fn add(&mut self, minute: SystemTime, status: &str, count: u64) {
        let Ok(offset) = minute.duration_since(self.start) else {
            return;
        };
        let index = (offset.as_secs() / 60) as usize;
        let outcome = OUTCOMES.iter().position(|(name, _)| *name == status);
        if let (Some(bucket), Some(outcome)) = (self.minutes.get_mut(index), outcome) {
            bucket[outcome] += count;
        }
    }

    /// Total per outcome, in the order of [`OUTCOMES`].
    pub fn totals(&self) -> [u64; 5] {
        let mut totals = [0; 5];
        for minute in &self.minutes {
            for (total, count) in totals.iter_mut().zip(minute) {
                *total += count;
            }
        }
        totals
    }
}

/// Escapes `text` for SVG/XML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The y axis' top: the smallest of 1, 2, 5 times a power of ten at or above `max`.
fn nice_max(max: u64) -> u64 {
    let mut step = 1;
    loop {
        for factor in [1, 2, 5] {
            if step * factor >= max.max(1) {
                return step * factor;
            }
        }
        step *= 10;
    }
}

/// The SVG of `series`, titled `title`: stacked bars per minute, the y axis (events per
/// minute, 0 and the top), the x axis (UTC times, about six labels), the legend with each
/// outcome's total.
pub fn svg(title: &str, series: &Series) -> String {
    let n = series.minutes.len().max(1);
    let max = series
        .minutes
        .iter()
        .map(|m| m.iter().sum::<u64>())
        .max()
        .unwrap_or(0);
    let top = nice_max(max) as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let bar_w = plot_w / n as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{}"><title>{}</title>"#,
        escape(title),
        escape(title)
    );
    // Axes and the y labels.
    let _ = write!(
        out,
        r##"<g stroke="#888" stroke-width="1"><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{y0}"/><line x1="{LEFT}" y1="{y0}" x2="{x1}" y2="{y0}"/></g>"##,
        y0 = TOP + plot_h,
        x1 = LEFT + plot_w
    );
    let _ = write!(
        out,
        r##"<g font-size="10" fill="#444" text-anchor="end"><text x="{x}" y="{y_top}">{top}</text><text x="{x}" y="{y0}">0</text></g>"##,
        x = LEFT - 4.0,
        y_top = TOP + 8.0,
        y0 = TOP + plot_h,
        top = top as u64
    );
    let _ = write!(
        out,
        r##"<text x="4" y="{y}" font-size="10" fill="#444" transform="rotate(-90 10 {y})">per min</text>"##,
        y = TOP + plot_h / 2.0 + 20.0
    );
    // Bars.
    for (i, minute) in series.minutes.iter().enumerate() {
        let mut base = 0u64;
        for (outcome, count) in minute.iter().enumerate() {
            if *count == 0 {
                continue;
            }
            let y = TOP + plot_h - ((base + count) as f64 / top) * plot_h;
            let h = (*count as f64 / top) * plot_h;
            let _ = write!(
                out,
                r#"<rect x="{:.2}" y="{y:.2}" width="{:.2}" height="{h:.2}" fill="{}"/>"#,
                LEFT + i as f64 * bar_w,
                bar_w.max(0.8),
                OUTCOMES[outcome].1
            );
            base += count;
        }
    }
    // X labels: about six, on whole minutes.
    let every = (n / 6).max(1);
    for i in (0..n).step_by(every) {
        let at = series.start + Duration::from_secs(60 * i as u64);
        let label = shared::timestamp::rfc3339(at);
        let hh_mm = label.get(11..16).unwrap_or("");
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{}" font-size="10" fill="#444" text-anchor="middle">{}</text>"##,
            LEFT + i as f64 * bar_w,
            TOP + plot_h + 14.0,
            escape(hh_mm)
        );
    }
    let _ = write!(
        out,
        r##"<text x="{}" y="{}" font-size="10" fill="#444" text-anchor="end">UTC</text>"##,
        LEFT + plot_w,
        HEIGHT - 2.0
    );
    // Legend with totals.
    let totals = series.totals();
    for (i, ((name, colour), total)) in OUTCOMES.iter().zip(totals).enumerate() {
        let y = TOP + 6.0 + i as f64 * 16.0;
        let x = LEFT + plot_w + 12.0;
        let _ = write!(
            out,
            r##"<rect x="{x}" y="{y}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}" font-size="11" fill="#222">{} {total}</text>"##,
            x + 14.0,
            y + 9.0,
            escape(name)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_stack_by_outcome_and_titles_are_escaped() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(600);
        let mut series = Series::new(start, 3);
        series.add(start, "completed", 4);
        series.add(start + Duration::from_secs(60), "dead", 1);
        series.add(start + Duration::from_secs(600), "dead", 9); // outside
        series.add(start, "unknown", 9);
        assert_eq!(series.totals(), [4, 0, 1, 0, 0]);
        let svg = svg("<b>&\"", &series);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("<title>&lt;b&gt;&amp;&quot;</title>"), "{svg}");
        assert!(svg.contains("completed 4"), "{svg}");
        assert!(svg.contains("dead 1"), "{svg}");
        assert_eq!(svg.matches("<rect").count(), 2 + OUTCOMES.len());
        assert_eq!(nice_max(0), 1);
        assert_eq!(nice_max(3), 5);
        assert_eq!(nice_max(11), 20);
    }
}
