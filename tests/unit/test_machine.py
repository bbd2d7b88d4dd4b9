"""The HTTP server's connection machine (mcpserver.httpd._machine), state by state: bytes and facts in, actions
out, with no socket, thread or clock. Every case the hostile suites found over real sockets (slow heads,
half-closes, pipelining, a client hanging up mid-stream, 408, 503) is here as the rule that answers it."""

import pytest
from mcpserver.httpd._machine import (
    BODY,
    CLOSE,
    CLOSED,
    CONTINUE,
    DRAIN,
    HANDSHAKE,
    HEAD,
    IDLE,
    LINGER,
    LINGER_CLOSE,
    LINGER_SECONDS,
    MAX_DRAIN_BYTES,
    MAX_HEAD_BYTES,
    NOTHING,
    READ,
    SCREEN,
    STREAM,
    WORK,
    WORKING,
    WRITE,
    WRITING,
    Machine,
    Rules,
)

READ_TIMEOUT, HEADER_TIMEOUT = 30.0, 10.0
GET = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"
OK = ("200 OK", [("Content-Length", "2")])


def machine(screening=False, tls=False, max_body_bytes=1000, now=100.0):
    rules = Rules(read_timeout=READ_TIMEOUT, header_timeout=HEADER_TIMEOUT, max_body_bytes=max_body_bytes,
                  screening=screening)
    return Machine(rules, tls, now)


def post(body=b"", length=None, *extra):
    lines = [b"POST /mcp HTTP/1.1", b"Host: h", b"Content-Length: %d" % (len(body) if length is None else length),
             *extra]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def served(m, now=100.0):
    """Run the request in progress to the end of a whole 200 response; the action once it is out."""
    assert m.state in (WORKING, SCREEN)
    if m.state == SCREEN:
        assert m.screened(None, now) == WORK
    assert m.state == WORKING and m.body is not None
    m.respond(*OK)
    return m.finished(now)


# -- waiting for a request: IDLE, HEAD, and the head's rules ----------------------------------------------------

def test_a_new_connection_idles_with_the_read_timeout_and_a_tls_one_handshakes_with_the_header_timeout():
    plain, tls = machine(now=5.0), machine(tls=True, now=5.0)
    assert (plain.state, plain.deadline) == (IDLE, 5.0 + READ_TIMEOUT)
    assert (tls.state, tls.deadline) == (HANDSHAKE, 5.0 + HEADER_TIMEOUT)
    assert tls.handshaken(7.0) == READ and (tls.state, tls.deadline) == (IDLE, 7.0 + READ_TIMEOUT)


def test_a_whole_request_goes_to_a_worker_at_once_with_its_body_taken():
    m = machine()
    assert m.received(GET, False, 100.0) == WORK
    assert m.state == WORKING and m.head.method == "GET" and m.body == b"" and not m.buffer
    posted = machine()
    assert posted.received(post(b"12345") + GET[:5], False, 100.0) == WORK
    assert (posted.state, posted.body, bytes(posted.buffer)) == (WORKING, b"12345", GET[:5])  # the next one stays


def test_a_whole_request_to_a_screening_app_goes_to_be_screened_and_run_in_one_hand_off():
    m = machine(screening=True)
    assert m.received(post(b"12345"), False, 1.0) == WORK  # the worker screens it just before it runs
    assert (m.state, m.body) == (WORKING, b"12345")
    refused = machine(screening=True)
    refused.received(post(b"12345") + GET, False, 1.0)
    assert refused.screened(("403 Forbidden", [("Content-Length", "0")], b""), 2.0) == WRITE
    assert refused.outgoing.startswith(b"HTTP/1.1 403 ") and refused.body is None
    assert refused.finished(2.0) == WORK and refused.head.method == "GET"  # its body was not read as a request
    large = machine(screening=True, max_body_bytes=4)
    assert large.received(post(b"12345"), False, 1.0) == WORK and large.state == SCREEN  # the app's bound first
    assert large.screened(None, 2.0) == WRITE and large.outgoing.startswith(b"HTTP/1.1 413 ")


def test_a_slow_head_starts_the_header_deadline_at_its_first_byte_and_keeps_it():
    m = machine()
    assert m.received(b"GET / HT", False, 101.0) == READ
    assert (m.state, m.deadline) == (HEAD, 101.0 + HEADER_TIMEOUT)
    for offset, byte in enumerate(b"TP/1.1\r\nHost: h\r\n"):  # a byte at a time: the deadline does not move
        assert m.received(bytes([byte]), False, 102.0 + offset) == READ
        assert m.deadline == 101.0 + HEADER_TIMEOUT
    assert m.received(b"\r\n", False, 120.0) == WORK


def test_a_head_trickling_in_is_searched_from_where_the_last_search_stopped():
    m = machine()
    m.received(b"GET / HTTP/1.1\r\nHost: h\r\n" + (b"X-A: " + b"b" * 200 + b"\r\n") * 50, False, 100.0)
    assert m.searched == len(m.buffer)  # the next search starts 3 bytes before here, not at 0
    assert m.received(b"\r\n", False, 100.0) == WORK


def test_a_slow_head_past_the_header_timeout_gets_408_and_a_lingering_close():
    m = machine()
    m.received(b"GET / HTTP/1.1\r\n", False, 100.0)
    assert m.deadline_passed(100.0 + HEADER_TIMEOUT - 0.001) == NOTHING
    assert m.deadline_passed(100.0 + HEADER_TIMEOUT) == WRITE
    assert m.outgoing.startswith(b"HTTP/1.1 408 ") and b"Connection: close" in m.outgoing
    assert m.finished(200.0) == LINGER_CLOSE and (m.state, m.deadline) == (LINGER, 200.0 + LINGER_SECONDS)


def test_an_idle_connection_past_its_deadline_just_closes():
    m = machine(now=0.0)
    assert m.deadline_passed(READ_TIMEOUT) == CLOSE
    tls = machine(tls=True, now=0.0)  # a handshake that never finishes
    assert tls.deadline_passed(HEADER_TIMEOUT) == CLOSE


def test_a_head_larger_than_its_bound_is_431_however_it_arrives():
    m = machine()
    assert m.received(b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * MAX_HEAD_BYTES, False, 100.0) == WRITE
    assert m.outgoing.startswith(b"HTTP/1.1 431 ")
    assert m.finished(100.0) == LINGER_CLOSE  # a framing error: the rest is never read as a request


def test_a_malformed_head_is_answered_and_the_connection_ends():
    m = machine()
    assert m.received(b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", False, 1.0) == WRITE
    assert m.outgoing.startswith(b"HTTP/1.1 411 ")
    assert m.finished(1.0) == LINGER_CLOSE
    assert m.received(GET, False, 2.0) == READ and m.head is None  # lingering: dropped, never a request
    assert m.received(b"", True, 3.0) == CLOSE


def test_empty_lines_before_a_request_and_bare_line_feeds_are_accepted():
    m = machine()
    assert m.received(b"\r\n\n\r\nGET / HTTP/1.1\nHost: h\n\n", False, 1.0) == WORK
    assert m.head.target == "/"


def test_a_fin_before_a_whole_request_closes_and_one_after_it_still_gets_the_answer():
    cut = machine()
    assert cut.received(GET[:10], True, 1.0) == CLOSE
    half = machine()
    assert half.received(GET, True, 1.0) == WORK  # a half-close after the request: it is served
    data = half.respond(*OK)
    assert b"Connection: close" in data  # but not kept: the client sends nothing more
    assert half.finished(2.0) == CLOSE


# -- a body -----------------------------------------------------------------------------------------------------

def test_a_body_on_its_way_waits_in_body_with_the_read_timeout_from_its_head():
    m = machine()
    assert m.received(post(b"12345")[:-3], False, 10.0) == READ
    assert (m.state, m.deadline) == (BODY, 10.0 + READ_TIMEOUT)
    assert m.received(b"3", False, 20.0) == READ and m.deadline == 10.0 + READ_TIMEOUT  # no reset per byte
    assert m.received(b"45", False, 30.0) == WORK and (m.state, m.body) == (WORKING, b"12345")


def test_expect_100_continue_gets_an_interim_response_once_when_the_body_is_wanted():
    m = machine()
    assert m.received(post(b"abc")[:-3].replace(b"Host: h", b"Host: h\r\nExpect: 100-continue"), False, 1.0) == READ
    assert m.take_interim() == CONTINUE and m.take_interim() == b""
    assert m.received(b"a", False, 2.0) == READ and m.interim == b""


def test_a_body_past_max_body_bytes_is_413_without_waiting_for_it():
    m = machine(max_body_bytes=10)
    assert m.received(post(length=11), False, 1.0) == WRITE
    assert m.outgoing.startswith(b"HTTP/1.1 413 ")
    assert m.finished(1.0) == READ and (m.state, m.skip) == (DRAIN, 11)  # small: skipped, the connection kept


def test_a_skipped_body_then_the_next_request_in_the_same_bytes():
    m = machine(max_body_bytes=10)
    m.received(post(length=11), False, 1.0)
    m.finished(1.0)
    assert m.received(b"x" * 11 + GET, False, 2.0) == WORK
    assert m.head.method == "GET"


def test_a_refused_body_too_large_to_skip_ends_with_a_lingering_close():
    m = machine(max_body_bytes=10)
    m.received(post(length=MAX_DRAIN_BYTES + 1), False, 1.0)
    assert b"Connection: close" in m.outgoing
    assert m.finished(1.0) == LINGER_CLOSE


# -- screening --------------------------------------------------------------------------------------------------

def test_with_screening_a_head_goes_to_a_worker_before_its_body():
    m = machine(screening=True)
    assert m.received(post(length=5), False, 1.0) == WORK and m.state == SCREEN
    assert m.screened(None, 2.0) == READ and (m.state, m.deadline) == (BODY, 2.0 + READ_TIMEOUT)
    assert m.received(b"12345", False, 3.0) == WORK and (m.state, m.body) == (WORKING, b"12345")


def test_a_screened_refusal_is_answered_and_its_small_body_skipped():
    m = machine(screening=True)
    m.received(post(b"ab", length=5), False, 1.0)
    refused = ("401 Unauthorized", [("Content-Length", "3")], b"no\n")
    assert m.screened(refused, 2.0) == WRITE
    assert m.outgoing.startswith(b"HTTP/1.1 401 Unauthorized\r\n") and m.outgoing.endswith(b"no\n")
    assert m.finished(2.0) == READ and (m.state, m.skip) == (DRAIN, 3)
    assert m.received(b"cde", False, 3.0) == READ and m.state == IDLE


def test_a_screened_refusal_with_the_body_in_keeps_the_connection_and_serves_what_follows():
    m = machine(screening=True)
    m.received(post(b"abcde") + GET, False, 1.0)
    assert m.screened(("403 Forbidden", [("Content-Length", "0")], b""), 1.0) == WRITE
    assert m.finished(1.0) == WORK and m.head.method == "GET"  # the pipelined one, in order


def test_the_app_s_own_bound_is_asked_before_max_body_bytes():
    m = machine(screening=True, max_body_bytes=10)
    assert m.received(post(length=11), False, 1.0) == WORK  # screened first: the app may refuse otherwise
    assert m.screened(None, 1.0) == WRITE and m.outgoing.startswith(b"HTTP/1.1 413 ")


def test_a_screened_head_whose_client_half_closed_before_its_body_closes():
    m = machine(screening=True)
    m.received(post(length=5), True, 1.0)
    assert m.screened(None, 1.0) == CLOSE


# -- the response, and what follows it --------------------------------------------------------------------------

def test_a_kept_alive_response_goes_back_to_idle_with_a_fresh_read_timeout():
    m = machine()
    m.received(GET, False, 1.0)
    assert m.body == b"" and m.state == WORKING
    data = m.respond(*OK)
    assert data.startswith(b"HTTP/1.1 200 OK\r\nServer: mcpserver/") and b"Connection" not in data
    assert m.finished(50.0) == READ and (m.state, m.deadline, m.head) == (IDLE, 50.0 + READ_TIMEOUT, None)


def test_pipelined_requests_are_served_one_at_a_time_in_order():
    m = machine()
    assert m.received(GET.replace(b"/", b"/one", 1) + GET.replace(b"/", b"/two", 1) + b"GET /thr", False, 1.0) == WORK
    assert m.head.target == "/one"
    assert served(m) == WORK and m.head.target == "/two"
    assert served(m) == READ and m.state == HEAD and m.buffer == b"GET /thr"


def test_without_a_length_a_response_is_chunked_on_1_1_and_ends_the_connection_on_1_0():
    one_one = machine()
    one_one.received(GET, False, 1.0)
    assert b"Transfer-Encoding: chunked" in one_one.respond("200 OK", []) and one_one.chunked
    assert one_one.finished(1.0) == READ
    one_oh = machine()
    one_oh.received(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", False, 1.0)
    assert b"Connection: close" in one_oh.respond("200 OK", []) and not one_oh.chunked
    assert one_oh.finished(1.0) == CLOSE


@pytest.mark.parametrize("version", [b"1.1", b"1.0"])
@pytest.mark.parametrize("status", ["304 Not Modified", "204 No Content"])
def test_a_status_without_a_body_is_neither_chunked_nor_the_end_of_the_connection(status, version):
    """A 304 (a Server Card revalidated) or a 204 has no body (RFC 9112 §6.3): a chunked one would leave its
    terminator for the client to read as the next response."""
    m = machine()
    m.received(b"GET / HTTP/" + version + b"\r\nHost: h\r\nConnection: keep-alive\r\n\r\n", False, 1.0)
    data = m.respond(status, [("ETag", '"a"')])
    assert b"Transfer-Encoding" not in data and b"Connection: close" not in data and not m.chunked
    assert m.finished(1.0) == READ


def test_http_1_0_keep_alive_is_said_and_connection_close_is_honoured():
    kept = machine()
    kept.received(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", False, 1.0)
    assert b"Connection: keep-alive" in kept.respond(*OK) and kept.finished(1.0) == READ
    closing = machine()
    closing.received(GET.replace(b"Host: h", b"Host: h\r\nConnection: close"), False, 1.0)
    assert b"Connection: close" in closing.respond(*OK) and closing.finished(1.0) == CLOSE


def test_a_server_that_stops_keeps_no_connection_alive():
    m = machine()
    m.received(GET, False, 1.0)
    m.rules.stopping = True
    assert b"Connection: close" in m.respond(*OK) and m.finished(1.0) == CLOSE


def test_a_slow_reader_is_the_loops_with_the_read_timeout_started_again_by_progress():
    m = machine()
    m.received(GET, False, 1.0)
    m.respond(*OK)
    m.stalled(10.0)
    assert (m.state, m.deadline) == (WRITING, 10.0 + READ_TIMEOUT)
    m.progressed(20.0)
    assert m.deadline_passed(10.0 + READ_TIMEOUT) == NOTHING
    assert m.deadline_passed(20.0 + READ_TIMEOUT) == CLOSE


def test_the_app_raising_is_500_before_its_response_started_and_a_close_after():
    before = machine()
    before.received(GET, False, 1.0)
    assert before.failed() == WRITE and before.outgoing.startswith(b"HTTP/1.1 500 ")
    assert before.finished(1.0) == LINGER_CLOSE
    after = machine()
    after.received(GET, False, 1.0)
    after.respond(*OK)
    assert after.failed() == CLOSE


def test_503_when_no_worker_can_take_it_is_the_servers_own_answer():
    m = machine()
    m.received(GET, False, 1.0)
    assert m.answer(503, "Too many requests in progress; try again", "Retry-After: 1") == WRITE
    assert m.outgoing.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1\r\n" in m.outgoing
    assert m.finished(1.0) == LINGER_CLOSE


# -- hang-ups and half-closes -----------------------------------------------------------------------------------

def test_a_half_close_while_the_app_runs_is_probed_once_with_an_interim_100():
    m = machine()
    m.received(GET, False, 1.0)
    assert m.half_closed(watched=True) == CONTINUE and m.probed and m.peer_done
    unwatched = machine()
    unwatched.received(GET, False, 1.0)
    assert unwatched.half_closed(watched=False) == b""  # nobody asked to hear of a hang-up: no probe


def test_no_probe_once_the_response_started_nor_on_http_1_0():
    started = machine()
    started.received(GET, False, 1.0)
    started.respond(*OK)
    assert started.half_closed(watched=True) == b""
    old = machine()
    old.received(b"GET / HTTP/1.0\r\n\r\n", False, 1.0)
    assert old.half_closed(watched=True) == b""


def test_a_client_that_hung_up_mid_request_is_not_kept():
    m = machine()
    m.received(GET, False, 1.0)
    m.hung_up()
    m.respond(*OK)
    assert m.finished(1.0) == CLOSE


# -- push streams -----------------------------------------------------------------------------------------------

def stream(version=b"1.1"):
    m = machine()
    m.received(GET.replace(b"HTTP/1.1", b"HTTP/" + version), False, 1.0)
    m.streaming()
    assert m.state == STREAM
    return m


def test_a_push_stream_sends_its_head_with_its_first_piece_then_chunks():
    m = stream()
    first = m.stream_piece(b"data: 1\n\n", "200 OK", [("Content-Type", "text/event-stream")])
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b"\r\n\r\n9\r\ndata: 1\n\n\r\n")
    assert m.stream_piece(b"x", "200 OK", []) == b"1\r\nx\r\n"
    assert m.stream_over("200 OK", []) == b"0\r\n\r\n"
    assert m.finished(2.0) == READ and m.state == IDLE


def test_a_half_closed_stream_is_probed_with_its_own_probe_and_then_not_kept():
    m = stream()
    assert m.stream_probe(b": ping\n\n") == CONTINUE  # before its head: an interim 100
    m.stream_piece(b"x", "200 OK", [])
    fresh = stream()
    fresh.stream_piece(b"x", "200 OK", [])
    assert fresh.stream_probe(b": ping\n\n") == b"8\r\n: ping\n\n\r\n" and fresh.probed
    fresh.stream_over("200 OK", [])
    assert fresh.finished(2.0) == CLOSE  # the client sends no more requests


def test_a_stream_whose_client_hung_up_mid_stream_ends_with_the_connection():
    m = stream()
    m.stream_piece(b"x", "200 OK", [])
    m.hung_up()
    m.stream_over("200 OK", [])
    assert m.finished(2.0) == CLOSE
    assert m.closed() and m.state == CLOSED and not m.closed()


def test_a_stream_on_http_1_0_is_not_chunked_and_ends_with_the_connection():
    m = stream(b"1.0")
    assert not m.stream_piece(b"x", "200 OK", []).endswith(b"\r\n1\r\nx\r\n")
    assert m.stream_over("200 OK", []) == b"" and m.finished(2.0) == CLOSE


@pytest.mark.parametrize("state", [IDLE, HEAD, BODY, DRAIN, LINGER, WRITING])
def test_every_state_the_loop_sweeps_has_a_deadline(state):
    m = machine()
    m._enter(state, 0.0)
    assert 0.0 < m.deadline < float("inf") and m.deadline_passed(m.deadline) in (CLOSE, WRITE)
