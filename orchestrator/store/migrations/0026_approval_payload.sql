-- 0026_approval_payload: what the orchestrator does itself once a request
-- is approved (issue 21: an agent's request_push), as JSON; '' for a plain
-- request, which the agent acts on.
ALTER TABLE approvals ADD COLUMN payload TEXT NOT NULL DEFAULT '';
