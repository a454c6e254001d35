#!/usr/bin/env python3
"""A delaying TCP proxy on loopback for bench/run case (d).

Listens on 127.0.0.1 ports BASE..BASE+COUNT-1; port BASE+i forwards to 127.0.0.1:UPSTREAM+(i % UPSTREAMS),
delaying every chunk by DELAY seconds in each direction (so a round trip costs 2 x DELAY). Hostile
ports: those in --tarpits accept connections and never answer; those in --http answer the ClientHello
with a plain HTTP 400 response, after the delay, and close (an HTTP server on a TLS port); those in
--resets read the ClientHello and reset the connection (RST), after the delay. Runs until killed.
"""
import argparse
import asyncio
import socket
import struct


async def pipe(reader, writer, delay):
    try:
        while data := await reader.read(65536):
            await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--upstream", type=int, required=True)
    parser.add_argument("--upstreams", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--tarpits", type=str, default="")
    parser.add_argument("--http", type=str, default="")
    parser.add_argument("--resets", type=str, default="")
    args = parser.parse_args()
    ports = lambda text: {int(p) for p in text.split(",") if p}
    tarpits, http, resets = ports(args.tarpits), ports(args.http), ports(args.resets)

    async def tarpit(reader, writer):
        await asyncio.sleep(3600)

    async def http_server(reader, writer):
        await reader.read(65536)
        await asyncio.sleep(args.delay * 2)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def reset(reader, writer):
        await reader.read(65536)
        await asyncio.sleep(args.delay * 2)
        # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    def forwarder(upstream_port):
        async def handle(reader, writer):
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pipe(reader, up_writer, args.delay), pipe(up_reader, writer, args.delay))
        return handle

    servers = []
    for i in range(args.count):
        port = args.base + i
        if port in tarpits:
            handler = tarpit
        elif port in http:
            handler = http_server
        elif port in resets:
            handler = reset
        else:
            handler = forwarder(args.upstream + i % args.upstreams)
        servers.append(await asyncio.start_server(handler, "127.0.0.1", port, backlog=512))
    print("ready", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
