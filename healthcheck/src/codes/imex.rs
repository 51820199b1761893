//! The `imex` check's codes: the IMEX daemon of a multi-node NVLink domain.

use super::{exact, CodeEntry};
use crate::checks::imex::{evaluate as ie, NAME};
use lemonade_config::Action::{Investigate, RestartImex};
use lemonade_config::Severity::{Drain, Unknown, Warning};

pub(super) static ENTRIES: &[CodeEntry] = &[
    exact(
        NAME,
        ie::IMEX_DOWN,
        &[Drain],
        RestartImex,
        "the `nvidia-imex` daemon is not running, or runs but is not READY in its domain",
        "`[checks.imex] severity`; `enabled = false`",
    ),
    exact(
        NAME,
        ie::IMEX_PEER_DISCONNECTED,
        &[Warning, Drain],
        RestartImex,
        "`nvidia-imex-ctl -N` shows this node's connection to a peer (either way) other than \
         `C`; a drain when the peer's daemon is READY, a warning when the peer itself is down",
        "`[checks.imex] severity`, `peer_down_severity`, `address`",
    ),
    exact(
        NAME,
        ie::IMEX_CHANNEL_MISSING,
        &[Drain],
        RestartImex,
        "the IMEX channel device (`/dev/nvidia-caps-imex-channels/channel0`) is missing or not \
         a character device; the prolog recreates it",
        "`[checks.imex] channel`, `create_channel`, `severity`",
    ),
    exact(
        NAME,
        ie::IMEX_STATUS_UNKNOWN,
        &[Unknown],
        Investigate,
        "`nvidia-imex-ctl -N` hung, failed or printed what cannot be read, or this node is not \
         among the domain's nodes",
        "`[checks.imex] ctl`, `ctl_timeout_s`, `address`; `enabled = false`",
    ),
];
