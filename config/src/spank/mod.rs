//! The SPANK plugin's own configuration: the arguments on its
//! `plugstack.conf` line ([`Settings`]), the user's `--health-check` value
//! ([`Choice`]), the flight-recorder setting ([`Recorder`], issue 32), and finding that line from slurm.conf ([`plugin_args`]), so
//! that `lemonade-prolog` on a node applies the node's line too.

mod args;
mod choice;
mod plugstack;
mod recorder;

pub use args::Settings;
pub use choice::Choice;
pub use plugstack::{plugin_args, PlugstackError};
pub use recorder::Recorder;
