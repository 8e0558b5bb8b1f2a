//! Resolving the `turboinfer.model` setting to a file inside the models directory.
//!
//! The setting is either a fetched model's name (`qwen2.5-coder-0.5b`, `.gguf` optional) or a
//! path. Whatever it is, the file must live inside the models directory: a superuser sets it, but
//! the library then maps the file into every backend that calls nl2sql, so it must not be a way
//! to make the server read arbitrary files. Checked twice: lexically (no `..`, inside the
//! directory) when the setting changes, and after resolving symlinks when the file is opened.

use std::path::{Component, Path, PathBuf};

/// Where `make fetch-model` installs models.
pub const MODELS_DIR: &str = "/var/lib/turboinfer/models";

/// Why a model setting cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelPathError {
    #[error("no model is configured (turboinfer.model is empty)")]
    NotConfigured,
    #[error("model path {0:?} is outside the models directory {1:?}")]
    OutsideModelsDir(String, String),
    #[error("model path {0:?} contains \"..\" or is not a plain file name or path")]
    BadPath(String),
    #[error("model file {0:?} does not exist")]
    Missing(String),
}

/// The file `setting` names, before touching the file system: a bare name becomes
/// `<dir>/<name>.gguf` (or `<dir>/<name>` if it already ends in `.gguf`); a relative path is taken
/// inside `dir`; an absolute path must lie inside `dir`. `..` components are refused.
pub fn resolve(setting: &str, dir: &Path) -> Result<PathBuf, ModelPathError> {
    let s = setting.trim();
    if s.is_empty() {
        return Err(ModelPathError::NotConfigured);
    }
    if s.contains('\0') {
        return Err(ModelPathError::BadPath(s.to_string()));
    }
    let p = Path::new(s);
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(ModelPathError::BadPath(s.to_string()));
    }
    let path = if p.is_absolute() {
        p.to_path_buf()
    } else if p.components().count() == 1 && !s.ends_with(".gguf") {
        dir.join(format!("{s}.gguf"))
    } else {
        dir.join(p)
    };
    let inside = path
        .strip_prefix(dir)
        .is_ok_and(|rest| rest.components().any(|c| matches!(c, Component::Normal(_))));
    if !inside {
        return Err(ModelPathError::OutsideModelsDir(s.to_string(), dir.display().to_string()));
    }
    Ok(path)
}

/// [`resolve`], then the real file: it must exist and, with every symlink resolved, still lie
/// inside the (resolved) models directory. Returns the canonical path.
pub fn resolve_existing(setting: &str, dir: &Path) -> Result<PathBuf, ModelPathError> {
    let path = resolve(setting, dir)?;
    let real =
        path.canonicalize().map_err(|_| ModelPathError::Missing(path.display().to_string()))?;
    let real_dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if !real.starts_with(&real_dir) || !real.is_file() {
        return Err(ModelPathError::OutsideModelsDir(
            real.display().to_string(),
            real_dir.display().to_string(),
        ));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_resolve_inside_the_directory() {
        let d = Path::new("/var/lib/turboinfer/models");
        assert_eq!(resolve("qwen2.5-coder-0.5b", d).unwrap(), d.join("qwen2.5-coder-0.5b.gguf"));
        assert_eq!(resolve(" smollm2-135m.gguf ", d).unwrap(), d.join("smollm2-135m.gguf"));
        assert_eq!(resolve("sub/m.gguf", d).unwrap(), d.join("sub/m.gguf"));
        assert_eq!(resolve("/var/lib/turboinfer/models/x.gguf", d).unwrap(), d.join("x.gguf"));
    }

    #[test]
    fn escapes_are_refused() {
        let d = Path::new("/var/lib/turboinfer/models");
        assert_eq!(resolve("", d), Err(ModelPathError::NotConfigured));
        assert_eq!(resolve("  ", d), Err(ModelPathError::NotConfigured));
        assert!(matches!(resolve("/etc/passwd", d), Err(ModelPathError::OutsideModelsDir(..))));
        assert!(matches!(
            resolve("/var/lib/turboinfer/models", d),
            Err(ModelPathError::OutsideModelsDir(..))
        ));
        assert!(matches!(
            resolve("/var/lib/turboinfer/models2/x.gguf", d),
            Err(ModelPathError::OutsideModelsDir(..))
        ));
        assert!(matches!(resolve("../cluster/x", d), Err(ModelPathError::BadPath(_))));
        assert!(matches!(
            resolve("/var/lib/turboinfer/models/../x.gguf", d),
            Err(ModelPathError::BadPath(_))
        ));
        assert!(matches!(resolve("a\0b", d), Err(ModelPathError::BadPath(_))));
    }

    #[test]
    fn symlinks_out_of_the_directory_are_refused() {
        let base =
            std::env::temp_dir().join(format!("turboinfer-model-path-{}", std::process::id()));
        let dir = base.join("models");
        std::fs::create_dir_all(&dir).unwrap();
        let outside = base.join("secret.gguf");
        std::fs::write(&outside, b"x").unwrap();
        std::fs::write(dir.join("ok.gguf"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link.gguf")).unwrap();
        assert!(resolve_existing("ok", &dir).unwrap().ends_with("ok.gguf"));
        assert!(matches!(
            resolve_existing("link", &dir),
            Err(ModelPathError::OutsideModelsDir(..))
        ));
        assert!(matches!(resolve_existing("absent", &dir), Err(ModelPathError::Missing(_))));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
