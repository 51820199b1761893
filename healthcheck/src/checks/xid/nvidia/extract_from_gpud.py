#!/usr/bin/env python3
"""Pull NVIDIA's XID catalog rows out of gpud's transcription of it.

Why this exists: NVIDIA publishes the catalog as a web table and a
spreadsheet (Xid-Catalog.xlsx) on docs.nvidia.com; this workspace cannot
download it, but leptonai/gpud commits a faithful, machine-made transcription
of that spreadsheet. This script keeps only NVIDIA's table data (the cells),
none of gpud's code, and writes the two TSV files next to it. See SOURCE.md.

Usage: extract_from_gpud.py <catalog_generated.go> <out-dir>
"""
import json
import re
import sys
from pathlib import Path

RETRIEVED = "2025-10-29"  # the date in gpud's generated file header
SOURCE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
FIELD = r'(\w+): ("(?:[^"\\]|\\.)*"|0x[0-9a-fA-F]+|\d+)'


def rows(text, var):
    """The struct literals of `var` as dicts of field -> text."""
    body = text.split(f"var {var} = ", 1)[1].split("\n}\n", 1)[0]
    for line in body.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = {}
        for name, value in re.findall(FIELD, line):
            row[name] = json.loads(value) if value.startswith('"') else value
        yield row


def cell(value):
    """One TSV cell: NVIDIA's line breaks inside a cell become single spaces."""
    return " ".join(str(value).split())


def write(path, sheet, header, records):
    with open(path, "w", encoding="utf-8") as out:
        out.write(f'# edition: NVIDIA Xid Catalog (Xid-Catalog.xlsx, sheet "{sheet}")'
                  f" as retrieved {RETRIEVED}\n")
        out.write(f"# source: {SOURCE}\n")
        out.write("\t".join(header) + "\n")
        for record in records:
            out.write("\t".join(cell(v) for v in record) + "\n")


def main():
    text = Path(sys.argv[1]).read_text(encoding="utf-8")
    out = Path(sys.argv[2])
    catalog = [
        (r["Code"], r["Mnemonic"], r["Description"], r["ImmediateResolution"],
         r["InvestigatoryResolution"])
        for r in rows(text, "catalogEntries")
    ]
    write(out / "catalog.tsv", "Catalog",
          ["xid", "mnemonic", "description", "immediate_action", "investigatory_action"],
          catalog)
    decode = [
        (r["Xid"], r["Unit"], r["IntrinfoPatternV1"], r["IntrinfoPatternV2"],
         "0x%08x" % int(r["ErrorStatus"], 16), r["Resolution"], r["Investigatory"],
         r["Severity"], r["HwSw"], r["LocalRemote"])
        for r in rows(text, "nvlinkRules")
    ]
    write(out / "nvlink5-decode.tsv", "XID 144-150 Decode",
          ["xid", "unit", "intrinfo_v1", "intrinfo_v2", "error_status", "immediate_action",
           "investigatory_action", "severity", "hw_sw", "local_remote"],
          decode)
    print(f"{len(catalog)} catalog rows, {len(decode)} decode rows")


if __name__ == "__main__":
    main()
