//! A busy GPU node's kernel log in `/dev/kmsg` record format: driver
//! chatter with a few XIDs, for the host-check and kernel-log benchmarks.

use std::fmt::Write as _;
use std::io::{self, Write};

/// Driver chatter of a busy node.
const CHATTER: [&str; 12] = [
    "mlx5_core 0000:19:00.0: mlx5_fw_tracer_handle_traces:781:(pid 1533): FWTracer: Event 0x1a: ts 0x1234567890",
    "mlx5_core 0000:2b:00.0 ibp43s0: Link up",
    "perf: interrupt took too long (2503 > 2500), lowering kernel.perf_event_max_sample_rate to 79750",
    "audit: type=1400 audit(1795136419.870:311): apparmor=\"DENIED\" operation=\"open\" class=\"file\" profile=\"snap.lxd\" name=\"/proc/sys/vm/max_map_count\" pid=48211 comm=\"python3\" requested_mask=\"r\" denied_mask=\"r\" fsuid=1001 ouid=0",
    "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing",
    "nfs: server nfs02.cluster not responding, still trying",
    "nfs: server nfs02.cluster OK",
    "Lustre: datasets-OST0007-osc-ff3b2a5c4e1f8000: Connection restored to 10.1.0.11@o2ib (at 10.1.0.11@o2ib)",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ibp154s0: link becomes ready",
    "slurmstepd[48213]: task/cgroup: _memcg_initialize: job: alloc=1843200MB mem.limit=1843200MB memsw.limit=unlimited",
    "NVRM: nvAssertOkFailedNoLog: Assertion failed: Invalid data passed [NV_ERR_INVALID_DATA] (0x00000025) returned from pRmApi->Control(pRmApi, RES_GET_CLIENT_HANDLE(pKernelChannel), RES_GET_HANDLE(pKernelChannel), NVA06F_CTRL_CMD_STOP_CHANNEL, &stopChannelParams, sizeof(stopChannelParams)) @ kernel_channel.c:3436",
    "EXT4-fs (md127): re-mounted 5c3f1a2b-77e1-4b0e-9c4d-2a6f8e1d9b30 r/w. Quota mode: none.",
];

const XIDS: [&str; 4] = [
    "NVRM: Xid (PCI:0000:3a:00): 13, pid=48211, name=python3, Graphics SM Warp Exception on (GPC 4, TPC 1, SM 0): Out Of Range Address",
    "NVRM: Xid (PCI:0000:3a:00): 13, pid=48211, name=python3, Graphics Exception: ESR 0x51a730=0x201000e 0x51a734=0x20 0x51a728=0x4c1eb72 0x51a72c=0x174",
    "NVRM: Xid (PCI:0000:ab:00): 31, pid=51872, name=pt_main_thread, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2c_9a000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    "NVRM: Xid (PCI:0000:ab:00): 43, pid=51872, name=pt_main_thread, Ch 00000008",
];

/// Writes `boot` (records already in the format) and then chatter until
/// `bytes` are written; calls `record` with each generated record, whole
/// (continuation lines included), as the device would return it. Returns
/// the bytes written.
pub fn write(
    out: &mut dyn Write,
    boot: &str,
    bytes: u64,
    mut record: impl FnMut(&[u8]),
) -> io::Result<u64> {
    let mut seq = boot
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split(',').nth(1)?.parse::<u64>().ok())
        .max()
        .map_or(0, |s| s + 1);
    let mut ts: u64 = 3_700_000_000;
    out.write_all(boot.as_bytes())?;
    let mut written = boot.len() as u64;
    let mut i: u64 = 0;
    while written < bytes {
        // A handful of XIDs spread through the log, the rest chatter.
        let message = if i % 100_000 == 50_000 {
            XIDS[(i / 100_000) as usize % XIDS.len()]
        } else {
            CHATTER[(i % CHATTER.len() as u64) as usize]
        };
        let priority = if message.starts_with("NVRM") { 4 } else { 6 };
        let mut text = format!("{priority},{seq},{ts},-;{message}\n");
        if message.starts_with("mlx5_core") {
            let device = &message[10..22];
            write!(text, " SUBSYSTEM=pci\n DEVICE=+pci:{device}\n").unwrap();
        }
        out.write_all(text.as_bytes())?;
        record(text.as_bytes());
        written += text.len() as u64;
        seq += 1;
        ts += 7_919 + (i % 13) * 1_000;
        i += 1;
    }
    Ok(written)
}
