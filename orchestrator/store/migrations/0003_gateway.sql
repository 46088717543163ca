-- 0003_gateway: LLM usage metered by the gateway (orchestrator/gateway), the
-- running totals on nodes and sessions, and per-session budgets.
--
-- llm_usage is the billing source of truth: one row per request an agent sent
-- through the gateway. Its session_id and node_id are plain text, not foreign
-- keys, so that the rows outlive a deleted node or session; they go with
-- their user. Token columns follow one rule for every provider:
--   input_tokens        prompt tokens neither read from nor written to a cache
--   cache_read_tokens   prompt tokens read from the provider's prompt cache
--   cache_write_tokens  prompt tokens written to it (Anthropic)
--   output_tokens       completion tokens (reasoning included)
-- A node's and a session's `tokens` add all four.
CREATE TABLE llm_usage (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id            TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id         TEXT NOT NULL,
    node_id            TEXT NOT NULL,
    provider           TEXT NOT NULL,
    endpoint           TEXT NOT NULL,
    model              TEXT NOT NULL DEFAULT '',
    input_tokens       INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    cost_usd           REAL CHECK (cost_usd IS NULL OR cost_usd >= 0), -- NULL: not reported
    status             INTEGER NOT NULL,  -- HTTP status; 499: the agent went away first
    streamed           INTEGER NOT NULL DEFAULT 0 CHECK (streamed IN (0, 1)),
    ttfb_ms            INTEGER,           -- until the upstream's first body byte
    latency_ms         INTEGER NOT NULL,  -- until the last byte
    note               TEXT NOT NULL DEFAULT '',
    created_at         INTEGER NOT NULL
);
CREATE INDEX llm_usage_session_idx ON llm_usage(session_id, id);
CREATE INDEX llm_usage_user_idx ON llm_usage(user_id, created_at);

ALTER TABLE agent_node ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;

-- Budgets: NULL is unlimited. tokens_used and cost_usd add the usage of every
-- node the session ever had (deleting a node does not give its spend back).
ALTER TABLE agent_session ADD COLUMN budget_tokens INTEGER CHECK (budget_tokens IS NULL OR budget_tokens >= 0);
ALTER TABLE agent_session ADD COLUMN budget_usd REAL CHECK (budget_usd IS NULL OR budget_usd >= 0);
ALTER TABLE agent_session ADD COLUMN tokens_used INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_session ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
