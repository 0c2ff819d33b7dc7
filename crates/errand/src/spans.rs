//! The spans of an enqueue and of an attempt, named and attributed after
//! OpenTelemetry's messaging conventions (`messaging.system` "errand", the
//! queue as the destination, the job id as the message id) plus Errand's
//! own `errand.job.*` attributes. They are ordinary `tracing` spans: a log
//! subscriber sees them as such, and with the `otel` feature and a
//! `tracing-opentelemetry` layer installed they become OpenTelemetry spans
//! — the enqueue span a child of the trace context the job carries in
//! (from a `traceparent` header, say), and the context stored with the
//! job becoming the enqueue span's own, so that every attempt's span is
//! its child, in the same trace, in whatever process runs it.

use errand_core::{Error, ErrorClass, Inserted, NewJob, Result};
use tracing::field::Empty;

use crate::worker::WorkReport;

/// The span of one enqueue call of `count` jobs into `queue`.
pub(crate) fn enqueue_span(queue: &str, count: usize) -> tracing::Span {
    tracing::info_span!(
        "enqueue",
        otel.name = %format!("send {queue}"),
        otel.kind = "producer",
        otel.status_code = Empty,
        messaging.system = "errand",
        messaging.operation.type = "send",
        messaging.operation.name = "enqueue",
        messaging.destination.name = %queue,
        messaging.message.id = Empty,
        messaging.batch.message_count = count,
        errand.job.id = Empty,
        errand.job.kind = Empty,
        errand.job.created = Empty,
        error.type = Empty,
    )
}

/// Prepares `jobs` for an enqueue under `span`: the span takes the first
/// job's trace context (from the request that enqueued it) as its parent,
/// and each job without a context of its own, or with that one, is given
/// the span's, so its attempts join the trace under the enqueue. Without
/// the `otel` feature, or when no OpenTelemetry layer records the span,
/// the jobs keep what they carried.
pub(crate) fn link_jobs(span: &tracing::Span, jobs: &mut [NewJob]) {
    if let Some(first) = jobs.first() {
        span.record("errand.job.kind", first.kind.as_str());
        if let Some(id) = &first.id {
            span.record("errand.job.id", id.as_str());
            span.record("messaging.message.id", id.as_str());
        }
    }
    #[cfg(feature = "otel")]
    {
        let inherited = jobs.first().and_then(|j| j.traceparent.clone());
        if let Some(tp) = &inherited {
            otel::set_parent(span, tp);
        }
        if let Some(own) = otel::traceparent_of(span) {
            for job in jobs.iter_mut() {
                if job.traceparent.is_none() || job.traceparent == inherited {
                    job.traceparent = Some(own.clone());
                }
            }
        }
    }
}

/// Records what the enqueue did on its span: the first job it answered
/// with, or its error.
pub(crate) fn record_enqueued(
    span: &tracing::Span,
    result: std::result::Result<Option<&Inserted>, &Error>,
) {
    match result {
        Ok(first) => {
            if let Some(first) = first {
                span.record("errand.job.id", first.job.id.as_str());
                span.record("messaging.message.id", first.job.id.as_str());
                span.record("errand.job.created", first.created);
            }
        }
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", e.code());
        }
    }
}

/// The span of one attempt.
pub(crate) fn attempt_span(job: &errand_core::Job, attempt: u32) -> tracing::Span {
    let span = tracing::info_span!(
        "attempt",
        job = %job.id,
        kind = %job.kind,
        attempt = attempt,
        trace_id = job.traceparent.as_ref().map(|t| t.trace_id()),
        traceparent = job.traceparent.as_ref().map(|t| t.as_str()),
        otel.name = %format!("process {}", job.queue),
        otel.kind = "consumer",
        otel.status_code = Empty,
        messaging.system = "errand",
        messaging.operation.type = "process",
        messaging.operation.name = "process",
        messaging.destination.name = %job.queue,
        messaging.message.id = %job.id,
        errand.job.id = %job.id,
        errand.job.kind = %job.kind,
        errand.job.queue = %job.queue,
        errand.job.attempt = attempt,
        errand.job.outcome = Empty,
        errand.error.class = Empty,
        error.type = Empty,
    );
    #[cfg(feature = "otel")]
    if let Some(tp) = &job.traceparent {
        otel::set_parent(&span, tp);
    }
    span
}

/// Records how the attempt ended: the class of the handler's failure (if
/// it failed) and what the settlement made of it.
pub(crate) fn record_attempt(
    span: &tracing::Span,
    class: Option<ErrorClass>,
    report: &Result<WorkReport>,
) {
    if let Some(class) = class {
        span.record("errand.error.class", class.as_str());
        span.record("error.type", class.as_str());
        span.record("otel.status_code", "ERROR");
    }
    match report {
        Ok(r) => span.record("errand.job.outcome", r.outcome.as_str()),
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("errand.job.outcome", "settle_failed");
            span.record("error.type", e.code())
        }
    };
}

/// The current span's context as a W3C trace context, when an
/// OpenTelemetry layer records it (inside an attempt: the attempt's span).
pub(crate) fn current_traceparent() -> Option<errand_core::TraceParent> {
    #[cfg(feature = "otel")]
    {
        otel::traceparent_of(&tracing::Span::current())
    }
    #[cfg(not(feature = "otel"))]
    {
        None
    }
}

#[cfg(feature = "otel")]
mod otel {
    use errand_core::TraceParent;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// The remote parent a stored trace context names (`None` if it cannot
    /// be read, which validation at enqueue rules out).
    fn remote(tp: &TraceParent) -> Option<opentelemetry::Context> {
        let s = tp.as_str();
        let trace = TraceId::from_hex(s.get(3..35)?).ok()?;
        let span = SpanId::from_hex(s.get(36..52)?).ok()?;
        let flags = u8::from_str_radix(s.get(53..55)?, 16).ok()?;
        let context = SpanContext::new(
            trace,
            span,
            TraceFlags::new(flags),
            true,
            TraceState::default(),
        );
        context
            .is_valid()
            .then(|| opentelemetry::Context::new().with_remote_span_context(context))
    }

    pub(super) fn set_parent(span: &tracing::Span, tp: &TraceParent) {
        if let Some(parent) = remote(tp) {
            let _ = span.set_parent(parent);
        }
    }

    /// The span's own context as a W3C trace context, when an
    /// OpenTelemetry layer records it.
    pub(super) fn traceparent_of(span: &tracing::Span) -> Option<TraceParent> {
        let context = span.context();
        let own = context.span().span_context().clone();
        if !own.is_valid() {
            return None;
        }
        TraceParent::parse(format!(
            "00-{}-{}-{:02x}",
            own.trace_id(),
            own.span_id(),
            own.trace_flags().to_u8()
        ))
        .ok()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_stored_trace_context_becomes_a_remote_parent() {
            let tp = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                .expect("traceparent");
            let parent = remote(&tp).expect("a parent");
            let sc = parent.span().span_context().clone();
            assert_eq!(
                sc.trace_id().to_string(),
                "4bf92f3577b34da6a3ce929d0e0e4736"
            );
            assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
            assert!(sc.is_sampled() && sc.is_remote());
            let unsampled =
                TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
                    .expect("traceparent");
            assert!(
                !remote(&unsampled)
                    .expect("a parent")
                    .span()
                    .span_context()
                    .is_sampled()
            );
        }

        #[test]
        fn without_an_opentelemetry_layer_a_span_has_no_context_to_store() {
            let span = tracing::info_span!("enqueue");
            assert_eq!(traceparent_of(&span), None);
        }
    }
}
