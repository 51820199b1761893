//! Reading PCI functions from sysfs, in the formats the kernel writes.

use crate::check::CheckError;
use crate::root::NodeRoot;
use lemonade_config::PcieSettings;

/// Where the kernel lists every PCI function.
pub const DEVICES_DIR: &str = "/sys/bus/pci/devices";

/// What gather found: the watched functions, and those it could not read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PcieData {
    pub functions: Vec<PciFunction>,
    /// (bus id, message naming the file) of functions with an unreadable or malformed value.
    pub unreadable: Vec<(String, String)>,
}

/// One PCI function of a watched vendor.
#[derive(Debug, Clone, PartialEq)]
pub struct PciFunction {
    /// Bus id, `0000:18:00.0`.
    pub bdf: String,
    /// `0x10de`, lower case as sysfs writes it.
    pub vendor: String,
    pub device: String,
    /// `0x030200`.
    pub class: String,
    /// `None` for functions without PCIe link attributes.
    pub link: Option<Link>,
    /// `None` where the kernel has no AER statistics for the function.
    pub aer: Option<Aer>,
}

/// Link state; speeds in GT/s, `None` when the kernel says `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    pub current_speed: Option<f64>,
    pub max_speed: Option<f64>,
    pub current_width: u32,
    pub max_width: u32,
}

/// AER totals since the device was enumerated.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Aer {
    pub fatal: u64,
    pub nonfatal: u64,
    pub correctable: u64,
}

/// Reads every function of the configured vendors. Virtual functions are
/// skipped: they have no link of their own and would read as link down.
pub fn gather(root: &NodeRoot, settings: &PcieSettings) -> Result<PcieData, CheckError> {
    let mut data = PcieData::default();
    for bdf in root.list_dir(DEVICES_DIR)? {
        let dir = format!("{DEVICES_DIR}/{bdf}");
        match read_function(root, &dir, &bdf, &settings.vendors) {
            Ok(Some(f)) => data.functions.push(f),
            Ok(None) => {}
            Err(e) => data.unreadable.push((bdf, e.to_string())),
        }
    }
    Ok(data)
}

fn read_function(
    root: &NodeRoot,
    dir: &str,
    bdf: &str,
    vendors: &[String],
) -> Result<Option<PciFunction>, CheckError> {
    // Before reading anything, so that a snapshot holds no file of a VF.
    if root.exists(format!("{dir}/physfn")) {
        return Ok(None);
    }
    let vendor = root
        .read_value(format!("{dir}/vendor"))?
        .to_ascii_lowercase();
    if !vendors.iter().any(|v| v.eq_ignore_ascii_case(&vendor)) {
        return Ok(None);
    }
    let device = root
        .read_value(format!("{dir}/device"))?
        .to_ascii_lowercase();
    let class = root
        .read_value(format!("{dir}/class"))?
        .to_ascii_lowercase();
    Ok(Some(PciFunction {
        bdf: bdf.to_string(),
        vendor,
        device,
        class,
        link: read_link(root, dir)?,
        aer: read_aer(root, dir)?,
    }))
}

fn read_link(root: &NodeRoot, dir: &str) -> Result<Option<Link>, CheckError> {
    let read = |name: &str| root.read_value_opt(format!("{dir}/{name}"));
    let (Some(cs), Some(ms), Some(cw), Some(mw)) = (
        read("current_link_speed")?,
        read("max_link_speed")?,
        read("current_link_width")?,
        read("max_link_width")?,
    ) else {
        return Ok(None);
    };
    Ok(Some(Link {
        current_speed: parse_speed(&cs, &format!("{dir}/current_link_speed"))?,
        max_speed: parse_speed(&ms, &format!("{dir}/max_link_speed"))?,
        current_width: parse_width(&cw, &format!("{dir}/current_link_width"))?,
        max_width: parse_width(&mw, &format!("{dir}/max_link_width"))?,
    }))
}

fn read_aer(root: &NodeRoot, dir: &str) -> Result<Option<Aer>, CheckError> {
    let mut aer = Aer::default();
    for (file, total, slot) in [
        ("aer_dev_fatal", "TOTAL_ERR_FATAL", &mut aer.fatal),
        ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL", &mut aer.nonfatal),
        ("aer_dev_correctable", "TOTAL_ERR_COR", &mut aer.correctable),
    ] {
        let path = format!("{dir}/{file}");
        let text = match root.read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        *slot = parse_aer_total(&text, total, &path)?;
    }
    Ok(Some(aer))
}

/// Parses `32.0 GT/s PCIe` (and the older `8 GT/s`); `Unknown` is `None`.
pub fn parse_speed(text: &str, path: &str) -> Result<Option<f64>, CheckError> {
    let text = text.trim();
    if text.starts_with("Unknown") {
        return Ok(None);
    }
    let mut words = text.split_whitespace();
    match (words.next().map(str::parse::<f64>), words.next()) {
        (Some(Ok(v)), Some("GT/s")) => Ok(Some(v)),
        _ => Err(CheckError::malformed(
            path,
            format!("link speed: expected `<n> GT/s PCIe` or `Unknown`, found `{text}`"),
        )),
    }
}

/// Parses a link width (`16`).
pub fn parse_width(text: &str, path: &str) -> Result<u32, CheckError> {
    text.trim().parse().map_err(|_| {
        CheckError::malformed(
            path,
            format!(
                "link width: expected a number of lanes, found `{}`",
                text.trim()
            ),
        )
    })
}

/// The `TOTAL_ERR_*` line of an `aer_dev_*` file (one `NAME count` per line).
pub fn parse_aer_total(text: &str, total: &str, path: &str) -> Result<u64, CheckError> {
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some(total) {
            return words.next().and_then(|v| v.parse().ok()).ok_or_else(|| {
                CheckError::malformed(path, format!("{total}: expected a count in `{line}`"))
            });
        }
    }
    Err(CheckError::malformed(path, format!("no `{total}` line")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_formats() {
        assert_eq!(parse_speed("32.0 GT/s PCIe", "f").unwrap(), Some(32.0));
        assert_eq!(parse_speed("8 GT/s", "f").unwrap(), Some(8.0));
        assert_eq!(parse_speed("Unknown", "f").unwrap(), None);
        assert!(parse_speed("fast", "/sys/x")
            .unwrap_err()
            .to_string()
            .contains("/sys/x"));
        assert_eq!(parse_width("16\n", "f").unwrap(), 16);
        let aer = "Undefined 0\nDLP 1\nTOTAL_ERR_FATAL 3\n";
        assert_eq!(parse_aer_total(aer, "TOTAL_ERR_FATAL", "f").unwrap(), 3);
        assert!(parse_aer_total("DLP 1\n", "TOTAL_ERR_FATAL", "f").is_err());
    }
}
