//! The standard OpenTelemetry variables, read once into [`TraceSettings`].
//!
//! The one thing to know: tracing is off unless an endpoint is set
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, used as given, or `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! to which `/v1/traces` is added), and every other variable is checked only then. A
//! value that does not parse is an error naming the variable and what it accepts; it is
//! never ignored, so an operator who set one learns at start-up that it was wrong.

use std::time::Duration;

/// How spans are sampled (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    AlwaysOn,
    AlwaysOff,
    /// A share of traces, by trace id.
    Ratio(f64),
    /// As the incoming parent says; a root span sampled by the inner rule.
    ParentBased(ParentlessRule),
}

/// What a parent-based sampler does for a span without a parent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParentlessRule {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
}

/// Tracing as the variables configure it.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSettings {
    /// Where spans are sent: the full URL of the OTLP/HTTP traces endpoint.
    pub endpoint: String,
    /// Headers sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`, and the traces one).
    pub headers: Vec<(String, String)>,
    /// `service.name` of the resource (`OTEL_SERVICE_NAME`, else the default given).
    pub service_name: String,
    pub sampling: Sampling,
    /// How long one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT`, milliseconds).
    pub timeout: Duration,
    /// Prompts and completions go on model call spans
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    pub capture_content: bool,
}

/// A variable whose value cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{variable}={value:?} is not accepted: {problem}")]
pub struct SettingError {
    pub variable: &'static str,
    pub value: String,
    pub problem: String,
}

/// The only protocol this build exports with.
pub const SUPPORTED_PROTOCOL: &str = "http/protobuf";

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl TraceSettings {
    /// Reads the variables through `lookup` (the process environment, or a test's table).
    /// `Ok(None)` when tracing is off: no endpoint, `OTEL_SDK_DISABLED=true`, or
    /// `OTEL_TRACES_EXPORTER=none`.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        default_service: &str,
    ) -> Result<Option<TraceSettings>, SettingError> {
        let read = |name: &str| lookup(name).map(|value| value.trim().to_string()).filter(|value| !value.is_empty());
        if let Some(value) = read("OTEL_SDK_DISABLED")
            && flag("OTEL_SDK_DISABLED", &value)?
        {
            return Ok(None);
        }
        if let Some(value) = read("OTEL_TRACES_EXPORTER") {
            match value.as_str() {
                "none" => return Ok(None),
                "otlp" => {}
                _ => return Err(problem("OTEL_TRACES_EXPORTER", &value, "use `otlp` (the default) or `none`")),
            }
        }
        let endpoint = match (read("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), read("OTEL_EXPORTER_OTLP_ENDPOINT")) {
            (Some(traces), _) => checked_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &traces)?,
            (None, Some(base)) => {
                let base = checked_url("OTEL_EXPORTER_OTLP_ENDPOINT", &base)?;
                format!("{}/v1/traces", base.trim_end_matches('/'))
            }
            (None, None) => return Ok(None),
        };
        for variable in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let Some(protocol) = read(variable) {
                if protocol != SUPPORTED_PROTOCOL {
                    let why = format!(
                        "this build exports only `{SUPPORTED_PROTOCOL}` (OTLP over HTTP); set it, or unset the variable"
                    );
                    return Err(problem(variable, &protocol, &why));
                }
                break;
            }
        }
        let mut headers = Vec::new();
        for variable in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            if let Some(value) = read(variable) {
                for (name, value) in parse_headers(variable, &value)? {
                    headers.retain(|(existing, _): &(String, String)| !existing.eq_ignore_ascii_case(&name));
                    headers.push((name, value));
                }
            }
        }
        let timeout = match read("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .map(|value| ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", value))
            .or_else(|| read("OTEL_EXPORTER_OTLP_TIMEOUT").map(|value| ("OTEL_EXPORTER_OTLP_TIMEOUT", value)))
        {
            Some((variable, value)) => match value.parse::<u64>() {
                Ok(millis) if millis > 0 => Duration::from_millis(millis),
                _ => return Err(problem(variable, &value, "give a whole number of milliseconds above 0")),
            },
            None => DEFAULT_TIMEOUT,
        };
        let sampling = sampling(read("OTEL_TRACES_SAMPLER"), read("OTEL_TRACES_SAMPLER_ARG"))?;
        let capture_content = match read("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
            Some(value) => flag("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", &value)?,
            None => false,
        };
        let service_name = read("OTEL_SERVICE_NAME").unwrap_or_else(|| default_service.to_string());
        Ok(Some(TraceSettings { endpoint, headers, service_name, sampling, timeout, capture_content }))
    }
}

fn problem(variable: &'static str, value: &str, why: &str) -> SettingError {
    SettingError { variable, value: value.to_string(), problem: why.to_string() }
}

fn flag(variable: &'static str, value: &str) -> Result<bool, SettingError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(problem(variable, value, "use `true` or `false`")),
    }
}

fn checked_url(variable: &'static str, value: &str) -> Result<String, SettingError> {
    let rest = value.strip_prefix("http://").or_else(|| value.strip_prefix("https://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') && !value.chars().any(char::is_whitespace) => {
            Ok(value.to_string())
        }
        _ => {
            Err(problem(variable, value, "give an http:// or https:// URL with a host, such as http://localhost:4318"))
        }
    }
}

/// `name=value` pairs separated by commas; values are percent-decoded (the W3C baggage
/// format the specification names). A refusal never repeats the variable's text, nor a
/// pair or a name of it: these variables carry credentials, and a refusal goes to logs.
fn parse_headers(variable: &'static str, text: &str) -> Result<Vec<(String, String)>, SettingError> {
    const HIDDEN: &str = "(not shown: it may hold credentials)";
    let mut headers = Vec::new();
    for (at, pair) in text.split(',').map(str::trim).filter(|pair| !pair.is_empty()).enumerate() {
        let place = at + 1;
        let Some((name, value)) = pair.split_once('=') else {
            return Err(problem(variable, HIDDEN, &format!("pair {place} is not `name=value`")));
        };
        let name = name.trim();
        let valid_name = !name.is_empty()
            && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte));
        if !valid_name {
            return Err(problem(variable, HIDDEN, &format!("the name of pair {place} is not a header name")));
        }
        let value = percent_encoding::percent_decode_str(value.trim()).decode_utf8().map_err(|_| {
            problem(variable, HIDDEN, &format!("the value of `{name}` is not UTF-8 once percent-decoded"))
        })?;
        if value.chars().any(|c| c.is_control()) {
            return Err(problem(variable, HIDDEN, &format!("the value of `{name}` holds a control character")));
        }
        headers.push((name.to_string(), value.into_owned()));
    }
    Ok(headers)
}

fn sampling(sampler: Option<String>, argument: Option<String>) -> Result<Sampling, SettingError> {
    let ratio = || -> Result<f64, SettingError> {
        match &argument {
            None => Ok(1.0),
            Some(text) => match text.parse::<f64>() {
                Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
                _ => Err(problem("OTEL_TRACES_SAMPLER_ARG", text, "give a ratio between 0 and 1, such as 0.25")),
            },
        }
    };
    let Some(sampler) = sampler else {
        return Ok(Sampling::ParentBased(ParentlessRule::AlwaysOn));
    };
    Ok(match sampler.as_str() {
        "always_on" => Sampling::AlwaysOn,
        "always_off" => Sampling::AlwaysOff,
        "traceidratio" => Sampling::Ratio(ratio()?),
        "parentbased_always_on" => Sampling::ParentBased(ParentlessRule::AlwaysOn),
        "parentbased_always_off" => Sampling::ParentBased(ParentlessRule::AlwaysOff),
        "parentbased_traceidratio" => Sampling::ParentBased(ParentlessRule::Ratio(ratio()?)),
        other => {
            return Err(problem(
                "OTEL_TRACES_SAMPLER",
                other,
                "use always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off or parentbased_traceidratio",
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Option<TraceSettings>, SettingError> {
        let table: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TraceSettings::from_lookup(
            |name| table.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone()),
            "archmax",
        )
    }

    #[test]
    fn no_endpoint_means_tracing_is_off_whatever_else_is_set() {
        assert_eq!(settings(&[("OTEL_SERVICE_NAME", "desk"), ("OTEL_TRACES_SAMPLER", "bogus")]), Ok(None));
    }

    #[test]
    fn the_base_endpoint_gets_the_traces_path_and_the_traces_endpoint_is_used_as_given() {
        let base = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]).unwrap().unwrap();
        assert_eq!(base.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(base.service_name, "archmax");
        assert_eq!(base.sampling, Sampling::ParentBased(ParentlessRule::AlwaysOn));
        assert!(!base.capture_content);
        let both = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces.example/ingest"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(both.endpoint, "https://traces.example/ingest");
    }

    #[test]
    fn disabled_sdk_or_exporter_none_turns_tracing_off() {
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")];
        assert_eq!(settings(&[on[0], ("OTEL_SDK_DISABLED", "true")]), Ok(None));
        assert_eq!(settings(&[on[0], ("OTEL_TRACES_EXPORTER", "none")]), Ok(None));
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        let cases = [
            (vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")], "OTEL_EXPORTER_OTLP_ENDPOINT"),
            (vec![on, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], "OTEL_EXPORTER_OTLP_PROTOCOL"),
            (vec![on, ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")], "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
            (vec![on, ("OTEL_EXPORTER_OTLP_HEADERS", "api-key")], "OTEL_EXPORTER_OTLP_HEADERS"),
            (vec![on, ("OTEL_TRACES_SAMPLER", "sometimes")], "OTEL_TRACES_SAMPLER"),
            (
                vec![on, ("OTEL_TRACES_SAMPLER", "traceidratio"), ("OTEL_TRACES_SAMPLER_ARG", "2")],
                "OTEL_TRACES_SAMPLER_ARG",
            ),
            (
                vec![on, ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "yes")],
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            ),
            (vec![on, ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")], "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ];
        for (pairs, variable) in cases {
            let error = settings(&pairs).expect_err(variable);
            assert_eq!(error.variable, variable);
            assert!(error.to_string().starts_with(variable), "{error}");
        }
    }

    #[test]
    fn a_refused_headers_variable_never_shows_its_text() {
        for bad in ["authorization=Bearer%20sk-SECRET-1,sk-SECRET-2", "sk-SECRET-3 x=1", "a=%FF%FEsk-SECRET-4"] {
            let error = settings(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
                ("OTEL_EXPORTER_OTLP_HEADERS", bad),
            ])
            .expect_err("refused");
            assert_eq!(error.variable, "OTEL_EXPORTER_OTLP_HEADERS");
            assert!(!error.to_string().contains("SECRET"), "{error}");
        }
    }

    #[test]
    fn headers_are_percent_decoded_and_the_traces_ones_win() {
        let got = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, tenant=one"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "Tenant=two"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "TRUE"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            got.headers,
            vec![("api-key".to_string(), "a b".to_string()), ("Tenant".to_string(), "two".to_string())]
        );
        assert_eq!(got.sampling, Sampling::ParentBased(ParentlessRule::Ratio(0.25)));
        assert!(got.capture_content);
    }
}
