"""The task record and its rules (mcpserver.tasks._record): TASKS.md §4's transitions, the limits, the wire shape,
and how a dead runner is told from a live one. Pure functions: no store involved."""

import dataclasses
import os
import subprocess
import sys

import pytest
from mcpserver.store import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    MAX_RESULT_BYTES,
    STATUSES,
    TERMINAL,
    WORKING,
    Runner,
)
from mcpserver.store._task import from_row, iso_time, to_row
from mcpserver.tasks import InvalidTransition, _record
from mcpserver.tasks._record import (
    MAX_INPUT_BYTES,
    MAX_INPUT_KEYS,
    InputTooLarge,
    dead_runner,
    finished,
    new_task,
    orphaned,
    this_runner,
    with_answers,
    with_cancel_request,
    with_input,
    with_status,
    without_answers,
)

NOW = 1_785_000_000_000
NEVER, ALWAYS = (lambda record: False), (lambda record: True)  # a lease lapsed: never, always
ASK = {"method": "elicitation/create", "params": {"message": "Sure?", "requestedSchema": {"type": "object"}}}


def task(**changes):
    record = new_task("alice", NOW, ttl_ms=60_000, poll_interval_ms=500, lease_ms=30_000)
    return dataclasses.replace(record, **changes)


def in_status(status):
    record = task()
    if status == INPUT_REQUIRED:
        return with_input(record, {"a": ASK}, None, NOW)
    if status == COMPLETED:
        return finished(record, NOW, result={"content": []})
    if status == FAILED:
        return finished(record, NOW, error={"code": -32603, "message": "boom"})
    if status == CANCELLED:
        return with_status(record, CANCELLED, None, NOW)
    return record


def test_a_new_task_is_working_unguessable_and_run_by_this_process():
    record = task()
    assert record.status == WORKING and record.version == 1 and record.runner == this_runner()
    assert len(record.task_id) >= 32 and record.task_id != task().task_id  # 24 random bytes, URL-safe
    assert record.expires_at == NOW + 60_000 and not record.expired(NOW + 59_999) and record.expired(NOW + 60_000)
    assert new_task("a", NOW, ttl_ms=None, poll_interval_ms=None, lease_ms=1).expires_at is None


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "60"])
def test_ttl_and_poll_interval_are_positive_integers_or_none(bad):
    # TASKS.md §8: conformance wants ttlMs null or positive, pollIntervalMs positive.
    with pytest.raises(ValueError, match="positive integer"):
        new_task("a", NOW, ttl_ms=bad, poll_interval_ms=None, lease_ms=1)
    with pytest.raises(ValueError, match="positive integer"):
        new_task("a", NOW, ttl_ms=None, poll_interval_ms=bad, lease_ms=1)


def test_the_transitions_tasks_md_allows():
    working = task()
    asking = with_input(working, {"a": ASK}, "Need a yes", NOW)
    assert asking.status == INPUT_REQUIRED
    back = with_status(asking, WORKING, "going on", NOW)
    assert back.status == WORKING and dict(back.input_requests) == {}  # withdrawn requests are no longer outstanding
    for start in (working, asking):
        assert finished(start, NOW, result={"content": []}).status == COMPLETED
        assert finished(start, NOW, error={"code": -1, "message": "x"}).status == FAILED
        assert with_status(start, CANCELLED, None, NOW).status == CANCELLED


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_a_terminal_task_never_changes(status):
    record = in_status(status)
    changes = [lambda: with_status(record, WORKING, None, NOW), lambda: with_status(record, CANCELLED, None, NOW),
               lambda: with_input(record, {"b": ASK}, None, NOW),
               lambda: finished(record, NOW, result={"content": []}),
               lambda: finished(record, NOW, error={"code": 1, "message": "x"})]
    for change in changes:
        with pytest.raises(InvalidTransition, match="never changes"):
            change()
    # What a client sends to a finished task is acknowledged and changes nothing (TASKS.md §6, §7).
    assert with_answers(record, {"a": {"action": "accept"}}, NOW) is None
    assert with_cancel_request(record, NOW) is None
    assert orphaned(NEVER)(record, NOW) is None


def test_input_required_and_the_results_come_only_with_their_data():
    with pytest.raises(ValueError, match="need_input"):
        with_status(task(), INPUT_REQUIRED, None, NOW)
    for status in (COMPLETED, FAILED):
        with pytest.raises(ValueError, match="finish"):
            with_status(task(), status, None, NOW)
    with pytest.raises(ValueError, match="not a task status"):
        with_status(task(), "paused", None, NOW)
    with pytest.raises(ValueError, match="not both"):
        finished(task(), NOW, result={"content": []}, error={"code": 1, "message": "x"})
    with pytest.raises(ValueError, match="not neither"):
        finished(task(), NOW)
    with pytest.raises(ValueError, match="JSON-RPC error object"):
        finished(task(), NOW, error={"message": "no code"})
    with pytest.raises(ValueError, match="method"):
        with_input(task(), {"a": {"params": {}}}, None, NOW)


def test_every_change_moves_the_version_and_visible_ones_move_last_updated_at_strictly():
    record = task()
    seen = [record]
    for change in (lambda r: with_input(r, {"a": ASK, "b": ASK}, None, NOW),
                   lambda r: with_answers(r, {"a": {"action": "accept"}}, NOW),
                   lambda r: with_cancel_request(r, NOW),
                   lambda r: without_answers(r, NOW),
                   lambda r: finished(r, NOW, result={"content": []})):
        seen.append(change(seen[-1]))
    assert [r.version for r in seen] == [1, 2, 3, 4, 5, 6]
    # All at the same millisecond: still strictly increasing, except for the changes no client sees.
    assert [r.last_updated_at - NOW for r in seen] == [0, 1, 2, 2, 2, 3]


def test_answers_remove_outstanding_keys_at_once_and_ignore_the_rest():
    asking = with_input(task(), {"a": ASK, "b": ASK}, None, NOW)
    partly = with_answers(asking, {"a": {"action": "accept"}, "never-issued": {"x": 1}}, NOW)
    assert partly.status == INPUT_REQUIRED and list(partly.input_requests) == ["b"]
    assert dict(partly.answers) == {"a": {"action": "accept"}}
    assert with_answers(partly, {"a": {"action": "decline"}}, NOW) is None  # answered already: ignored
    done = with_answers(partly, {"b": {"action": "decline"}}, NOW)
    assert done.status == WORKING and dict(done.input_requests) == {}
    assert dict(done.answers) == {"a": {"action": "accept"}, "b": {"action": "decline"}}
    assert dict(without_answers(done, NOW).answers) == {} and without_answers(without_answers(done, NOW), NOW) is None


def test_input_keys_are_unique_for_a_tasks_life():
    answered = with_answers(with_input(task(), {"a": ASK}, None, NOW), {"a": {"action": "accept"}}, NOW)
    with pytest.raises(ValueError, match="already issued"):
        with_input(answered, {"a": ASK}, None, NOW)
    assert with_input(answered, {"b": ASK}, None, NOW).issued == ("a", "b")


def test_input_is_bounded():
    with pytest.raises(InputTooLarge, match="MAX_INPUT_BYTES"):
        with_input(task(), {"a": {"method": "elicitation/create", "params": {"message": "x" * MAX_INPUT_BYTES}}},
                   None, NOW)
    with pytest.raises(ValueError, match="MAX_INPUT_KEYS"):
        with_input(task(), {str(n): ASK for n in range(MAX_INPUT_KEYS + 1)}, None, NOW)
    asking = with_input(task(), {"a": ASK}, None, NOW)
    with pytest.raises(InputTooLarge, match="over the limit"):
        with_answers(asking, {"a": {"action": "accept", "content": {"v": "x" * MAX_INPUT_BYTES}}}, NOW)
    assert InputTooLarge("x").code == -32602  # the client sent it: invalid params


def test_a_result_over_the_limit_fails_the_task_saying_so():
    big = {"content": [{"type": "text", "text": "x" * MAX_RESULT_BYTES}]}
    record = finished(task(), NOW, result=big)
    assert record.status == FAILED and record.result is None
    assert record.error["code"] == -32603 and record.error["data"]["limit"] == MAX_RESULT_BYTES
    assert "MAX_RESULT_BYTES" in record.error["message"] and record.status_message == record.error["message"]
    fits = finished(task(), NOW, result={"content": [{"type": "text", "text": "x" * 1000}]})
    assert fits.status == COMPLETED and 1000 < fits.result_bytes < 1100


def test_a_result_that_is_not_json_fails_the_task_instead_of_being_lost():
    record = finished(task(), NOW, result={"content": [{"type": "text", "text": object()}]})
    assert record.status == FAILED and "not JSON" in record.error["message"]
    with pytest.raises(ValueError, match="result object"):
        finished(task(), NOW, result=["not", "a", "dict"])


def test_cancel_is_a_flag_for_the_runner():
    flagged = with_cancel_request(task(), NOW)
    assert flagged.cancel_requested and flagged.status == WORKING
    assert with_cancel_request(flagged, NOW) is None  # idempotent


def test_the_detailed_task_has_the_field_of_its_status_only():
    shown = {status: in_status(status).detailed() for status in STATUSES}
    assert shown[INPUT_REQUIRED]["inputRequests"] == {"a": ASK}
    assert shown[COMPLETED]["result"] == {"content": []}
    assert shown[FAILED]["error"] == {"code": -32603, "message": "boom"} and shown[FAILED]["statusMessage"] == "boom"
    extra = {"inputRequests", "result", "error"}
    assert {status: sorted(set(fields) & extra) for status, fields in shown.items()} == {
        WORKING: [], INPUT_REQUIRED: ["inputRequests"], COMPLETED: ["result"], FAILED: ["error"], CANCELLED: []}
    working = shown[WORKING]
    assert working["ttlMs"] == 60_000 and working["pollIntervalMs"] == 500 and "statusMessage" not in working
    assert working["createdAt"] == iso_time(NOW) and not {"owner", "answers", "version"} & set(working)
    assert new_task("a", NOW, ttl_ms=None, poll_interval_ms=None, lease_ms=1).detailed()["ttlMs"] is None


def test_iso_time():
    assert iso_time(0) == "1970-01-01T00:00:00.000Z"
    assert iso_time(1_785_231_000_250) == "2026-07-28T09:30:00.250Z"
    # Past a 32-bit time_t's end (2038-01-19T03:14:07Z): the lab's i386 cell raised OverflowError here.
    assert iso_time(2**31 * 1000) == "2038-01-19T03:14:08.000Z"
    assert iso_time(4_102_444_800_999) == "2100-01-01T00:00:00.999Z"


def test_a_row_holds_the_whole_record():
    record = with_cancel_request(with_answers(with_input(task(), {"a": ASK, "b": ASK}, "?", NOW),
                                              {"a": {"action": "accept", "content": {"n": "\ud800 lone"}}}, NOW), NOW)
    again = from_row(to_row(record))
    assert again == dataclasses.replace(record, input_requests=dict(record.input_requests),
                                        answers=dict(record.answers))
    assert from_row(to_row(finished(record, NOW, result={"content": [], "isError": True}))).result["isError"]


def ended_process():
    """(pid, start ticks) of a process that has ended and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = _record._process_start(child.pid)[1]
    child.kill()
    child.wait()
    return child.pid, started


def test_a_runner_on_this_host_whose_process_ended_is_dead():
    pid, started = ended_process()
    record = task(runner=Runner(host=this_runner().host, pid=pid, started=started, token="gone"))
    reason = dead_runner(record, NEVER)
    assert reason is not None and f"pid {pid}" in reason and "ended before the task finished" in reason
    failed = orphaned(NEVER)(record, NOW)
    assert failed.status == FAILED and failed.error == {"code": -32603, "message": reason}


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times come from Linux's /proc")
def test_a_reused_pid_is_not_mistaken_for_the_runner():
    # The pid is alive (it is this very process), but it started at another time than the runner did.
    me = this_runner()
    impostor = task(runner=Runner(host=me.host, pid=me.pid, started=me.started + 1, token="other"))
    assert dead_runner(impostor, NEVER) is not None
    alive = task(runner=dataclasses.replace(me, token="another store's token, same process"))
    assert dead_runner(alive, ALWAYS) is None  # start time matches: alive whatever the lease says


def test_a_runner_elsewhere_is_judged_by_its_lease_standing_still_by_the_judges_own_monotonic_clock():
    from mcpserver.tasks._operations import LeaseWatch

    monotonic = [100.0]
    watch = LeaseWatch(1000, lambda: monotonic[0])
    record = task(runner=Runner(host="another-host", pid=1, started=1, token="remote"), lease_until=NOW - 10**9)
    assert dead_runner(record, watch.lapsed) is None  # first seen: long past by the wall clock, and not yet lapsed
    monotonic[0] += 0.999
    assert dead_runner(record, watch.lapsed) is None
    renewed = dataclasses.replace(record, lease_until=NOW - 10**9 - 60_000)  # renewed by a clock stepped back
    assert dead_runner(renewed, watch.lapsed) is None  # moved: a runner at work, whatever the value
    monotonic[0] += 0.999
    assert dead_runner(renewed, watch.lapsed) is None
    monotonic[0] += 0.002
    assert "stopped renewing its lease" in dead_runner(renewed, watch.lapsed)  # a whole lease standing still
    assert dead_runner(task(), ALWAYS) is None  # this process: never dead, whatever its lease


def test_this_runner_is_made_again_after_a_fork(monkeypatch):
    me = this_runner()
    assert this_runner() is me
    monkeypatch.setattr(os, "getpid", lambda: me.pid + 1)
    other = this_runner()
    assert other.pid == me.pid + 1 and other.token != me.token and other.host == me.host
    monkeypatch.undo()
    _record._IDENTITY[:] = [me]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times come from Linux's /proc")
def test_a_process_records_the_start_time_other_processes_read_of_it():
    # Under qemu-user (the lab's arm64 and s390x cells) a process's read of its own /proc/PID/stat is qemu's answer,
    # 38 to 42 ticks from the kernel's, which a child reads: a runner recorded so was taken for a dead one.
    child = [sys.executable, "-c", "import os; print(open(f'/proc/{os.getppid()}/stat').read())"]
    read_by_a_child = subprocess.run(child, capture_output=True, text=True, timeout=60, check=True).stdout
    state, started = _record._stat_fields(read_by_a_child)
    assert state.isalpha() and started == this_runner().started == _record._process_start(os.getpid())[1] > 0


def test_a_stat_answered_by_qemu_user_says_nothing_of_when_the_process_started():
    from mcpserver.tasks._record import _process_start, _stat_fields

    state, started = _process_start(os.getpid())
    assert state.isalpha() and started > 0  # what the kernel says, and what other processes read
    # What a process under qemu-user reads of itself (the lab's s390x cell): state 0, qemu's own start time,
    # 42 ticks from the kernel's; recorded as the runner's identity, it took a live runner for a dead one.
    emulated = "813 (python3.11) 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 813765 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
    assert _stat_fields(emulated) == ("", 0)
