//! A node's SKU: the hardware class whose nodes are judged against each
//! other. Both sides compute it with [`sku`]: the node when it judges its own
//! results against the learned bands, lemon when it learns them.
//!
//! The SKU is the GPU model and count, then the HCA model and count:
//! `H100x8`, `H100x8+ConnectX-7x8`. Pure, from the model strings the node
//! reads (NVML's GPU names, the HCAs' `hca_type` in sysfs), so that a site
//! whose nodes report odd names can override it (`[validate] sku`).

/// The SKU of a node with these GPU names (NVML's, e.g. `NVIDIA H100 80GB
/// HBM3`) and HCA types (sysfs `hca_type`, e.g. `MT4129`, or a model name).
/// Each distinct model appears once with its count, in order of first
/// appearance; no GPUs and no HCAs gives `none`.
pub fn sku(gpu_names: &[&str], hca_types: &[&str]) -> String {
    let parts: Vec<String> = counted(gpu_names.iter().map(|name| gpu_model(name)))
        .into_iter()
        .chain(counted(hca_types.iter().map(|t| hca_model(t))))
        .map(|(model, count)| format!("{model}x{count}"))
        .collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join("+")
    }
}

/// `NVIDIA H100 80GB HBM3` -> `H100`, `NVIDIA A100-SXM4-80GB` -> `A100`,
/// `Tesla V100-SXM2-32GB` -> `V100`, `NVIDIA RTX A6000` -> `A6000`,
/// `NVIDIA GeForce RTX 4090` -> `RTX4090`: the first word with a digit, cut
/// at its first `-` (the form factor and memory follow it), with the word
/// before it when it is digits only.
pub fn gpu_model(name: &str) -> String {
    let words: Vec<&str> = name.split_whitespace().collect();
    let Some(at) = words
        .iter()
        .position(|w| w.chars().any(|c| c.is_ascii_digit()))
    else {
        return squeeze(name);
    };
    let word = words[at].split('-').next().unwrap_or(words[at]);
    if word.chars().all(|c| c.is_ascii_digit()) && at > 0 {
        format!("{}{word}", words[at - 1])
    } else {
        word.to_string()
    }
}

/// Mellanox/NVIDIA `hca_type` (the PCI device id behind `MT`) to the model
/// name; anything else is kept as it reads, without blanks.
pub fn hca_model(hca_type: &str) -> String {
    let model = match hca_type.trim() {
        "MT4115" | "MT4116" => "ConnectX-4",
        "MT4117" | "MT4118" => "ConnectX-4Lx",
        "MT4119" | "MT4120" | "MT4121" | "MT4122" => "ConnectX-5",
        "MT4123" | "MT4124" => "ConnectX-6",
        "MT4125" => "ConnectX-6Dx",
        "MT4127" => "ConnectX-6Lx",
        "MT4129" => "ConnectX-7",
        "MT4131" => "ConnectX-8",
        "MT41682" => "BlueField-2",
        "MT41686" => "BlueField-3",
        other => return squeeze(other),
    };
    model.to_string()
}

/// The SKU is one token in drain reasons and CSV files: no blanks in it.
fn squeeze(s: &str) -> String {
    let joined: String = s.split_whitespace().collect::<Vec<_>>().join("_");
    if joined.is_empty() {
        "unknown".to_string()
    } else {
        joined
    }
}

fn counted(models: impl Iterator<Item = String>) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for model in models {
        match out.iter_mut().find(|(m, _)| *m == model) {
            Some((_, count)) => *count += 1,
            None => out.push((model, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_h100s_and_eight_connectx7s_make_one_sku() {
        let gpus = ["NVIDIA H100 80GB HBM3"; 8];
        let hcas = ["MT4129"; 8];
        assert_eq!(sku(&gpus, &hcas), "H100x8+ConnectX-7x8");
        assert_eq!(sku(&gpus, &[]), "H100x8");
        assert_eq!(sku(&[], &[]), "none");
    }

    #[test]
    fn nvml_names_lose_their_vendor_form_factor_and_memory() {
        assert_eq!(gpu_model("NVIDIA A100-SXM4-80GB"), "A100");
        assert_eq!(gpu_model("Tesla V100-SXM2-32GB"), "V100");
        assert_eq!(gpu_model("NVIDIA RTX A6000"), "A6000");
        assert_eq!(gpu_model("NVIDIA GeForce RTX 4090"), "RTX4090");
        assert_eq!(gpu_model("NVIDIA H200"), "H200");
        assert_eq!(gpu_model("Some Card"), "Some_Card");
    }

    #[test]
    fn mixed_models_are_counted_each_in_order_of_appearance() {
        let gpus = [
            "NVIDIA A100-SXM4-40GB",
            "NVIDIA H100 PCIe",
            "NVIDIA A100-SXM4-80GB",
        ];
        assert_eq!(
            sku(&gpus, &["MT4123", "odd hca"]),
            "A100x2+H100x1+ConnectX-6x1+odd_hcax1"
        );
    }
}
