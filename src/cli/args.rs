//! The one command-line option parser, shared by the `turboinfer` CLI (`src/bin/turboinfer.rs`)
//! and its sparse FFN subcommands (`sparse::cli`): `--key value`, options that take several
//! values (`--corpus a b c`), flags, short aliases (`-m`), and bare (positional) arguments, with
//! one wording of every error.

use std::collections::HashMap;

/// How an option takes its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No value (`--json`).
    Flag,
    /// Exactly the next argument, whatever it looks like (`-p "-x"`); repeatable (`--stop`).
    One,
    /// The following arguments up to the next option (`--corpus a.txt b.txt`); at least one.
    Many,
}

/// One option: its names (the first is the key it is read back with) and how it takes values.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// Canonical name first, then aliases: `&["--model", "-m"]`.
    pub names: &'static [&'static str],
    /// How it takes values.
    pub kind: Kind,
}

impl Opt {
    /// A flag.
    pub const fn flag(names: &'static [&'static str]) -> Opt {
        Opt { names, kind: Kind::Flag }
    }
    /// An option with one value per occurrence.
    pub const fn one(names: &'static [&'static str]) -> Opt {
        Opt { names, kind: Kind::One }
    }
    /// An option with one or more values.
    pub const fn many(names: &'static [&'static str]) -> Opt {
        Opt { names, kind: Kind::Many }
    }
}

/// Parsed arguments: each given option's values under its canonical name (in order; a flag has
/// none), and the bare arguments.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<&'static str, Vec<String>>,
    /// Arguments that are no option and no option's value, in order.
    pub positional: Vec<String>,
}

/// True if `a` looks like an option: `-x`/`--x`, but not `-` or a negative number.
fn looks_like_option(a: &str) -> bool {
    a.starts_with('-') && a.len() > 1 && a.parse::<f64>().is_err()
}

impl Args {
    /// Parses `args` against `spec`. An option not in `spec` is an error ("unknown option").
    pub fn parse(args: &[String], spec: &[Opt]) -> Result<Args, String> {
        let mut out = Args::default();
        let mut it = args.iter().peekable();
        while let Some(a) = it.next() {
            let Some(opt) = spec.iter().find(|o| o.names.contains(&a.as_str())) else {
                if looks_like_option(a) {
                    return Err(format!("unknown option {a:?}"));
                }
                out.positional.push(a.clone());
                continue;
            };
            let values = out.values.entry(opt.names[0]).or_default();
            match opt.kind {
                Kind::Flag => {}
                Kind::One => values
                    .push(it.next().cloned().ok_or_else(|| format!("option {a} needs a value"))?),
                Kind::Many => {
                    let before = values.len();
                    while let Some(v) = it.next_if(|v| !looks_like_option(v)) {
                        values.push(v.clone());
                    }
                    if values.len() == before {
                        return Err(format!("option {a} needs a value"));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Whether option `key` (its canonical name) was given.
    pub fn has(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// Every value of `key`, in order (empty if not given).
    pub fn all(&self, key: &str) -> &[String] {
        self.values.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The value of `key`, if given (the last one if given more than once).
    pub fn one(&self, key: &str) -> Option<&str> {
        self.all(key).last().map(String::as_str)
    }

    /// The value of `key`, or an error naming `what` (e.g. "-m MODEL").
    pub fn req(&self, key: &str, what: &str) -> Result<&str, String> {
        self.one(key).ok_or_else(|| format!("missing {what}"))
    }

    /// The value of `key` parsed as `T` (the name in the error is `key`).
    pub fn parsed<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, String> {
        self.one(key)
            .map(|v| v.parse().map_err(|_| format!("option {key}: invalid value {v:?}")))
            .transpose()
    }

    /// The value of `key` parsed as `T`, or `default`.
    pub fn num<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        Ok(self.parsed(key)?.unwrap_or(default))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &[Opt] = &[
        Opt::one(&["--model", "-m"]),
        Opt::one(&["--stop"]),
        Opt::many(&["--corpus"]),
        Opt::flag(&["--json"]),
        Opt::one(&["--temp"]),
    ];

    fn parse(a: &[&str]) -> Result<Args, String> {
        Args::parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>(), SPEC)
    }

    #[test]
    fn options_values_flags_and_positionals() {
        let a = parse(&[
            "x", "-m", "-odd", "--corpus", "a", "b", "--json", "--stop", ";", "--stop", "\n", "y",
        ])
        .unwrap();
        assert_eq!(a.one("--model"), Some("-odd"), "a One option takes the next argument as is");
        assert_eq!(a.all("--corpus"), ["a", "b"]);
        assert!(a.has("--json") && !a.has("--temp"));
        assert_eq!(a.all("--stop"), [";", "\n"]);
        assert_eq!(a.positional, ["x", "y"]);
        assert_eq!(parse(&["--temp", "-0.5"]).unwrap().num("--temp", 1.0f32), Ok(-0.5));
    }

    #[test]
    fn errors_name_the_option() {
        assert!(parse(&["--bogus"]).unwrap_err().contains("unknown option"));
        assert!(parse(&["-m"]).unwrap_err().contains("-m needs a value"));
        assert!(parse(&["--corpus", "--json"]).unwrap_err().contains("needs a value"));
        let a = parse(&["--temp", "hot"]).unwrap();
        assert!(a.num("--temp", 0.0f32).unwrap_err().contains("invalid value"));
        assert_eq!(a.req("--model", "-m MODEL").unwrap_err(), "missing -m MODEL");
    }
}
