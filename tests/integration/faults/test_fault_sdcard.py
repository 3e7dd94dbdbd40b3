"""SD card faults while flashing: writes that fail, and a card that keeps wrong bytes,
which only the read-back after the write can see."""

import pytest

from conftest import assert_cleaned_up, assert_error

CASE = "idle/1000us"


def test_write_error_is_retried_then_an_error(vlab, run_with_faults):
    run = run_with_faults([("sd-write-error", {"times": 0})])
    record = assert_error(run, CASE, "SD card write failed: bmaptool exited 1")
    assert "No space left on device" in record["message"]
    assert "(flash attempt 3 of 3)" in record["message"]
    assert [a["ok"] for a in run.attempts(CASE, "flash")] == [False, False, False]
    assert run.attempts(CASE, "boot") == []
    # the card holds a partial image: nobody gets it, host or board
    assert_cleaned_up(vlab, sdmux="off")


@pytest.mark.full
def test_one_write_error_in_a_row_is_retried(vlab, run_with_faults):
    run = run_with_faults([("sd-write-error", {"times": 1})])
    assert run.returncode == 0, run.output[-3000:]
    assert [a["ok"] for a in run.attempts(CASE, "flash")] == [False, True]
    assert run.record(CASE)["verdict"] == "pass"
    assert_cleaned_up(vlab, sdmux="dut")


def test_corrupted_write_fails_the_read_back(vlab, run_with_faults):
    run = run_with_faults([("sd-corrupt", {"times": 0})])
    record = assert_error(run, CASE, "image verify failed: checksum mismatch in blocks 0-0")
    assert "(flash attempt 3 of 3)" in record["message"]
    assert run.attempts(CASE, "boot") == [], "a damaged card must never be booted"
    assert_cleaned_up(vlab, sdmux="off")


# in make demo FULL=1, as the write error retried once (55 s of make test's 45 min):
# make test keeps the read-back that finds the damage and the retries that end in an error
@pytest.mark.full
def test_corrupted_write_is_rewritten_and_verified(vlab, run_with_faults):
    run = run_with_faults([("sd-corrupt", {"times": 1})])
    assert run.returncode == 0, run.output[-3000:]
    flashes = run.attempts(CASE, "flash")
    assert [a["ok"] for a in flashes] == [False, True]
    assert flashes[0]["cause"].startswith("image verify failed: checksum mismatch")
    assert run.record(CASE)["verdict"] == "pass"
    # the retry is in the case's log, not only in its record
    log = run.case(CASE).findtext("system-out") or ""
    assert "flash attempt 1/3 failed: image verify failed" in log, log[-2000:]
