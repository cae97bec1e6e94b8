"""The deployment path on paper (issue 22, deliverable 5): ``langgraph.json`` ready for
``langgraph build`` and ``deploy/langgraph/docker-compose.yml``. No container engine runs on the
build machines, so the image is never built here; what is checked is everything around it, with
the pinned langgraph-cli's own code (in process: no subprocess, no Docker):

* the configuration validates, and the Dockerfile ``langgraph build`` would write starts from
  the LangGraph server image of the *same* langgraph-api as requirements.lock (the server
  Hermes's graphs and ``langgraph.json`` hooks are tested on), with the checkpointer, store and
  auth hooks and the three graphs;
* the compose file gives the server and the ``hermes serve`` workers one PostgreSQL and one
  Redis, Hermes's tables in a database of their own (created with pgvector by the init script),
  the password inside ``HERMES_POSTGRES_URL`` (the executor's worker has no ``PGPASSWORD``);
* the build context leaves the virtual environment, the data directory and VCS out."""

from __future__ import annotations

import json
import pathlib
import re
from importlib.metadata import version
from urllib.parse import urlsplit

import yaml
from langgraph_cli.config import config_to_docker, validate_config_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "langgraph" / "docker-compose.yml"


def test_langgraph_json_builds_the_server_image_of_the_locked_langgraph_api():
    config = validate_config_file(ROOT / "langgraph.json")
    dockerfile, _ = config_to_docker(ROOT / "langgraph.json", config)
    first = dockerfile.strip().splitlines()[0]
    assert first == f"FROM langchain/langgraph-api:{version('langgraph-api')}-py3.11", first
    env = dict(re.findall(r"^ENV (\w+)='(.*)'$", dockerfile, re.MULTILINE))
    assert (
        json.loads(env["LANGGRAPH_CHECKPOINTER"])["path"]
        == f"/deps/{ROOT.name}/graph/checkpoints.py:server_checkpointer"
    )
    assert json.loads(env["LANGGRAPH_AUTH"])["path"] == f"/deps/{ROOT.name}/graph/auth.py:auth"
    assert set(json.loads(env["LANGSERVE_GRAPHS"])) == {"agent", "reminders", "consolidate"}
    # the store's paths stay relative: they resolve against the image's working directory
    assert json.loads(env["LANGGRAPH_STORE"])["path"].startswith("./graph/memory_store.py")
    assert dockerfile.rstrip().endswith(f"WORKDIR /deps/{ROOT.name}")


def test_the_compose_file_puts_server_and_workers_on_one_postgres_and_redis():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    api, serve = services["langgraph-api"], services["hermes-serve"]
    assert api["image"] == serve["image"] == "hermes-agent"  # the tag of the build command above it
    assert "langgraph build -t hermes-agent -c langgraph.json" in COMPOSE.read_text()
    assert api["environment"] == serve["environment"]
    env = api["environment"]
    server_db, hermes_db = urlsplit(env["DATABASE_URI"]), urlsplit(env["HERMES_POSTGRES_URL"])
    assert server_db.hostname == hermes_db.hostname == "postgres" and "postgres" in services
    assert server_db.path != hermes_db.path  # apart: the stock checkpoint tables share names
    assert hermes_db.password  # the executor's worker has no PGPASSWORD
    assert urlsplit(env["REDIS_URI"]).hostname == "redis" and services["redis"]["image"].startswith("redis:")
    assert services["postgres"]["image"].startswith("pgvector/")
    init = (COMPOSE.parent / "initdb" / "01-hermes.sql").read_text()
    assert f"CREATE DATABASE {hermes_db.path.strip('/')};" in init and "CREATE EXTENSION IF NOT EXISTS vector" in init
    assert "./initdb:/docker-entrypoint-initdb.d:ro" in services["postgres"]["volumes"]
    assert serve["entrypoint"] == ["hermes"] and serve["command"][0] == "serve"


def test_the_build_context_leaves_the_environment_and_data_out():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".venv", ".hermes", ".git", ".langgraph_api"} <= ignored
