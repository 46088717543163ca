-- 0060_approval_scope: what "Always" allows when a request's answer is
-- "always". '' is the request's kind (node config approvals[kind] = allow);
-- a server-made request names a narrower scope: the egress proxy's
-- "network" request names its host, and "Always" then allows that host
-- only (approvals["network:<host>"] = allow).
ALTER TABLE approvals ADD COLUMN scope TEXT NOT NULL DEFAULT '';
