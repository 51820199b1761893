//! Finding our plugin's line in Slurm's `plugstack.conf`.
//!
//! slurm.conf's `PlugStackConfig` names the file (default: `plugstack.conf`
//! beside slurm.conf). Its lines are `required|optional <plugin> [args...]`
//! and `include <glob>` (relative patterns are taken from the including
//! file's directory), `#` starts a comment. Our line is the one whose plugin
//! file is `lemonade_spank.so` or `lemonade_spank_prolog.so` (cargo's
//! `lib...` names count too).

use std::path::{Path, PathBuf};
use thiserror::Error;

/// The plugin files that are ours, without cargo's `lib` prefix.
const OUR_PLUGINS: [&str; 2] = ["lemonade_spank.so", "lemonade_spank_prolog.so"];
/// `include` may nest; Slurm's own limit is not documented, ours stops loops.
const MAX_INCLUDE_DEPTH: usize = 8;

#[derive(Debug, Error)]
pub enum PlugstackError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: bad include pattern: {message}")]
    Include {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: includes nest deeper than {MAX_INCLUDE_DEPTH} files")]
    TooDeep { path: PathBuf },
}

/// The arguments on our plugin's line in the plugstack.conf that
/// `slurm_conf` uses; `None` when no such file or no such line exists (the
/// plugin is not installed there).
pub fn plugin_args(slurm_conf: &Path) -> Result<Option<Vec<String>>, PlugstackError> {
    let text = read(slurm_conf)?;
    let dir = slurm_conf.parent().unwrap_or(Path::new("/"));
    let plugstack = plugstack_path(&text)
        .map(|p| dir.join(p))
        .unwrap_or_else(|| dir.join("plugstack.conf"));
    if !plugstack.exists() {
        return Ok(None);
    }
    find_in(&plugstack, 0)
}

/// `PlugStackConfig=` of slurm.conf's text (keys are case-insensitive).
fn plugstack_path(slurm_conf: &str) -> Option<&str> {
    slurm_conf.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("").trim();
        let (key, value) = line.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("PlugStackConfig")
            .then(|| value.trim())
            .filter(|v| !v.is_empty())
    })
}

fn find_in(path: &Path, depth: usize) -> Result<Option<Vec<String>>, PlugstackError> {
    if depth > MAX_INCLUDE_DEPTH {
        return Err(PlugstackError::TooDeep {
            path: path.to_path_buf(),
        });
    }
    let text = read(path)?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["include", pattern, ..] => {
                for included in expand(dir, pattern, path, i + 1)? {
                    if let Some(args) = find_in(&included, depth + 1)? {
                        return Ok(Some(args));
                    }
                }
            }
            ["required" | "optional", plugin, args @ ..] if is_ours(plugin) => {
                return Ok(Some(args.iter().map(|a| a.to_string()).collect()));
            }
            _ => {}
        }
    }
    Ok(None)
}

fn is_ours(plugin: &str) -> bool {
    let file = Path::new(plugin)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or("");
    let file = file.strip_prefix("lib").unwrap_or(file);
    OUR_PLUGINS.contains(&file)
}

/// The files an `include` pattern names, in sorted order.
fn expand(
    dir: &Path,
    pattern: &str,
    file: &Path,
    line: usize,
) -> Result<Vec<PathBuf>, PlugstackError> {
    let full = dir.join(pattern);
    let bad = |message: String| PlugstackError::Include {
        path: file.to_path_buf(),
        line,
        message,
    };
    let full = full.to_str().ok_or_else(|| bad("not UTF-8".to_string()))?;
    let mut files: Vec<PathBuf> = glob::glob(full)
        .map_err(|e| bad(e.to_string()))?
        .flatten()
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

fn read(path: &Path) -> Result<String, PlugstackError> {
    std::fs::read_to_string(path).map_err(|source| PlugstackError::Read {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn finds_our_line_beside_slurm_conf() {
        let dir = tempfile::tempdir().unwrap();
        let conf = write(dir.path(), "slurm.conf", "ClusterName=x\n");
        write(
            dir.path(),
            "plugstack.conf",
            "# ours below\noptional /usr/lib/slurm/other.so a=1\n\
             required /usr/lib/slurm/lemonade_spank.so default=full allow_off=yes # why\n",
        );
        assert_eq!(
            plugin_args(&conf).unwrap(),
            Some(vec![
                "default=full".to_string(),
                "allow_off=yes".to_string()
            ])
        );
    }

    #[test]
    fn follows_plugstackconfig_and_includes() {
        let dir = tempfile::tempdir().unwrap();
        let conf = write(
            dir.path(),
            "slurm.conf",
            "ClusterName=x\nplugstackconfig = stack/main.conf # here\n",
        );
        write(dir.path(), "stack/main.conf", "include conf.d/*.conf\n");
        write(
            dir.path(),
            "stack/conf.d/10-other.conf",
            "required other.so\n",
        );
        write(
            dir.path(),
            "stack/conf.d/20-lemonade.conf",
            "required liblemonade_spank_prolog.so timeout=5\n",
        );
        assert_eq!(
            plugin_args(&conf).unwrap(),
            Some(vec!["timeout=5".to_string()])
        );
    }

    #[test]
    fn no_file_or_no_line_is_none_and_unreadable_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let conf = write(dir.path(), "slurm.conf", "ClusterName=x\n");
        assert_eq!(plugin_args(&conf).unwrap(), None);
        write(dir.path(), "plugstack.conf", "required other.so\n");
        assert_eq!(plugin_args(&conf).unwrap(), None);
        let missing = dir.path().join("nope/slurm.conf");
        let e = plugin_args(&missing).unwrap_err().to_string();
        assert!(e.contains("nope/slurm.conf"), "{e}");
    }

    #[test]
    fn an_include_loop_stops_with_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let conf = write(dir.path(), "slurm.conf", "");
        write(dir.path(), "plugstack.conf", "include plugstack.conf\n");
        let e = plugin_args(&conf).unwrap_err().to_string();
        assert!(e.contains("nest deeper"), "{e}");
    }
}

/// Random input: our line, none, or an error, never a panic.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A slurm.conf and a plugstack.conf with `lines` in a fresh directory.
    fn node(lines: &[String]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "ClusterName=x\n").unwrap();
        std::fs::write(dir.path().join("plugstack.conf"), lines.join("\n")).unwrap();
        (dir, conf)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_plugstack_text_reads_without_a_panic(text in any::<String>()) {
            let (_dir, conf) = node(&[text]);
            let _ = plugin_args(&conf);
        }

        #[test]
        fn our_line_is_found_among_any_others(
            before in proptest::collection::vec("[a-z =/.#_-]{0,30}", 0..10),
            after in proptest::collection::vec("[a-z =/.#_-]{0,30}", 0..10),
            args in proptest::collection::vec("[a-z_]{1,8}=[a-z0-9]{1,5}", 0..4),
        ) {
            let other = |l: &String| !l.trim_start().starts_with("include") && !l.contains("lemonade");
            prop_assume!(before.iter().all(other) && after.iter().all(other));
            let mut lines = before.clone();
            lines.push(format!("required /usr/lib/slurm/lemonade_spank.so {}", args.join(" ")));
            lines.extend(after.iter().cloned());
            let (_dir, conf) = node(&lines);
            prop_assert_eq!(plugin_args(&conf).unwrap(), Some(args));
        }
    }
}
