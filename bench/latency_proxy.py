#!/usr/bin/env python3
"""A delaying TCP proxy on loopback for bench/run case (d).

Listens on 127.0.0.1 ports BASE..BASE+COUNT-1; port BASE+i forwards to 127.0.0.1:UPSTREAM+(i % UPSTREAMS),
delaying every chunk by DELAY seconds in each direction (so a round trip costs 2 x DELAY). Ports listed
in --tarpits accept connections and never answer. Runs until killed.
"""
import argparse
import asyncio


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
    args = parser.parse_args()
    tarpits = {int(p) for p in args.tarpits.split(",") if p}

    async def tarpit(reader, writer):
        await asyncio.sleep(3600)

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
        handler = tarpit if port in tarpits else forwarder(args.upstream + i % args.upstreams)
        servers.append(await asyncio.start_server(handler, "127.0.0.1", port, backlog=512))
    print("ready", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
