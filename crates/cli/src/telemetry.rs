//! Logging, and exporting spans over OTLP when the standard OpenTelemetry
//! environment asks for it.
//!
//! Logs go to stderr, filtered by `ERRAND_LOG` (default `warn`). When
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
//! set (and `OTEL_SDK_DISABLED` is not `true`, `OTEL_TRACES_EXPORTER` not
//! `none`), the library's enqueue and attempt spans are also exported:
//! OTLP over HTTP with protobuf bodies (opentelemetry-otlp), batched on the
//! SDK's own thread, flushed when the command ends; plain `http://`
//! endpoints only. The exporter reads the rest of the standard variables
//! itself (headers, timeout, the batch processor's delays); the service
//! name is the environment's (`OTEL_SERVICE_NAME`, or `service.name` in
//! `OTEL_RESOURCE_ATTRIBUTES`), else `errand`. The SDK's own warnings (an
//! export that failed, say) are logged like the command's.

use opentelemetry::trace::TracerProvider as _;

use crate::output::errln;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The exporter's provider, to flush and stop when the command ends.
#[derive(Debug)]
pub(crate) struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still buffered and stops the exporter (bounded by
    /// the exporter's own timeout).
    pub(crate) fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            errln!("errand: exporting the last spans failed: {e}");
        }
    }
}

fn set(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// Whether the environment asks for trace export.
fn wanted() -> bool {
    let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let none = set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    let endpoint = set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    endpoint && !disabled && !none
}

fn provider() -> Result<SdkTracerProvider, String> {
    let protocol =
        set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Some(p) = protocol.filter(|p| p != "http/protobuf") {
        return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL is {p:?}, but this errand exports OTLP over HTTP with \
             protobuf only: set it to http/protobuf (or unset it) and point the endpoint at the \
             collector's HTTP port (usually 4318)"
        ));
    }
    let endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .unwrap_or_default();
    if !endpoint.starts_with("http://") {
        return Err(format!(
            "the OTLP endpoint {endpoint:?} is not an http:// address: this errand exports over \
             plain HTTP only; send to a collector next to it (for example \
             http://127.0.0.1:4318) and let that one forward over TLS"
        ));
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| format!("cannot set up the OTLP exporter: {e}"))?;
    // The service name the environment gives (OTEL_SERVICE_NAME or
    // service.name in OTEL_RESOURCE_ATTRIBUTES), else `errand`.
    let named = set("OTEL_SERVICE_NAME").is_some()
        || set("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| {
            a.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    let resource = if named {
        opentelemetry_sdk::Resource::builder().build()
    } else {
        opentelemetry_sdk::Resource::builder()
            .with_service_name("errand")
            .build()
    };
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// Installs the process's subscriber: logs to stderr and, when asked,
/// span export. A program embedding the command may have installed its own
/// subscriber; then nothing is installed here.
pub(crate) fn init() -> Telemetry {
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(errand::log_colours())
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_env("ERRAND_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        );
    let provider = if wanted() {
        match provider() {
            Ok(p) => Some(p),
            Err(e) => {
                errln!("errand: spans are not exported: {e}");
                None
            }
        }
    } else {
        None
    };
    let spans = provider.as_ref().map(|p| {
        // Only the library's enqueue and attempt spans (module
        // errand::spans), whatever ERRAND_LOG says about logs.
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("errand"))
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("errand::spans", tracing::Level::INFO),
            )
    });
    let installed = tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init()
        .is_ok();
    Telemetry {
        provider: provider.filter(|_| installed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_endpoint_variables_turn_export_on() {
        // The test process's environment: none of these are set by the
        // suite, so export is off (a set variable would make this test
        // say why).
        for var in [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ] {
            assert!(set(var).is_none(), "{var} is set in the test environment");
        }
        assert!(!wanted());
    }
}
