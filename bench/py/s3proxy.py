"""A TCP proxy in front of a local S3 server that adds time to first byte.

Usage: s3proxy.py LISTEN_PORT TARGET_PORT LATENCY_MS

Every HTTP response is held back LATENCY_MS from the moment its request
finished arriving (the first bytes the server sends after the client last
sent), which models an object store's per-request latency (S3 within a
region: 10-30 ms to first byte) without limiting bandwidth. Bytes are not
parsed, so keep-alive connections, ranged GETs and multipart uploads pass
unchanged; each connection is one asyncio task pair. Prints `ready PORT` on
stdout once listening (PORT is the bound port: pass 0 for a free one).
"""

from __future__ import annotations

import asyncio
import sys


async def main(listen: int, target: int, latency_s: float) -> None:
    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            sr, sw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cw.close()
            return
        # Set when the client sent bytes the server has not answered yet.
        pending = asyncio.Event()

        async def up() -> None:
            try:
                while data := await cr.read(1 << 16):
                    pending.set()
                    sw.write(data)
                    await sw.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if sw.can_write_eof():
                    try:
                        sw.write_eof()
                    except OSError:
                        pass

        async def down() -> None:
            try:
                while data := await sr.read(1 << 16):
                    if pending.is_set():
                        pending.clear()
                        await asyncio.sleep(latency_s)
                    cw.write(data)
                    await cw.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                cw.close()

        await asyncio.gather(up(), down())
        sw.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=512)
    port = server.sockets[0].getsockname()[1]
    print(f"ready {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000.0))
