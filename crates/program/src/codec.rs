//! The binary codec for artifact payloads: bincode 2 over serde, in one place.
//!
//! The one thing to know: every encode and decode of archmax data goes through this
//! module, so the configuration (bincode's `standard`: little-endian, variable-length
//! integers) and the decode size bound cannot drift apart between writer and reader.
//! Changing either changes the artifact format and needs a bump of
//! [`FORMAT_VERSION`](crate::artifact::FORMAT_VERSION).

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The most bytes [`decode`] accepts; a longer input is refused before decoding, and the
/// decoder never allocates past it for a length field that lies.
pub const MAX_DECODE_BYTES: usize = 64 * 1024 * 1024;

/// Why bytes could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("{0} bytes is over the {MAX_DECODE_BYTES} byte limit")]
    TooLong(usize),
    #[error("{0}")]
    Encode(#[from] bincode::error::EncodeError),
    #[error("{0}")]
    Decode(#[from] bincode::error::DecodeError),
    #[error("{0} trailing bytes after the value")]
    Trailing(usize),
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes `value` with the standard configuration.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    Ok(bincode::serde::encode_to_vec(value, config())?)
}

/// Decodes exactly one value from `bytes`, under [`MAX_DECODE_BYTES`]; bytes left over
/// after the value are an error, not ignored.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    if bytes.len() > MAX_DECODE_BYTES {
        return Err(CodecError::TooLong(bytes.len()));
    }
    let limited = config().with_limit::<MAX_DECODE_BYTES>();
    let (value, used) = bincode::serde::decode_from_slice(bytes, limited)?;
    match bytes.len() - used {
        0 => Ok(value),
        extra => Err(CodecError::Trailing(extra)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_survives_the_round_trip_in_the_standard_layout() {
        let value = (7u32, "tool".to_string(), vec![300u64]);
        let bytes = encode(&value).expect("encodes");
        // standard(): varint 7, length-prefixed "tool", length 1, varint 300 as 0xfb + u16 LE.
        assert_eq!(bytes, [7, 4, b't', b'o', b'o', b'l', 1, 0xfb, 0x2c, 0x01]);
        assert_eq!(decode::<(u32, String, Vec<u64>)>(&bytes).expect("decodes"), value);
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut bytes = encode(&5u8).expect("encodes");
        bytes.push(0);
        assert!(matches!(decode::<u8>(&bytes), Err(CodecError::Trailing(1))));
    }

    #[test]
    fn a_lying_length_is_refused_without_allocating_it() {
        // A Vec<u8> claiming u64::MAX - 1 elements, followed by nothing.
        let mut bytes = vec![0xfd];
        bytes.extend_from_slice(&(u64::MAX - 1).to_le_bytes());
        assert!(matches!(decode::<Vec<u8>>(&bytes), Err(CodecError::Decode(_))));
    }

    #[test]
    fn input_over_the_bound_is_refused_before_decoding() {
        let bytes = vec![0u8; MAX_DECODE_BYTES + 1];
        assert!(matches!(decode::<u8>(&bytes), Err(CodecError::TooLong(length)) if length == MAX_DECODE_BYTES + 1));
    }
}
