"""The command traced from the OTEL_* environment: a real OTLP/HTTP export to a loopback
receiver written here (decoded with opentelemetry-proto), the console exporter, bad values."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.helpers.support import TRIO_AGENTS
from trio_agents.tracing import TracingConfigError, tracer_provider_from_environ


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1: keeps every decoded ``/v1/traces`` request."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.port = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = await stream.receive_some()
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)
            }
            length = int(headers.get("content-length", "0"))
            while len(buffer) < length:
                buffer += await stream.receive_some()
            body, buffer = buffer[:length], buffer[length:]
            self.paths.append(request_line.split()[1])
            self.requests.append(ExportTraceServiceRequest.FromString(body))
            answer = ExportTraceServiceResponse().SerializeToString()
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                + f"Content-Length: {len(answer)}\r\n\r\n".encode()
                + answer
            )


def environment(tmp_path: Path, **otel: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, "TRIO_AGENTS_HOME": str(tmp_path), "NO_COLOR": "1", **otel}


async def test_the_command_exports_its_spans_over_otlp_http(tmp_path: Path) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT alone: `run` sends its turn to the receiver, as protobuf."""
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, receiver.handle, 0, host="127.0.0.1")
        [listener] = await nursery.start(serve)
        receiver.port = listener.socket.getsockname()[1]
        env = environment(
            tmp_path,
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}",
            OTEL_SERVICE_NAME="tracing-test",
        )
        with trio.fail_after(60):
            done = await trio.run_process(
                [str(TRIO_AGENTS), "run", "hello", "--store", "memory"],
                env=env,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        nursery.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "hello"
    assert set(receiver.paths) == {"/v1/traces"}
    spans = [
        (resource, span)
        for request in receiver.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    names = sorted(span.name for _, span in spans)
    assert len(names) == 2
    assert re.fullmatch(r"invoke_agent \S+", names[1])
    assert names[0] == "chat echo"
    service = {
        a.key: a.value.string_value
        for a in spans[0][0].resource.attributes
        if a.key == "service.name"
    }
    assert service == {"service.name": "tracing-test"}
    by_name = {span.name: span for _, span in spans}
    assert by_name["chat echo"].parent_span_id == by_name[names[1]].span_id


def test_the_console_exporter_prints_spans_to_stderr(tmp_path: Path) -> None:
    """OTEL_TRACES_EXPORTER=console: the SDK's JSON spans on stderr; stdout is the answer."""
    done = subprocess.run(
        [str(TRIO_AGENTS), "run", "hello", "--store", "memory"],
        env=environment(tmp_path, OTEL_TRACES_EXPORTER="console"),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello"
    assert re.search(r'^    "name": "invoke_agent \S+",$', done.stderr, re.MULTILINE)
    assert '"service.name": "trio-agents"' in done.stderr


def test_an_unknown_exporter_is_one_line_that_names_the_fix(tmp_path: Path) -> None:
    """OTEL_TRACES_EXPORTER=jaeger: one error line, no traceback, a failing status."""
    done = subprocess.run(
        [str(TRIO_AGENTS), "run", "hello", "--store", "memory"],
        env=environment(tmp_path, OTEL_TRACES_EXPORTER="jaeger"),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        "trio-agents: error: OTEL_TRACES_EXPORTER='jaeger' names an exporter trio-agents does "
        "not have (jaeger); use otlp, console or none"
    ]


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_tracing_stays_off_unless_the_environment_asks(environ: dict[str, str]) -> None:
    """No exporter asked for (or the SDK disabled): no tracer provider at all."""
    assert tracer_provider_from_environ(environ) is None


def test_an_unknown_exporter_is_refused() -> None:
    """The error names the variable and the exporters there are."""
    with pytest.raises(TracingConfigError, match=r"^OTEL_TRACES_EXPORTER='otlp,zipkin' names"):
        tracer_provider_from_environ({"OTEL_TRACES_EXPORTER": "otlp,zipkin"})


def test_tracing_asked_for_without_the_extra_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the SDK importable, the error says which extra to install."""
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)
    with pytest.raises(
        TracingConfigError, match=r"^OTEL_TRACES_EXPORTER=console needs OpenTelemetry; install "
    ):
        tracer_provider_from_environ({"OTEL_TRACES_EXPORTER": "console"})
