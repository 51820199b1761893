//! Builds the fake NVML (`fake-nvml/fake_nvml.c`) into `$OUT_DIR/libnvidia-ml.so.1`,
//! the name nvml-wrapper loads, so tests can put it first on the loader path.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = PathBuf::from("fake-nvml/fake_nvml.c");
    println!("cargo:rerun-if-changed={}", source.display());
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let library = out_dir.join("libnvidia-ml.so.1");

    // cc finds the C compiler the way every -sys crate does (CC, target
    // defaults); the link step is ours, because cc only builds static archives.
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .opt_level(2)
        .get_compiler();
    let status = Command::new(compiler.path())
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Wextra",
            "-fvisibility=hidden",
        ])
        .arg("-o")
        .arg(&library)
        .arg(&source)
        .arg("-lpthread")
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run the C compiler {}: {e}",
                compiler.path().display()
            )
        });
    assert!(status.success(), "building the fake NVML failed");
    println!(
        "cargo:rustc-env=LEMONADE_FAKE_NVML_LIB={}",
        library.display()
    );
}
