//! Loading NVML for a run: the handle the GPU checks share (kept in
//! [`Shared::nvml`](crate::check::Shared)) and why it could not be loaded.
//!
//! Below both the check interface and the GPU checks, so that the run's
//! shared resources can name NVML's failure without knowing the checks.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::sync::Arc;

/// Why NVML could not be initialised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitFailure {
    /// The driver is gone: library missing, kernel module not loaded, or a
    /// library that does not match the loaded module (upgraded, not rebooted).
    pub driver_gone: bool,
    pub message: String,
}

/// Loads and initialises NVML from `library`.
pub fn load(library: &std::path::Path) -> Result<Arc<Nvml>, InitFailure> {
    let result = Nvml::builder().lib_path(library.as_os_str()).init();
    result.map(Arc::new).map_err(|e| {
        let driver_gone = matches!(
            e,
            NvmlError::LibloadingError(_)
                | NvmlError::FailedToLoadSymbol(_)
                | NvmlError::DriverNotLoaded
                | NvmlError::LibRmVersionMismatch
                | NvmlError::LibraryNotFound
        );
        InitFailure {
            driver_gone,
            message: format!("cannot initialise NVML from {}: {e}", library.display()),
        }
    })
}
