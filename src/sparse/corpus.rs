//! Calibration and evaluation text from files (the nl2sql prompts are the caller's:
//! `nl2sql::calibration`), and the mixing of text sources.

use std::path::Path;

/// `a` and `b` alternated (a0, b0, a1, b1, ...; the longer one's rest at the end), so that a
/// small token budget samples both sources rather than filling up with the first.
pub fn interleave(a: Vec<String>, b: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        let (x, y) = (a.next(), b.next());
        if x.is_none() && y.is_none() {
            return out;
        }
        out.extend(x);
        out.extend(y);
    }
}

/// Reads text files (lossy UTF-8; HTML tags stripped so documentation pages read as prose).
pub fn read_texts(paths: &[impl AsRef<Path>]) -> std::io::Result<Vec<String>> {
    paths
        .iter()
        .map(|p| {
            // Non-blocking open, regular files only: a FIFO named here must not hang the caller.
            let mut b = Vec::new();
            std::io::Read::read_to_end(
                &mut crate::fileio::regular_file::open(
                    p.as_ref(),
                    crate::fileio::regular_file::Links::Follow,
                )?,
                &mut b,
            )?;
            let s = String::from_utf8_lossy(&b).into_owned();
            Ok(if s.contains("</") { strip_tags(&s) } else { s })
        })
        .collect()
}

/// Removes `<...>` tags and collapses blank runs.
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for ch in s.chars() {
        match ch {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(ch),
            _ => {}
        }
    }
    let mut res = String::with_capacity(out.len());
    let mut blank = 0;
    for line in out.lines() {
        let t = line.trim_end();
        if t.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        res.push_str(t);
        res.push('\n');
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaves_both_sources() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(interleave(v(&["a", "b", "c"]), v(&["x"])), v(&["a", "x", "b", "c"]));
        assert_eq!(interleave(v(&[]), v(&["x", "y"])), v(&["x", "y"]));
    }
}
