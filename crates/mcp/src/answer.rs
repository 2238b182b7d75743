//! A server's `tools/call` result as the runtime's [`HostAnswer`].
//!
//! The one thing to know: binary content is bounded per answer ([`MAX_BLOB_BYTES`] after
//! decoding); a piece past the bound, or one that is not base64, becomes a sentence the
//! model reads instead of bytes, and every text is redacted.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use archmax_vm::tool_host::{Content, HostAnswer};

use crate::redact::Redactor;

/// The most binary content (images, audio, embedded blobs) one answer may carry.
pub const MAX_BLOB_BYTES: usize = 10 * 1024 * 1024;

/// Decodes blobs against the answer's remaining budget.
struct Blobs {
    remaining: usize,
}

impl Blobs {
    fn decode(&mut self, kind: &str, mime_type: String, data: &str) -> Content {
        // Base64 is 4 characters for 3 bytes: refuse before decoding anything absurd.
        let estimate = data.len() / 4 * 3;
        if estimate > self.remaining {
            return Content::Text(format!(
                "[{kind} ({mime_type}) of about {estimate} bytes left out: an answer carries at most {MAX_BLOB_BYTES} bytes of binary content]"
            ));
        }
        match BASE64.decode(data.trim()) {
            Ok(bytes) if bytes.len() <= self.remaining => {
                self.remaining -= bytes.len();
                Content::Blob { mime_type, data: bytes }
            }
            Ok(bytes) => Content::Text(format!(
                "[{kind} ({mime_type}) of {} bytes left out: an answer carries at most {MAX_BLOB_BYTES} bytes of binary content]",
                bytes.len()
            )),
            Err(_) => {
                Content::Text(format!("[{kind} ({mime_type}) left out: the server sent data that is not base64]"))
            }
        }
    }
}

/// The answer `server` gave.
pub fn convert(server: &str, result: CallToolResult, redactor: &Redactor) -> HostAnswer {
    let mut blobs = Blobs { remaining: MAX_BLOB_BYTES };
    let mut content: Vec<Content> = result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => Content::Text(redactor.redact(&text.text)),
            ContentBlock::Image(image) => blobs.decode("image", image.mime_type, &image.data),
            ContentBlock::Audio(audio) => blobs.decode("audio", audio.mime_type, &audio.data),
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { uri, mime_type, text, .. } => {
                    Content::ResourceText { uri: redactor.redact(&uri), mime_type, text: redactor.redact(&text) }
                }
                ResourceContents::BlobResourceContents { mime_type, blob, .. } => blobs.decode(
                    "embedded resource",
                    mime_type.unwrap_or_else(|| "application/octet-stream".to_string()),
                    &blob,
                ),
                _ => Content::Text("[an embedded resource of a kind this host does not know was left out]".to_string()),
            },
            ContentBlock::ResourceLink(link) => {
                Content::ResourceLink { uri: redactor.redact(&link.uri), name: redactor.redact(&link.name) }
            }
            _ => Content::Text("[a piece of content of a kind this host does not know was left out]".to_string()),
        })
        .collect();
    if content.is_empty()
        && let Some(structured) = result.structured_content
    {
        content.push(Content::Text(redactor.redact(&structured.to_string())));
    }
    HostAnswer { server: server.to_string(), content, is_error: result.is_error.unwrap_or(false) }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{EmbeddedResource, ImageContent, TextContent};
    use serde_json::json;

    use super::*;

    #[test]
    fn each_kind_of_content_becomes_its_piece_of_the_answer() {
        let mut result = CallToolResult::default();
        result.content = vec![
            ContentBlock::Text(TextContent::new("hello KEY9")),
            ContentBlock::Image(ImageContent::new(BASE64.encode([1u8, 2, 3]), "image/png")),
            ContentBlock::Image(ImageContent::new("@@not base64@@", "image/png")),
            ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text("body", "note://1"))),
        ];
        result.is_error = Some(true);
        let answer = convert("crm", result, &Redactor::new(["KEY9".to_string()]));
        assert_eq!(answer.server, "crm");
        assert!(answer.is_error);
        assert_eq!(answer.content[0], Content::Text("hello [redacted]".to_string()));
        assert_eq!(answer.content[1], Content::Blob { mime_type: "image/png".to_string(), data: vec![1, 2, 3] });
        assert!(matches!(&answer.content[2], Content::Text(text) if text.contains("not base64")));
        assert!(
            matches!(&answer.content[3], Content::ResourceText { uri, text, .. } if uri == "note://1" && text == "body")
        );
    }

    #[test]
    fn blobs_past_the_bound_are_described_not_decoded() {
        let big = "A".repeat(MAX_BLOB_BYTES / 3 * 4 + 8);
        let mut result = CallToolResult::default();
        result.content = vec![ContentBlock::Image(ImageContent::new(big, "image/png"))];
        let answer = convert("crm", result, &Redactor::default());
        assert!(matches!(&answer.content[0], Content::Text(text) if text.contains("left out")), "{:?}", answer.content);
    }

    #[test]
    fn structured_content_alone_is_shown_as_json() {
        let mut result = CallToolResult::default();
        result.structured_content = Some(json!({"sum": 3}));
        let answer = convert("crm", result, &Redactor::default());
        assert_eq!(answer.content, vec![Content::Text("{\"sum\":3}".to_string())]);
        assert!(!answer.is_error);
    }
}
