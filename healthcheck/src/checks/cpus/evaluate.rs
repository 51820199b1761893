//! Judging the online CPUs: a pure function of gathered data and config.

use super::sysfs::{CpuData, ONLINE};
use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, CpusSettings};

pub const CPU_OFFLINE: &str = "CPU_OFFLINE";

/// One finding about the node's CPUs; none when no count is expected.
pub fn evaluate(data: &CpuData, settings: &CpusSettings) -> Vec<Finding> {
    let Some(expected) = settings.expected_online else {
        return Vec::new();
    };
    vec![if data.online < expected {
        Finding::new(NAME, "cpus", CPU_OFFLINE, settings.offline_severity)
            .expected(expected)
            .actual(data.online)
            .action(Action::Repair)
            .message(format!(
                "{} of {expected} CPUs online ({ONLINE}: {})",
                data.online, data.online_list
            ))
    } else {
        Finding::ok(NAME, "cpus")
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

    fn data(online: usize) -> CpuData {
        CpuData {
            online_list: format!("0-{}", online - 1),
            online,
        }
    }

    #[test]
    fn fewer_cpus_than_expected_drain_and_as_many_or_more_are_ok() {
        let s = CpusSettings {
            expected_online: Some(224),
            ..CpusSettings::default()
        };
        let low = evaluate(&data(112), &s);
        assert_eq!(
            (low[0].code.as_str(), low[0].severity),
            (CPU_OFFLINE, Severity::Drain)
        );
        assert!(low[0].message.contains("0-111"));
        for online in [224, 256] {
            let found = evaluate(&data(online), &s);
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(found[0].is_ok(), "{online} online: {found:?}");
            assert_eq!(
                (found[0].check.as_str(), found[0].entity.as_str()),
                (NAME, "cpus")
            );
        }
    }

    #[test]
    fn without_an_expected_count_nothing_is_judged() {
        assert!(evaluate(&data(1), &CpusSettings::default()).is_empty());
    }
}
