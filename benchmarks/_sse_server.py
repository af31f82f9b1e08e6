"""A server that replays prepared SSE bytes: the client path measured in isolation.

Every POST gets the same pre-built HTTP/1.1 chunked response (an OpenAI chat
stream of ``--chunks`` content chunks). With ``--interval-ms`` > 0 the events
are written one at a time at that pace (each arrives in its own read, like a
real server); with 0 they are written as fast as the socket takes them.
Run as a subprocess so that its CPU is not counted as the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import json


def event(obj: object) -> bytes:
    payload = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def prepared(chunks: int) -> tuple[bytes, list[bytes]]:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
    )
    base = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    events = [event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})]
    for i in range(chunks):
        events.append(event({**base, "choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": None}],
                             "usage": {"prompt_tokens": 8, "completion_tokens": i + 1, "total_tokens": i + 9}}))
    events.append(event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}))
    events.append(event({**base, "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": chunks, "total_tokens": chunks + 8}}))
    events.append(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
    return head, events


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--interval-ms", type=float, default=0.0)
    args = ap.parse_args()
    head, events = prepared(args.chunks)
    burst = head + b"".join(events)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in headers.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                if args.interval_ms <= 0:
                    writer.write(burst)
                    await writer.drain()
                    continue
                writer.write(head + events[0])
                for ev in events[1:]:
                    await asyncio.sleep(args.interval_ms / 1000)
                    writer.write(ev)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
