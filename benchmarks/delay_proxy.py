"""A TCP proxy on 127.0.0.1 that adds a fixed delay to everything a client sends: each byte reaches
the server ``delay`` seconds after the client wrote it, as over a link with that one-way latency, so
every request (and the first byte of every upload) arrives that much later while a stream's
throughput is unchanged. Answers come back undelayed. It runs as its own process so that no
contender shares its interpreter with it:

    python benchmarks/delay_proxy.py DELAY_MS UPSTREAM_PORT [UPSTREAM_PORT ...]

prints one line, the listening ports in the order of the upstreams, and serves until killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

CHUNK = 256 * 1024
# Chunks in flight per direction: bounds what the proxy buffers (and, with the delay, its
# throughput per connection: 64 x 256 KB per delay, gigabytes per second at 15 ms).
IN_FLIGHT = 64


async def _delayed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(IN_FLIGHT)

    async def deliver() -> None:
        while True:
            when, data = await due.get()
            if not data:
                break
            wait = when - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()

    delivering = asyncio.ensure_future(deliver())
    try:
        while data := await reader.read(CHUNK):
            await due.put((loop.time() + delay, data))
        await due.put((0.0, b""))
        await delivering
    finally:
        delivering.cancel()


async def _straight(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(CHUNK):
        writer.write(data)
        await writer.drain()
    with contextlib.suppress(OSError):
        writer.write_eof()


async def _connection(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, port: int, delay: float) -> None:
    try:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        client_w.close()
        return
    up = asyncio.ensure_future(_delayed(client_r, server_w, delay))
    try:
        # The connection lasts as long as the server side: a client that is done sending may still
        # be reading its answer; once the server has closed, nothing sent up matters any more.
        await _straight(server_r, client_w)
    except (OSError, ConnectionError):
        pass  # either side hung up: close both
    finally:
        up.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError, ConnectionError):
            await up
        server_w.close()
        client_w.close()


async def serve(delay: float, upstreams: list[int]) -> None:
    servers = []
    live: set[asyncio.Task[object]] = set()  # the loop holds its tasks weakly: these are kept to the end
    for port in upstreams:

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter, port: int = port) -> None:
            task = asyncio.current_task()
            assert task is not None
            live.add(task)
            try:
                await _connection(r, w, port, delay)
            finally:
                live.discard(task)

        servers.append(await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024))
    print(" ".join(str(s.sockets[0].getsockname()[1]) for s in servers), flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main() -> None:
    delay_ms, *ports = (int(a) for a in sys.argv[1:])
    if not ports:
        raise SystemExit(__doc__)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(delay_ms / 1000, ports))


if __name__ == "__main__":
    main()
