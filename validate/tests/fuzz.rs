//! Random truncation and byte mutation of every fixture, over many seeds:
//! the parsers never panic, and a cut made before an output's closing line
//! (newline included) is always an error, never a pass.

use validate::{parse, Kind};

/// splitmix64: a few lines of deterministic randomness, so that a failing
/// seed replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

const SEEDS: u64 = 1500;

/// Each fixture, with the byte offset just past its closing line: a cut
/// anywhere before it must be refused.
fn cases() -> Vec<(Kind, String, usize)> {
    let read = |kind: &str, name: &str| {
        let path = format!(
            "{}/tests/fixtures/{kind}/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
    };
    let past_line = |text: &str, marker: &str| {
        let start = text
            .rfind(marker)
            .unwrap_or_else(|| panic!("no {marker:?}"));
        start + text[start..].find('\n').unwrap() + 1
    };
    let mut cases = Vec::new();
    let nccl = [
        "all_reduce_h100_16gpus.txt",
        "all_reduce_gh200_wrong.txt",
        "all_gather_v100_8gpus_error_column.txt",
    ];
    for name in nccl {
        let text = read("nccl_tests", name);
        let end = past_line(&text, "Avg bus bandwidth");
        cases.push((Kind::NcclTests, text, end));
    }
    // nvbandwidth prints no end-of-run line: a cut between two tests reads as
    // a shorter run (the caller checks the tests it asked for are there,
    // `nvbandwidth::missing_tests`), so the property holds up to the first SUM.
    for name in ["d2d_read_ce_6gpus.txt", "host_device_8gpus.txt"] {
        let text = read("nvbandwidth", name);
        let start = text.find("SUM ").unwrap();
        let end = start + text[start..].find('\n').unwrap() + 1;
        cases.push((Kind::Nvbandwidth, text, end));
    }
    for name in [
        "ib_write_bw_gbits_8bytes.txt",
        "ib_write_bw_mb_softroce_warning.txt",
    ] {
        let text = read("perftest", name);
        let end = past_line(&text, "---");
        cases.push((Kind::Perftest, text, end));
    }
    let text = read("dcgmi_diag", "handmade_r2_gpu0_fail.json");
    let end = text.rfind('}').unwrap() + 1;
    cases.push((Kind::DcgmiDiag, text, end));
    let text = read("gpu_burn", "faulty_16gpus.txt");
    let end = past_line(&text, "GPU 15: FAULTY");
    cases.push((Kind::GpuBurn, text, end));
    cases
}

#[test]
fn every_fixture_parses_whole() {
    for (kind, text, _) in cases() {
        assert!(
            parse(kind, &text).is_ok(),
            "{kind}: {:?}",
            parse(kind, &text)
        );
    }
}

#[test]
fn a_cut_before_the_closing_line_is_always_an_error() {
    for (kind, text, end) in cases() {
        let mut rng = Rng(0x5eed);
        for seed in 0..SEEDS {
            // Every cut point for short files, random ones otherwise.
            let cut = if (end as u64) <= SEEDS {
                seed as usize % end
            } else {
                rng.below(end)
            };
            let result = parse(kind, &text[..cut]);
            assert!(
                result.is_err(),
                "{kind}: a cut at byte {cut} of {end} parsed: {result:?}"
            );
        }
    }
}

#[test]
fn random_byte_mutations_never_panic_and_give_finite_values() {
    for (kind, text, _) in cases() {
        for seed in 0..SEEDS {
            let mut rng = Rng(seed);
            let mutated = mutate(&mut rng, text.as_bytes());
            let Ok(text) = String::from_utf8(mutated) else {
                continue;
            };
            if let Ok(metrics) = parse(kind, &text) {
                for metric in &metrics.metrics {
                    assert!(metric.value.is_finite(), "{kind} seed {seed}: {metric:?}");
                }
            }
        }
    }
}

/// One to eight edits: replace a byte, delete one, insert one, or cut the
/// text at a random point. Replacement bytes favour the ones that matter to
/// the formats (digits, separators, newlines).
fn mutate(rng: &mut Rng, bytes: &[u8]) -> Vec<u8> {
    const INTERESTING: &[u8] = b"0123456789 .-:#\n\r\t{}[]\",N/AaxE+";
    let mut out = bytes.to_vec();
    for _ in 0..=rng.below(8) {
        if out.is_empty() {
            break;
        }
        let at = rng.below(out.len());
        let byte = INTERESTING[rng.below(INTERESTING.len())];
        match rng.below(4) {
            0 => out[at] = byte,
            1 => {
                out.remove(at);
            }
            2 => out.insert(at, byte),
            _ => out.truncate(at),
        }
    }
    out
}
