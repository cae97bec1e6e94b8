"""Process entry point of the embedded llama.cpp server (``python -m graph.embedded_llm``).

Runs xllamacpp's OpenAI-compatible HTTP server on 127.0.0.1 with one GGUF and one chat
template, both chosen and verified by the parent (``graph/embedded/server.py`` via the catalog
in ``graph/embedded/catalog.py``). It exits when its parent process goes away, so a crashed
agent never leaves it behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-path", type=Path, required=True, help="verified GGUF file")
    parser.add_argument("--template", type=Path, required=True, help="Jinja chat template file")
    parser.add_argument("--alias", default="", help="model name the server reports")
    parser.add_argument("--ctx", type=int, default=8192, help="context size, tokens")
    parser.add_argument("--threads", type=int, default=0, help="generation threads; 0 = one per core")
    parser.add_argument("--batch-threads", type=int, default=0, help="prompt threads; 0 = as --threads")
    parser.add_argument("--batch", type=int, default=0, help="logical batch size; 0 = llama.cpp default")
    parser.add_argument("--ubatch", type=int, default=0, help="physical batch size; 0 = llama.cpp default")
    parser.add_argument(
        "--cache-reuse",
        type=int,
        default=0,
        help="min chunk size (tokens) to reuse from the KV cache via shifting; 0 = off",
    )
    parser.add_argument(
        "--slot-dir",
        type=Path,
        default=None,
        help="folder for /slots/0?action=save|restore files (the KV cache kept across processes)",
    )
    parser.add_argument("--parent-pid", type=int, default=os.getppid())
    args = parser.parse_args()

    import xllamacpp  # heavy native import: only in the server process

    threads = args.threads or os.cpu_count() or 1
    params = xllamacpp.CommonParams()
    params.model.path = str(args.model_path)
    if args.alias:
        params.model_alias = {args.alias}  # a set of names in this binding
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.use_jinja = True
    params.chat_template = args.template.read_text()
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.cache_prompt = True  # reuse the KV cache of the common prefix between the loop's calls
    if args.slot_dir is not None:
        params.slot_save_path = f"{args.slot_dir}/"  # llama.cpp joins it to the file name as a string
    if args.cache_reuse:
        params.n_cache_reuse = args.cache_reuse
    if args.batch:
        params.n_batch = args.batch
    if args.ubatch:
        params.n_ubatch = args.ubatch
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = args.batch_threads or threads
    server = xllamacpp.Server(params)
    print(
        f"listening {server.listening_address} model {args.model_path.name} ctx {args.ctx} "
        f"threads {threads}/{args.batch_threads or threads}",
        flush=True,
    )

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:  # exit with the parent: no orphan server when the agent dies
        if os.getppid() != args.parent_pid:
            os._exit(0)
        time.sleep(0.5)


if __name__ == "__main__":
    main()
