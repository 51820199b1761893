//! A finding: what one check concluded about one entity.

use lemonade_config::{Action, Severity};
use lemonade_spool::Body;
use lemonade_sql::node::FindingRow;
use serde::{Deserialize, Serialize};

/// One conclusion of one check about one entity (`gpu3`, `mlx5_2:1`, `/checkpoint`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The check's name, e.g. `xid`.
    pub check: String,
    /// What it is about: `gpu3`, `mlx5_2:1`, `/checkpoint`, or `node`.
    pub entity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Stable code: `OK`, `XID_79`, `PCIE_WIDTH_DEGRADED`, `MOUNT_HUNG`.
    pub code: String,
    pub severity: Severity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
    pub action: Action,
    pub message: String,
    /// Judged from a counter's growth between runs (error rates, AER,
    /// NVLink replays): links that train after a boot move these, so the
    /// policy does not act on them within `[policy] boot_grace_s`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counter_growth: bool,
}

/// Code of a healthy finding.
pub const OK: &str = "OK";

impl Finding {
    /// A finding with the given code and severity; refine it with the builder methods.
    pub fn new(
        check: &str,
        entity: impl Into<String>,
        code: impl Into<String>,
        severity: Severity,
    ) -> Finding {
        Finding {
            check: check.to_string(),
            entity: entity.into(),
            pci_bus_id: None,
            uuid: None,
            code: code.into(),
            severity,
            expected: None,
            actual: None,
            action: if severity == Severity::Ok {
                Action::None
            } else {
                Action::Investigate
            },
            message: String::new(),
            counter_growth: false,
        }
    }

    /// A healthy entity.
    pub fn ok(check: &str, entity: impl Into<String>) -> Finding {
        Finding::new(check, entity, OK, Severity::Ok)
    }

    /// The check could not run; never drains by itself.
    pub fn unknown(
        check: &str,
        entity: impl Into<String>,
        code: &str,
        message: impl Into<String>,
    ) -> Finding {
        Finding::new(check, entity, code, Severity::Unknown).message(message)
    }

    pub fn expected(mut self, value: impl ToString) -> Self {
        self.expected = Some(value.to_string());
        self
    }

    pub fn actual(mut self, value: impl ToString) -> Self {
        self.actual = Some(value.to_string());
        self
    }

    pub fn action(mut self, action: Action) -> Self {
        self.action = action;
        self
    }

    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Marks a finding judged from counter growth.
    pub fn from_counter_growth(mut self) -> Self {
        self.counter_growth = true;
        self
    }

    pub fn pci(mut self, bus_id: impl Into<String>) -> Self {
        self.pci_bus_id = Some(bus_id.into());
        self
    }

    pub fn uuid(mut self, uuid: impl Into<String>) -> Self {
        self.uuid = Some(uuid.into());
        self
    }

    pub fn is_ok(&self) -> bool {
        self.severity == Severity::Ok
    }
}

/// The worst severity among findings; `ok` when there are none.
pub fn worst<'a>(findings: impl IntoIterator<Item = &'a Finding>) -> Severity {
    findings
        .into_iter()
        .map(|f| f.severity)
        .max()
        .unwrap_or(Severity::Ok)
}

/// A finding as the node database keeps it.
impl From<&Finding> for FindingRow {
    fn from(f: &Finding) -> FindingRow {
        FindingRow {
            check_name: f.check.clone(),
            entity: f.entity.clone(),
            pci_bus_id: f.pci_bus_id.clone(),
            uuid: f.uuid.clone(),
            code: f.code.clone(),
            severity: f.severity,
            expected: f.expected.clone(),
            actual: f.actual.clone(),
            action: f.action.as_str().to_string(),
            message: f.message.clone(),
        }
    }
}

/// A finding of a run about a job (or none), as the spool export carries it.
pub struct OfJob<'a> {
    pub finding: &'a Finding,
    pub job_id: Option<&'a str>,
}

impl From<OfJob<'_>> for Body {
    fn from(OfJob { finding: f, job_id }: OfJob<'_>) -> Body {
        Body::Finding {
            check: f.check.clone(),
            entity: f.entity.clone(),
            code: f.code.clone(),
            severity: f.severity,
            message: f.message.clone(),
            job_id: job_id.map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_keeps_its_fields_as_a_row_and_as_a_spool_record() {
        let f = Finding::new("gpu-pcie", "gpu3", "PCIE_WIDTH_DEGRADED", Severity::Drain)
            .pci("0000:9a:00.0")
            .expected("x16")
            .actual("x8")
            .action(Action::Reboot)
            .message("narrow");
        let row = FindingRow::from(&f);
        assert_eq!(
            (
                row.severity.as_str(),
                row.action.as_str(),
                row.pci_bus_id.as_deref(),
                row.actual.as_deref()
            ),
            ("drain", "reboot", Some("0000:9a:00.0"), Some("x8"))
        );
        let body = Body::from(OfJob {
            finding: &f,
            job_id: Some("42"),
        });
        assert_eq!(
            body,
            Body::Finding {
                check: "gpu-pcie".into(),
                entity: "gpu3".into(),
                code: "PCIE_WIDTH_DEGRADED".into(),
                severity: Severity::Drain,
                message: "narrow".into(),
                job_id: Some("42".into()),
            }
        );
    }
}
