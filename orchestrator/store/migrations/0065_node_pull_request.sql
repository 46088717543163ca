-- 0065_node_pull_request: the pull (merge) request opened of a node's pushed
-- branch (issue 21), as JSON of protocol.PullRequestLink: forge, url,
-- number, branch, base. '' : none. The node carries it so the tree shows
-- its link; opening it again after a new push keeps the one link.
ALTER TABLE agent_node ADD COLUMN pull_request TEXT NOT NULL DEFAULT '';
