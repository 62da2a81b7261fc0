"""Joins as argv[1], says "joined", then waits to be killed."""

import asyncio
import sys

from lkcommon import connect


async def main():
    room = await connect(sys.argv[1])
    print("joined", flush=True)
    del room
    await asyncio.sleep(3600)


asyncio.run(main())
