"""Running the PyFlink workload from the harness (it lives in its own virtualenv:
PyFlink pins library versions that conflict with PySpark's)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv-flink" / "bin" / "python"
SCRIPT = Path(__file__).with_name("flink_w2.py")


def available() -> bool:
    return PYTHON.exists()


def run(spec: dict[str, Any], log: Path) -> dict[str, Any]:
    if spec["workload"] != "w2":
        raise ValueError("the Flink baseline runs W2 only")
    Path(spec["work"]).mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as err:
        proc = subprocess.run(
            [str(PYTHON), str(SCRIPT), spec["input"], spec["work"]], stdout=subprocess.PIPE, stderr=err, check=False
        )
    lines = [line for line in proc.stdout.decode().splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"Flink run failed (exit {proc.returncode}); see {log}")
    return {**spec, **json.loads(lines[-1].removeprefix("RESULT "))}
