//! The spans of an enqueue and of an attempt, named and attributed after
//! OpenTelemetry's messaging conventions (`messaging.system` "errand", the
//! queue as the destination, the job id as the message id) plus Errand's
//! own `errand.job.*` attributes. They are ordinary `tracing` spans, with
//! the few fields a log line needs (`attempt{job kind attempt …}`); with
//! the `otel` feature the OpenTelemetry attributes are set on them through
//! `tracing-opentelemetry` (not as fields, so logs stay short), and with a
//! `tracing-opentelemetry` layer installed they become OpenTelemetry spans
//! — the enqueue span a child of the trace context the job carries in
//! (from a `traceparent` header, say), and the context stored with the
//! job becoming the enqueue span's own, so that every attempt's span is
//! its child, in the same trace, in whatever process runs it.

use errand_core::{Error, ErrorClass, Inserted, NewJob, Result};

use crate::work_report::WorkReport;

/// The span of one enqueue call of `count` jobs into `queue`. Logs see a
/// short `enqueue{queue count}`; with the `otel` feature the span also carries
/// its OpenTelemetry name, kind and messaging attributes.
pub(crate) fn enqueue_span(queue: &str, count: usize) -> tracing::Span {
    #[cfg(not(feature = "otel"))]
    let span = tracing::info_span!("enqueue", queue = %queue, count = count);
    #[cfg(feature = "otel")]
    let span = {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let span = tracing::info_span!(
            "enqueue",
            queue = %queue,
            count = count,
            otel.name = %format!("send {queue}"),
            otel.kind = "producer",
        );
        if span.is_disabled() {
            return span;
        }
        span.set_attribute("messaging.system", "errand");
        span.set_attribute("messaging.operation.type", "send");
        span.set_attribute("messaging.operation.name", "enqueue");
        span.set_attribute("messaging.destination.name", queue.to_owned());
        span.set_attribute(
            "messaging.batch.message_count",
            i64::try_from(count).unwrap_or(i64::MAX),
        );
        span
    };
    span
}

/// Prepares `jobs` for an enqueue under `span`: the span takes the first
/// job's trace context (from the request that enqueued it) as its parent,
/// and each job without a context of its own, or with that one, is given
/// the span's, so its attempts join the trace under the enqueue. Without
/// the `otel` feature, or when no OpenTelemetry layer records the span,
/// the jobs keep what they carried.
pub(crate) fn link_jobs(span: &tracing::Span, jobs: &mut [NewJob]) {
    #[cfg(not(feature = "otel"))]
    let _ = (span, jobs);
    #[cfg(feature = "otel")]
    {
        // A span no subscriber records carries nothing: no work per job.
        if span.is_disabled() {
            return;
        }
        if let Some(first) = jobs.first() {
            otel::attribute(span, "errand.job.kind", first.kind.to_string());
        }
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

/// Records what the enqueue did on its span (with the `otel` feature): the
/// first job it answered with, or its error.
pub(crate) fn record_enqueued(
    span: &tracing::Span,
    result: std::result::Result<Option<&Inserted>, &Error>,
) {
    #[cfg(not(feature = "otel"))]
    let _ = (span, result);
    #[cfg(feature = "otel")]
    if !span.is_disabled() {
        match result {
            Ok(first) => {
                if let Some(first) = first {
                    otel::attribute(span, "errand.job.id", first.job.id.to_string());
                    otel::attribute(span, "messaging.message.id", first.job.id.to_string());
                    otel::attribute(span, "errand.job.created", first.created);
                }
            }
            Err(e) => otel::failed(span, e.code(), &e.to_string()),
        }
    }
}

/// The span of one attempt. Logs see `attempt{job kind attempt trace_id
/// traceparent}`; with the `otel` feature it also carries its
/// OpenTelemetry name, kind and attributes, and is a child of the job's
/// trace context.
pub(crate) fn attempt_span(job: &errand_core::Job, attempt: u32) -> tracing::Span {
    #[cfg(not(feature = "otel"))]
    let span = tracing::info_span!(
        "attempt",
        job = %job.id,
        kind = %job.kind,
        attempt = attempt,
        trace_id = job.traceparent.as_ref().map(|t| t.trace_id()),
        traceparent = job.traceparent.as_ref().map(|t| t.as_str()),
    );
    #[cfg(feature = "otel")]
    let span = {
        let span = tracing::info_span!(
            "attempt",
            job = %job.id,
            kind = %job.kind,
            attempt = attempt,
            trace_id = job.traceparent.as_ref().map(|t| t.trace_id()),
            traceparent = job.traceparent.as_ref().map(|t| t.as_str()),
            otel.name = %format!("process {}", job.queue),
            otel.kind = "consumer",
        );
        if span.is_disabled() {
            return span;
        }
        if let Some(tp) = &job.traceparent {
            otel::set_parent(&span, tp);
        }
        for (key, value) in [
            ("messaging.system", "errand"),
            ("messaging.operation.type", "process"),
            ("messaging.operation.name", "process"),
            ("messaging.destination.name", job.queue.as_str()),
            ("messaging.message.id", job.id.as_str()),
            ("errand.job.id", job.id.as_str()),
            ("errand.job.kind", job.kind.as_str()),
            ("errand.job.queue", job.queue.as_str()),
        ] {
            otel::attribute(&span, key, value.to_owned());
        }
        otel::attribute(&span, "errand.job.attempt", i64::from(attempt));
        span
    };
    span
}

/// Records how the attempt ended (with the `otel` feature): the class of
/// the handler's failure, if it failed, and what the settlement made of
/// it.
pub(crate) fn record_attempt(
    span: &tracing::Span,
    class: Option<ErrorClass>,
    report: &Result<WorkReport>,
) {
    #[cfg(not(feature = "otel"))]
    let _ = (span, class, report);
    #[cfg(feature = "otel")]
    if !span.is_disabled() {
        if let Some(class) = class {
            otel::attribute(span, "errand.error.class", class.as_str());
            otel::failed(span, class.as_str(), "the attempt failed");
        }
        match report {
            Ok(r) => otel::attribute(span, "errand.job.outcome", r.outcome.as_str()),
            Err(e) => {
                otel::attribute(span, "errand.job.outcome", "settle_failed");
                otel::failed(span, e.code(), &e.to_string());
            }
        }
    }
}

/// The current attempt span's context as a W3C trace context, when an
/// OpenTelemetry layer records it; `None` outside an attempt span.
pub(crate) fn current_traceparent() -> Option<errand_core::TraceParent> {
    #[cfg(feature = "otel")]
    {
        let current = tracing::Span::current();
        if current.metadata().map(|m| m.name()) != Some("attempt") {
            return None;
        }
        otel::traceparent_of(&current)
    }
    #[cfg(not(feature = "otel"))]
    {
        None
    }
}

#[cfg(feature = "otel")]
mod otel {
    use errand_core::TraceParent;
    use opentelemetry::trace::Status;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// Sets an OpenTelemetry attribute on the span (nothing when no
    /// OpenTelemetry layer records it).
    pub(super) fn attribute(
        span: &tracing::Span,
        key: &'static str,
        value: impl Into<opentelemetry::Value>,
    ) {
        span.set_attribute(key, value);
    }

    /// Marks the span failed: status ERROR and `error.type`.
    pub(super) fn failed(span: &tracing::Span, error_type: &str, description: &str) {
        span.set_attribute("error.type", error_type.to_owned());
        span.set_status(Status::error(description.to_owned()));
    }

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
