//! The fake NVML: a C library (`tests/fake-nvml/`) that the build script
//! compiles into `libnvidia-ml.so.1`, answering from a scenario file.
//!
//! Scenarios live in `tests/fixtures/nvml/*.json`: `h100-healthy.json` is a
//! healthy 8-GPU H100 node; every other file includes it and plants one fault.
//! A process picks its scenario with [`SCENARIO_ENV`] before NVML is
//! initialised, so each scenario runs in its own process (the library reads
//! the file once).

use std::path::{Path, PathBuf};

/// The environment variable naming the scenario file the fake reads.
pub const SCENARIO_ENV: &str = "LEMONADE_FAKE_NVML_SCENARIO";

/// The environment variable naming the fake's event log: lines that change
/// its counters as the driver does (`ecc-unc 1 2`, `reset 1`, `reboot`; see
/// `tests/fake-nvml/README.md`). A reset command appends to it.
pub const EVENTS_ENV: &str = "LEMONADE_FAKE_NVML_EVENTS";

/// The healthy 8-GPU H100 node every fault scenario starts from.
pub const HEALTHY: &str = "h100-healthy";

/// The built fake library, `.../libnvidia-ml.so.1`.
pub fn library() -> PathBuf {
    PathBuf::from(env!("LEMONADE_FAKE_NVML_LIB"))
}

/// Its directory, to put first on `LD_LIBRARY_PATH`.
pub fn library_dir() -> PathBuf {
    library()
        .parent()
        .expect("the library has a directory")
        .to_path_buf()
}

/// `tests/fixtures/nvml`.
pub fn scenarios_dir() -> PathBuf {
    crate::tests_dir().join("fixtures").join("nvml")
}

/// The scenario file `name` (without `.json`); panics if there is none.
pub fn scenario(name: &str) -> PathBuf {
    let path = scenarios_dir().join(format!("{name}.json"));
    assert!(path.is_file(), "no NVML scenario {}", path.display());
    path
}

/// Every scenario's name, sorted.
pub fn scenarios() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(scenarios_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".json")
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Writes `dir/<name>.json`: scenario `base` with `fields` (JSON object
/// members, e.g. `"gpus": {"2": {"pcie_replay": 900}}`) laid over it.
pub fn derive(dir: &Path, name: &str, base: &str, fields: &str) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    let base = scenario(base);
    let sep = if fields.trim().is_empty() { "" } else { ",\n" };
    std::fs::write(
        &path,
        format!("{{\"include\": \"{}\"{sep}{fields}}}\n", base.display()),
    )
    .expect("write a derived scenario");
    path
}

/// A `lemonade.toml` for a fake 8-GPU node: the store under `state_dir`, NVML
/// from the fake library, plus `extra` (more TOML, appended).
pub fn node_config(state_dir: &Path, expected_gpus: usize, extra: &str) -> PathBuf {
    let path = state_dir.join("lemonade.toml");
    let text = format!(
        "[store]\npath = \"{}\"\n\n[checks.gpu]\nexpected_count = {expected_gpus}\nlibrary_path = \"{}\"\n{extra}\n",
        state_dir.join("node.db").display(),
        library().display(),
    );
    std::fs::write(&path, text).expect("write the node config");
    path
}
