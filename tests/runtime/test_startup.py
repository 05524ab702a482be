import json
import logging

from ddptrain.runtime.startup import LAUNCHED_ENV, REPORT_ENV, T0_ENV, StartupClock


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
