//! The run: the order of what it measures (the ledger, the batch statement's plan, the phases,
//! the auditor), ending in the report.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use shared::config::SweepSettings;

use crate::phases::Background;
use crate::report::Report;
use crate::setup::Bench;

impl Bench {
    /// The whole run, in the order of the crate's docs; returns the report.
    pub async fn run(&self) -> Result<Report> {
        shared::db::migrate(&self.settings).await?;
        let facts = self.machine_facts().await?;
        step!(self, "loading {} expired rows", self.args.expired_rows);
        let load = self.load_expired(false).await?;
        step!(self, "loaded in {:.1} s; live rows", load);
        self.load_live().await?;
        self.vacuum_analyze().await?;
        let sizes = self.sizes().await?;

        step!(self, "EXPLAIN after 10 batches");
        let plan = self.explain_after_batches(10).await?;
        self.load_expired(true).await?; // put back the 10 batches' rows
        self.vacuum_analyze().await?;

        step!(self, "warm-up");
        self.traffic(Instant::now() + Duration::from_secs(3), None)
            .await?;

        let window = Duration::from_secs(self.args.phase_secs);
        let default = SweepSettings {
            max_batches: 1_000_000,
            margin_ms: 1,
            ..SweepSettings::default()
        };
        let mut phases = vec![
            self.phase("no sweep", window, Background::Nothing).await?,
            self.phase(
                &sweep_name(&default, None, true),
                window,
                Background::Sweep(default),
            )
            .await?,
        ];
        for variant in &self.args.sweep_variants {
            let mut parts = variant.split(':');
            let (Some(batch), Some(duty)) = (parts.next(), parts.next()) else {
                return Err(anyhow!(
                    "--sweep-variants takes batch_size:duty_percent[:wal_compression]"
                ));
            };
            let compression = parts.next().map(|c| c.trim().to_owned());
            let settings = SweepSettings {
                batch_size: batch.trim().parse()?,
                duty_percent: duty.trim().parse()?,
                ..default
            };
            let name = sweep_name(&settings, compression.as_deref(), false);
            step!(self, "reloading the expired rows for {name}");
            self.reload().await?;
            if let Some(method) = &compression {
                self.set_wal_compression(Some(method)).await?;
            }
            let phase = self.phase(&name, window, Background::Sweep(settings)).await;
            if compression.is_some() {
                self.set_wal_compression(None).await?;
            }
            phases.push(phase?);
        }

        step!(self, "reloading the expired rows for the single DELETE");
        self.reload().await?;
        phases.push(
            self.phase("single unbatched DELETE", window, Background::Delete)
                .await?,
        );
        self.vacuum_analyze().await?;
        phases.push(
            self.phase("no sweep (control, after)", window, Background::Nothing)
                .await?,
        );

        let mut audits = Vec::new();
        step!(self, "auditor: {}-row ledger", self.args.audit_rows);
        audits.push(self.auditor_ledger(self.args.audit_rows).await?);
        if self.args.ten_million {
            step!(self, "auditor: 10M-row ledger");
            audits.push(self.auditor_ledger(10_000_000).await?);
        }
        Ok(self.report(&facts, load, &sizes, &plan, &phases, &audits))
    }
}

/// A sweep phase's name.
fn sweep_name(settings: &SweepSettings, compression: Option<&str>, default: bool) -> String {
    format!(
        "batched sweep ({}{} rows, duty {}%{})",
        if default { "default: " } else { "" },
        settings.batch_size,
        settings.duty_percent,
        compression.map_or(String::new(), |c| format!(", wal_compression={c}"))
    )
}
