//! Incremental detokenization: turns token pieces (arbitrary byte strings) into text that only
//! ever contains complete UTF-8 characters, holding back a partial multi-byte sequence until the
//! bytes that complete it arrive.

use super::Tokenizer;

/// UTF-8 assembly over a byte stream. The concatenation of everything returned by
/// [`Utf8Stream::push`] and [`Utf8Stream::finish`] equals `String::from_utf8_lossy` of all bytes.
#[derive(Debug, Clone, Default)]
pub struct Utf8Stream {
    /// Bytes of an incomplete trailing character (at most 3).
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// An empty stream.
    pub fn new() -> Utf8Stream {
        Utf8Stream::default()
    }

    /// Appends `bytes` and returns all text that is now complete. Bytes that can never become
    /// valid UTF-8 are replaced by U+FFFD right away; an incomplete tail is held back.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut start = 0;
        while start < self.pending.len() {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.push_str(
                        std::str::from_utf8(&self.pending[start..start + good])
                            .expect("validated prefix"),
                    );
                    start += good;
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            start += bad;
                        }
                        // An incomplete sequence at the end: wait for more bytes.
                        None => break,
                    }
                }
            }
        }
        self.pending.drain(..start);
        out
    }

    /// Flushes the held-back bytes: a tail that never completed becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }

    /// The bytes currently held back.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }
}

/// Streaming detokenizer for one generation: push token ids, get printable text.
#[derive(Debug, Clone)]
pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
    utf8: Utf8Stream,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder over `tokenizer`'s vocabulary.
    pub fn new(tokenizer: &'a Tokenizer) -> StreamDecoder<'a> {
        StreamDecoder { tokenizer, utf8: Utf8Stream::new() }
    }

    /// Adds one token; returns the text completed by it (possibly empty).
    pub fn push(&mut self, token: u32) -> String {
        self.utf8.push(self.tokenizer.piece(token))
    }

    /// Ends the stream, flushing any incomplete tail as U+FFFD.
    pub fn finish(&mut self) -> String {
        self.utf8.finish()
    }

    /// The bytes currently held back (an incomplete character).
    pub fn pending(&self) -> &[u8] {
        self.utf8.pending()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` cut at every boundary in `cuts` and returns the concatenated output.
    fn feed(bytes: &[u8], cuts: &[usize]) -> String {
        let mut s = Utf8Stream::new();
        let mut out = String::new();
        let mut prev = 0;
        for &c in cuts.iter().chain(std::iter::once(&bytes.len())) {
            out += &s.push(&bytes[prev..c]);
            prev = c;
        }
        out + &s.finish()
    }

    #[test]
    fn holds_back_partial_characters() {
        let text = "a€b😀";
        let b = text.as_bytes();
        let mut s = Utf8Stream::new();
        assert_eq!(s.push(&b[..2]), "a");
        assert_eq!(s.pending(), &b[1..2]);
        assert_eq!(s.push(&b[2..4]), "€");
        assert_eq!(s.push(&b[4..7]), "b");
        assert_eq!(s.push(&b[7..]), "😀");
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn matches_lossy_conversion_for_every_split() {
        let cases: Vec<Vec<u8>> = vec![
            "héllo wörld 中文 🚀".as_bytes().to_vec(),
            vec![b'a', 0xFF, b'b', 0xE2, 0x82, b'c', 0xF0, 0x9F, 0x98],
            vec![0xC3],
            vec![0xED, 0xA0, 0x80, b'x'], // a UTF-16 surrogate: invalid
        ];
        for bytes in cases {
            let want = String::from_utf8_lossy(&bytes).into_owned();
            for i in 0..=bytes.len() {
                for j in i..=bytes.len() {
                    assert_eq!(feed(&bytes, &[i, j]), want, "bytes {bytes:02x?} cut at {i},{j}");
                }
            }
        }
    }
}
