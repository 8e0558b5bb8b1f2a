//! One caller's step as bytes: what a backend writes into a shared-memory segment for the batch
//! worker (its requests, and the sequences it no longer needs), and what the worker writes back
//! into the same segment (each request's logits rows or error). Both sides are the same library,
//! but the bytes are still checked on reading: a segment is memory another process wrote.
//!
//! Layout (little-endian; the reply area is sized by the caller, so the worker never grows it):
//!
//! ```text
//! header    magic u32, n_req u32, n_forget u32, vocab u32, n_tokens u32, values u32,
//!           n_ids u32                                                                (28 bytes)
//! forget    [u64; n_forget]
//! requests  [seq u64, pos u32, n_tokens u32, logits u32, n_rows u32; n_req]        (24 bytes each)
//! tokens    [u32; n_tokens]                          every request's tokens, in request order
//! ids       [u32; n_ids]                             every request's vocabulary rows, in order
//! replies   [code u32, a u64, b u64, c u64; n_req]                                 (28 bytes each)
//! message   [u8; MESSAGE_BYTES]                      the text of a failed pass, NUL-padded
//! logits    [f32; values]                            each request's rows, in request order
//! ```
//!
//! A request's rows are `logits × vocab` values, or `logits × n_rows` when it names `n_rows`
//! vocabulary entries (`n_rows` 0: the whole vocabulary).

use super::{Request, SeqId, ServeError};

/// "TIbw": marks a segment written by this module.
const MAGIC: u32 = 0x5449_6277;
const HEADER: usize = 28;
const REQUEST: usize = 24;
const REPLY: usize = 28;
/// Room for the message of a failed pass (a model error: a sentence or two).
const MESSAGE_BYTES: usize = 512;

/// What is wrong with a segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the shared segment is {have} bytes, its contents need {need}")]
    TooSmall { have: usize, need: usize },
    #[error("the shared segment holds no request (bad magic number)")]
    Magic,
    #[error("the shared segment's requests do not add up: {0}")]
    Inconsistent(&'static str),
}

/// Logits values a request gets back: its rows of the whole vocabulary or of its own entries.
fn width(r: &Request, vocab: usize) -> usize {
    r.logits * r.rows.as_ref().map_or(vocab, Vec::len)
}

/// The totals of the header: tokens, vocabulary ids, logits values.
fn totals(reqs: &[Request], vocab: usize) -> (usize, usize, usize) {
    let tokens = reqs.iter().map(|r| r.tokens.len()).sum();
    let ids = reqs.iter().map(|r| r.rows.as_ref().map_or(0, Vec::len)).sum();
    (tokens, ids, reqs.iter().map(|r| width(r, vocab)).sum())
}

/// Bytes of the segment for `reqs` and `forget` with logits rows of `vocab` values.
pub fn size(reqs: &[Request], forget: &[SeqId], vocab: usize) -> usize {
    let (tokens, ids, values) = totals(reqs, vocab);
    layout(reqs.len(), forget.len(), tokens, ids).logits + 4 * values
}

/// Offsets of the areas after the header.
struct Layout {
    requests: usize,
    tokens: usize,
    ids: usize,
    replies: usize,
    message: usize,
    logits: usize,
}

fn layout(n_req: usize, n_forget: usize, n_tokens: usize, n_ids: usize) -> Layout {
    let requests = HEADER + 8 * n_forget;
    let tokens = requests + REQUEST * n_req;
    let ids = tokens + 4 * n_tokens;
    let replies = ids + 4 * n_ids;
    let message = replies + REPLY * n_req;
    let logits = message + MESSAGE_BYTES;
    Layout { requests, tokens, ids, replies, message, logits }
}

fn put32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}
fn get64(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

/// Writes the requests (the caller's side); `buf` is [`size`] bytes or more.
pub fn write_request(
    buf: &mut [u8],
    reqs: &[Request],
    forget: &[SeqId],
    vocab: usize,
) -> Result<(), WireError> {
    let need = size(reqs, forget, vocab);
    if buf.len() < need {
        return Err(WireError::TooSmall { have: buf.len(), need });
    }
    if reqs.iter().any(|r| r.rows.as_ref().is_some_and(Vec::is_empty)) {
        return Err(WireError::Inconsistent("a request names an empty set of rows"));
    }
    let (n_tokens, n_ids, values) = totals(reqs, vocab);
    let l = layout(reqs.len(), forget.len(), n_tokens, n_ids);
    let n = |v: usize| u32::try_from(v).map_err(|_| WireError::Inconsistent("count over 2^32"));
    put32(buf, 0, MAGIC);
    put32(buf, 4, n(reqs.len())?);
    put32(buf, 8, n(forget.len())?);
    put32(buf, 12, n(vocab)?);
    put32(buf, 16, n(n_tokens)?);
    put32(buf, 20, n(values)?);
    put32(buf, 24, n(n_ids)?);
    for (i, &id) in forget.iter().enumerate() {
        put64(buf, HEADER + 8 * i, id);
    }
    let (mut t, mut k) = (l.tokens, l.ids);
    for (i, r) in reqs.iter().enumerate() {
        let at = l.requests + REQUEST * i;
        let rows = r.rows.as_deref().unwrap_or_default();
        put64(buf, at, r.seq);
        put32(buf, at + 8, n(r.pos)?);
        put32(buf, at + 12, n(r.tokens.len())?);
        put32(buf, at + 16, n(r.logits)?);
        put32(buf, at + 20, n(rows.len())?);
        for &tok in &r.tokens {
            put32(buf, t, tok);
            t += 4;
        }
        for &id in rows {
            put32(buf, k, id);
            k += 4;
        }
    }
    Ok(())
}

/// A segment's requests as the worker reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub reqs: Vec<Request>,
    pub forget: Vec<SeqId>,
    pub vocab: usize,
}

/// Reads the requests of a segment (the worker's side), checking every count against the
/// segment's size.
pub fn read_request(buf: &[u8]) -> Result<Incoming, WireError> {
    if buf.len() < HEADER {
        return Err(WireError::TooSmall { have: buf.len(), need: HEADER });
    }
    if get32(buf, 0) != MAGIC {
        return Err(WireError::Magic);
    }
    let [n_req, n_forget, vocab, n_tokens, values, n_ids] =
        [4, 8, 12, 16, 20, 24].map(|at| get32(buf, at) as usize);
    let l = layout(n_req, n_forget, n_tokens, n_ids);
    let need = l.logits.saturating_add(values.saturating_mul(4));
    if buf.len() < need {
        return Err(WireError::TooSmall { have: buf.len(), need });
    }
    let forget = (0..n_forget).map(|i| get64(buf, HEADER + 8 * i)).collect();
    let (mut t, mut k, mut reqs) = (l.tokens, l.ids, Vec::with_capacity(n_req));
    let mut sum_values = 0usize;
    let u32s = |from: usize, n: usize| (0..n).map(|j| get32(buf, from + 4 * j)).collect();
    for i in 0..n_req {
        let at = l.requests + REQUEST * i;
        let (seq, pos) = (get64(buf, at), get32(buf, at + 8) as usize);
        let [n, logits, n_rows] = [12, 16, 20].map(|o| get32(buf, at + o) as usize);
        if t + 4 * n > l.ids || k + 4 * n_rows > l.replies {
            return Err(WireError::Inconsistent("tokens or rows beyond their area"));
        }
        let tokens = u32s(t, n);
        t += 4 * n;
        let rows = (n_rows > 0).then(|| u32s(k, n_rows));
        k += 4 * n_rows;
        let r = Request { seq, pos, tokens, logits, rows };
        sum_values = sum_values.saturating_add(width(&r, vocab));
        reqs.push(r);
    }
    if t != l.ids || k != l.replies || sum_values != values {
        return Err(WireError::Inconsistent("token, row or value counts"));
    }
    Ok(Incoming { reqs, forget, vocab })
}

/// The error codes of the reply area (0: the request's rows are in the logits area).
fn encode(e: &ServeError) -> (u32, [u64; 3]) {
    let u = |v: usize| v as u64;
    match *e {
        ServeError::UnknownPosition { seq, pos, known } => (1, [seq, u(pos), u(known)]),
        ServeError::Duplicate { seq } => (2, [seq, 0, 0]),
        ServeError::BadRequest { seq, tokens, logits } => (3, [seq, u(tokens), u(logits)]),
        ServeError::ContextFull { seq, needed, n_ctx } => (4, [seq, u(needed), u(n_ctx)]),
        ServeError::OverBudget { budget, fits, n_ctx } => (5, [u(budget), u(fits), u(n_ctx)]),
        ServeError::Interrupted => (6, [0; 3]),
        ServeError::Model(_) => (7, [0; 3]),
        ServeError::OutOfVocab { seq, id, vocab } => (8, [seq, u64::from(id), u(vocab)]),
    }
}

fn decode(code: u32, [a, b, c]: [u64; 3], message: &str) -> Option<ServeError> {
    let z = |v: u64| v as usize;
    Some(match code {
        0 => return None,
        1 => ServeError::UnknownPosition { seq: a, pos: z(b), known: z(c) },
        2 => ServeError::Duplicate { seq: a },
        3 => ServeError::BadRequest { seq: a, tokens: z(b), logits: z(c) },
        4 => ServeError::ContextFull { seq: a, needed: z(b), n_ctx: z(c) },
        5 => ServeError::OverBudget { budget: z(a), fits: z(b), n_ctx: z(c) },
        6 => ServeError::Interrupted,
        8 => ServeError::OutOfVocab { seq: a, id: b as u32, vocab: z(c) },
        _ => ServeError::Model(message.to_string()),
    })
}

/// Writes the answers to the requests of `buf` (the worker's side): `replies[i]` answers request
/// `i`, its logits `[req.logits, vocab]` (borrowed: the rows go straight from the server's reply
/// into the segment).
pub fn write_replies<R: AsRef<[f32]>>(
    buf: &mut [u8],
    replies: &[Result<R, ServeError>],
) -> Result<(), WireError> {
    let inc = read_request(buf)?;
    if replies.len() != inc.reqs.len() {
        return Err(WireError::Inconsistent("one reply per request"));
    }
    let (n_tokens, n_ids, _) = totals(&inc.reqs, inc.vocab);
    let l = layout(inc.reqs.len(), inc.forget.len(), n_tokens, n_ids);
    let mut at = l.logits;
    for (i, (req, reply)) in inc.reqs.iter().zip(replies).enumerate() {
        let head = l.replies + REPLY * i;
        let width = width(req, inc.vocab);
        match reply {
            Ok(rows) if rows.as_ref().len() == width => {
                put32(buf, head, 0);
                let area = &mut buf[at..at + 4 * width];
                for (b, v) in area.chunks_exact_mut(4).zip(rows.as_ref()) {
                    b.copy_from_slice(&v.to_le_bytes());
                }
            }
            Ok(_) => {
                let e = ServeError::Model("logits of the wrong width".into());
                write_error(buf, head, l.message, &e);
            }
            Err(e) => write_error(buf, head, l.message, e),
        }
        at += 4 * width;
    }
    Ok(())
}

fn write_error(buf: &mut [u8], head: usize, message: usize, e: &ServeError) {
    let (code, fields) = encode(e);
    put32(buf, head, code);
    for (k, f) in fields.iter().enumerate() {
        put64(buf, head + 4 + 8 * k, *f);
    }
    if let ServeError::Model(m) = e {
        let mut end = m.len().min(MESSAGE_BYTES - 1);
        while !m.is_char_boundary(end) {
            end -= 1;
        }
        buf[message..message + MESSAGE_BYTES].fill(0);
        buf[message..message + end].copy_from_slice(&m.as_bytes()[..end]);
    }
}

/// Reads the answers the worker wrote (the caller's side), one per request, in order.
pub fn read_replies(buf: &[u8]) -> Result<Vec<Result<Vec<f32>, ServeError>>, WireError> {
    let inc = read_request(buf)?;
    let (n_tokens, n_ids, _) = totals(&inc.reqs, inc.vocab);
    let l = layout(inc.reqs.len(), inc.forget.len(), n_tokens, n_ids);
    let text = &buf[l.message..l.message + MESSAGE_BYTES];
    let text = String::from_utf8_lossy(
        &text[..text.iter().position(|&b| b == 0).unwrap_or(MESSAGE_BYTES)],
    );
    let mut at = l.logits;
    let mut out = Vec::with_capacity(inc.reqs.len());
    for (i, req) in inc.reqs.iter().enumerate() {
        let head = l.replies + REPLY * i;
        let fields = [0, 1, 2].map(|k| get64(buf, head + 4 + 8 * k));
        let width = width(req, inc.vocab);
        out.push(match decode(get32(buf, head), fields, &text) {
            Some(e) => Err(e),
            None => Ok(buf[at..at + 4 * width]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect()),
        });
        at += 4 * width;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reqs() -> Vec<Request> {
        vec![
            Request { seq: 7 << 32 | 1, pos: 0, tokens: vec![1, 2, 3], logits: 1, rows: None },
            Request { seq: 7 << 32 | 2, pos: 40, tokens: vec![9], logits: 1, rows: None },
            Request { seq: 7 << 32 | 3, pos: 5, tokens: vec![4, 5], logits: 2, rows: None },
            Request {
                seq: 7 << 32 | 4,
                pos: 9,
                tokens: vec![6],
                logits: 1,
                rows: Some(vec![0, 3]),
            },
        ]
    }

    #[test]
    fn requests_and_replies_round_trip() {
        let (reqs, forget, vocab) = (reqs(), vec![7 << 32 | 9], 5);
        let mut buf = vec![0u8; size(&reqs, &forget, vocab)];
        write_request(&mut buf, &reqs, &forget, vocab).unwrap();
        let inc = read_request(&buf).unwrap();
        assert_eq!(inc, Incoming { reqs: reqs.clone(), forget, vocab });
        let replies = vec![
            Ok(vec![0.5, -1.0, 2.0, f32::MIN, 3.25]),
            Err(ServeError::ContextFull { seq: 7 << 32 | 2, needed: 41, n_ctx: 40 }),
            Ok((0..10).map(|i| i as f32 / 3.0).collect()),
            Ok(vec![7.5, -0.0]),
        ];
        write_replies(&mut buf, &replies).unwrap();
        assert_eq!(read_replies(&buf).unwrap(), replies);
        let failed: Vec<Result<Vec<f32>, ServeError>> = vec![
            Err(ServeError::Model("é".repeat(600))),
            Err(ServeError::Interrupted),
            Err(ServeError::OutOfVocab { seq: 7 << 32 | 3, id: 99, vocab: 5 }),
            Err(ServeError::Interrupted),
        ];
        write_replies(&mut buf, &failed).unwrap();
        match &read_replies(&buf).unwrap()[0] {
            Err(ServeError::Model(m)) => {
                assert_eq!(m.chars().count(), 255, "cut at a char boundary")
            }
            r => panic!("{r:?}"),
        }
        assert_eq!(read_replies(&buf).unwrap()[1..], failed[1..]);
    }

    #[test]
    fn damaged_segments_are_refused() {
        let (reqs, vocab) = (reqs(), 5);
        let mut buf = vec![0u8; size(&reqs, &[], vocab)];
        assert!(matches!(
            write_request(&mut buf[..10], &reqs, &[], vocab),
            Err(WireError::TooSmall { .. })
        ));
        write_request(&mut buf, &reqs, &[], vocab).unwrap();
        assert!(matches!(read_request(&buf[..buf.len() - 1]), Err(WireError::TooSmall { .. })));
        let mut bad = buf.clone();
        bad[0] ^= 1;
        assert_eq!(read_request(&bad), Err(WireError::Magic));
        let mut bad = buf.clone();
        put32(&mut bad, 20, 99); // logits values
        assert!(read_request(&bad).is_err());
        let mut bad = buf.clone();
        put32(&mut bad, HEADER + 12, 1000); // first request's token count
        assert!(read_request(&bad).is_err());
        let mut bad = buf.clone();
        put32(&mut bad, HEADER + 3 * REQUEST + 20, 3); // last request's row count
        assert!(read_request(&bad).is_err());
        let mut empty = reqs.clone();
        empty[0].rows = Some(Vec::new());
        assert!(write_request(&mut buf, &empty, &[], vocab).is_err());
        let one: [Result<Vec<f32>, ServeError>; 1] = [Err(ServeError::Interrupted)];
        assert!(write_replies(&mut buf, &one).is_err());
    }
}
