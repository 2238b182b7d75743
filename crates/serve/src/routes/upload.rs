//! `multipart/form-data` bodies: how a start or a delivery hands files to a trigger's
//! `type: file` inputs over HTTP.
//!
//! The one thing to know: an upload is the JSON request plus files, nothing else. The
//! part named `request` (optional) holds the same JSON body the route takes as
//! `application/json`; every other part is a file, named after the `file` input it
//! fills, its file name used only for its extension. The checks against the trigger
//! (`maxSize`, `accept`, which input) and the copy into the session are the runtime's
//! ([`archmax_vm::handover`]), as for `--file`.
//!
//! Hostile senders are bounded before the runtime sees a byte: the whole body at
//! [`files_limit`] (413), each file at the session file limit and the request at the
//! body limit (413 naming the part), at most [`MAX_PARTS`] parts with names of at most
//! [`MAX_NAME_BYTES`] (400), and at most [`UPLOADS_AT_ONCE`] uploads per runner, of which
//! one identity holds at most [`UPLOADS_PER_IDENTITY`] (429 with `Retry-After`), so one
//! caller cannot take every slot from the others. An upload's permit is held from its first byte until its turn
//! has copied the files ([`Uploaded`] travels with the turn), so queued turns cannot
//! pile up files in memory either: uploads hold at most [`UPLOADS_AT_ONCE`] times about
//! three copies of [`files_limit`] (the body, the parser's buffer, the parts) while they
//! are split, and one copy each afterwards.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};

use archmax_vm::handover::HandedFile;
use archmax_vm::stdlib::limits::MAX_FILE_BYTES;

use crate::error::ApiError;
use crate::server::Server;

/// The most parts an upload may have: the request and the files.
pub(crate) const MAX_PARTS: usize = 16;

/// Uploads a runner holds at once, from their first byte until their turn has copied
/// the files; one more is answered 429.
pub(crate) const UPLOADS_AT_ONCE: usize = 4;

/// Of those, the uploads one identity holds at once.
pub(crate) const UPLOADS_PER_IDENTITY: usize = 2;

/// The slots of a runner's uploads: [`UPLOADS_AT_ONCE`] in all, and the count each
/// identity holds (an identity holding none has no entry).
pub(crate) struct UploadSlots {
    all: std::sync::Arc<tokio::sync::Semaphore>,
    held: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

impl Default for UploadSlots {
    fn default() -> UploadSlots {
        UploadSlots { all: std::sync::Arc::new(tokio::sync::Semaphore::new(UPLOADS_AT_ONCE)), held: Default::default() }
    }
}

impl UploadSlots {
    /// A slot for `identity`, or the refusal saying which bound it met.
    fn take(&self, identity: &str) -> Result<Slot, ApiError> {
        let busy =
            |message: String| ApiError::new(StatusCode::TOO_MANY_REQUESTS, "server.saturated", message).retry_after(1);
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = held.get(identity).copied().unwrap_or(0);
        if count >= UPLOADS_PER_IDENTITY {
            return Err(busy(format!(
                "you are sending {UPLOADS_PER_IDENTITY} uploads to this runner already; send this one when one of \
                 them has been answered"
            )));
        }
        let Ok(permit) = std::sync::Arc::clone(&self.all).try_acquire_owned() else {
            return Err(busy(format!(
                "this runner is reading {UPLOADS_AT_ONCE} uploads already; send it again in a moment"
            )));
        };
        held.insert(identity.to_string(), count + 1);
        Ok(Slot { _permit: permit, identity: identity.to_string(), held: std::sync::Arc::clone(&self.held) })
    }
}

/// One upload's slot, given back when dropped.
struct Slot {
    _permit: tokio::sync::OwnedSemaphorePermit,
    identity: String,
    held: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.identity) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.identity);
            }
        }
    }
}

/// The longest part name or file name an upload may use, in bytes.
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// The files of an upload, with the permit that counts them against
/// [`UPLOADS_AT_ONCE`] until they are dropped (after the turn copied them).
#[derive(Default)]
pub struct Uploaded {
    pub files: Vec<HandedFile>,
    permit: Option<Slot>,
}

impl Uploaded {
    /// Files handed over without a permit (none, from a JSON body).
    pub fn none() -> Uploaded {
        Uploaded::default()
    }

    /// Takes the files, keeping the permit to be held until the turn ends.
    pub fn take(self) -> (Vec<HandedFile>, UploadPermit) {
        (self.files, UploadPermit(self.permit))
    }
}

/// The permit of an upload, held by its turn.
pub struct UploadPermit(#[allow(dead_code)] Option<Slot>);

/// The most the files of one upload may hold together, in bytes.
const FILES_BYTES: usize = 4 * MAX_FILE_BYTES as usize;

/// The name of the part that holds the JSON request.
pub(crate) const REQUEST_PART: &str = "request";

/// The largest upload body a server with `body_limit` takes.
pub(crate) fn files_limit(body_limit: usize) -> usize {
    body_limit.saturating_add(FILES_BYTES)
}

/// The boundary of a `multipart/form-data` body, `None` for any other body; a multipart
/// body without a usable boundary is a 400.
pub(crate) fn boundary(headers: &HeaderMap) -> Option<Result<String, ApiError>> {
    let kind = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = kind.split(';').next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    Some(multer::parse_boundary(kind).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "request.invalid",
            "a multipart/form-data body needs a `boundary` in its Content-Type",
        )
    }))
}

/// An upload, read: the JSON request (`{}` without a `request` part), the text fields of
/// a web form, and the files.
pub(crate) struct Upload {
    pub body: Value,
    pub fields: Vec<(String, String)>,
    pub files: Uploaded,
}

/// Who sent an upload, which says how its parts are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// The API: the part `request` is the JSON request, every other part a file named
    /// after its input.
    Api,
    /// The inbox's generated forms, as a browser sends them: a part without a file name
    /// is a text field, and a file part is named `field.<input>`; a file control left
    /// empty (no file name, no bytes) is no file.
    Form,
}

/// Reads an upload of `identity` whose boundary is `boundary`. The body is read whole first (bounded,
/// and refused past [`files_limit`] as every body is refused past its limit), then split.
/// `text_limit` bounds the request part, or a form's text fields together.
pub(crate) async fn read(
    headers: &HeaderMap,
    body: Body,
    (boundary, layout): (String, Layout),
    (server, identity): (&Server, &str),
    text_limit: usize,
) -> Result<Upload, ApiError> {
    let permit = server.uploads.take(identity)?;
    let bytes = super::extract::body_bytes(headers, body, files_limit(text_limit)).await?;
    let mut upload = split(bytes, (boundary, layout), text_limit).await?;
    upload.files.permit = Some(permit);
    Ok(upload)
}

/// The parts of an upload's bytes.
async fn split(bytes: Bytes, (boundary, layout): (String, Layout), text_limit: usize) -> Result<Upload, ApiError> {
    let stream = futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(bytes) });
    let mut parts = multer::Multipart::new(stream, boundary);
    let mut body = None;
    let mut fields = Vec::new();
    let mut text_left = text_limit;
    let mut files = Vec::new();
    let mut count = 0;
    while let Some(mut part) = parts.next_field().await.map_err(malformed)? {
        count += 1;
        if count > MAX_PARTS {
            return Err(invalid("body", format!("an upload has at most {MAX_PARTS} parts")));
        }
        let Some(name) = part.name().map(str::to_string).filter(|name| !name.is_empty()) else {
            return Err(invalid(
                "body",
                "every part needs a name: `request` for the JSON request, else the file input it fills".to_string(),
            ));
        };
        let too_long = |what: &str| {
            invalid("body", format!("a part's {what} is longer than {MAX_NAME_BYTES} bytes; use a shorter one"))
        };
        if name.len() > MAX_NAME_BYTES {
            return Err(too_long("name"));
        }
        if part.file_name().is_some_and(|file_name| file_name.len() > MAX_NAME_BYTES) {
            return Err(too_long("file name"));
        }
        if layout == Layout::Form {
            match part.file_name().map(str::to_string) {
                None => {
                    let text = bounded(&mut part, &name, text_left).await?;
                    text_left -= text.len();
                    fields.push((name, String::from_utf8_lossy(&text).into_owned()));
                }
                Some(file_name) => {
                    let bytes = bounded(&mut part, &name, MAX_FILE_BYTES as usize).await?;
                    if file_name.is_empty() && bytes.is_empty() {
                        continue;
                    }
                    let Some(input) = name.strip_prefix("field.") else {
                        return Err(invalid(&name, format!("the form has no file control `{name}`")));
                    };
                    files.push(HandedFile { input: Some(input.to_string()), name: file_name, bytes });
                }
            }
            continue;
        }
        if name == REQUEST_PART {
            if body.is_some() {
                return Err(invalid(REQUEST_PART, "the `request` part is given twice".to_string()));
            }
            let text = bounded(&mut part, &name, text_limit).await?;
            let parsed = if text.is_empty() {
                json!({})
            } else {
                crate::strict_json::parse(&text)
                    .map_err(|error| invalid(REQUEST_PART, format!("the `request` part is not JSON: {error}")))?
            };
            body = Some(parsed);
            continue;
        }
        let Some(file_name) = part.file_name().map(str::to_string) else {
            return Err(invalid(
                &name,
                format!(
                    "part `{name}` has no file name, so it is not a file; send it as a file (with curl, `-F '{name}=@PATH'`), or put values in the `request` part"
                ),
            ));
        };
        let bytes = bounded(&mut part, &name, MAX_FILE_BYTES as usize).await?;
        files.push(HandedFile { input: Some(name), name: file_name, bytes });
    }
    Ok(Upload { body: body.unwrap_or_else(|| json!({})), fields, files: Uploaded { files, permit: None } })
}

/// A part's bytes, refused with 413 naming the part past `limit`.
async fn bounded(part: &mut multer::Field<'_>, name: &str, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = part.chunk().await.map_err(malformed)? {
        if bytes.len() + chunk.len() > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request.too-large",
                format!("part `{name}` is larger than {limit} bytes"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

fn malformed(error: multer::Error) -> ApiError {
    invalid("body", format!("the multipart body does not parse: {error}"))
}

fn invalid(field: &str, problem: String) -> ApiError {
    ApiError::invalid(problem.clone(), &[archmax_vm::FieldProblem { field: field.to_string(), problem }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_identity_holds_at_most_its_share_of_a_runners_upload_slots() {
        let slots = UploadSlots::default();
        let refusal = |taken: Result<Slot, ApiError>| match taken {
            Err(error) => (error.status, error.message),
            Ok(_) => panic!("a slot past the bound was given"),
        };
        let mine = [slots.take("ana").expect("first"), slots.take("ana").expect("second")];
        let (status, message) = refusal(slots.take("ana"));
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(message.starts_with("you are sending 2 uploads to this runner already"), "{message}");
        // Others still get the rest of the runner's slots, and then the runner is full.
        let theirs = [slots.take("ben").expect("ben"), slots.take("cy").expect("cy")];
        let (_, message) = refusal(slots.take("dee"));
        assert_eq!(message, "this runner is reading 4 uploads already; send it again in a moment");
        // A slot given back is free again, for anyone.
        drop(mine);
        assert!(slots.held.lock().expect("held").get("ana").is_none(), "no count is left behind");
        let again = [slots.take("dee").expect("dee"), slots.take("ana").expect("ana again")];
        drop((theirs, again));
        assert!(slots.held.lock().expect("held").is_empty());
        assert_eq!(slots.all.available_permits(), UPLOADS_AT_ONCE);
    }

    fn body(parts: &[(&str, Option<&str>, &str)]) -> Bytes {
        let mut text = String::new();
        for (name, file, content) in parts {
            text.push_str("--B\r\n");
            match file {
                Some(file) => text
                    .push_str(&format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\n\r\n")),
                None => text.push_str(&format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n")),
            }
            text.push_str(content);
            text.push_str("\r\n");
        }
        text.push_str("--B--\r\n");
        Bytes::from(text)
    }

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().build().expect("executor").block_on(future)
    }

    #[test]
    fn an_upload_is_the_request_part_and_one_file_per_named_part() {
        let parts = [("request", None, r#"{"message":"hi"}"#), ("receipt", Some("Scan.PDF"), "%PDF-1.7")];
        let upload = run(split(body(&parts), ("B".into(), Layout::Api), 1024))
            .unwrap_or_else(|error| panic!("parses: {}", error.message));
        assert_eq!(upload.body, json!({ "message": "hi" }));
        assert_eq!(upload.files.files.len(), 1);
        assert_eq!(upload.files.files[0].input.as_deref(), Some("receipt"));
        assert_eq!(upload.files.files[0].name, "Scan.PDF");
        assert_eq!(upload.files.files[0].bytes, b"%PDF-1.7");
    }

    #[test]
    fn a_form_upload_is_text_fields_and_the_files_chosen() {
        let parts = [
            ("csrf", None, "token"),
            ("field.note", None, "hello"),
            ("field.slip", Some("Slip.txt"), "1 x board"),
            ("field.photo", Some(""), ""),
        ];
        let upload = run(split(body(&parts), ("B".into(), Layout::Form), 1024))
            .unwrap_or_else(|error| panic!("parses: {}", error.message));
        assert_eq!(upload.fields, [("csrf".to_string(), "token".to_string()), ("field.note".into(), "hello".into())]);
        assert_eq!(upload.files.files.len(), 1, "an empty file control is no file");
        assert_eq!(upload.files.files[0].input.as_deref(), Some("slip"));
        let refused = run(split(body(&[("other", Some("a.txt"), "x")]), ("B".into(), Layout::Form), 1024))
            .err()
            .expect("refused");
        assert!(refused.message.contains("no file control `other`"), "{}", refused.message);
        let long = run(split(body(&[("a", None, "12345"), ("b", None, "67890")]), ("B".into(), Layout::Form), 8))
            .err()
            .expect("the text fields together are bounded");
        assert_eq!(long.status, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn what_an_upload_cannot_be_is_refused_naming_it() {
        let refused = |parts: &[(&str, Option<&str>, &str)], limit: usize| {
            run(split(body(parts), ("B".into(), Layout::Api), limit)).err().expect("refused")
        };
        let twice = refused(&[("request", None, "{}"), ("request", None, "{}")], 1024);
        assert!(twice.message.contains("twice"), "{}", twice.message);
        let not_json = refused(&[("request", None, "{")], 1024);
        assert!(not_json.message.contains("not JSON"), "{}", not_json.message);
        let large = refused(&[("request", None, r#"{"message":"a long one"}"#)], 8);
        assert_eq!(large.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(large.message.contains("part `request`"), "{}", large.message);
        let many: Vec<(&str, Option<&str>, &str)> = vec![("f", Some("a.txt"), "x"); MAX_PARTS + 1];
        assert!(refused(&many, 1024).message.contains("at most 16 parts"));
        let unnamed = refused(&[("", Some("a.txt"), "x")], 1024);
        assert!(unnamed.message.contains("needs a name"), "{}", unnamed.message);
        let broken = run(split(Bytes::from_static(b"--B\r\nno headers"), ("B".into(), Layout::Api), 1024))
            .err()
            .expect("refused");
        assert!(broken.message.contains("does not parse"), "{}", broken.message);
    }
}
