"""EngineService: one request at a time, in arrival order, a bounded queue, give-up while
waiting; and the frame protocol between the window and its engine process."""

from __future__ import annotations

import io
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import build_stats
from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, Message, StepChunk
from qwen_mtp_desktop.core.hosting.protocol import (
    AnswerChunks,
    AnswerFailed,
    AnswerFinished,
    FrameWriter,
    Generate,
    ProtocolError,
    read_frame,
)
from qwen_mtp_desktop.core.hosting.service import (
    EngineService,
    ServiceBusyError,
    WaitCancelledError,
)


def _hold(service: EngineService, entered: threading.Event, release: threading.Event) -> None:
    with service.exclusive():
        entered.set()
        release.wait(10)


def test_requests_run_one_at_a_time_in_arrival_order() -> None:
    service = EngineService(max_waiting=8)
    entered, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(service, entered, release))
    holder.start()
    assert entered.wait(5)
    order: list[int] = []
    inside = [0]
    most_inside = [0]
    lock = threading.Lock()

    def request(n: int) -> None:
        with service.exclusive():
            with lock:
                inside[0] += 1
                most_inside[0] = max(most_inside[0], inside[0])
            order.append(n)
            time.sleep(0.01)
            with lock:
                inside[0] -= 1

    threads = []
    for n in range(6):
        thread = threading.Thread(target=request, args=(n,))
        thread.start()
        threads.append(thread)
        while service.waiting < n + 1:  # queued in this order
            time.sleep(0.001)
    release.set()
    for thread in [holder, *threads]:
        thread.join(10)
    assert order == list(range(6))
    assert most_inside[0] == 1
    assert not service.busy and service.waiting == 0


def test_a_full_queue_refuses_at_once() -> None:
    service = EngineService(max_waiting=1)
    entered, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(service, entered, release))
    holder.start()
    assert entered.wait(5)
    waiter = threading.Thread(target=_hold, args=(service, threading.Event(), release))
    waiter.start()
    while service.waiting < 1:
        time.sleep(0.001)
    with pytest.raises(ServiceBusyError) as refused, service.exclusive():
        pass
    assert refused.value.code == "BUSY"
    release.set()
    holder.join(10)
    waiter.join(10)
    with service.exclusive():  # free again
        pass


def test_a_caller_that_gives_up_leaves_the_queue() -> None:
    service = EngineService()
    entered, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold, args=(service, entered, release))
    holder.start()
    assert entered.wait(5)
    gave_up = threading.Event()
    outcome: list[BaseException] = []

    def waiter() -> None:
        try:
            with service.exclusive(cancelled=gave_up.is_set):
                pass
        except WaitCancelledError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    while service.waiting < 1:
        time.sleep(0.001)
    gave_up.set()
    thread.join(5)
    assert outcome and outcome[0].code == "CANCELLED"
    assert service.waiting == 0
    release.set()
    holder.join(10)


def test_a_failing_request_frees_the_engine() -> None:
    service = EngineService()
    with pytest.raises(EngineError), service.turn([Message("user", "hi")], GenerationSettings()):
        pass  # no model loaded: generate() refuses
    with service.exclusive():
        pass


MESSAGES = st.one_of(
    st.builds(
        Generate,
        st.integers(1, 2**31),
        st.lists(st.builds(Message, st.sampled_from(["user", "assistant"]), st.text())).map(tuple),
        st.builds(GenerationSettings, max_new_tokens=st.integers(1, 10_000)),
        st.floats(0, 1),
    ),
    st.builds(
        AnswerChunks,
        st.integers(1, 100),
        st.lists(
            st.builds(
                StepChunk,
                st.lists(st.integers(0, 250_000), min_size=1, max_size=9).map(tuple),
                st.text(),
                st.text(),
                st.floats(0, 100),
            )
        ),
        st.floats(0, 2e9),
    ),
    st.builds(AnswerFailed, st.integers(1, 100), st.builds(EngineError, st.text(), st.text())),
)


@given(st.lists(MESSAGES, max_size=5))
def test_frames_round_trip(messages: list[object]) -> None:
    stream = io.BytesIO()
    writer = FrameWriter(stream)
    for message in messages:
        writer.send(message)
    stream.seek(0)
    received = []
    while (message := read_frame(stream)) is not None:
        received.append(message)
    assert len(received) == len(messages)
    for sent, got in zip(messages, received, strict=True):
        if isinstance(sent, AnswerFailed):
            assert isinstance(got, AnswerFailed) and got.request_id == sent.request_id
            assert (got.error.message, got.error.fix, got.error.code) == (
                sent.error.message,
                sent.error.fix,
                sent.error.code,
            )
        else:
            assert got == sent


def test_finished_carries_the_stats() -> None:
    stats = build_stats(
        method=DecodingMethod.mtp(2),
        device="CPU",
        prompt_tokens=5,
        chunk_sizes=[1, 3, 2],
        chunk_times=[0.1, 0.2, 0.3],
        total_s=0.3,
        reasoning_tokens=0,
        answer_tokens=6,
        finish_reason="eos",
        warnings=[],
        max_new_tokens=10,
    )
    stream = io.BytesIO()
    FrameWriter(stream).send(AnswerFinished(3, stats, True))
    stream.seek(0)
    assert read_frame(stream) == AnswerFinished(3, stats, True)


@given(st.binary(max_size=64))
def test_damaged_frames_are_a_protocol_error_not_a_crash(junk: bytes) -> None:
    stream = io.BytesIO(junk)
    try:
        while read_frame(stream) is not None:
            pass
    except ProtocolError:
        pass


def test_a_truncated_frame_is_a_protocol_error() -> None:
    stream = io.BytesIO()
    FrameWriter(stream).send(AnswerFinished)
    data = stream.getvalue()
    with pytest.raises(ProtocolError, match="ended inside a frame"):
        read_frame(io.BytesIO(data[:-1]))
    with pytest.raises(ProtocolError, match="over the limit"):
        read_frame(io.BytesIO(b"\xff\xff\xff\xff"))


def test_writing_to_a_closed_stream_is_a_broken_pipe() -> None:
    writer = FrameWriter(io.BytesIO())
    writer.close()
    with pytest.raises(BrokenPipeError):
        writer.send(AnswerFailed(1, EngineError("x")))
