"""`python -m qwen_mtp_desktop.devtools.hub_server ROOT [--port N]`: serve ROOT, print the
URL, serve until interrupted (SIGINT or SIGTERM)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from pathlib import Path

from .server import HubServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m qwen_mtp_desktop.devtools.hub_server",
        description="Serve repo folders ROOT/ORG/NAME as a Hugging Face hub (tests and dev).",
    )
    parser.add_argument("root", type=Path, help="folder of ORG/NAME repo folders")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="hub port (0: any free one)")
    parser.add_argument("--cdn-port", type=int, default=0, help="LFS origin port (0: any)")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"not a folder: {args.root}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with HubServer(args.root, host=args.host, port=args.port, cdn_port=args.cdn_port) as hub:
        print(hub.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while not stop.wait(0.2):
                pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
