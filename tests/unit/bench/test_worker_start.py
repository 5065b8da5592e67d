"""Load workers start without re-running the caller's main script (bot/bench/loadgen.py).

multiprocessing re-executes the parent's `__main__` in every child it starts; for the `flagbot`
console script that re-imported the whole CLI in every worker of every level and repeat. The
script below counts its own executions in a file: once with the guard, twice without it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.bench.loadgen import _main_not_rerun

SCRIPT = """
import sys, time
from pathlib import Path
with Path(sys.argv[1]).open("a") as out:
    out.write("main ran\\n")
from bot.bench.loadgen import _main_not_rerun, _worker_context
if __name__ == "__main__":
    worker = _worker_context().Process(target=time.sleep, args=(0,))
    if sys.argv[2] == "guarded":
        with _main_not_rerun():
            worker.start()
    else:
        worker.start()
    worker.join(30)
    sys.exit(worker.exitcode)
"""


@pytest.mark.parametrize(("mode", "runs"), [("guarded", 1), ("plain", 2)])
def test_a_worker_runs_the_main_script_only_without_the_guard(tmp_path: Path, mode: str, runs: int) -> None:
    script, marks = tmp_path / "caller.py", tmp_path / "runs.txt"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(marks), mode],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr
    assert marks.read_text().count("main ran") == runs


def test_the_main_module_is_put_back_after_the_start() -> None:
    main = sys.modules["__main__"]
    before = getattr(main, "__spec__", None)
    with _main_not_rerun():
        assert main.__spec__ is not None and main.__spec__.name == "bot.__main__"
    assert getattr(main, "__spec__", None) is before
