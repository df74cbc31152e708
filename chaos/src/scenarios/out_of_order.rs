//! placeholder
use super::{Context, Scenario};
use crate::report::ScenarioReport;
use anyhow::Result;
/// placeholder
pub struct OutOfOrder;
#[async_trait::async_trait]
impl Scenario for OutOfOrder {
    fn name(&self) -> &'static str {
        "out_of_order"
    }
    fn title(&self) -> &'static str {
        "todo"
    }
    async fn run(&self, _ctx: &Context) -> Result<ScenarioReport> {
        anyhow::bail!("not yet")
    }
}
