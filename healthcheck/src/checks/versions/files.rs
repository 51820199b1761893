//! Versions read from files: the kernel, the CUDA toolkit, NCCL.

use crate::check::CheckError;
use crate::root::NodeRoot;

const OSRELEASE: &str = "/proc/sys/kernel/osrelease";
const CUDA_JSON: &str = "/usr/local/cuda/version.json";
const CUDA_TXT: &str = "/usr/local/cuda/version.txt";
/// Where distribution packages and the CUDA toolkit put `libnccl.so.2.x.y`.
const NCCL_DIRS: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/local/cuda/lib64",
];

/// The running kernel's release (`5.15.0-105-generic`).
pub fn kernel(root: &NodeRoot) -> Result<Option<String>, CheckError> {
    Ok(root.read_value_opt(OSRELEASE)?)
}

/// The CUDA toolkit at `/usr/local/cuda`, where installed.
pub fn cuda_toolkit(root: &NodeRoot) -> Result<Option<String>, CheckError> {
    if let Some(json) = root.read_value_opt(CUDA_JSON)? {
        return Ok(cuda_json_version(&json));
    }
    Ok(root.read_value_opt(CUDA_TXT)?.and_then(|t| {
        t.strip_prefix("CUDA Version ")
            .map(|v| v.trim().to_string())
    }))
}

/// Pure: `"cuda" : { "name" : "CUDA SDK", "version" : "12.4.1" }` of version.json.
pub fn cuda_json_version(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    Some(v["cuda"]["version"].as_str()?.to_string())
}

/// The newest NCCL library in the usual directories, where installed.
pub fn nccl(root: &NodeRoot) -> Result<Option<String>, CheckError> {
    let mut best: Option<Vec<u64>> = None;
    for dir in NCCL_DIRS {
        for name in root.list_dir(dir)? {
            if let Some(v) = nccl_version(&name) {
                if best.as_ref().is_none_or(|b| &v > b) {
                    best = Some(v);
                }
            }
        }
    }
    Ok(best.map(|v| v.iter().map(u64::to_string).collect::<Vec<_>>().join(".")))
}

/// Pure: `libnccl.so.2.21.5` → [2, 21, 5].
pub fn nccl_version(file: &str) -> Option<Vec<u64>> {
    let v = file.strip_prefix("libnccl.so.")?;
    let parts: Option<Vec<u64>> = v.split('.').map(|p| p.parse().ok()).collect();
    parts.filter(|p| p.len() == 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_is_read_from_the_library_name() {
        assert_eq!(nccl_version("libnccl.so.2.21.5"), Some(vec![2, 21, 5]));
        assert_eq!(nccl_version("libnccl.so.2"), None);
        assert_eq!(nccl_version("libnccl-net.so"), None);
    }

    #[test]
    fn the_cuda_toolkit_version_comes_from_version_json() {
        let json = r#"{ "cuda" : { "name" : "CUDA SDK", "version" : "12.4.1" }, "cuda_cudart" : { "version" : "12.4.127" } }"#;
        assert_eq!(cuda_json_version(json).as_deref(), Some("12.4.1"));
        assert_eq!(cuda_json_version("{}"), None);
    }

    #[test]
    fn the_newest_nccl_of_the_usual_directories_wins() {
        let dir = tempfile::tempdir().unwrap();
        for (d, f) in [
            ("usr/lib/x86_64-linux-gnu", "libnccl.so.2.19.3"),
            ("usr/local/cuda/lib64", "libnccl.so.2.21.5"),
            ("usr/local/cuda/lib64", "libnccl.so.2"),
        ] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
            std::fs::write(dir.path().join(d).join(f), "").unwrap();
        }
        let root = NodeRoot::new(dir.path());
        assert_eq!(nccl(&root).unwrap().as_deref(), Some("2.21.5"));
        assert_eq!(cuda_toolkit(&root).unwrap(), None);
    }
}
