//! The GPT-2 byte-level alphabet: every byte 0..=255 is spelled by one printable character in
//! vocabulary strings (so a space is `Ġ`, a newline `Ċ`). Decoding a normal token maps each of its
//! characters back to the byte it stands for.

/// Code points of the byte-level alphabet lie below this bound (256 bytes + at most 68 remapped).
const ALPHABET_LIMIT: usize = 324;

/// True for the bytes GPT-2 keeps as their own Latin-1 character: `!`..=`~`, `¡`..=`¬`, `®`..=`ÿ`.
fn is_self_mapped(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// Inverse map of the byte-level alphabet: `char code point -> byte`.
pub struct ByteAlphabet {
    /// `[ALPHABET_LIMIT]`: the byte a code point stands for, or -1 when it is not in the alphabet.
    to_byte: [i16; ALPHABET_LIMIT],
}

impl ByteAlphabet {
    /// Builds the table: self-mapped bytes keep their code point, the other 68 bytes get
    /// 256, 257, … in increasing byte order.
    pub fn new() -> ByteAlphabet {
        let mut to_byte = [-1i16; ALPHABET_LIMIT];
        let mut next = 256usize;
        for b in 0..=255u8 {
            let cp = if is_self_mapped(b) {
                b as usize
            } else {
                next += 1;
                next - 1
            };
            to_byte[cp] = b as i16;
        }
        ByteAlphabet { to_byte }
    }

    /// The byte spelled by `c`, if `c` belongs to the alphabet.
    pub fn byte_of(&self, c: char) -> Option<u8> {
        match self.to_byte.get(c as usize) {
            Some(&b) if b >= 0 => Some(b as u8),
            _ => None,
        }
    }

    /// Appends the raw bytes of a byte-level token text to `out`; characters outside the alphabet
    /// (never present in well-formed vocabularies) are kept as their UTF-8 encoding.
    pub fn decode_into(&self, text: &str, out: &mut Vec<u8>) {
        for c in text.chars() {
            match self.byte_of(c) {
                Some(b) => out.push(b),
                None => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }
}

impl Default for ByteAlphabet {
    /// Same as [`ByteAlphabet::new`].
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphabet_is_a_bijection_with_known_points() {
        let a = ByteAlphabet::new();
        assert_eq!(a.byte_of('Ġ'), Some(b' '));
        assert_eq!(a.byte_of('Ċ'), Some(b'\n'));
        assert_eq!(a.byte_of('ĉ'), Some(b'\t'));
        assert_eq!(a.byte_of('A'), Some(b'A'));
        assert_eq!(a.byte_of('中'), None);
        let mut seen = [false; 256];
        for cp in 0..ALPHABET_LIMIT as u32 {
            if let Some(b) = a.byte_of(char::from_u32(cp).unwrap()) {
                assert!(!seen[b as usize], "byte {b} mapped twice");
                seen[b as usize] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }
}
