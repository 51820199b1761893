//! The schema of `lemonade.toml`, the one configuration file of Lemonade.
//!
//! The file has a section per component (`[slurm]`, `[store]`, `[checks.xid]`,
//! `[policy]`, `[lemon]`, `[watch]`, ...). Per-node overrides are `[[node]]` blocks whose
//! `hosts` is a Slurm hostlist; the blocks that match a node are merged over the
//! base in file order, so later blocks win:
//!
//! ```toml
//! [checks.gpu]
//! expected_count = 8
//!
//! [[node]]
//! hosts = "cpu[001-016]"
//! checks.gpu.expected_count = 0
//! ```
//!
//! Unknown keys and wrong types are errors that name the file, the line and
//! the key. Every section has defaults, so an empty file is a valid config.

mod checks;
mod expect;
mod fabric;
mod gpu_checks;
mod host;
mod host_faults;
mod imex;
mod kernel_faults;
mod lemon;
mod load;
mod node;
mod rack;
mod severity;
pub mod spank;
mod validate;
mod watch;
mod watch_source;
mod xid;

pub use checks::*;
pub use expect::*;
pub use fabric::*;
pub use gpu_checks::*;
pub use host::*;
pub use host_faults::*;
pub use imex::*;
pub use kernel_faults::*;
pub use lemon::*;
pub use load::{load, load_str, ConfigError, DEFAULT_PATH, ENV_VAR};
pub use node::*;
pub use rack::{rack_of_nodes, RackSettings};
pub use severity::{Action, Severity};
pub use validate::*;
pub use watch::*;
pub use watch_source::*;
pub use xid::*;

use serde::{Deserialize, Serialize};

/// The whole configuration as one node (or the head node) sees it, overrides applied.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub slurm: SlurmSettings,
    pub store: StoreSettings,
    pub spool: SpoolSettings,
    pub engine: EngineSettings,
    pub policy: PolicySettings,
    pub hooks: HooksSettings,
    pub remediation: RemediationSettings,
    pub checks: ChecksSettings,
    pub lemon: LemonSettings,
    pub watch: WatchSettings,
    pub expect: ExpectSettings,
    pub validate: ValidateSettings,
    /// The `[[rack]]` entries: which nodes share a rack (issue 50).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rack: Vec<RackSettings>,
    /// The `[[node]]` override blocks as written. [`load`] has already applied
    /// the ones matching the node, and leaves this empty.
    #[serde(skip_serializing)]
    pub node: Vec<toml::Table>,
}

/// Settings of every check, one sub-section each (`[checks.xid]`, ...).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ChecksSettings {
    pub xid: XidSettings,
    pub pcie: PcieSettings,
    pub ib: IbSettings,
    pub mounts: MountsSettings,
    pub gpu: GpuSettings,
    pub ecc: EccSettings,
    pub nvlink: NvlinkSettings,
    pub gpu_pcie: GpuPcieSettings,
    pub clocks: ClocksSettings,
    pub gpu_procs: GpuProcsSettings,
    pub memory: MemorySettings,
    pub cpus: CpusSettings,
    pub block: BlockSettings,
    pub services: ServicesSettings,
    pub firmware: FirmwareSettings,
    pub fabric: FabricSettings,
    pub imex: ImexSettings,
    pub modules: ModulesSettings,
    pub dstate: DstateSettings,
    pub pstore: PstoreSettings,
    pub versions: VersionsSettings,
}
