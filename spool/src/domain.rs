//! A GPU's NVLink domain as it travels in the export (issue 50): the
//! cluster UUID and clique ID NVML reports in the GPU's fabric info
//! (`nvmlGpuFabricInfo_v3`'s `clusterUuid`, `cliqueId`).
//!
//! It rides in an [`crate::Body::Inventory`] record, `check` [`CHECK`],
//! `entity` the GPU (`gpu0`), `value` [`NvlinkDomain::value`]: inventory is
//! sent when first seen or changed and lemon keeps each item's latest, which
//! is what a domain needs. The format of the record is unchanged, so older
//! exports (without the items) and older lemons read the same as before.

/// The inventory `check` of a GPU's NVLink domain.
pub const CHECK: &str = "fabric";

/// Longest value [`NvlinkDomain::parse`] reads: a UUID, a `u32` and the words.
const MAX_VALUE: usize = 80;

/// Which NVLink domain (cluster UUID) and partition (clique) a GPU is in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NvlinkDomain {
    /// `clusterUuid` as a lower-case UUID (`8-4-4-4-12` hex digits).
    pub cluster_uuid: String,
    pub clique_id: u32,
}

impl NvlinkDomain {
    /// From NVML's 16 bytes; `None` for all zeros (no multi-node domain).
    pub fn from_raw(cluster_uuid: [u8; 16], clique_id: u32) -> Option<NvlinkDomain> {
        if cluster_uuid == [0; 16] {
            return None;
        }
        let hex: String = cluster_uuid.iter().map(|b| format!("{b:02x}")).collect();
        let cluster_uuid = format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        );
        Some(NvlinkDomain {
            cluster_uuid,
            clique_id,
        })
    }

    /// The inventory value: `cluster <uuid> clique <id>`.
    pub fn value(&self) -> String {
        format!("cluster {} clique {}", self.cluster_uuid, self.clique_id)
    }

    /// Reads [`Self::value`] back; `None` for anything else.
    pub fn parse(value: &str) -> Option<NvlinkDomain> {
        if value.len() > MAX_VALUE {
            return None;
        }
        let mut words = value.split(' ');
        let (Some("cluster"), Some(uuid), Some("clique"), Some(clique), None) = (
            words.next(),
            words.next(),
            words.next(),
            words.next(),
            words.next(),
        ) else {
            return None;
        };
        let uuid_shaped = uuid.len() == 36
            && uuid.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit(),
            });
        let digits = !clique.is_empty() && clique.bytes().all(|b| b.is_ascii_digit());
        if !uuid_shaped || !digits {
            return None;
        }
        Some(NvlinkDomain {
            cluster_uuid: uuid.to_ascii_lowercase(),
            clique_id: clique.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_travels_as_text_and_reads_back() {
        let mut raw = [0u8; 16];
        raw[0] = 0x6d;
        raw[15] = 0x01;
        let d = NvlinkDomain::from_raw(raw, 32766).unwrap();
        assert_eq!(d.cluster_uuid, "6d000000-0000-0000-0000-000000000001");
        assert_eq!(
            d.value(),
            "cluster 6d000000-0000-0000-0000-000000000001 clique 32766"
        );
        assert_eq!(NvlinkDomain::parse(&d.value()), Some(d));
    }

    #[test]
    fn no_cluster_uuid_is_no_domain_and_other_text_does_not_read() {
        assert_eq!(NvlinkDomain::from_raw([0; 16], 7), None);
        for bad in [
            "",
            "cluster x clique 1",
            "cluster 6d000000-0000-0000-0000-000000000001 clique",
            "cluster 6d000000-0000-0000-0000-000000000001 clique -1",
            "cluster 6d000000-0000-0000-0000-000000000001 clique 99999999999",
            "cluster 6d000000-0000-0000-0000-000000000001 clique 1 extra",
            "cluster 6d000000x0000-0000-0000-000000000001 clique 1",
        ] {
            assert_eq!(NvlinkDomain::parse(bad), None, "{bad}");
        }
    }
}
