//! Settings of the GPU checks (NVML): `[checks.gpu]`, `[checks.ecc]`, `[checks.nvlink]`,
//! `[checks.gpu_pcie]`, `[checks.clocks]`, `[checks.gpu_procs]`.

use serde::{Deserialize, Serialize};

/// `[checks.gpu]`: presence and access.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GpuSettings {
    pub enabled: bool,
    pub deadline_s: Option<f64>,
    /// GPUs the node must have; 0 means the node has none and GPU checks are skipped.
    pub expected_count: usize,
}

impl Default for GpuSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            deadline_s: None,
            expected_count: 0,
        }
    }
}

macro_rules! placeholder_settings {
    ($($name:ident),*) => {$(
        #[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            pub enabled: bool,
            pub deadline_s: Option<f64>,
        }
        impl Default for $name {
            fn default() -> Self { Self { enabled: true, deadline_s: None } }
        }
    )*};
}
placeholder_settings!(
    EccSettings,
    NvlinkSettings,
    GpuPcieSettings,
    ClocksSettings,
    GpuProcsSettings
);
