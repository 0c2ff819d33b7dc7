//! `errand signal ID NAME`: send a signal to a job that waits for it (or,
//! with `--buffer`, keep it for the job's next wait), recorded in the
//! audit log as the operator's.

use std::process::ExitCode;
use std::sync::Arc;

use errand::{AuditStamp, Client, NewSignal, Store};

use crate::args::SignalArgs;
use crate::exit::Failure;
use crate::output::{self, outln};

pub(crate) async fn signal(store: Arc<dyn Store>, a: SignalArgs) -> Result<ExitCode, Failure> {
    let id = crate::ids(vec![a.id])?
        .pop()
        .ok_or_else(|| errand::Error::invalid("give the job's id"))?;
    let mut signal = NewSignal::new(id, &a.name)?;
    if let Some(payload) = a.payload {
        signal = signal.with_payload_text(payload)?;
    }
    signal.buffer = a.buffer;
    signal.by = Some(AuditStamp {
        operator: crate::operator(a.operator.by),
        reason: a.operator.reason,
    });
    let sent = Client::new(store).signal(&signal).await?;
    if a.json {
        output::json(&sent)?;
    } else if sent.delivered {
        outln!(
            "delivered {} to {}: now {}",
            signal.name,
            sent.job.id,
            sent.job.state
        );
    } else {
        outln!(
            "kept {} for {} ({} now): its next wait for {} takes it",
            signal.name,
            sent.job.id,
            sent.job.state,
            signal.name
        );
    }
    Ok(ExitCode::SUCCESS)
}
