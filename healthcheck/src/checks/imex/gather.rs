//! What the `imex` check reads: the daemon in `/proc`, the channel device,
//! this node's addresses, and `nvidia-imex-ctl -N` under its deadline.

use super::ctl::{self, DomainStatus};
use crate::check::CheckError;
use crate::checks::services::procfs;
use crate::root::{NodeRoot, ReadError};
use lemonade_config::ImexSettings;
use std::os::unix::fs::FileTypeExt;
use std::time::Duration;

/// The channel device as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channel {
    Present,
    Missing,
    /// Something else under its name (a file, a directory, a symlink,
    /// which is never followed): what it is.
    NotADevice(&'static str),
}

/// What `nvidia-imex-ctl -N` gave: the domain, or why not (a deadline, an
/// exit status, output that does not parse).
pub type CtlResult = Result<DomainStatus, String>;

/// Everything the evaluation needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ImexData {
    /// The daemon's pid when it runs.
    pub daemon: Option<u32>,
    pub channel: Channel,
    /// `None` when the daemon is not running: nobody to ask.
    pub ctl: Option<CtlResult>,
    /// This node's names in the domain's node list (addresses, host name).
    pub local: Vec<String>,
}

pub const FIB_TRIE: &str = "/proc/net/fib_trie";
/// `nvidia-imex-ctl -N`'s output captured by `healthcheck snapshot`, as the
/// node sees the path: a replay reads it instead of asking this machine.
pub const CTL_FILE: &str = "/.lemonade/imex-ctl-N.txt";
pub const HOSTNAME: &str = "/proc/sys/kernel/hostname";

pub fn gather(root: &NodeRoot, settings: &ImexSettings) -> Result<ImexData, CheckError> {
    let wanted = [settings.daemon.clone()];
    let running = procfs::gather(root, &wanted)?;
    let daemon = running.0.get(procfs::comm_name(&settings.daemon)).copied();
    let ctl = match daemon {
        None => None,
        Some(_) if !root.is_live() && root.exists(CTL_FILE) => {
            let text = root.read_to_string(CTL_FILE)?;
            Some(ctl::parse(&text).map_err(|e| format!("{CTL_FILE}: {e}")))
        }
        Some(_) => Some(run_ctl(settings)),
    };
    Ok(ImexData {
        daemon,
        channel: channel(root, &settings.channel)?,
        ctl,
        local: local_names(root, settings)?,
    })
}

/// The channel device, looked at without following a symlink.
pub fn channel(root: &NodeRoot, node_path: &str) -> Result<Channel, ReadError> {
    match std::fs::symlink_metadata(root.path(node_path)) {
        Ok(meta) => {
            root.note(node_path);
            let kind = meta.file_type();
            Ok(if kind.is_char_device() {
                Channel::Present
            } else if kind.is_symlink() {
                Channel::NotADevice("a symlink")
            } else if kind.is_dir() {
                Channel::NotADevice("a directory")
            } else {
                Channel::NotADevice("not a character device")
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Channel::Missing),
        Err(e) => Err(ReadError {
            path: node_path.to_string(),
            source: e,
        }),
    }
}

/// What `<ctl> -N` printed and its exit code, under `ctl_timeout_s`.
pub fn ctl_output(settings: &ImexSettings) -> Result<(String, Option<i32>), String> {
    let argv = [settings.ctl.clone(), "-N".to_string()];
    let timeout = Duration::from_secs_f64(settings.ctl_timeout_s.max(0.1));
    let done = crate::bounded::run_any_status(&argv, b"", timeout)
        .map_err(|e| format!("`{} -N`: {e}", settings.ctl))?;
    Ok((
        String::from_utf8_lossy(&done.stdout).into_owned(),
        done.code,
    ))
}

/// `<ctl> -N`, read; any failure is a sentence.
fn run_ctl(settings: &ImexSettings) -> CtlResult {
    let shown = format!("{} -N", settings.ctl);
    let (text, code) = ctl_output(settings)?;
    ctl::parse(&text).map_err(|e| match code {
        Some(0) => format!("`{shown}` printed what we cannot read: {e}"),
        code => format!(
            "`{shown}` exited with {} and printed what we cannot read: {e}",
            code.map_or("a signal".to_string(), |c| c.to_string())
        ),
    })
}

/// The configured address, else this node's local IPv4 addresses and its
/// host name.
fn local_names(root: &NodeRoot, settings: &ImexSettings) -> Result<Vec<String>, CheckError> {
    if let Some(address) = &settings.address {
        return Ok(vec![address.clone()]);
    }
    let mut names = match root.read_to_string(FIB_TRIE) {
        Ok(text) => local_addresses(&text),
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    if let Some(host) = root.read_value_opt(HOSTNAME)? {
        names.push(host);
    }
    Ok(names)
}

/// The addresses `/proc/net/fib_trie` marks `/32 host LOCAL`: each follows
/// the `|-- <address>` line it belongs to. Loopback is left out.
pub fn local_addresses(fib_trie: &str) -> Vec<String> {
    let mut last: Option<&str> = None;
    let mut out: Vec<String> = Vec::new();
    for line in fib_trie.lines() {
        let t = line.trim();
        if let Some(addr) = t.strip_prefix("|-- ") {
            last = Some(addr.trim());
        } else if t.starts_with("/32 host LOCAL") {
            if let Some(addr) = last.filter(|a| !a.starts_with("127.")) {
                if !out.iter().any(|o| o == addr) {
                    out.push(addr.to_string());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIB: &str = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.1
              /32 host LOCAL
     +-- 172.31.48.0/20 2 0 2
        |-- 172.31.48.0
           /20 link UNICAST
        |-- 172.31.48.98
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
        |-- 172.31.48.98
           /32 host LOCAL
";

    #[test]
    fn local_addresses_are_the_host_local_entries_without_loopback() {
        assert_eq!(local_addresses(FIB), ["172.31.48.98"]);
    }

    #[test]
    fn a_symlink_in_place_of_the_channel_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let caps = dir.path().join("dev/nvidia-caps-imex-channels");
        std::fs::create_dir_all(&caps).unwrap();
        std::os::unix::fs::symlink("/dev/null", caps.join("channel0")).unwrap();
        let root = NodeRoot::new(dir.path());
        let path = "/dev/nvidia-caps-imex-channels/channel0";
        assert_eq!(
            channel(&root, path).unwrap(),
            Channel::NotADevice("a symlink")
        );
        std::fs::remove_file(caps.join("channel0")).unwrap();
        assert_eq!(channel(&root, path).unwrap(), Channel::Missing);
    }
}
