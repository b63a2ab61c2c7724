"""ScriptedModel: scripts, the echo default, checkpoints and cancellation."""

from __future__ import annotations

import re
from contextlib import aclosing

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_agents.model import (
    AssistantText,
    CallTool,
    Fail,
    Finished,
    FinishReason,
    Model,
    ModelError,
    ModelEvent,
    ModelRequest,
    Say,
    ScriptedModel,
    SystemText,
    TextDelta,
    ToolCallRequested,
    ToolOutput,
    Usage,
    UserText,
    Wait,
)
from trio_agents.model._messages import ChatMessage, ToolCallPart
from trio_agents.model._scripted import _KEPT_REQUESTS, split_words


def _request(*messages: ChatMessage) -> ModelRequest:
    return ModelRequest(messages=messages)


async def _collect(model: Model, request: ModelRequest) -> list[ModelEvent]:
    async with aclosing(model.stream(request)) as events:
        return [event async for event in events]


def _text(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_scripted_reply_streams_text_then_finishes_stop() -> None:
    """A Say step streams its text as deltas, and the stream ends with Finished(stop)."""
    model = ScriptedModel([[Say("hello there world")]])
    events = await _collect(model, _request(UserText("hi")))
    assert _text(events) == "hello there world"
    assert len([e for e in events if isinstance(e, TextDelta)]) == 3
    assert events[-1] == Finished(FinishReason.STOP, Usage(input_tokens=1, output_tokens=3))


async def test_string_reply_is_shorthand_for_one_say() -> None:
    """A plain string reply is played like (Say(text),)."""
    model = ScriptedModel(["short answer"])
    assert _text(await _collect(model, _request(UserText("q")))) == "short answer"


async def test_each_stream_consumes_the_next_reply_in_order() -> None:
    """Successive stream() calls play successive replies."""
    model = ScriptedModel(["one", "two"])
    assert model.replies_left == 2
    first = _text(await _collect(model, _request(UserText("a"))))
    second = _text(await _collect(model, _request(UserText("b"))))
    assert (first, second) == ("one", "two")
    assert model.replies_left == 0


async def test_tool_call_reply_finishes_with_tool_calls() -> None:
    """A CallTool step yields ToolCallRequested and the finish reason is tool_calls."""
    model = ScriptedModel([[Say("running"), CallTool("bash", {"command": "ls"}, call_id="c9")]])
    events = await _collect(model, _request(UserText("go")))
    assert ToolCallRequested("c9", "bash", {"command": "ls"}) in events
    last = events[-1]
    assert isinstance(last, Finished)
    assert last.reason is FinishReason.TOOL_CALLS


async def test_tool_calls_without_id_get_unique_ids_per_model() -> None:
    """CallTool(call_id=None) gets call-1, call-2, ... across the model's streams."""
    model = ScriptedModel([[CallTool("a"), CallTool("b")], [CallTool("c")]])
    first = await _collect(model, _request(UserText("x")))
    second = await _collect(model, _request(UserText("y")))
    ids = [e.call_id for e in first + second if isinstance(e, ToolCallRequested)]
    assert ids == ["call-1", "call-2", "call-3"]


async def test_fail_step_raises_model_error_with_its_message() -> None:
    """A Fail step raises ModelError carrying the scripted message."""
    model = ScriptedModel([[Say("partial"), Fail("rate limited")]])
    with pytest.raises(ModelError, match=r"^rate limited$"):
        await _collect(model, _request(UserText("x")))


async def test_exhausted_script_raises_model_error_naming_its_length() -> None:
    """Streaming past the last reply is a ModelError that says how many replies there were."""
    model = ScriptedModel(["only"])
    await _collect(model, _request(UserText("x")))
    pattern = r"^the script of ScriptedModel 'scripted' has no reply left \(it had 1\)$"
    with pytest.raises(ModelError, match=pattern):
        await _collect(model, _request(UserText("y")))


def test_reply_of_wrong_type_is_refused_at_construction() -> None:
    """A step that is not Say/CallTool/Wait/Fail is a TypeError when the model is built."""
    with pytest.raises(TypeError, match=r"^reply 0 of a ScriptedModel has a step"):
        ScriptedModel([["not a step"]])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"^reply 0 of a ScriptedModel must be"):
        ScriptedModel([Say("bare step, not a sequence")])  # type: ignore[list-item]


def test_negative_wait_is_refused() -> None:
    """Wait and Say delays are seconds >= 0."""
    with pytest.raises(ValueError, match=r"^seconds must be"):
        Wait(-1)
    with pytest.raises(ValueError, match=r"^delay must be"):
        Say("x", delay=float("nan"))


async def test_wait_step_sleeps_in_trio_time(autojump_clock: trio.testing.MockClock) -> None:
    """Wait(seconds) delays the rest of the reply by that much trio time."""
    model = ScriptedModel([[Wait(5), Say("late")]])
    start = trio.current_time()
    events = await _collect(model, _request(UserText("x")))
    assert _text(events) == "late"
    assert trio.current_time() - start == pytest.approx(5)


async def test_cancel_during_wait_stops_the_stream(autojump_clock: trio.testing.MockClock) -> None:
    """A cancel scope around the consumer interrupts a Wait mid-turn."""
    model = ScriptedModel([[Say("first "), Wait(10), Say("never")]])
    seen: list[ModelEvent] = []
    with trio.move_on_after(3) as scope:
        async with aclosing(model.stream(_request(UserText("x")))) as events:
            async for event in events:
                seen.append(event)
    assert scope.cancelled_caught
    assert _text(seen) == "first "
    assert not any(isinstance(e, Finished) for e in seen)


async def test_say_delay_paces_each_word(autojump_clock: trio.testing.MockClock) -> None:
    """Say(delay=d) waits d seconds of trio time before each word."""
    model = ScriptedModel([[Say("a b c", delay=1.0)]])
    times: list[float] = []
    async with aclosing(model.stream(_request(UserText("x")))) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                times.append(trio.current_time())
    assert times == pytest.approx([1.0, 2.0, 3.0])


async def test_every_event_is_preceded_by_a_checkpoint() -> None:
    """Each __anext__ checkpoints: a cancelled consumer is stopped before the first event."""
    model = ScriptedModel.echo()
    with trio.CancelScope() as scope:
        scope.cancel()
        async with aclosing(model.stream(_request(UserText("x")))) as events:
            await events.__anext__()
        pytest.fail("the stream did not checkpoint")  # pragma: no cover
    assert scope.cancelled_caught


def test_scripted_model_satisfies_the_model_protocol() -> None:
    """ScriptedModel is a Model; its name says which kind."""
    assert isinstance(ScriptedModel([]), Model)
    assert ScriptedModel([]).name == "scripted"
    assert ScriptedModel.echo().name == "echo"


# -- echo ------------------------------------------------------------------------------------------


async def test_echo_streams_the_latest_user_message_back() -> None:
    """echo answers with the latest user message, not an older one."""
    model = ScriptedModel.echo()
    request = _request(
        SystemText("be brief"), UserText("old"), AssistantText("old"), UserText("say  this back ")
    )
    events = await _collect(model, request)
    assert _text(events) == "say  this back "
    assert events[-1] == Finished(FinishReason.STOP, Usage(input_tokens=7, output_tokens=3))


@given(st.text())
def test_split_words_concatenates_to_the_input(text: str) -> None:
    """Word chunks preserve all whitespace: joined they equal the text."""
    chunks = split_words(text)
    assert "".join(chunks) == text
    assert all(chunk for chunk in chunks)


@given(st.text().filter(lambda t: not t.lstrip().startswith(("!bash", "!bg", "!tool"))))
def test_echo_deltas_concatenate_to_the_input(text: str) -> None:
    """For any text, echo's deltas joined are exactly the user's text."""

    async def run() -> list[ModelEvent]:
        return await _collect(ScriptedModel.echo(), _request(UserText(text)))

    events = trio.run(run)
    assert _text(events) == text
    assert events[-1] == Finished(FinishReason.STOP, Usage(len(text.split()), len(text.split())))


async def test_echo_waits_its_delay_before_answering(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """echo(delay) emits nothing for delay seconds of trio time."""
    model = ScriptedModel.echo(delay=2.5)
    start = trio.current_time()
    async with aclosing(model.stream(_request(UserText("hi")))) as events:
        first = await events.__anext__()
    assert first == TextDelta("hi")
    assert trio.current_time() - start == pytest.approx(2.5)


async def test_echo_delay_paces_each_word_and_each_tool_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """echo(delay) waits its delay before every word it says, and before a tool call."""
    model = ScriptedModel.echo(delay=0.5)
    start = trio.current_time()
    times: list[float] = []
    async with aclosing(model.stream(_request(UserText("one two three")))) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                times.append(trio.current_time() - start)
    assert times == pytest.approx([0.5, 1.0, 1.5])
    start = trio.current_time()
    async with aclosing(model.stream(_request(UserText("!bash pwd")))) as events:
        assert isinstance(await events.__anext__(), ToolCallRequested)
    assert trio.current_time() - start == pytest.approx(0.5)


async def test_echo_bang_bg_starts_a_background_job() -> None:
    """'!bg CMD' calls bash with run_in_background, so a job's lifecycle shows offline."""
    events = await _collect(ScriptedModel.echo(), _request(UserText("!bg sleep 5; echo done")))
    assert events[0] == ToolCallRequested(
        "call-1", "bash", {"command": "sleep 5; echo done", "run_in_background": True}
    )


async def test_echo_delay_can_be_cancelled(autojump_clock: trio.testing.MockClock) -> None:
    """A cancel during echo's delay ends the stream with nothing emitted."""
    model = ScriptedModel.echo(delay=10)
    seen: list[ModelEvent] = []
    with trio.move_on_after(1):
        async with aclosing(model.stream(_request(UserText("hi")))) as events:
            seen.extend([e async for e in events])
    assert seen == []


async def test_echo_bang_tool_calls_any_tool_with_its_json_arguments() -> None:
    """'!tool NAME {JSON}' calls NAME with that object ('!tool NAME' alone: {}); arguments
    that are not a JSON object are one line of text, and no call."""
    model = ScriptedModel.echo()
    events = await _collect(model, _request(UserText('!tool read_file {"path": "a b.txt"}')))
    assert events[0] == ToolCallRequested("call-1", "read_file", {"path": "a b.txt"})
    assert isinstance(events[-1], Finished)
    assert events[-1].reason is FinishReason.TOOL_CALLS
    bare = await _collect(model, _request(UserText("!tool list_files")))
    assert bare[0] == ToolCallRequested("call-2", "list_files", {})
    broken = await _collect(model, _request(UserText("!tool grep {oops")))
    assert re.match(r"^!tool grep: the arguments are not JSON \(", _text(broken))
    listed = await _collect(model, _request(UserText("!tool grep [1]")))
    assert _text(listed) == "!tool grep: the arguments must be a JSON object; got [1]"


async def test_echo_bang_bash_requests_the_bash_tool() -> None:
    """'!bash CMD' makes echo call bash with {"command": CMD} and finish with tool_calls."""
    model = ScriptedModel.echo()
    events = await _collect(model, _request(UserText("!bash echo hi | wc -c")))
    assert events[0] == ToolCallRequested("call-1", "bash", {"command": "echo hi | wc -c"})
    assert isinstance(events[-1], Finished)
    assert events[-1].reason is FinishReason.TOOL_CALLS
    again = await _collect(model, _request(UserText("!bash pwd")))
    assert isinstance(again[0], ToolCallRequested)
    assert again[0].call_id == "call-2"


async def test_echo_reports_tool_output_verbatim() -> None:
    """After the tool ran, echo reports the command and its output, verbatim."""
    model = ScriptedModel.echo()
    call = ToolCallPart("call-1", "bash", {"command": "ls /"})
    request = _request(
        UserText("!bash ls /"),
        AssistantText("", (call,)),
        ToolOutput("call-1", "bash", "bin\n  etc\n"),
    )
    events = await _collect(model, request)
    assert _text(events) == "bash `ls /` exited: bin\n  etc\n"
    assert isinstance(events[-1], Finished)
    assert events[-1].reason is FinishReason.STOP


async def test_echo_reports_a_failed_tool_as_failed() -> None:
    """An error tool output is reported as a failure, with its content."""
    model = ScriptedModel.echo()
    call = ToolCallPart("c", "bash", {"command": "false"})
    request = _request(
        UserText("!bash false"), AssistantText("", (call,)), ToolOutput("c", "bash", "boom", True)
    )
    assert _text(await _collect(model, request)) == "bash `false` failed: boom"


async def test_echo_reports_tools_it_cannot_match_by_their_name() -> None:
    """Outputs without a matching call (or with no message before them) name the tool."""
    model = ScriptedModel.echo()
    other = ToolCallPart("other", "bash", {"command": "ls"})
    unmatched = _request(AssistantText("", (other,)), ToolOutput("c", "bash", "x"))
    assert _text(await _collect(model, unmatched)) == "tool bash exited: x"
    alone = _request(ToolOutput("c", "read", "text"), ToolOutput("d", "read", "more"))
    assert (
        _text(await _collect(model, alone)) == "tool read returned: text\ntool read returned: more"
    )


def test_echo_has_no_replies_left_count_and_a_repr() -> None:
    """An echo model is unscripted (replies_left is None); repr names the model."""
    model = ScriptedModel.echo()
    assert model.replies_left is None
    assert repr(model) == "<ScriptedModel 'echo'>"


async def test_echo_without_user_message_finishes_empty() -> None:
    """With no user message there is nothing to echo: just Finished(stop)."""
    events = await _collect(ScriptedModel.echo(), _request(SystemText("sys")))
    assert events == [Finished(FinishReason.STOP, Usage(1, 0))]


async def test_requests_records_every_request_in_order_also_past_the_script() -> None:
    """``requests`` keeps each request a stream started on, the refused last one too."""
    model = ScriptedModel(["one"])
    first = _request(UserText("hi"))
    second = _request(UserText("again"))
    before = model.requests
    await _collect(model, first)
    with pytest.raises(ModelError, match=r"^the script of ScriptedModel 'scripted' has no reply"):
        await _collect(model, second)
    assert (before, model.requests) == ((), (first, second))


async def test_requests_keeps_the_latest_ones_only() -> None:
    """The echo model never runs out: a long-lived agent on it must not grow by a request
    per turn, so ``requests`` holds the latest 1,000, oldest first."""
    model = ScriptedModel.echo()
    sent = [_request(UserText(f"m{i}")) for i in range(_KEPT_REQUESTS + 5)]
    for request in sent:
        await _collect(model, request)
    assert model.requests == tuple(sent[5:])


_WORDY = st.sampled_from(["a", "b c", "", " d  e f ", "g"])
_MESSAGE = st.builds(UserText, _WORDY) | st.builds(AssistantText, _WORDY)


@given(
    st.lists(
        st.lists(_MESSAGE, max_size=6).map(tuple) | st.sampled_from(["grow", "shrink"]),
        min_size=1,
        max_size=12,
    )
)
async def test_echo_input_tokens_are_the_words_of_every_message_in_any_sequence(
    steps: list[tuple[ChatMessage, ...] | str],
) -> None:
    """A request's input_tokens count every message's words, whether it extends the
    conversation before it (the same message objects), shrinks it, or is another one."""
    model = ScriptedModel.echo()
    conversation: tuple[ChatMessage, ...] = (UserText("x y"),)
    for step in steps:
        if step == "grow":
            conversation = (*conversation, UserText("more words"))
        elif step == "shrink":
            conversation = conversation[: len(conversation) // 2]
        else:
            assert isinstance(step, tuple)
            conversation = (*conversation[:1], *step)
        events = await _collect(model, _request(*conversation))
        finished = events[-1]
        assert isinstance(finished, Finished)
        expected = sum(len(m.content.split()) for m in conversation)
        assert finished.usage.input_tokens == expected
