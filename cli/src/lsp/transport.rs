//! JSON-RPC framing over a byte stream: `Content-Length` headers, a JSON body.
//!
//! The one thing to know: a frame whose body is not JSON, or not a JSON-RPC message, is
//! answered (`-32700` parse error, `-32600` invalid request, with the request's id when it
//! had one) and the stream goes on; only a broken header or the end of input stops reading.
//! A body is bounded by [`MAX_BODY`], so a lying `Content-Length` cannot exhaust memory.

use std::io::{self, BufRead, Write};

use lsp_server::{ErrorCode, Message};
use serde_json::{Value, json};

/// The largest message body read, in bytes.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// One frame read from the client.
#[derive(Debug)]
pub enum Incoming {
    Message(Message),
    /// A frame that was read whole but is not a message: the answer to send back.
    Malformed(Value),
}

/// Reads the next frame; `Ok(None)` at the end of input.
pub fn read_frame(reader: &mut impl BufRead) -> io::Result<Option<Incoming>> {
    let mut length: Option<usize> = None;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("malformed header `{header}`")));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let size = value
                .trim()
                .parse::<usize>()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "Content-Length is not a number"))?;
            if size > MAX_BODY {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "Content-Length exceeds the bound"));
            }
            length = Some(size);
        }
    }
    let mut body = vec![0u8; length.unwrap_or(0)];
    reader.read_exact(&mut body)?;
    Ok(Some(decode(&body)))
}

fn decode(body: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(error) => return Incoming::Malformed(error_frame(Value::Null, ErrorCode::ParseError, &error.to_string())),
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    match serde_json::from_value::<Message>(value) {
        Ok(message) => Incoming::Message(message),
        Err(error) => Incoming::Malformed(error_frame(id, ErrorCode::InvalidRequest, &error.to_string())),
    }
}

/// An error response with any id, `null` included (which `lsp_server` cannot express).
pub fn error_frame(id: Value, code: ErrorCode, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code as i32, "message": message } })
}

/// Writes one frame and flushes it.
pub fn write_frame(writer: &mut impl Write, body: &Value) -> io::Result<()> {
    let text = serde_json::to_string(body).map_err(io::Error::other)?;
    write!(writer, "Content-Length: {}\r\n\r\n{text}", text.len())?;
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_json_is_answered_and_the_next_frame_still_reads() {
        let input =
            "Content-Length: 3\r\n\r\n{x}Content-Length: 40\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"initialized\"}";
        let mut reader = io::BufReader::new(input.as_bytes());
        match read_frame(&mut reader) {
            Ok(Some(Incoming::Malformed(answer))) => assert_eq!(answer["error"]["code"], -32700),
            other => panic!("expected a parse error, got {other:?}"),
        }
        assert!(matches!(read_frame(&mut reader), Ok(Some(Incoming::Message(Message::Notification(_))))));
        assert!(matches!(read_frame(&mut reader), Ok(None)));
    }

    #[test]
    fn an_oversized_length_is_refused_before_anything_is_allocated() {
        let input = format!("Content-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert!(read_frame(&mut io::BufReader::new(input.as_bytes())).is_err());
    }
}
