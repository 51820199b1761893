//! `lemon trace` on dumps written by real PyTorch 2.15.0 (issue 46): eight
//! ranks on CPU with gloo, each dump written by torch's own writer. Every
//! entry is `scheduled`, the last started collective is -1 and there are no
//! durations: only what the ranks enqueued, and when. The dumps and the
//! script that made them: flight-recorder/tests/fixtures/real-torch/.

use lemon::trace::{trace_dumps, Placement, TraceFormat};
use std::path::PathBuf;

/// Two nodes of four ranks: ranks 0-3 on gpu01, 4-7 on gpu02.
fn trace(scenario: &str) -> serde_json::Value {
    // The reader refuses `..` on the way (a user could aim it anywhere).
    let dir = std::fs::canonicalize(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../flight-recorder/tests/fixtures/real-torch"),
    )
    .unwrap()
    .join(scenario);
    let dumps: Vec<PathBuf> = (0..8)
        .map(|r| dir.join(format!("nccl_trace_rank_{r}")))
        .collect();
    let owner = std::fs::metadata(&dumps[0]).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid()
    });
    let placement = Placement {
        nodes: Some("gpu[01-02]".into()),
        tasks_per_node: Some(4),
    };
    let (out, err) = trace_dumps("7", &dumps, &placement, owner.unwrap(), TraceFormat::Json)
        .expect("lemon trace");
    assert!(err.contains("8 dumps read, 0 skipped"), "{err}");
    serde_json::from_str(&out).unwrap()
}

fn hung(v: &serde_json::Value) -> Vec<(u64, String, i64)> {
    let mut out = Vec::new();
    for h in v["hangs"].as_array().unwrap() {
        for r in h["ranks"].as_array().unwrap() {
            let node = r["node"].as_str().unwrap_or("").to_string();
            out.push((
                r["rank"].as_u64().unwrap(),
                node,
                h["seq"].as_i64().unwrap(),
            ));
        }
    }
    out
}

#[test]
fn a_real_torch_hang_names_rank_2_on_gpu01_where_the_others_wait_in_all_reduce_13() {
    for scenario in ["hang", "hang-in-flight"] {
        let v = trace(scenario);
        assert_eq!(hung(&v), [(2, "gpu01".to_string(), 13)], "{scenario}: {v}");
        assert_eq!(v["hangs"][0]["op"], "gloo:all_reduce", "{scenario}");
        assert!(
            v["stragglers"].as_array().unwrap().is_empty(),
            "{scenario}: {v}"
        );
    }
}

#[test]
fn a_real_torch_straggler_is_named_from_enqueue_times_alone() {
    let v = trace("straggler");
    assert!(hung(&v).is_empty(), "{v}");
    let s = v["stragglers"].as_array().unwrap();
    assert_eq!(s.len(), 1, "{v}");
    assert_eq!(
        (s[0]["rank"].as_u64(), s[0]["node"].as_str()),
        (Some(5), Some("gpu02"))
    );
    assert_eq!(s[0]["sign"], "enters_last");
    // It slept 80 ms before each all_reduce.
    let lag = s[0]["measure"].as_f64().unwrap();
    assert!((60.0..120.0).contains(&lag), "{lag}");
}

#[test]
fn a_real_torch_healthy_run_names_nobody_and_says_why() {
    let v = trace("healthy");
    assert!(
        hung(&v).is_empty() && v["stragglers"].as_array().unwrap().is_empty(),
        "{v}"
    );
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert_eq!(notes.len(), 1, "{v}");
    assert!(
        notes[0].contains("no rank is behind: every rank of 8 enqueued seq 21"),
        "{v}"
    );
}
