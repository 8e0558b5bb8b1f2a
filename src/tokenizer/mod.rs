//! Byte-level BPE tokenizer built from the GGUF vocabulary.
//!
//! Encoding follows llama.cpp: special tokens are cut out of the text first (longest first), then
//! every remaining text fragment is split by the pre-tokenizer regexes named in
//! `tokenizer.ggml.pre`, mapped to the byte-level alphabet and BPE-merged (Hugging Face
//! `tokenizers` does these last three steps). Decoding maps token strings back to raw bytes.

mod bytes;
mod error;
mod packed;
mod pretok;
mod special;
mod stream;
mod vocab;

pub use error::TokenizerError;
pub use special::Fragment;
pub use stream::{StreamDecoder, Utf8Stream};
pub use vocab::{SpecialIds, TokenType};

use crate::gguf::{GgufFile, MetaValue};
use bytes::ByteAlphabet;
use packed::PackedBytes;
use special::SpecialMatcher;
use std::collections::HashMap;
use tokenizers::models::bpe::BPE;
use tokenizers::Model;

/// Token texts llama.cpp treats as end-of-generation whatever their id (`special_eog_ids`).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];
/// FIM padding / repository / file-separator tokens: also end generation in llama.cpp.
const FIM_EOG_TEXTS: &[&str] = &["<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"];

/// A byte-level BPE tokenizer (immutable, `Send + Sync`; share it behind an `Arc`).
#[derive(Clone)]
pub struct Tokenizer {
    /// BPE model + pre-tokenizer (no normalizer, no post-processor, no added tokens).
    bpe: tokenizers::Tokenizer,
    /// `[n_vocab]` token strings as stored in the GGUF file.
    texts: PackedBytes,
    /// `[n_vocab]` token types (EOG-looking tokens promoted to control, as llama.cpp does).
    types: Vec<TokenType>,
    /// `[n_vocab]` raw bytes of every token's piece.
    pieces: PackedBytes,
    special: SpecialMatcher,
    ids: SpecialIds,
    /// Sorted end-of-generation ids.
    eog: Vec<u32>,
    pre: String,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("pre", &self.pre)
            .field("vocab_size", &self.vocab_size())
            .field("special_tokens", &self.special.len())
            .field("ids", &self.ids)
            .field("eog", &self.eog)
            .finish()
    }
}

impl Tokenizer {
    /// Builds the tokenizer from an open GGUF file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        Self::from_metadata(&file.header().metadata)
    }

    /// Builds the tokenizer from a parsed metadata map (what [`crate::gguf::parse_header`] returns).
    pub fn from_metadata(meta: &HashMap<String, MetaValue>) -> Result<Tokenizer, TokenizerError> {
        let vocab::VocabData { pre, tokens, mut types, merges, special: ids } = vocab::read(meta)?;
        let n = tokens.len();

        // Token string -> id; on a duplicate string the last id wins, as in llama.cpp.
        let bpe_vocab: tokenizers::models::bpe::Vocab =
            tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let model = BPE::builder()
            .vocab_and_merges(bpe_vocab, merges)
            .build()
            .map_err(|e| TokenizerError::Build(e.to_string()))?;
        let eog = collect_eog(&ids, &model, &mut types);

        let alphabet = ByteAlphabet::new();
        // Average token length is about 6-7 bytes in these vocabularies.
        let mut texts = PackedBytes::with_capacity(n, 8);
        let mut pieces = PackedBytes::with_capacity(n, 7);
        for (t, ty) in tokens.iter().zip(&types) {
            texts.push(t.as_bytes())?;
            match ty {
                TokenType::Normal | TokenType::Byte | TokenType::Undefined => {
                    alphabet.decode_into(t, pieces.buffer())
                }
                TokenType::Control | TokenType::UserDefined | TokenType::Unknown => {
                    pieces.buffer().extend_from_slice(t.as_bytes())
                }
                // Padding slots render as nothing (llama.cpp does the same).
                TokenType::Unused => {}
            }
            pieces.seal()?;
        }

        let special = SpecialMatcher::new(
            tokens
                .iter()
                .zip(&types)
                .enumerate()
                .filter(|(_, (_, ty))| ty.is_special())
                .map(|(i, (t, ty))| (i as u32, t.clone(), *ty != TokenType::UserDefined)),
        );

        let mut bpe = tokenizers::Tokenizer::new(model);
        bpe.with_pre_tokenizer(Some(pretok::build(&pre)?));

        Ok(Tokenizer { bpe, texts, types, pieces, special, ids, eog, pre })
    }

    /// Encodes `text` with no BOS/EOS added. With `parse_special`, control tokens written in the
    /// text (`<|im_start|>`) become single tokens; without, they are encoded as ordinary text.
    /// User-defined added tokens are always matched, as in llama.cpp.
    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<u32>, TokenizerError> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        for frag in self.special.partition(text, parse_special) {
            match frag {
                Fragment::Token(id) => out.push(id),
                Fragment::Text(s) => {
                    let enc = self
                        .bpe
                        .encode_fast(s, false)
                        .map_err(|e| TokenizerError::Encode(e.to_string()))?;
                    out.extend_from_slice(enc.get_ids());
                }
            }
        }
        Ok(out)
    }

    /// Encodes a whole prompt: [`Tokenizer::encode`], with BOS in front when the model's
    /// `add_bos_token` says so and EOS at the end when `add_eos_token` says so.
    pub fn encode_prompt(
        &self,
        text: &str,
        parse_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let mut ids = Vec::new();
        if let (true, Some(bos)) = (self.ids.add_bos, self.ids.bos) {
            ids.push(bos);
        }
        ids.extend(self.encode(text, parse_special)?);
        if let (true, Some(eos)) = (self.ids.add_eos, self.ids.eos) {
            ids.push(eos);
        }
        Ok(ids)
    }

    /// The raw bytes of the pieces of `ids`, concatenated (special tokens as their text; ids
    /// outside the vocabulary contribute nothing).
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.piece(id));
        }
        out
    }

    /// Decodes `ids` to text; invalid UTF-8 (e.g. a cut multi-byte character) becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids)).into_owned()
    }

    /// A streaming decoder for one generation.
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }

    /// The raw bytes token `id` stands for (empty for ids outside the vocabulary).
    pub fn piece(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize).unwrap_or(&[])
    }

    /// The raw bytes token `id` stands for, owned (empty for ids outside the vocabulary).
    pub fn token_to_piece(&self, id: u32) -> Vec<u8> {
        self.piece(id).to_vec()
    }

    /// Number of tokens in the vocabulary (the embedding / logits width).
    pub fn vocab_size(&self) -> usize {
        self.texts.len()
    }

    /// The token's string as stored in the vocabulary (byte-level alphabet for normal tokens).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        // Stored from `&str`, so always valid UTF-8.
        std::str::from_utf8(self.texts.get(id as usize)?).ok()
    }

    /// The token's type.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// The id of the token whose vocabulary string is exactly `text` (e.g. `"<|im_end|>"`).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.bpe.token_to_id(text)
    }

    /// True for control, user-defined and unknown tokens (the ones matched verbatim in text).
    pub fn is_special(&self, id: u32) -> bool {
        self.token_type(id).is_some_and(TokenType::is_special)
    }

    /// True when `id` ends generation (EOS, EOT/EOM, `<|im_end|>`, `<|endoftext|>`, FIM stops).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// All end-of-generation ids, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    /// The beginning-of-sequence id, if the model has one.
    pub fn bos_id(&self) -> Option<u32> {
        self.ids.bos
    }

    /// The end-of-sequence id, if the model has one.
    pub fn eos_id(&self) -> Option<u32> {
        self.ids.eos
    }

    /// Whether prompts start with BOS (`tokenizer.ggml.add_bos_token`).
    pub fn add_bos(&self) -> bool {
        self.ids.add_bos
    }

    /// All special ids and flags read from the metadata.
    pub fn special_ids(&self) -> &SpecialIds {
        &self.ids
    }

    /// The pre-tokenizer name (`tokenizer.ggml.pre`).
    pub fn pre_tokenizer(&self) -> &str {
        &self.pre
    }

    /// Splits `text` into ordinary-text fragments and special tokens (the first encoding step).
    pub fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        self.special.partition(text, parse_special)
    }
}

/// The end-of-generation set: metadata EOS/EOT/EOM/FIM ids plus tokens with a known stop text;
/// like llama.cpp, stop tokens found by text are promoted to control tokens.
fn collect_eog(ids: &SpecialIds, model: &BPE, types: &mut [TokenType]) -> Vec<u32> {
    let mut eog: Vec<u32> = [ids.eos, ids.eot, ids.eom, ids.fim_pad, ids.fim_rep, ids.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for text in EOG_TEXTS.iter().chain(FIM_EOG_TEXTS) {
        if let Some(id) = model.token_to_id(text) {
            eog.push(id);
            if types[id as usize] != TokenType::Control {
                types[id as usize] = TokenType::Control;
            }
        }
    }
    eog.sort_unstable();
    eog.dedup();
    eog
}

#[cfg(test)]
mod tests {
    /// Compile-time check: the tokenizer can be shared across threads.
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn tokenizer_is_send_and_sync() {
        assert_send_sync::<super::Tokenizer>();
    }
}
