import json
import logging
import subprocess
import sys

import pytest

from ddptrain.runtime.startup import LAUNCHED_ENV, REPORT_ENV, T0_ENV, StartupClock, mark_command_start

from ..conftest import cli_env


def test_phases_add_up_to_the_time_since_the_command_started(tmp_path, caplog):
    environ = {T0_ENV: "100.0", LAUNCHED_ENV: "102.0", REPORT_ENV: str(tmp_path / "startup.json")}
    clock = StartupClock(environ)
    clock.marks[1] = ("worker start", 102.5)  # as if this process started half a second after the launch
    clock.marks += [("imports", 104.0), ("first step", 105.0)]
    assert clock.phases() == {"launcher": 2.0, "worker start": 0.5, "imports": 1.5, "first step": 1.0}
    assert clock.total_s == 5.0
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        assert clock.report_once(logging.getLogger("ddptrain"), environ)["total_s"] == 5.0
        assert clock.report_once(logging.getLogger("ddptrain"), environ) is None  # once only
    assert "first optimizer step 5.00 s after the command started (launcher 2.00" in caplog.text
    assert json.loads((tmp_path / "startup.json").read_text())["phases"]["imports"] == 1.5


def test_a_single_process_starts_its_own_clock():
    clock = StartupClock({T0_ENV: "50.0"})
    assert clock.marks[0][0] == "command start" and clock.t0 == 50.0


def test_a_program_calling_main_twice_gets_each_commands_own_start_up_time(tiny_shapes, tmp_path):
    """An embedding program (a notebook, a sweep driver) runs two trainings in one process with a pause between
    them: the second start-up report counts from the second call, and no start mark is left behind for the
    programs it starts afterwards."""
    script = f"""
import json, os, sys, time
from ddptrain.cli import main
os.environ[{REPORT_ENV!r}] = {str(tmp_path / "startup.json")!r}
flags = ["--data", {str(tiny_shapes)!r}, "--model", "timm:test_resnet", "--img-size", "32", "--batch-size", "4",
         "--epochs", "1", "--val-split", "0.25", "--workers", "0", "--device", "cpu"]
assert main(["train", *flags, "--out", {str(tmp_path / "first")!r}]) == 0
left = {T0_ENV!r} in os.environ
time.sleep(6)
assert main(["train", *flags, "--out", {str(tmp_path / "second")!r}]) == 0
print(json.dumps({{"left": left or {T0_ENV!r} in os.environ}}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=cli_env({}), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"left": False}
    assert json.loads((tmp_path / "startup.json").read_text())["total_s"] < 6.0, "the pause counted as start-up"


def test_a_launched_worker_keeps_its_launchers_start_mark():
    environ = {T0_ENV: "50.0"}
    assert mark_command_start(environ) is False and environ == {T0_ENV: "50.0"}
    assert mark_command_start({}) is True


@pytest.mark.parametrize("value", ["yesterday", "", "nan", "inf", "-inf", "1e12"])  # 1e12: a moment 31,000 years ahead
def test_a_start_mark_that_is_not_a_past_moment_counts_from_now(value):
    """DDPTRAIN_T0 exported by hand (garbage, or a moment in the future) never fails a command nor shows a
    negative or endless start-up."""
    clock = StartupClock({T0_ENV: value, LAUNCHED_ENV: value})
    clock.mark("first step")
    assert 0 <= clock.total_s < 5 and all(0 <= s < 5 for s in clock.phases().values())
    assert clock.marks[0][0] == "command start"  # no launcher phase from a bad mark
