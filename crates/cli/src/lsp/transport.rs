//! JSON-RPC framing over a byte stream: `Content-Length` headers, a JSON body.
//!
//! The one thing to know: a frame whose body is not JSON, or not a JSON-RPC message, is
//! answered (`-32700` parse error, `-32600` invalid request, with the request's id when it
//! had one) and the stream goes on; only a broken header or the end of input stops reading.
//! A body is bounded by [`MAX_BODY`], so a lying `Content-Length` cannot exhaust memory, and
//! a frame's header block by [`MAX_HEADER`], so a line that never ends (or headers that
//! never stop) is refused after that many bytes instead of being read forever.

use std::io::{self, BufRead, Read, Write};

use lsp_server::{ErrorCode, Message};
use serde_json::{Value, json};

/// The largest message body read, in bytes.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// The most bytes of one frame's header block: every header line, the blank lines before
/// them and the empty line that ends them. Real clients send one or two short headers.
pub const MAX_HEADER: usize = 8 * 1024;

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
    let mut header_bytes = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        // One byte past what is left of the bound: reading it means the block is too long,
        // and no more than that is ever taken from the stream.
        let left = MAX_HEADER.saturating_sub(header_bytes);
        let read = (&mut *reader).take(left as u64 + 1).read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(None);
        }
        header_bytes += read;
        if header_bytes > MAX_HEADER {
            return Err(invalid_header(format!(
                "a frame's header block is longer than {MAX_HEADER} bytes (a header line that never ends, or headers that never stop); send `Content-Length: N` and an empty line"
            )));
        }
        let text = String::from_utf8_lossy(&line);
        let header = text.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(invalid_header(format!("malformed header `{header}`")));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let size = value.trim().parse::<usize>().map_err(|_| invalid_header("Content-Length is not a number"))?;
            if size > MAX_BODY {
                return Err(invalid_header("Content-Length exceeds the bound"));
            }
            length = Some(size);
        }
    }
    let mut body = vec![0u8; length.unwrap_or(0)];
    reader.read_exact(&mut body)?;
    Ok(Some(decode(&body)))
}

fn invalid_header(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
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

    /// Feeds `unit` into a pipe over and over (up to 16 MiB, then closes it) while
    /// [`read_frame`] reads the other end; what it returned and how many bytes went in
    /// before the reader stopped and closed its end.
    fn read_endless(unit: &'static [u8]) -> (io::Result<Option<Incoming>>, usize) {
        const OFFERED: usize = 16 * 1024 * 1024;
        let (reader, mut writer) = io::pipe().expect("a pipe");
        let feeding = std::thread::spawn(move || {
            let chunk = unit.repeat(4096 / unit.len());
            let mut written = 0;
            while written < OFFERED {
                match writer.write(&chunk) {
                    Ok(count) => written += count,
                    // The reader closed its end: the writer learns it here (the test
                    // process ignores SIGPIPE, as Rust programs do).
                    Err(_) => break,
                }
            }
            written
        });
        let mut reader = io::BufReader::new(reader);
        let read = read_frame(&mut reader);
        drop(reader);
        (read, feeding.join().expect("the writer ends"))
    }

    #[test]
    fn a_header_line_that_never_ends_is_refused_at_the_bound() {
        let (read, written) = read_endless(b"X");
        let error = read.expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains(&MAX_HEADER.to_string()), "{error}");
        // What went in: the bound, the reader's buffer and the pipe's buffer at most.
        assert!(written < 1024 * 1024, "the reader took {written} bytes before refusing");
    }

    #[test]
    fn headers_that_never_stop_are_refused_at_the_bound() {
        let (read, written) = read_endless(b"X-Padding: more\r\n");
        assert!(read.is_err_and(|error| error.to_string().contains("header block")));
        assert!(written < 1024 * 1024, "the reader took {written} bytes before refusing");
        let (read, written) = read_endless(b"\r\n");
        assert!(read.is_err(), "empty lines forever are refused too");
        assert!(written < 1024 * 1024, "the reader took {written} bytes before refusing");
    }

    #[test]
    fn a_header_block_just_under_the_bound_still_reads() {
        let padding = format!("X-Padding: {}\r\n", "p".repeat(MAX_HEADER - 100));
        let input = format!("{padding}Content-Length: 2\r\n\r\n{{}}");
        let read = read_frame(&mut io::BufReader::new(input.as_bytes()));
        assert!(matches!(read, Ok(Some(Incoming::Malformed(_)))), "{read:?}");
    }

    #[test]
    fn an_oversized_length_is_refused_before_anything_is_allocated() {
        let input = format!("Content-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert!(read_frame(&mut io::BufReader::new(input.as_bytes())).is_err());
    }
}
