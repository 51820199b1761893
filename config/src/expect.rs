//! `[expect]`: versions pinned for the site (or, in a `[[node]]` block, for
//! some nodes). The `versions` check makes a node running another version a
//! `VERSION_MISMATCH` finding; an unset key pins nothing.

use crate::Severity;
use serde::{Deserialize, Serialize};

/// `[expect]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ExpectSettings {
    /// The NVIDIA driver (`550.54.15`).
    pub driver: Option<String>,
    /// The CUDA version the driver supports (`12.4`).
    pub cuda_driver: Option<String>,
    /// The CUDA toolkit in `/usr/local/cuda` (`12.4.1`).
    pub cuda_toolkit: Option<String>,
    /// NCCL (`2.21.5`).
    pub nccl: Option<String>,
    /// The kernel release (`5.15.0-105-generic`).
    pub kernel: Option<String>,
    /// Every GPU's GSP firmware.
    pub gsp: Option<String>,
    /// Severity of `VERSION_MISMATCH`.
    pub severity: Severity,
}

impl Default for ExpectSettings {
    fn default() -> Self {
        Self {
            driver: None,
            cuda_driver: None,
            cuda_toolkit: None,
            nccl: None,
            kernel: None,
            gsp: None,
            severity: Severity::Warning,
        }
    }
}

impl ExpectSettings {
    /// The pin for a `versions` entity (`driver`, `cuda-toolkit`, `gpu3/gsp`).
    pub fn pin(&self, entity: &str) -> Option<&str> {
        let pin = match entity {
            "driver" => &self.driver,
            "cuda-driver" => &self.cuda_driver,
            "cuda-toolkit" => &self.cuda_toolkit,
            "nccl" => &self.nccl,
            "kernel" => &self.kernel,
            e if e.ends_with("/gsp") => &self.gsp,
            _ => &None,
        };
        pin.as_deref()
    }
}
