#!/usr/bin/env python3
"""Turn NVIDIA's saved XID catalog into our Rust table, `../catalog_table.rs`.

Why a generator: NVIDIA revises its catalog with new drivers and GPUs. Saving
its table as data and generating the Rust from it means a new edition is a
diff of data plus a rerun, and the test in `catalog.rs` checks the committed
table against the saved data, so the two cannot drift apart silently.

Each XID gets our severity and repair action from NVIDIA's immediate action
(`ACTIONS`), except the XIDs we judged by hand before we had the catalog
(`JUDGED`, each with its reason). An immediate action missing from `ACTIONS`
(NVIDIA's WORKFLOW_* entries, or a bucket a new edition adds) stops the
generator: someone must judge it.

It also turns NVIDIA's decode sheet for XIDs 144-150 (`nvlink5-decode.tsv`)
into `../nvlink5_table.rs`: one row per (unit, IntrInfo pattern, error
status) with our severity and action from NVIDIA's immediate action
(`NVLINK5_ACTIONS`); `nvlink5.rs` checks that table against the sheet.

Usage: python3 make_catalog.py   (from anywhere; paths are relative to this file)
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "catalog.tsv"
OUTPUT = HERE.parent / "catalog_table.rs"
DECODE = HERE / "nvlink5-decode.tsv"
DECODE_OUTPUT = HERE.parent / "nvlink5_table.rs"

# NVIDIA's "Resolution Bucket (Immediate Action)" -> (our severity, our action).
ACTIONS = {
    # The application's fault or bad luck: restart it, leave the node in service.
    "RESTART_APP": ("Warning", "RestartApp"),
    # The GPU needs a reset: drain, the reset rung runs once the jobs end.
    "RESET_GPU": ("Drain", "ResetGpu"),
    # Bare-metal restart: the GPU is gone until the node reboots.
    "RESTART_BM": ("Down", "Reboot"),
    # A VM restart is a node reboot on bare metal; jobs may finish first.
    "RESTART_VM": ("Drain", "Reboot"),
    # A person must look (support ticket, UVM, software/firmware update);
    # on its own it does not drain, like an XID we do not know.
    "CONTACT_SUPPORT": ("Warning", "Investigate"),
    "CHECK_UVM": ("Warning", "Investigate"),
    "UPDATE_SWFW": ("Warning", "Investigate"),
    # Cabling or power: hands on the node.
    "CHECK_MECHANICALS": ("Drain", "Repair"),
    "IGNORE": ("Ok", "None"),
    # Newer XIDs with no bucket in this edition yet: treat as unknown.
    "": ("Warning", "Investigate"),
}

# Our judgements from before the catalog (see shared/reference/seed-digest.md):
# xid -> (severity, action, description, why).
JUDGED = {
    13: ("Warning", "RestartApp", "graphics engine exception",
         "NVIDIA: restart app; repeats escalate through repeat_xids"),
    31: ("Warning", "RestartApp", "GPU memory page fault",
         "NVIDIA: restart app; repeats escalate through repeat_xids"),
    43: ("Ok", "None", "channel reset (application fault)", "NVIDIA: ignore"),
    45: ("Ok", "None", "preemptive cleanup",
         "NVIDIA WORKFLOW_XID_45: follows another XID, which is judged itself"),
    48: ("Down", "ResetGpu", "double-bit ECC error",
         "NVIDIA WORKFLOW_XID_48: uncorrectable memory error, GPU unusable until reset"),
    61: ("Drain", "ResetGpu", "internal micro-controller breakpoint",
         "NVIDIA lists it unused from Ampere (contact support); older GPUs still "
         "report it and need a reset"),
    62: ("Drain", "ResetGpu", "internal micro-controller halt", "NVIDIA: reset GPU"),
    63: ("Drain", "ResetGpu", "row remapping or page retirement recorded",
         "NVIDIA: ignore; we keep the reset because the remap takes effect only "
         "at the next GPU reset"),
    64: ("Down", "ResetGpu", "row remapping or page retirement failure",
         "NVIDIA: reset GPU; the memory fault is not contained, so down"),
    74: ("Down", "ResetGpu", "NVLink error",
         "NVIDIA WORKFLOW_NVLINK_ERR: decode, then reset"),
    79: ("Down", "Reboot", "GPU has fallen off the bus", "NVIDIA: restart bare metal"),
    92: ("Warning", "None", "excessive single-bit ECC errors",
         "NVIDIA: ignore; a warning keeps the rate visible"),
    94: ("Warning", "RestartApp", "contained ECC error", "NVIDIA: restart app"),
    95: ("Down", "ResetGpu", "uncontained ECC error",
         "NVIDIA: reset GPU; uncontained, so down"),
    109: ("Drain", "ResetGpu", "context switch timeout", "NVIDIA: reset GPU"),
    119: ("Down", "ResetGpu", "GSP RPC timeout",
          "NVIDIA: reset GPU; the GPU stops answering, so down"),
    120: ("Down", "ResetGpu", "GSP error", "NVIDIA: reset GPU; GSP lost, so down"),
    121: ("Warning", "Investigate", "Grace C2C (CPU-GPU chip-to-chip) link error",
          "NVIDIA: ignore, then contact support; on Grace-Hopper and Grace-Blackwell "
          "the C2C link carries all CPU-GPU traffic, so a warning keeps it seen"),
    136: ("Down", "ResetGpu", "link training failure", "NVIDIA: reset GPU; link down, so down"),
    140: ("Down", "ResetGpu", "unrecoverable ECC error",
          "NVIDIA: reset GPU; uncorrectable, so down"),
    143: ("Down", "ResetGpu", "GPU initialisation error",
          "NVIDIA: reset GPU; the GPU never came up, so down"),
    154: ("Warning", "Investigate", "recovery action changed",
          "NVIDIA XID_154: the recovery action in the message decides (catalog.rs)"),
}
for _xid in range(144, 151):
    JUDGED[_xid] = ("Down", "ResetGpu", "NVLink error",
                    "NVIDIA WORKFLOW_NVLINK5_ERR: decode the sub-code, then reset")


# NVIDIA's immediate action for one XID 144-150 sub-code -> (severity, action).
# The XID's own default (Down, reset) stays for a line we cannot decode.
NVLINK5_ACTIONS = {
    # Fatal or link-fatal: the link stays down until the GPU is reset.
    "RESET_GPU": ("Down", "ResetGpu"),
    # The XID 154 the driver logs next carries the action and is judged itself.
    "XID_154_EVAL": ("Warning", "Investigate"),
}


def nvlink5_judge(row):
    """(severity, action) for one decode row."""
    nvidia = row["immediate_action"]
    if nvidia == "IGNORE":
        # NVIDIA: no action now; a warning when it still asks for an investigation.
        if row["investigatory_action"] == "IGNORE":
            return "Ok", "None"
        return "Warning", "Investigate"
    if nvidia not in NVLINK5_ACTIONS:
        sys.exit(f"XID {row['xid']} {row['unit']}: NVIDIA's action {nvidia!r} has no mapping")
    return NVLINK5_ACTIONS[nvidia]


def decode_entry(row):
    severity, action = nvlink5_judge(row)
    for pattern in (row["intrinfo_v1"], row["intrinfo_v2"]):
        if len(pattern) != 32 or set(pattern) - set("01-"):
            sys.exit(f"XID {row['xid']} {row['unit']}: bad IntrInfo pattern {pattern!r}")
    fields = [
        f"xid: {int(row['xid'])}",
        f"unit: {rust_str(row['unit'])}",
        f"intrinfo_v1: {rust_str(row['intrinfo_v1'])}",
        f"intrinfo_v2: {rust_str(row['intrinfo_v2'])}",
        f"error_status: 0x{int(row['error_status'], 16):08x}",
        f"immediate_action: {rust_str(row['immediate_action'])}",
        f"investigatory_action: {rust_str(row['investigatory_action'])}",
        f"nvidia_severity: {rust_str(row['severity'])}",
        f"hw_sw: {rust_str(row['hw_sw'])}",
        f"severity: Severity::{severity}",
        f"action: Action::{action}",
    ]
    return "    DecodeRow { " + ", ".join(fields) + " },\n"


def render_decode(meta, rows):
    head = (
        "// @generated by nvidia/make_catalog.py from nvidia/nvlink5-decode.tsv; do not edit.\n"
        "// Rerun the script after changing the sheet or the mapping.\n\n"
        "use super::nvlink5::DecodeRow;\n"
        "use lemonade_config::{Action, Severity};\n\n"
        "/// The decode sheet's edition.\n"
        f"pub const EDITION: &str = {rust_str(meta['edition'])};\n\n"
        "/// NVIDIA's decode of XIDs 144-150, in the sheet's order.\n"
        "pub static ROWS: &[DecodeRow] = &[\n"
    )
    return head + "".join(decode_entry(r) for r in rows) + "];\n"


def read_catalog(path):
    """(metadata, rows) of the saved table; `# key: value` lines are metadata."""
    meta, rows, header = {}, [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            meta[key.strip()] = value.strip()
        elif header is None:
            header = line.split("\t")
        elif line:
            rows.append(dict(zip(header, line.split("\t"))))
    return meta, rows


def rust_str(text):
    """A Rust string literal."""
    if any(ord(c) < 0x20 for c in text):
        sys.exit(f"control character in {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def judge(row):
    """(severity, action, description, why-or-None) for one catalog row."""
    xid, nvidia = int(row["xid"]), row["immediate_action"]
    if xid in JUDGED:
        return JUDGED[xid]
    if nvidia not in ACTIONS:
        sys.exit(f"XID {xid}: NVIDIA's action {nvidia!r} has no mapping; judge it in JUDGED")
    severity, action = ACTIONS[nvidia]
    description = row["description"]
    if description.lower() == "unused":
        description = f"{row['mnemonic']} (unused per NVIDIA)"
    return severity, action, description, None


def entry(row):
    severity, action, description, why = judge(row)
    judged = f"Some({rust_str(why)})" if why else "None"
    return (
        f"    Entry {{ xid: {int(row['xid'])}, mnemonic: {rust_str(row['mnemonic'])}, "
        f"nvidia_action: {rust_str(row['immediate_action'])}, severity: Severity::{severity}, "
        f"action: Action::{action}, description: {rust_str(description)}, judged: {judged} }},\n"
    )


def render(meta, rows):
    head = (
        "// @generated by nvidia/make_catalog.py from nvidia/catalog.tsv; do not edit.\n"
        "// Rerun the script after changing the catalog or the mapping.\n\n"
        "use super::catalog::Entry;\n"
        "use lemonade_config::{Action, Severity};\n\n"
        "/// The catalog edition the table was made from.\n"
        f"pub const EDITION: &str = {rust_str(meta['edition'])};\n\n"
        "/// Where NVIDIA publishes it.\n"
        f"pub const SOURCE: &str = {rust_str(meta['source'])};\n\n"
        "/// One entry per XID of NVIDIA's catalog, sorted by XID.\n"
        "pub static ENTRIES: &[Entry] = &[\n"
    )
    return head + "".join(entry(r) for r in rows) + "];\n"


def main():
    meta, rows = read_catalog(CATALOG)
    rows.sort(key=lambda r: int(r["xid"]))
    missing = sorted(set(JUDGED) - {int(r["xid"]) for r in rows})
    if missing:
        sys.exit(f"judged XIDs not in NVIDIA's catalog: {missing}")
    OUTPUT.write_text(render(meta, rows), encoding="utf-8")
    print(f"{OUTPUT.name}: {len(rows)} entries, {len(JUDGED)} judged by hand")
    meta, decode = read_catalog(DECODE)
    DECODE_OUTPUT.write_text(render_decode(meta, decode), encoding="utf-8")
    print(f"{DECODE_OUTPUT.name}: {len(decode)} rows")


if __name__ == "__main__":
    main()
