//! The loaded kernel modules: `/proc/modules`, else the `/sys/module`
//! directories of loadable modules (those with a `refcnt`).

use crate::check::CheckError;
use crate::root::NodeRoot;
use std::collections::BTreeSet;

const PROC_MODULES: &str = "/proc/modules";
const SYS_MODULE: &str = "/sys/module";

/// The names of the modules that are loaded and live.
pub fn loaded(root: &NodeRoot) -> Result<BTreeSet<String>, CheckError> {
    match root.read_to_string(PROC_MODULES) {
        Ok(text) => Ok(parse_proc_modules(&text)),
        Err(e) if e.is_not_found() => from_sys_module(root),
        Err(e) => Err(e.into()),
    }
}

/// Pure: `nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)`: the
/// name, and only modules in the `Live` state (not loading or unloading).
pub fn parse_proc_modules(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let live = fields.get(4).is_none_or(|state| *state == "Live");
            (live && !fields.is_empty()).then(|| fields[0].to_string())
        })
        .collect()
}

fn from_sys_module(root: &NodeRoot) -> Result<BTreeSet<String>, CheckError> {
    let mut out = BTreeSet::new();
    for name in root.list_dir(SYS_MODULE)? {
        // Built-in code has a /sys/module entry too, without a refcnt.
        if root.exists(format!("{SYS_MODULE}/{name}/refcnt")) {
            out.insert(name);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_live_modules_count() {
        let text = "\
nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)
nvidia_uvm 1531904 4 - Live 0x0000000000000000 (POE)
ib_core 479232 9 rdma_ucm,ib_ipoib,nvidia_peermem, Live 0x0000000000000000
nv_peer_mem 16384 0 - Unloading 0x0000000000000000 (OE)
";
        let names: Vec<_> = parse_proc_modules(text).into_iter().collect();
        assert_eq!(names, ["ib_core", "nvidia_peermem", "nvidia_uvm"]);
    }

    #[test]
    fn without_proc_modules_the_loadable_modules_of_sys_module_count() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys/module");
        std::fs::create_dir_all(sys.join("nvidia_peermem")).unwrap();
        std::fs::write(sys.join("nvidia_peermem/refcnt"), "0\n").unwrap();
        std::fs::create_dir_all(sys.join("printk")).unwrap();
        let names: Vec<_> = loaded(&NodeRoot::new(dir.path()))
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(names, ["nvidia_peermem"]);
    }
}
