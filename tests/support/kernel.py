"""A real Jupyter kernel (ipykernel, driven by jupyter_client) importing
a given aquaprof tree: cells run as a notebook runs them, the kernel's
interrupt (SIGINT) sent as the notebook's stop button sends it."""
from __future__ import annotations

import os
import queue
import time
from typing import List, Optional, Tuple

# what a cell gave: ("stream", text), ("execute_result" or "display_data",
# its text/plain), ("error", "Name: message")
Output = Tuple[str, str]


class Kernel:
    """A kernel started in `cwd`, with `root` first on its path."""

    def __init__(self, root: str, cwd: str, timeout: float = 60):
        from jupyter_client.manager import KernelManager
        self.manager = KernelManager(kernel_name="python3")
        # the tree under test first, whatever the environment installs
        path = os.pathsep.join(p for p in (root, os.environ.get(
            "PYTHONPATH")) if p)
        self.manager.start_kernel(env=dict(os.environ, PYTHONPATH=path),
                                  cwd=cwd)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=timeout)

    def run(self, code: str, timeout: float = 60,
            interrupt_after: Optional[float] = None) -> List[Output]:
        """The cell's outputs, in order, once the kernel is idle again;
        with interrupt_after, the kernel interrupted that many seconds
        after the cell was sent."""
        msg_id = self.client.execute(code)
        outputs: List[Output] = []
        start = time.monotonic()
        while True:
            now = time.monotonic() - start
            if interrupt_after is not None and now > interrupt_after:
                self.manager.interrupt_kernel()
                interrupt_after = None
            if now > timeout:
                raise TimeoutError(f"the cell ran past {timeout} s: {code}")
            try:
                msg = self.client.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                return outputs
            if kind == "stream":
                outputs.append((kind, content["text"]))
            elif kind in ("execute_result", "display_data"):
                outputs.append((kind, content["data"].get("text/plain", "")))
            elif kind == "error":
                outputs.append((kind, f"{content['ename']}: "
                                      f"{content['evalue']}"))

    def value(self, expression: str) -> str:
        """What print(expression) writes in the kernel."""
        out = self.run(f"print({expression})")
        text = "".join(t for k, t in out if k == "stream")
        errors = [t for k, t in out if k == "error"]
        assert not errors, errors
        return text.strip()

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
