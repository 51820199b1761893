//! Generates the Rust view of `slurm/spank.h` with bindgen.
//!
//! The plugin must be built against the headers of the Slurm it will run
//! under: `plugin_version` comes from the header's `SLURM_VERSION_NUMBER`, and
//! Slurm refuses a plugin of another release series. So the header is found
//! on the build machine, never vendored.
//!
//! Where the header is looked for, in order:
//! 1. `$SLURM_INCLUDE_DIR` (the directory holding `slurm/spank.h`),
//! 2. `pkg-config --cflags-only-I slurm`,
//! 3. the standard include directories.

use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER: &str = "slurm/spank.h";
const HEADER_PACKAGE: &str = "libslurm-dev";
const LIBCLANG_PACKAGE: &str = "libclang-dev";

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");

    let include_dir = find_include_dir().unwrap_or_else(|searched| {
        fail(&format!(
            "cannot find {HEADER} (looked in {}).\n\
             Install the Slurm development headers (Debian/Ubuntu: `apt-get install {HEADER_PACKAGE}`; \
             RHEL: `slurm-devel`), or set SLURM_INCLUDE_DIR to the directory that holds {HEADER}.",
            searched.join(", ")
        ))
    });
    let header = include_dir.join(HEADER);
    println!("cargo:rerun-if-changed={}", header.display());

    let builder = bindgen::Builder::default()
        .header(header.display().to_string())
        .clang_arg(format!("-I{}", include_dir.display()))
        .allowlist_function("spank_.*")
        // Logging into slurmd's own log; these exist in every release since 2.x.
        .allowlist_function("slurm_(error|info|verbose|debug)")
        .allowlist_type("spank_.*")
        .allowlist_var("S_.*")
        .allowlist_var("ESPANK_.*")
        .allowlist_var("SLURM_VERSION_NUMBER")
        .layout_tests(false);

    // bindgen loads libclang at run time and panics when it is missing; turn
    // that into a message that says what to install.
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let generated =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()));
    std::panic::set_hook(previous_hook);
    let bindings = match generated {
        Ok(Ok(bindings)) => bindings,
        Ok(Err(e)) => fail(&format!("bindgen failed on {}: {e}", header.display())),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            fail(&format!(
                "bindgen could not run ({why}).\n\
                 It needs libclang: install it (Debian/Ubuntu: `apt-get install {LIBCLANG_PACKAGE}`), \
                 or set LIBCLANG_PATH to the directory holding libclang.so."
            ))
        }
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("spank_bindings.rs"))
        .unwrap_or_else(|e| fail(&format!("cannot write the bindings: {e}")));
}

/// The directory holding `slurm/spank.h`, or the places searched.
fn find_include_dir() -> Result<PathBuf, Vec<String>> {
    let mut searched = Vec::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("SLURM_INCLUDE_DIR") {
        candidates.push(PathBuf::from(dir));
    }
    candidates.extend(pkg_config_include_dirs());
    candidates.extend(["/usr/include", "/usr/local/include"].map(PathBuf::from));
    for dir in candidates {
        if dir.join(HEADER).is_file() {
            return Ok(dir);
        }
        // pkg-config may name `.../include/slurm` itself.
        if dir.ends_with("slurm") && dir.join("spank.h").is_file() {
            if let Some(parent) = dir.parent() {
                return Ok(parent.to_path_buf());
            }
        }
        searched.push(dir.display().to_string());
    }
    Err(searched)
}

/// `-I` directories of `pkg-config slurm`, if pkg-config and the .pc exist.
fn pkg_config_include_dirs() -> Vec<PathBuf> {
    let Ok(output) = Command::new("pkg-config")
        .args(["--cflags-only-I", "slurm"])
        .output()
    else {
        return Vec::new();
    };
    if !output.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .filter_map(|flag| flag.strip_prefix("-I"))
        .map(|dir| Path::new(dir).to_path_buf())
        .collect()
}

fn fail(message: &str) -> ! {
    eprintln!("\nlemonade-spank: {message}\n");
    std::process::exit(1);
}
