-- Run once by the postgres image on its first start (docker-entrypoint-initdb.d): the database of
-- HERMES_POSTGRES_URL, apart from the LangGraph server's own (DATABASE_URI), with pgvector for
-- Hermes's episodic memory (memory/episodic/postgres.py; CREATE EXTENSION needs a superuser or
-- the database owner on PostgreSQL 13+, done here so that Hermes's role needs neither).
CREATE DATABASE hermes;
\connect hermes
CREATE EXTENSION IF NOT EXISTS vector;
