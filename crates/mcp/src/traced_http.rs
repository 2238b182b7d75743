//! The HTTP client under the streamable HTTP transport: rmcp's reqwest client, with each
//! request's W3C trace context also sent as HTTP headers.
//!
//! A tool call already carries `traceparent` and `tracestate` in its `_meta` (MCP's
//! SEP-414, see `trace_context` in the crate root), which an MCP server reads. An HTTP
//! server is usually traced by middleware in front of it that knows nothing of MCP and
//! reads only the W3C headers, so [`TracedHttp`] copies the two fields from the message's
//! `_meta` into headers of the POST that carries it. Nothing else differs from rmcp's own
//! client: the same connection settings, the same redirect rule, and every call delegated.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// How many same-origin redirects one request follows (rmcp's own client: ten).
const MAX_REDIRECTS: usize = 10;

/// rmcp's reqwest client plus the trace context headers.
#[derive(Clone)]
pub(crate) struct TracedHttp(reqwest::Client);

impl TracedHttp {
    /// The client rmcp builds by default: no idle pooling (a reused connection whose last
    /// body was not read stalls on delayed ACKs), and only same-origin 307 and 308
    /// redirects followed, since they keep the POST's body and send the session id and
    /// token nowhere else.
    pub(crate) fn new() -> Result<TracedHttp, String> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
            let same_origin = attempt.previous().first().is_some_and(|first| first.origin() == attempt.url().origin());
            if keeps_body && same_origin && attempt.previous().len() <= MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(redirects)
            .build()
            .map_err(|error| format!("the HTTP client could not be built: {error}"))?;
        Ok(TracedHttp(client))
    }
}

/// `headers` plus `traceparent` and `tracestate` from the request's `_meta`, when it has
/// them; values that are not valid header text are left out (the `_meta` still has them).
fn with_trace_context(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let JsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(&request.request) else {
        return headers;
    };
    let Some(meta) = fields.get("params").and_then(|params| params.get("_meta")) else {
        return headers;
    };
    for name in ["traceparent", "tracestate"] {
        if let Some(value) = meta.get(name).and_then(serde_json::Value::as_str)
            && let Ok(value) = HeaderValue::from_str(value)
        {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

impl StreamableHttpClient for TracedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace_context(&message, custom_headers);
        self.0.post_message(uri, message, session_id, auth_header, headers).await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace_context(&message, custom_headers);
        self.0
            .post_message_with_max_sse_event_size(uri, message, session_id, auth_header, headers, max_sse_event_size)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace_context(&message, custom_headers);
        self.0.post_message_with_response_limits(uri, message, session_id, auth_header, headers, limits).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.0.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequestParams, ClientRequest, JsonRpcRequest, MetaObject, Request, RequestId};

    /// The headers as text pairs, sorted.
    fn shown(headers: &HashMap<HeaderName, HeaderValue>) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> =
            headers.iter().map(|(name, value)| (name.to_string(), value.to_str().unwrap_or("?").to_string())).collect();
        pairs.sort();
        pairs
    }

    fn call(meta: Option<MetaObject>) -> ClientJsonRpcMessage {
        let mut params = CallToolRequestParams::new("echo");
        params.meta = meta.map(Into::into);
        JsonRpcMessage::Request(JsonRpcRequest::new(
            RequestId::Number(1),
            ClientRequest::CallToolRequest(Request::new(params)),
        ))
    }

    #[test]
    fn a_call_with_trace_context_in_its_meta_gets_the_headers_too() {
        let mut meta = MetaObject::new();
        meta.set_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        meta.set_tracestate("vendor=1");
        let headers = with_trace_context(&call(Some(meta)), HashMap::new());
        let expected =
            [("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), ("tracestate", "vendor=1")];
        let expected: Vec<(String, String)> =
            expected.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
        assert_eq!(shown(&headers), expected);
    }

    #[test]
    fn without_trace_context_the_headers_are_left_as_they_were() {
        let mut given = HashMap::new();
        given.insert(HeaderName::from_static("x-extra"), HeaderValue::from_static("kept"));
        let headers = with_trace_context(&call(None), given);
        assert_eq!(shown(&headers), vec![("x-extra".to_string(), "kept".to_string())]);
    }

    #[test]
    fn a_value_that_is_not_header_text_is_left_out() {
        let mut meta = MetaObject::new();
        meta.set_traceparent("00-bad\nvalue");
        assert!(with_trace_context(&call(Some(meta)), HashMap::new()).is_empty());
    }
}
