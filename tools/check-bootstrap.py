#!/usr/bin/env python3
"""What `make build` made is what Lambda runs: an aarch64 ELF per function,
within the size Lambda takes (250 MB unzipped) and the figure we keep
(docs/benchmarks.md). Exits non-zero otherwise."""
import sys
import zipfile
import io
from pathlib import Path

AARCH64 = 183  # ELF e_machine
LIMIT_MIB = 24  # the function's bootstrap is about 17 MiB; more is a regression to look at

failed = False
for function in ("refund-chat", "refund-chat-sweep", "refund-chat-staff", "refund-chat-live"):
    path = Path("target/lambda") / function / "bootstrap"
    data = path.read_bytes()
    machine = int.from_bytes(data[18:20], "little")
    size_mib = len(data) / 2**20
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bootstrap", data)
    zipped_mib = len(zipped.getvalue()) / 2**20
    ok = data[:4] == b"\x7fELF" and machine == AARCH64 and size_mib < LIMIT_MIB
    failed |= not ok
    print(f"{path}: {'aarch64' if machine == AARCH64 else f'machine {machine}'} ELF, "
          f"{size_mib:.2f} MiB, {zipped_mib:.2f} MiB zipped: {'ok' if ok else 'NOT OK'}")
sys.exit(1 if failed else 0)
