//! placeholder
use super::{Context, Scenario};
use crate::report::ScenarioReport;
use anyhow::Result;
/// placeholder
pub struct ReceiverKilled;
#[async_trait::async_trait]
impl Scenario for ReceiverKilled {
    fn name(&self) -> &'static str {
        "receiver_killed"
    }
    fn title(&self) -> &'static str {
        "todo"
    }
    async fn run(&self, _ctx: &Context) -> Result<ScenarioReport> {
        anyhow::bail!("not yet")
    }
}
