"""``pods/{name}/portforward``: what ``kubectl port-forward`` opens, to the pod's own address.

kubectl 1.32 first asks for a WebSocket with the subprotocol
``SPDY/3.1+portforward.k8s.io`` and runs SPDY/3.1 inside its binary
messages; only when that upgrade fails does it fall back to a plain SPDY
upgrade (a POST with ``Upgrade: SPDY/3.1``). This server answers the
WebSocket (aiohttp speaks it; a raw SPDY upgrade would need the HTTP parser
handed over mid-connection), so the fallback is never needed.

Inside the tunnel, for each local connection kubectl opens two SPDY streams
with the same ``requestID`` header: an *error* stream (``streamType:
error``), where the server writes why the connection to the pod failed, and
a *data* stream (``streamType: data``) whose bytes are piped both ways to
``status.podIP:port`` (the pod listens on its own loopback address here, as
on a pod network). Each stream gets a SYN_REPLY (client-go waits for it); a
FIN from the client half-closes the pod connection; the pod's EOF is a FIN
back; pings are echoed.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from aiohttp import WSMsgType, web

from loadtests.sandbox.cluster import spdy
from loadtests.sandbox.cluster.apiserver.context import ResourceContext
from loadtests.sandbox.cluster.apiserver.routing import ResourceRequest
from loadtests.sandbox.cluster.errors import BadRequest

__all__ = ["PROTOCOL", "serve_port_forward"]

PROTOCOL = "SPDY/3.1+portforward.k8s.io"
_CHUNK = 32 * 1024


@dataclass
class _Tunnel:
    """One kubectl port-forward session: its SPDY state and the pod connections."""

    ws: web.WebSocketResponse
    pod_ip: str
    pod_name: str
    codec: spdy.HeaderCodec = field(default_factory=spdy.HeaderCodec)
    error_streams: dict[str, int] = field(default_factory=dict)  # requestID -> stream id
    writers: dict[int, asyncio.StreamWriter] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, frame: bytes) -> None:
        # The header compressor is stateful: frames leave in the order they are built.
        async with self.send_lock:
            if not self.ws.closed:
                await self.ws.send_bytes(frame)

    async def on_frame(self, frame: spdy.Frame) -> None:
        if frame.kind == spdy.SYN_STREAM:
            await self._open(frame)
        elif frame.kind == 0:
            writer = self.writers.get(frame.stream_id)
            if writer is not None:
                try:
                    if frame.payload:
                        writer.write(frame.payload)
                        await writer.drain()
                    if frame.fin and writer.can_write_eof():
                        writer.write_eof()
                except OSError:  # the pod closed it: end this stream, not the tunnel
                    self.writers.pop(frame.stream_id, None)
                    writer.close()
                    await self.send(spdy.rst_stream_frame(frame.stream_id))
        elif frame.kind == spdy.RST_STREAM:
            writer = self.writers.pop(frame.stream_id, None)
            if writer is not None:
                writer.close()
        elif frame.kind == spdy.PING:
            await self.send(spdy.ping_frame(frame.payload))

    async def _open(self, frame: spdy.Frame) -> None:
        def header(name: str) -> str:
            return (frame.headers.get(name) or [""])[0]

        async with self.send_lock:
            await self.ws.send_bytes(spdy.syn_reply_frame(self.codec, frame.stream_id))
        request_id = header("requestid")
        if header("streamtype") == "error":
            self.error_streams[request_id] = frame.stream_id
            return
        if header("streamtype") != "data":
            await self.send(spdy.rst_stream_frame(frame.stream_id))
            return
        task = asyncio.create_task(self._pipe(frame.stream_id, header("port"), request_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _pipe(self, stream_id: int, port_text: str, request_id: str) -> None:
        error_stream = self.error_streams.pop(request_id, None)
        try:
            port = int(port_text)
            reader, writer = await asyncio.open_connection(self.pod_ip, port)
        except (ValueError, OSError) as error:
            message = (
                f"error forwarding port {port_text} to pod {self.pod_name}: "
                f"failed to connect to {self.pod_ip}:{port_text}: {error}"
            )
            if error_stream is not None:
                await self.send(spdy.data_frame(error_stream, message.encode(), fin=True))
            await self.send(spdy.data_frame(stream_id, b"", fin=True))
            return
        self.writers[stream_id] = writer
        try:
            while data := await reader.read(_CHUNK):
                await self.send(spdy.data_frame(stream_id, data))
            await self.send(spdy.data_frame(stream_id, b"", fin=True))
            if error_stream is not None:
                await self.send(spdy.data_frame(error_stream, b"", fin=True))
        except OSError:
            await self.send(spdy.rst_stream_frame(stream_id))
        finally:
            self.writers.pop(stream_id, None)
            writer.close()

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for writer in self.writers.values():
            writer.close()


async def serve_port_forward(
    ctx: ResourceContext, request: web.Request, req: ResourceRequest, *, closing: asyncio.Event
) -> web.StreamResponse:
    assert req.name is not None
    pod = ctx.store.get(req.rtype, req.namespace or "default", req.name)
    pod_ip = (pod.get("status") or {}).get("podIP")
    if not pod_ip or (pod.get("status") or {}).get("phase") != "Running":
        raise BadRequest(f"unable to forward ports: pod {req.name} is not running")
    ws = web.WebSocketResponse(protocols=(PROTOCOL,), max_msg_size=0)
    if not ws.can_prepare(request).ok:
        raise BadRequest(
            f"port-forward here is a WebSocket with the subprotocol {PROTOCOL} "
            "(kubectl 1.30 and later)"
        )
    await ws.prepare(request)
    tunnel = _Tunnel(ws, pod_ip, req.name)
    frames = spdy.FrameReader(tunnel.codec)
    closed = asyncio.create_task(closing.wait())
    try:
        while True:
            receiving = asyncio.ensure_future(ws.receive())
            await asyncio.wait({receiving, closed}, return_when=asyncio.FIRST_COMPLETED)
            if not receiving.done():
                receiving.cancel()
                break
            message = receiving.result()
            if message.type != WSMsgType.BINARY:
                break
            try:
                received = frames.feed(message.data)
            except spdy.SpdyError:
                break
            for frame in received:
                if frame.kind == spdy.GOAWAY:
                    return ws
                await tunnel.on_frame(frame)
    finally:
        closed.cancel()
        await tunnel.close()
        await ws.close()
    return ws
