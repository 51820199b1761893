//! `[checks.imex]`: the IMEX daemon of a multi-node NVLink domain
//! (GB200/GB300 NVL72), its peers and its channel device.

use crate::Severity;
use serde::{Deserialize, Serialize};

/// The channel device NVIDIA's IMEX guide has the prolog create.
pub const DEFAULT_IMEX_CHANNEL: &str = "/dev/nvidia-caps-imex-channels/channel0";

/// `[checks.imex]`. Off by default: only a node that is part of an NVLink
/// domain runs an IMEX daemon, and a site turns the check on for those
/// (a `[[node]]` block naming the racks' trays).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ImexSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// The daemon's process name (`/proc/<pid>/comm`).
    pub daemon: String,
    /// `nvidia-imex-ctl`, run as `<ctl> -N` under `ctl_timeout_s`.
    pub ctl: String,
    pub ctl_timeout_s: f64,
    /// The channel device jobs use; the prolog recreates it when missing.
    pub channel: String,
    /// The prolog creates a missing `channel` (mknod, major from
    /// `/proc/devices`), as NVIDIA's guide says.
    pub create_channel: bool,
    /// This node's IMEX address as `nodes_config.cfg` lists it; unset: the
    /// node's own IPv4 addresses (`/proc/net/fib_trie`).
    pub address: Option<String>,
    /// The argv of the repair rung that restarts the daemon.
    pub restart_command: Vec<String>,
    /// Deadline of `restart_command`, and of the checks run after it.
    pub restart_timeout_s: f64,
    /// Severity of `IMEX_DOWN`, `IMEX_PEER_DISCONNECTED` (a link of this
    /// node to a peer whose daemon is READY) and `IMEX_CHANNEL_MISSING`.
    pub severity: Severity,
    /// Severity of `IMEX_PEER_DISCONNECTED` when the peer's own daemon is
    /// not READY: the peer's fault, found and drained on the peer.
    pub peer_down_severity: Severity,
}

impl Default for ImexSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            deadline_s: None,
            daemon: "nvidia-imex".into(),
            ctl: "/usr/bin/nvidia-imex-ctl".into(),
            ctl_timeout_s: 3.0,
            channel: DEFAULT_IMEX_CHANNEL.into(),
            create_channel: true,
            address: None,
            restart_command: ["systemctl", "restart", "nvidia-imex"]
                .map(String::from)
                .to_vec(),
            restart_timeout_s: 20.0,
            severity: Severity::Drain,
            peer_down_severity: Severity::Warning,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::load_str;

    #[test]
    fn imex_is_off_unless_a_node_is_configured_into_a_domain() {
        let origin = std::path::Path::new("t.toml");
        let config = load_str("", origin, None).unwrap();
        assert!(!config.checks.imex.enabled);
        let text = "[[node]]\nhosts = \"gb[01-18]\"\nchecks.imex.enabled = true\nchecks.imex.ctl_timeout_s = 1.5\n";
        let config = load_str(text, origin, Some("gb07")).unwrap();
        assert!(config.checks.imex.enabled);
        assert_eq!(config.checks.imex.ctl_timeout_s, 1.5);
        assert_eq!(
            config.checks.imex.channel,
            "/dev/nvidia-caps-imex-channels/channel0"
        );
        assert!(
            !load_str(text, origin, Some("cpu01"))
                .unwrap()
                .checks
                .imex
                .enabled
        );
    }
}
