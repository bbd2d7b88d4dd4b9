"""Drive a server with the official Python SDK's client, and report what happened as JSON.

    PYTHON py_client.py < plan.json > report.json

PYTHON is a venv with either mcp 1.x (ClientSession: the initialize handshake is all it knows) or
mcp 2.x (mcp.Client with mode="legacy", which forces the handshake). The plan (client_tools.drive)
names the transport, the answers the client's callbacks give, and the steps; the report has the
negotiated revision, each step's outcome, what the server asked, and every JSON-RPC message in
both directions, recorded between the transport and the session, so a test can check the wire
(a cancelled call's missing response, say) and not only what the SDK chose to surface.

The tests import nothing from here: it runs in its own interpreter, beside another mcp.
"""

import json
import sys
import time
from contextlib import asynccontextmanager
from importlib import metadata

import anyio
import mcp
from mcp import types

VERSION = metadata.version("mcp")
GENERATION = int(VERSION.split(".")[0])


def wire(message):
    """A SessionMessage's JSON-RPC message as the dict that went over the wire (1.x wraps it in a RootModel)."""
    if isinstance(message, Exception):
        return {"exception": f"{type(message).__name__}: {message}"}
    return message.message.model_dump(by_alias=True, mode="json", exclude_none=True)


class Recorder:
    """Every message between the transport and the session, in order, stamped by direction."""

    def __init__(self):
        self.messages = []

    def incoming(self):
        return [m for direction, m in self.messages if direction == "in"]

    def outgoing(self):
        return [m for direction, m in self.messages if direction == "out"]

    @asynccontextmanager
    async def around(self, transport):
        """The transport's (read, write) streams, with a copy of each message kept as it passes."""
        async with transport as streams:
            read, write = streams[0], streams[1]  # 1.x's HTTP transport yields a session-id getter third
            to_session, from_transport = anyio.create_memory_object_stream(100)
            to_transport, from_session = anyio.create_memory_object_stream(100)

            async def pump_in():
                async with to_session:
                    async for message in read:
                        self.messages.append(("in", wire(message)))
                        await to_session.send(message)

            async def pump_out():
                async for message in from_session:
                    self.messages.append(("out", wire(message)))
                    await write.send(message)

            async with anyio.create_task_group() as group:
                group.start_soon(pump_in)
                group.start_soon(pump_out)
                try:
                    yield from_transport, to_transport
                finally:
                    group.cancel_scope.cancel()


def transport_of(plan):
    if plan["transport"] == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        command = plan["command"]
        return stdio_client(StdioServerParameters(command=command[0], args=command[1:], env=plan.get("env"),
                                                  cwd=plan.get("cwd")))
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client(plan["url"])


class Callbacks:
    """The client's answers to the server's requests, from the plan; each request is noted in `asked`."""

    def __init__(self, answers):
        self.answers = answers
        self.asked = []
        self.logs = []

    async def elicit(self, context, params):
        self.asked.append({"method": "elicitation/create", "params": params.model_dump(by_alias=True, mode="json",
                                                                                       exclude_none=True)})
        for match, action, content in self.answers.get("elicit", []):
            if match in params.message:
                return types.ElicitResult(action=action, content=content)
        return types.ElicitResult(action="decline")

    async def sample(self, context, params):
        self.asked.append({"method": "sampling/createMessage",
                           "params": params.model_dump(by_alias=True, mode="json", exclude_none=True)})
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text=self.answers["sample"]))

    async def roots(self, context):
        self.asked.append({"method": "roots/list"})
        return types.ListRootsResult(roots=[types.Root(**root) for root in self.answers["roots"]])

    async def log(self, params):
        self.logs.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))

    def options(self, wanted):
        chosen = {"elicit": ("elicitation_callback", self.elicit), "sample": ("sampling_callback", self.sample),
                  "roots": ("list_roots_callback", self.roots)}
        options = dict(chosen[name] for name in wanted)
        options["logging_callback"] = self.log
        return options


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


class Driver:
    """The steps of a plan, on a 1.x ClientSession or a 2.x Client (their method names agree)."""

    def __init__(self, api, recorder):
        self.api, self.recorder = api, recorder

    async def step(self, step):
        op = step["op"]
        try:
            if op == "cancel":
                return await self.cancel(step)
            progress = []

            async def on_progress(value, total, message):
                progress.append([value, total, message])

            if op == "call":
                result = await self.api.call_tool(step["name"], step.get("arguments", {}),
                                                  progress_callback=on_progress if step.get("progress") else None)
                return {"result": dump(result), "progress": progress}
            if op == "list_tools":
                return {"result": dump(await self.api.list_tools())}
            if op == "list_resources":
                return {"result": dump(await self.api.list_resources())}
            if op == "list_templates":
                return {"result": dump(await self.api.list_resource_templates())}
            if op == "read":
                return {"result": dump(await self.api.read_resource(step["uri"]))}
            if op == "list_prompts":
                return {"result": dump(await self.api.list_prompts())}
            if op == "get_prompt":
                return {"result": dump(await self.api.get_prompt(step["name"], step.get("arguments")))}
            if op == "complete":
                ref = types.PromptReference(type="ref/prompt", name=step["prompt"])
                return {"result": dump(await self.api.complete(ref, step["argument"]))}
            if op == "set_level":
                return {"result": dump(await self.api.set_logging_level(step["level"]))}
            if op == "ping":
                return {"result": dump(await self.api.send_ping())}
            if op == "subscribe":
                return {"result": dump(await self.api.subscribe_resource(step["uri"]))}
            if op == "sleep":
                await anyio.sleep(step["seconds"])
                return {"result": {}}
            raise ValueError(f"unknown step {op!r}")
        except Exception as exc:  # the test reads the error; one failed step does not hide the others
            error = getattr(exc, "error", None)
            return {"error": {"type": type(exc).__name__, "message": str(exc),
                              "code": getattr(error, "code", None)}}

    async def cancel(self, step):
        """Start a call with progress, cancel it after `after` notifications the way this SDK does, then
        watch: the report marks where the cancel was sent and where the quiet window starts."""
        progress = []
        enough = anyio.Event()

        async def on_progress(value, total, message):
            progress.append([value, total, message])
            if len(progress) >= step["after"]:
                enough.set()

        outcome = {}
        async with anyio.create_task_group() as group:
            async def call():
                try:
                    outcome["result"] = dump(await self.api.call_tool(step["name"], step.get("arguments", {}),
                                                                      progress_callback=on_progress))
                except Exception as exc:
                    outcome["error"] = f"{type(exc).__name__}: {exc}"

            group.start_soon(call)
            with anyio.fail_after(60):
                await enough.wait()
            request = [m for m in self.recorder.outgoing() if m.get("method") == "tools/call"][-1]
            if GENERATION == 1:
                # 1.x never sends notifications/cancelled itself: an application sends it, then stops waiting.
                await self.api.send_notification(types.ClientNotification(types.CancelledNotification(
                    params=types.CancelledNotificationParams(requestId=request["id"], reason="test cancels"))))
            group.cancel_scope.cancel()  # 2.x sends notifications/cancelled when the caller stops waiting
        cancelled_at = len(self.recorder.incoming())
        await anyio.sleep(step.get("settle", 0.5))  # what was already on its way when the server saw the cancel
        settled_at = len(self.recorder.incoming())
        await anyio.sleep(step.get("quiet", 1.0))
        return {"progress": progress, "request": request, "outcome": outcome, "cancelled_at": cancelled_at,
                "settled_at": settled_at}


async def run(plan):
    recorder = Recorder()
    callbacks = Callbacks(plan.get("answers", {}))
    options = callbacks.options(plan.get("callbacks", ["elicit", "sample", "roots"]))
    report = {"mcp": VERSION, "steps": []}
    if plan.get("protocol_version"):  # ask for an older revision, as a client of that revision would
        assert GENERATION == 1, "only 1.x reads the revision it asks for from mcp.types at initialize"
        types.LATEST_PROTOCOL_VERSION = plan["protocol_version"]
    transport = recorder.around(transport_of(plan))
    if GENERATION == 1:
        from mcp import ClientSession

        async with transport as (read, write), ClientSession(read, write, **options) as session:
            initialized = await session.initialize()
            report.update(protocolVersion=initialized.protocolVersion, serverInfo=dump(initialized.serverInfo),
                          capabilities=dump(initialized.capabilities), instructions=initialized.instructions)
            driver = Driver(session, recorder)
            for step in plan["steps"]:
                report["steps"].append(await driver.step(step))
    else:
        async with transport as streams, mcp.Client(_Streams(streams), mode="legacy", **options) as client:
            report.update(protocolVersion=client.protocol_version, serverInfo=dump(client.server_info),
                          capabilities=dump(client.server_capabilities),
                          instructions=getattr(client.session, "instructions", None))
            driver = Driver(client, recorder)
            for step in plan["steps"]:
                report["steps"].append(await driver.step(step))
    report.update(asked=callbacks.asked, logs=callbacks.logs, incoming=recorder.incoming(),
                  outgoing=recorder.outgoing())
    return report


class _Streams:
    """Already-open streams as the Transport 2.x's Client enters (an async context manager yielding them)."""

    def __init__(self, streams):
        self.streams = streams

    async def __aenter__(self):
        return self.streams

    async def __aexit__(self, *exc):
        return None


if __name__ == "__main__":
    started = time.monotonic()
    result = anyio.run(run, json.load(sys.stdin))
    result["seconds"] = round(time.monotonic() - started, 3)
    json.dump(result, sys.stdout)
