//! Benchmark output parsers for proactive validation (issue 31).
//!
//! Each module reads one tool's saved output into [`Metrics`]: named numbers
//! with their units. Parsers are pure functions of the text. A truncated or
//! garbled output is an error that names the line, never a pass: each format
//! has a closing line (nccl-tests' `# Avg bus bandwidth`, nvbandwidth's `SUM`,
//! perftest's closing rule, gpu-burn's per-GPU summary, the end of the JSON
//! document) and a parser that has not seen it, newline included, refuses.
//!
//! Beside the parsers, what both sides of a validation share: a node's
//! [`sku`] and the learned criteria file ([`criteria_file`]) lemon writes
//! into the spool directory and nodes read.

pub mod criteria_file;
pub mod dcgmi_diag;
mod error;
pub mod gpu_burn;
mod lines;
mod metric;
pub mod nccl_tests;
pub mod nvbandwidth;
pub mod perftest;
pub mod plain_file;
pub mod sku;

pub use error::ParseError;
pub use metric::{Metric, Metrics};

use std::fmt;
use std::str::FromStr;

/// The largest output any parser reads. A real run prints a few hundred
/// kilobytes at most (nccl-tests with NCCL_DEBUG=INFO on many ranks); more is
/// not a benchmark's output.
pub const MAX_INPUT_BYTES: usize = 16 * 1024 * 1024;

/// Which tool printed the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    NcclTests,
    Nvbandwidth,
    Perftest,
    DcgmiDiag,
    GpuBurn,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::NcclTests,
        Kind::Nvbandwidth,
        Kind::Perftest,
        Kind::DcgmiDiag,
        Kind::GpuBurn,
    ];

    /// The name used on the command line and in the config.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NcclTests => "nccl-tests",
            Kind::Nvbandwidth => "nvbandwidth",
            Kind::Perftest => "perftest",
            Kind::DcgmiDiag => "dcgmi-diag",
            Kind::GpuBurn => "gpu-burn",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown parser name, with the known ones for the message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown benchmark kind {0:?}: expected one of nccl-tests, nvbandwidth, perftest, dcgmi-diag, gpu-burn")]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|kind| kind.name() == s)
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// Parse `text` as the output of `kind`.
pub fn parse(kind: Kind, text: &str) -> Result<Metrics, ParseError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(ParseError::TooLarge {
            size: text.len(),
            max: MAX_INPUT_BYTES,
        });
    }
    match kind {
        Kind::NcclTests => nccl_tests::parse(text),
        Kind::Nvbandwidth => nvbandwidth::parse(text),
        Kind::Perftest => perftest::parse(text),
        Kind::DcgmiDiag => dcgmi_diag::parse(text),
        Kind::GpuBurn => gpu_burn::parse(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_name() {
        for kind in Kind::ALL {
            assert_eq!(kind.name().parse::<Kind>(), Ok(kind));
        }
        assert!("nccl".parse::<Kind>().is_err());
    }

    #[test]
    fn an_output_over_the_cap_is_refused_before_parsing() {
        let text = "x".repeat(MAX_INPUT_BYTES + 1);
        assert!(matches!(
            parse(Kind::GpuBurn, &text),
            Err(ParseError::TooLarge { .. })
        ));
    }
}
