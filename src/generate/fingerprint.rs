//! Fingerprint of a prompt prefix: which model saw which exact text.
//!
//! SHA-256 rather than a 64-bit FNV/xxHash: the fingerprint keys the KV prefix cache, which may
//! be shared across backends (and so across roles) through a cache file. The hashed text includes
//! table names and comments other users choose, so a collision must be infeasible to construct,
//! not merely unlikely by chance: a crafted collision would hand one role the KV state computed
//! from another role's schema. Hashing a few kilobytes once per call costs microseconds.

use sha2::{Digest, Sha256};

/// A 32-byte SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// Digest of the model identity and the rendered prefix text. Each part is preceded by its
    /// byte length so that no two different (identity, text) pairs hash the same input.
    pub fn of(model_identity: &str, prefix_text: &str) -> Fingerprint {
        let mut h = Sha256::new();
        h.update(b"turboinfer-nl2sql-prefix-v1\0");
        for part in [model_identity, prefix_text] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        Fingerprint(h.finalize().into())
    }

    /// Lowercase hex (64 characters).
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The first 16 hex characters, for display.
    pub fn short(&self) -> String {
        self.hex()[..16].to_string()
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fingerprint({})", self.short())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_known_answer() {
        // The hash primitive itself: SHA-256("abc") from FIPS 180-2.
        let d: [u8; 32] = Sha256::digest(b"abc").into();
        assert_eq!(
            Fingerprint(d).hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn depends_on_model_and_text_and_their_boundary() {
        let a = Fingerprint::of("m1", "CREATE TABLE t (a int);");
        assert_eq!(a, Fingerprint::of("m1", "CREATE TABLE t (a int);"));
        assert_ne!(a, Fingerprint::of("m2", "CREATE TABLE t (a int);"));
        assert_ne!(a, Fingerprint::of("m1", "CREATE TABLE t (b int);"));
        assert_ne!(Fingerprint::of("ab", "c"), Fingerprint::of("a", "bc"));
        assert_eq!(a.hex().len(), 64);
        assert_eq!(a.short(), a.hex()[..16]);
    }
}
