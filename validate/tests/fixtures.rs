//! The parsers on real outputs (see each `tests/fixtures/<kind>/SOURCE.md`):
//! every assertion is a figure printed in the file.

use validate::{parse, Kind, ParseError};

fn fixture(kind: &str, name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/{kind}/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

#[test]
fn nccl_all_reduce_on_16_h100_reads_every_row_and_the_average() {
    let metrics = parse(
        Kind::NcclTests,
        &fixture("nccl_tests", "all_reduce_h100_16gpus.txt"),
    )
    .unwrap();
    assert_eq!(metrics.value("avg_busbw"), Some(70.742));
    assert_eq!(metrics.get("avg_busbw").unwrap().unit, "GB/s");
    assert_eq!(metrics.value("busbw.out_of_place.8589934592"), Some(338.82));
    assert_eq!(metrics.value("busbw.in_place.8589934592"), Some(337.35));
    assert_eq!(metrics.value("busbw.in_place.1073741824"), Some(298.82));
    assert_eq!(metrics.value("busbw.out_of_place.8"), Some(0.0));
    assert_eq!(metrics.value("wrong.in_place.4194304"), Some(0.0));
    assert_eq!(metrics.value("wrong_total"), Some(0.0));
    assert_eq!(metrics.value("out_of_bounds"), Some(0.0));
    // 31 sizes, 8 B to 8 GiB: busbw and #wrong for both places.
    let sizes = metrics
        .metrics
        .iter()
        .filter(|m| m.name.starts_with("busbw.out_of_place."))
        .count();
    assert_eq!(sizes, 31);
}

#[test]
fn nccl_output_with_a_nonzero_wrong_column_exposes_the_counts() {
    let metrics = parse(
        Kind::NcclTests,
        &fixture("nccl_tests", "all_reduce_gh200_wrong.txt"),
    )
    .unwrap();
    assert_eq!(metrics.value("wrong.out_of_place.1048576"), Some(96.0));
    assert_eq!(metrics.value("wrong.in_place.1048576"), Some(32.0));
    assert_eq!(metrics.value("wrong.out_of_place.2097152"), Some(0.0));
    assert_eq!(metrics.value("wrong_total"), Some(128.0));
    assert_eq!(metrics.value("out_of_bounds"), Some(4.0));
    assert_eq!(metrics.value("avg_busbw"), Some(4.79995));
    assert_eq!(metrics.value("busbw.out_of_place.134217728"), Some(22.87));
    assert_eq!(metrics.value("busbw.in_place.1048576"), Some(2.13));
}

#[test]
fn nccl_output_with_its_header_but_no_average_line_is_truncated() {
    let text = fixture("nccl_tests", "all_reduce_h100_16gpus.txt");
    let cut = &text[..text.find("# Out of bounds").unwrap()];
    let err = parse(Kind::NcclTests, cut).unwrap_err();
    assert!(matches!(err, ParseError::Truncated { .. }), "{err}");
    assert_eq!(err.line(), cut.lines().count() + 1);
    assert!(err.to_string().contains("# Avg bus bandwidth"), "{err}");
}

#[test]
fn nvbandwidth_reads_the_matrix_and_sum_of_a_test_named_by_its_sum_line() {
    let metrics = parse(
        Kind::Nvbandwidth,
        &fixture("nvbandwidth", "d2d_read_ce_6gpus.txt"),
    )
    .unwrap();
    assert_eq!(
        metrics.value("device_to_device_memcpy_read_ce.sum"),
        Some(715.53)
    );
    assert_eq!(
        metrics.value("device_to_device_memcpy_read_ce.0.1"),
        Some(26.34)
    );
    assert_eq!(
        metrics.value("device_to_device_memcpy_read_ce.3.0"),
        Some(21.82)
    );
    assert_eq!(
        metrics.value("device_to_device_memcpy_read_ce.5.4"),
        Some(26.35)
    );
    // The diagonal is N/A: no metric.
    assert_eq!(metrics.value("device_to_device_memcpy_read_ce.2.2"), None);
    assert_eq!(metrics.len(), 6 * 5 + 1);
    assert_eq!(
        metrics
            .get("device_to_device_memcpy_read_ce.sum")
            .unwrap()
            .unit,
        "GB/s"
    );
}

#[test]
fn nvbandwidth_reads_each_test_of_a_run_on_8_gpus() {
    let metrics = parse(
        Kind::Nvbandwidth,
        &fixture("nvbandwidth", "host_device_8gpus.txt"),
    )
    .unwrap();
    assert_eq!(metrics.value("host_to_device_memcpy_ce.sum"), Some(205.04));
    assert_eq!(metrics.value("host_to_device_memcpy_ce.0.2"), Some(23.90));
    assert_eq!(metrics.value("device_to_host_memcpy_ce.sum"), Some(214.28));
    assert_eq!(metrics.value("device_to_host_memcpy_ce.0.7"), Some(26.83));
    assert_eq!(metrics.len(), 2 * (8 + 1));
}

#[test]
fn nvbandwidth_cut_before_a_sum_line_is_truncated() {
    let text = fixture("nvbandwidth", "host_device_8gpus.txt");
    let cut = &text[..text.rfind("SUM").unwrap()];
    let err = parse(Kind::Nvbandwidth, cut).unwrap_err();
    assert!(
        err.to_string().contains("SUM device_to_host_memcpy_ce"),
        "{err}"
    );
}

#[test]
fn perftest_reads_peak_and_average_in_the_units_printed() {
    let metrics = parse(
        Kind::Perftest,
        &fixture("perftest", "ib_write_bw_gbits_8bytes.txt"),
    )
    .unwrap();
    let average = metrics.get("bw_average.8").unwrap();
    assert_eq!((average.value, average.unit.as_str()), (0.48, "Gb/sec"));
    assert_eq!(metrics.value("bw_peak.8"), Some(0.0));
    assert_eq!(metrics.value("msg_rate.8"), Some(7.498617));
    assert_eq!(metrics.len(), 3);
}

#[test]
fn dcgmi_diag_reads_each_result_per_gpu_with_the_failure_text() {
    let metrics = parse(
        Kind::DcgmiDiag,
        &fixture("dcgmi_diag", "handmade_r2_gpu0_fail.json"),
    )
    .unwrap();
    let memory = metrics.get("hardware.gpu_memory.gpu0").unwrap();
    assert_eq!((memory.value, memory.unit.as_str()), (3.0, "status"));
    let detail = memory.detail.as_deref().unwrap();
    assert!(
        detail.starts_with("Fail: GPU 0 Error using CUDA API cuCtxCreate"),
        "{detail}"
    );
    assert_eq!(metrics.value("hardware.gpu_memory.gpu1"), Some(0.0));
    assert_eq!(metrics.value("deployment.denylist.all"), Some(0.0));
    assert_eq!(metrics.value("integration.pcie.gpu0"), Some(1.0));
    assert_eq!(metrics.value("stress.targeted_stress.gpu0"), Some(2.0));
    assert_eq!(metrics.value("tests_failed"), Some(3.0));
    assert_eq!(metrics.value("tests_warned"), Some(1.0));
}

#[test]
fn dcgmi_diag_json_cut_short_names_the_line() {
    let text = fixture("dcgmi_diag", "handmade_r2_gpu0_fail.json");
    let cut = &text[..text.find("\"Stress\"").unwrap()];
    let err = parse(Kind::DcgmiDiag, cut).unwrap_err();
    assert!(matches!(err, ParseError::Json { .. }), "{err}");
    assert_eq!(err.line(), cut.lines().count());
}

#[test]
fn gpu_burn_reads_the_faulty_gpus_and_their_error_counts() {
    let metrics = parse(Kind::GpuBurn, &fixture("gpu_burn", "faulty_16gpus.txt")).unwrap();
    assert_eq!(metrics.value("gpus_tested"), Some(16.0));
    assert_eq!(metrics.value("gpus_faulty"), Some(16.0));
    assert_eq!(metrics.value("faulty.gpu15"), Some(1.0));
    assert_eq!(
        metrics.get("faulty.gpu1").unwrap().detail.as_deref(),
        Some("FAULTY")
    );
    assert_eq!(metrics.value("errors.gpu0"), Some(0.0));
    assert_eq!(metrics.value("errors.gpu1"), Some(-524288000.0));
    assert_eq!(metrics.value("errors.gpu9"), Some(-524288000.0));
    assert_eq!(metrics.value("errors.gpu15"), Some(0.0));
    assert_eq!(metrics.value("gflops.gpu0"), Some(6311.0));
    assert_eq!(metrics.value("gflops.gpu10"), Some(6660.0));
}

#[test]
fn gpu_burn_cut_inside_its_summary_is_truncated() {
    let text = fixture("gpu_burn", "faulty_16gpus.txt");
    let cut = &text[..text.find("GPU 12:").unwrap()];
    let err = parse(Kind::GpuBurn, cut).unwrap_err();
    assert!(err.to_string().contains("GPU 12: OK|FAULTY"), "{err}");
}

#[test]
fn nvbandwidth_cut_between_two_tests_is_caught_by_the_tests_the_caller_asked_for() {
    let text = fixture("nvbandwidth", "host_device_8gpus.txt");
    let cut = &text[..text.find("Running device_to_host").unwrap()];
    let metrics = parse(Kind::Nvbandwidth, cut).unwrap();
    let wanted = ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce"];
    assert_eq!(
        validate::nvbandwidth::missing_tests(&metrics, &wanted),
        ["device_to_host_memcpy_ce"]
    );
}

#[test]
fn perftest_reads_a_megabytes_table_through_the_warning_printed_inside_it() {
    let metrics = parse(
        Kind::Perftest,
        &fixture("perftest", "ib_write_bw_mb_softroce_warning.txt"),
    )
    .unwrap();
    let peak = metrics.get("bw_peak.65536").unwrap();
    assert_eq!((peak.value, peak.unit.as_str()), (419.30, "MB/sec"));
    assert_eq!(metrics.value("bw_average.65536"), Some(361.10));
    assert_eq!(metrics.value("msg_rate.65536"), Some(0.005778));
}

#[test]
fn nccl_all_gather_on_8_v100_in_the_old_error_column_layout_reads() {
    let text = fixture("nccl_tests", "all_gather_v100_8gpus_error_column.txt");
    let metrics = parse(Kind::NcclTests, &text).unwrap();
    assert_eq!(metrics.value("busbw.out_of_place.4294967296"), Some(129.05));
    assert_eq!(metrics.value("busbw.in_place.4294967296"), Some(128.84));
    assert_eq!(metrics.value("error.out_of_place.4294967296"), Some(1.0));
    assert_eq!(
        metrics.get("error.in_place.4294967296").unwrap().unit,
        "max_error"
    );
    assert_eq!(metrics.value("out_of_bounds"), Some(2.0));
    assert_eq!(metrics.value("avg_busbw"), Some(128.942));
    // An `error` header has no #wrong counts to sum.
    assert_eq!(metrics.value("wrong_total"), None);
}
