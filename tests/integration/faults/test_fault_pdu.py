"""A PDU that answers with an HTTP error or not at all."""

import pytest

from conftest import assert_cleaned_up, assert_error
from rtlab.vlab import control

CASE = "idle/1000us"


# the retry loop runs in make test by the PDU that keeps failing (every attempt failing);
# a failed attempt followed by a good one here, in make test FULL=1
@pytest.mark.full
def test_pdu_error_is_retried(vlab, run_with_faults):
    run = run_with_faults([("pdu-error", {"times": 1, "code": 500})])
    assert run.returncode == 0, run.output[-3000:]
    assert run.record(CASE)["verdict"] == "pass"
    attempts = run.attempts(CASE, "power off")
    assert [(a["attempt"], a["ok"]) for a in attempts] == [(1, False), (2, True)]
    assert attempts[0]["cause"] == "PDU: HTTP 500 on outlet 1 (power off)"
    assert_cleaned_up(vlab, sdmux="dut")


def test_pdu_that_keeps_failing_is_an_error_naming_status_and_outlet(vlab, run_with_faults):
    run = run_with_faults([("pdu-error", {"times": 0, "code": 503})])
    assert_error(run, CASE, "PDU: HTTP 503 on outlet 1 (power off)")
    assert len(run.attempts(CASE, "power off")) == 3
    # nothing could switch the board, so nothing ran: never flashed, never powered
    assert run.attempts(CASE, "flash") == []
    assert "cleanup of the place failed" in run.output
    system_out = run.case(CASE).findtext("system-out") or ""
    assert "nothing was read from the console" in system_out
    assert_cleaned_up(vlab, sdmux="off")


@pytest.mark.full
def test_pdu_that_never_answers_times_out(vlab, run_with_faults):
    run = run_with_faults([("pdu-timeout", {"times": 0})], pdu_timeout=3)
    assert_error(run, CASE, "PDU: no answer within 3 s to power off on outlet 1")
    assert len(run.attempts(CASE, "power off")) == 3
    status = control.status(vlab)
    assert [b["power"] for b in status["boards"] if b["place"] == "imx6q-01"] == ["off"]
