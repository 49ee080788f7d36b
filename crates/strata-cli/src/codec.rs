//! How keys and values are written on the command line and printed:
//! as text (the argument's bytes), hex, or base64.

use base64::Engine as _;

/// The encoding of keys and values in arguments and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Arguments are taken as their UTF-8 bytes; output is the raw bytes.
    Text,
    /// Lower-case hex, two digits a byte (upper case accepted).
    Hex,
    /// Standard base64 with padding.
    Base64,
}

impl Codec {
    /// The bytes an argument stands for.
    pub fn decode(self, s: &str) -> Result<Vec<u8>, String> {
        match self {
            Codec::Text => Ok(s.as_bytes().to_vec()),
            Codec::Hex => hex_decode(s),
            Codec::Base64 => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| format!("{s:?} is not base64: {e}")),
        }
    }

    /// How `bytes` are printed.
    pub fn encode(self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Codec::Text => bytes.to_vec(),
            Codec::Hex => hex_encode(bytes).into_bytes(),
            Codec::Base64 => base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .into_bytes(),
        }
    }
}

/// Lower-case hex of `bytes`.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// The bytes of a hex string (even length, either case).
pub fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("{s:?} is not hex: odd number of digits"));
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(format!(
            "{s:?} is not hex: {:?} is not a hex digit",
            c as char
        )),
    };
    s.as_bytes()
        .chunks(2)
        .map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        for c in [Codec::Hex, Codec::Base64] {
            let out = String::from_utf8(c.encode(&bytes)).unwrap();
            assert_eq!(c.decode(&out).unwrap(), bytes);
        }
        assert_eq!(Codec::Text.decode("ab").unwrap(), b"ab");
        assert_eq!(hex_decode("0aFF").unwrap(), vec![10, 255]);
        assert!(hex_decode("abc").is_err());
        assert!(hex_decode("zz").is_err());
        assert!(Codec::Base64.decode("!!").is_err());
    }
}
