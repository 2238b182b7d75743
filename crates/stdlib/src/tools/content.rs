//! What a file holds, as the text tools see it: text, or binary with a MIME type.
//!
//! A file is binary when its extension says so (images other than SVG, audio, video,
//! PDF, PowerPoint, archives) or when its bytes are not UTF-8 or hold a NUL. Reads and
//! searches never hand binary bytes to a model; they report the type and size instead.

/// A file's bytes, classified.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Content {
    Text(String),
    Binary { mime: &'static str },
}

/// MIME type for content that only its bytes showed to be binary.
pub(crate) const OCTET_STREAM: &str = "application/octet-stream";

/// Binary file types by lowercase extension.
const BINARY_EXTENSIONS: [(&str, &str); 44] = [
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("bmp", "image/bmp"),
    ("ico", "image/vnd.microsoft.icon"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("avif", "image/avif"),
    ("heic", "image/heic"),
    ("heif", "image/heif"),
    ("mp3", "audio/mpeg"),
    ("wav", "audio/wav"),
    ("ogg", "audio/ogg"),
    ("oga", "audio/ogg"),
    ("opus", "audio/opus"),
    ("flac", "audio/flac"),
    ("m4a", "audio/mp4"),
    ("aac", "audio/aac"),
    ("weba", "audio/webm"),
    ("mid", "audio/midi"),
    ("mp4", "video/mp4"),
    ("m4v", "video/mp4"),
    ("webm", "video/webm"),
    ("mov", "video/quicktime"),
    ("avi", "video/x-msvideo"),
    ("mkv", "video/x-matroska"),
    ("mpeg", "video/mpeg"),
    ("mpg", "video/mpeg"),
    ("ogv", "video/ogg"),
    ("pdf", "application/pdf"),
    ("ppt", "application/vnd.ms-powerpoint"),
    ("pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tgz", "application/gzip"),
    ("tar", "application/x-tar"),
    ("bz2", "application/x-bzip2"),
    ("xz", "application/x-xz"),
    ("zst", "application/zstd"),
    ("7z", "application/x-7z-compressed"),
    ("rar", "application/vnd.rar"),
    ("jar", "application/java-archive"),
];

/// The MIME type of a path whose extension marks it binary.
pub(crate) fn binary_type_by_name(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let (stem, extension) = name.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    let extension = extension.to_ascii_lowercase();
    BINARY_EXTENSIONS.iter().find(|(known, _)| *known == extension).map(|(_, mime)| *mime)
}

/// Classifies a file's bytes, the name first.
pub(crate) fn classify(path: &str, bytes: Vec<u8>) -> Content {
    if let Some(mime) = binary_type_by_name(path) {
        return Content::Binary { mime };
    }
    if bytes.contains(&0) {
        return Content::Binary { mime: OCTET_STREAM };
    }
    match String::from_utf8(bytes) {
        Ok(text) => Content::Text(text),
        Err(_) => Content::Binary { mime: OCTET_STREAM },
    }
}

/// The MIME type of a file whose first bytes show it binary: a NUL, or bytes that are
/// not UTF-8. `whole` says the head is the whole file; otherwise a character cut off at
/// the head's end is not held against it.
pub(crate) fn binary_head(head: &[u8], whole: bool) -> Option<&'static str> {
    if head.contains(&0) {
        return Some(OCTET_STREAM);
    }
    match std::str::from_utf8(head) {
        Ok(_) => None,
        Err(error) if error.error_len().is_none() && !whole => None,
        Err(_) => Some(OCTET_STREAM),
    }
}

/// A size in words: `512 bytes`, `24.1 KB`, `3.0 MB`.
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes == 1 {
        return "1 byte".to_string();
    }
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut scaled = bytes as f64 / 1024.0;
    let mut unit = 0;
    while scaled >= 1024.0 && unit + 1 < UNITS.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    format!("{scaled:.1} {}", UNITS[unit])
}

/// The answer `read_file` gives for a binary file: an ordinary result, not a failure.
pub(crate) fn binary_notice(path: &str, mime: &str, size: u64) -> String {
    format!(
        "Error: '{path}' is a binary file ({mime}, {}) and was not read; read_file returns text files only.",
        human_size(size)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_mark_binaries_but_svg_is_text() {
        assert_eq!(binary_type_by_name("images/logo.PNG"), Some("image/png"));
        assert_eq!(binary_type_by_name("a/deck.pptx").map(|mime| mime.contains("presentation")), Some(true));
        assert_eq!(binary_type_by_name("report.pdf"), Some("application/pdf"));
        assert_eq!(binary_type_by_name("backup.tar.gz"), Some("application/gzip"));
        assert_eq!(binary_type_by_name("song.mp3"), Some("audio/mpeg"));
        assert_eq!(binary_type_by_name("clip.mov"), Some("video/quicktime"));
        assert_eq!(binary_type_by_name("logo.svg"), None);
        assert_eq!(binary_type_by_name("notes.md"), None);
        assert_eq!(binary_type_by_name(".png"), None, "a dot-file named like an extension is not typed by it");
        assert_eq!(binary_type_by_name("png"), None);
    }

    #[test]
    fn bytes_decide_when_the_name_does_not() {
        assert_eq!(classify("a.txt", b"plain".to_vec()), Content::Text("plain".to_string()));
        assert_eq!(classify("a.txt", b"nul\0inside".to_vec()), Content::Binary { mime: OCTET_STREAM });
        assert_eq!(classify("a.txt", vec![0xff, 0xfe, 0x41]), Content::Binary { mime: OCTET_STREAM });
        assert_eq!(classify("a.png", b"text".to_vec()), Content::Binary { mime: "image/png" });
    }

    #[test]
    fn a_head_is_judged_without_the_rest_of_the_file() {
        assert_eq!(binary_head(b"plain text", true), None);
        assert_eq!(binary_head(b"ab\0", false), Some(OCTET_STREAM));
        assert_eq!(binary_head(&[0x61, 0xff, 0x62], false), Some(OCTET_STREAM));
        let cut = &"é".as_bytes()[..1];
        assert_eq!(binary_head(cut, false), None, "a character cut by the head's end is not binary");
        assert_eq!(binary_head(cut, true), Some(OCTET_STREAM), "but a file that ends mid-character is");
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(human_size(0), "0 bytes");
        assert_eq!(human_size(1), "1 byte");
        assert_eq!(human_size(1023), "1023 bytes");
        assert_eq!(human_size(1024), "1.0 KB");
        assert_eq!(human_size(24_678), "24.1 KB");
        assert_eq!(human_size(3 * 1024 * 1024), "3.0 MB");
        assert_eq!(human_size(5 * 1024 * 1024 * 1024), "5.0 GB");
    }

    #[test]
    fn the_binary_notice_has_the_agreed_shape() {
        assert_eq!(
            binary_notice("scratchpad/logo.png", "image/png", 24_678),
            "Error: 'scratchpad/logo.png' is a binary file (image/png, 24.1 KB) and was not read; \
             read_file returns text files only."
        );
    }
}
