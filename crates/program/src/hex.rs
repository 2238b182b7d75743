//! Lowercase hexadecimal: the one encoder every digest, key id and record name is
//! printed with, and the one decoder that reads them back.
//!
//! The one thing to know: decoding is strict. Only the digits `0-9`, `a-f` and `A-F`
//! are read, two a byte; a sign, a space or an odd digit makes the whole text unreadable.

use std::fmt::Write;

/// `bytes` as lowercase hexadecimal, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        // Writing into a String cannot fail.
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// The bytes `text` spells, two hexadecimal digits (either case) a byte; `None` when
/// it holds anything else or an odd number of digits.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let mut bytes = vec![0u8; text.len() / 2];
    decode_into(text, &mut bytes).then_some(bytes)
}

/// Exactly `N` bytes from exactly `2 * N` hexadecimal digits; `None` otherwise.
///
/// The length is checked before any digit is read, and the bytes are written straight
/// into the array: a key or a digest read this way leaves no copy on the heap, and a
/// long text costs nothing to refuse.
pub fn decode_array<const N: usize>(text: &str) -> Option<[u8; N]> {
    let mut bytes = [0u8; N];
    if decode_into(text, &mut bytes) {
        Some(bytes)
    } else {
        zeroize::Zeroize::zeroize(&mut bytes);
        None
    }
}

/// Fills `out` from `text`, which must be exactly two digits a byte of it; `false`
/// (with `out` partly written) otherwise.
fn decode_into(text: &str, out: &mut [u8]) -> bool {
    let digits = text.as_bytes();
    if digits.len() != out.len() * 2 {
        return false;
    }
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        match pair {
            [high, low] => match (digit(*high), digit(*low)) {
                (Some(high), Some(low)) => *byte = (high << 4) | low,
                _ => return false,
            },
            _ => return false,
        }
    }
    true
}

/// The value of one hexadecimal digit.
fn digit(character: u8) -> Option<u8> {
    match character {
        b'0'..=b'9' => Some(character - b'0'),
        b'a'..=b'f' => Some(character - b'a' + 10),
        b'A'..=b'F' => Some(character - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{decode, decode_array, hex};

    #[test]
    fn two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn decoding_reads_either_case_and_round_trips() {
        assert_eq!(decode("000fA0ff"), Some(vec![0x00, 0x0f, 0xa0, 0xff]));
        assert_eq!(decode(""), Some(Vec::new()));
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&hex(&bytes)), Some(bytes));
    }

    #[test]
    fn anything_but_pairs_of_digits_is_unreadable() {
        for text in ["0", "abc", "0g", "+f", "-1", " 0f", "0f ", "éé", "0x0f"] {
            assert_eq!(decode(text), None, "{text:?}");
        }
    }

    #[test]
    fn an_array_needs_exactly_its_length() {
        assert_eq!(decode_array::<2>("0aff"), Some([0x0a, 0xff]));
        assert_eq!(decode_array::<2>("0a"), None);
        assert_eq!(decode_array::<2>("0aff00"), None);
        assert_eq!(decode_array::<0>(""), Some([]));
        assert_eq!(decode_array::<2>("0agf"), None);
        assert_eq!(decode_array::<2>("+f0a"), None);
        assert_eq!(decode_array::<2>("é0a"), None, "a two-byte character is not two digits");
        assert_eq!(decode_array::<32>(&"ab".repeat(1 << 20)), None, "a long text is refused by its length");
    }
}
