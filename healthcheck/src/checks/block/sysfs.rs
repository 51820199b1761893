//! Reading NVMe namespaces from `/sys/block`, in the formats the kernel writes.

use crate::check::CheckError;
use crate::root::NodeRoot;

pub const BLOCK_DIR: &str = "/sys/block";

/// What gather found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlockData {
    pub namespaces: Vec<Namespace>,
    /// (device, message naming the file) of namespaces with a malformed value.
    pub unreadable: Vec<(String, String)>,
}

/// One NVMe namespace (`nvme0n1`).
#[derive(Debug, Clone, PartialEq)]
pub struct Namespace {
    pub name: String,
    /// Size in bytes (`size` counts 512-byte sectors whatever the block size).
    pub size_bytes: u64,
    pub read_only: bool,
    /// The controller's state (`live`, `resetting`, `dead`, ...), when sysfs
    /// has one (a native-multipath namespace's `device` is its subsystem, without).
    pub controller_state: Option<String>,
    pub model: Option<String>,
}

/// Reads every NVMe namespace the kernel lists.
pub fn gather(root: &NodeRoot) -> Result<BlockData, CheckError> {
    let mut data = BlockData::default();
    for name in root.list_dir(BLOCK_DIR)? {
        if !is_nvme_namespace(&name) {
            continue;
        }
        match read_namespace(root, &name) {
            Ok(ns) => data.namespaces.push(ns),
            Err(e) => data.unreadable.push((name, e.to_string())),
        }
    }
    Ok(data)
}

fn read_namespace(root: &NodeRoot, name: &str) -> Result<Namespace, CheckError> {
    let dir = format!("{BLOCK_DIR}/{name}");
    let size_path = format!("{dir}/size");
    let sectors = parse_sectors(&root.read_value(&size_path)?)
        .map_err(|m| CheckError::malformed(&size_path, m))?;
    let ro_path = format!("{dir}/ro");
    let read_only =
        parse_flag(&root.read_value(&ro_path)?).map_err(|m| CheckError::malformed(&ro_path, m))?;
    Ok(Namespace {
        name: name.to_string(),
        size_bytes: sectors.saturating_mul(512),
        read_only,
        controller_state: root.read_value_opt(format!("{dir}/device/state"))?,
        model: root
            .read_value_opt(format!("{dir}/device/model"))?
            .map(|m| m.trim().to_string()),
    })
}

/// `nvme0n1`, `nvme12n3`: a namespace, not a controller (`nvme0`), a
/// partition (`nvme0n1p1`) or a hidden multipath path (`nvme0c0n1`).
pub fn is_nvme_namespace(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix("nvme")
        .and_then(|rest| rest.split_once('n'))
        .is_some_and(|(ctrl, ns)| digits(ctrl) && digits(ns))
}

/// A `size` file: 512-byte sectors.
fn parse_sectors(text: &str) -> Result<u64, String> {
    let t = text.trim();
    t.parse()
        .map_err(|_| format!("expected a number of sectors, found {t:?}"))
}

/// An `ro` file: `0` or `1`.
fn parse_flag(text: &str) -> Result<bool, String> {
    match text.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        other => Err(format!("expected 0 or 1, found {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_namespaces_count_as_nvme_devices() {
        assert!(is_nvme_namespace("nvme0n1"));
        assert!(is_nvme_namespace("nvme12n3"));
        for other in [
            "nvme0",
            "nvme0n1p1",
            "nvme0c0n1",
            "nvmen1",
            "nvme0n",
            "sda",
            "md126",
        ] {
            assert!(!is_nvme_namespace(other), "{other}");
        }
    }

    #[test]
    fn sizes_and_flags_parse_and_garbage_is_quoted() {
        assert_eq!(parse_sectors("7501476528\n"), Ok(7_501_476_528));
        assert!(parse_sectors("big").unwrap_err().contains("\"big\""));
        assert_eq!(parse_flag("1\n"), Ok(true));
        assert_eq!(parse_flag("0"), Ok(false));
        assert!(parse_flag("2").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn parsers_never_panic(text in "\\PC{0,40}") {
            let _ = is_nvme_namespace(&text);
            let _ = parse_sectors(&text);
            let _ = parse_flag(&text);
        }

        #[test]
        fn every_controller_and_namespace_number_is_a_namespace(c in 0u32..1000, n in 1u32..1000) {
            let name = format!("nvme{c}n{n}");
            prop_assert!(is_nvme_namespace(&name));
            let partition = format!("nvme{c}n{n}p1");
            prop_assert!(!is_nvme_namespace(&partition));
        }
    }
}
