"""Where a benchmark writes its results: experiments/results/ for a full run, results/quick/ for a
--quick smoke run (which must not replace the recorded tables; git ignores that folder), or --out.
Checked before the run starts, so an unwritable folder costs no measurements."""
from __future__ import annotations

import os
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
OUT_HELP = "output folder (default experiments/results/, with --quick experiments/results/quick/)"


def results_dir(parser, out: str | None, quick: bool) -> Path:
    """The folder, created and tried with a file; parser.error (exit 2, one line) where it cannot
    be written."""
    path = Path(out) if out is not None else RESULTS / "quick" if quick else RESULTS
    probe = path / f".write_test_{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        parser.error(f"--out {path}: cannot write the results there ({e.strerror or e})")
    return path
