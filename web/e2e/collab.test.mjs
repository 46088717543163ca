// End-to-end, agents working together: a real byo-echo agent container asks for approval through
// the agent API at $FILEPATH_API_URL (a bash script in its /workspace, the image has no curl); the
// request appears as the top bar's badge over the live stream, Approve answers it and its chat
// block says so; a memory the agent keeps is listed on the Memory page and deleted there; the
// agent's Audit tab shows its commands and agent-API calls. The real binary, Docker, Chromium.
//   cd web && npm run e2e
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { e2eRun, poll, requirements, sendMessage } from './lib.mjs';

const T = 30_000;
const BYO_ECHO = process.env.E2E_BYO_IMAGE ?? 'filepath/byo-echo:latest';
const req = await requirements({ image: BYO_ECHO });

// agentapi.sh METHOD PATH [BODY]: one call of the agent API with the node's own token.
const SCRIPT = `#!/bin/bash
hp=\${FILEPATH_API_URL#http://}
exec 3<>"/dev/tcp/\${hp%:*}/\${hp##*:}"
body=\${3:-}
printf '%s %s HTTP/1.0\\r\\nHost: %s\\r\\nAuthorization: Bearer %s\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n%s' "$1" "$2" "$hp" "$FILEPATH_API_KEY" "\${#body}" "$body" >&3
sed -n '$p' <&3
`;

test('approvals inbox, memory and audit against the real binary and a real agent', { skip: req.skip, timeout: 300_000 }, async (t) => {
	if (req.__fail) assert.fail(`CI=true and the end-to-end test cannot run: ${req.__fail}`);
	const run = await e2eRun(t, 'fp-e2e-collab-');
	const server = await run.start();
	const a = await run.launch({ width: 1280, height: 800 });
	const page = a.page;
	const call = run.api;
	await page.goto(server.loginURL);
	await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: T });

	const sess = await call('POST', '/sessions', { name: 'e2e-collab' });
	const sessionId = (run.sessionId = sess.id);
	const node = await call('POST', `/sessions/${sessionId}/nodes`, { name: 'asker', agent_type: 'custom', image: BYO_ECHO });
	assert.equal(node.status, 'running', 'the agent container runs');
	await call('POST', `/sessions/${sessionId}/fs/agentapi.sh`, { content: SCRIPT, encoding: 'text' });
	await page.goto(`${server.base}/session/${sessionId}`);
	await page.locator('section.panel h1.name', { hasText: 'asker' }).waitFor({ timeout: T });
	const send = (text) => sendMessage(page, text, T);

	// The agent asks; the badge counts it, live.
	const badge = page.getByTestId('approvals-badge');
	assert.equal(await page.getByTestId('approvals-count').count(), 0, 'no badge count before a request');
	await send(`/cmd bash agentapi.sh POST /api/v1/approvals '{"action":"bash: curl https://example.com","detail":"asked by the e2e test","kind":"bash"}'`);
	await page.getByTestId('approvals-count').filter({ hasText: '1' }).waitFor({ timeout: T });
	const block = page.locator('[data-testid=chat-scroll] [data-testid=approval]');
	await block.waitFor({ timeout: T });
	assert.equal(await block.getAttribute('data-status'), 'pending');

	// The list names the agent, the action and the detail; Approve answers.
	await badge.click();
	const entry = page.getByTestId('approval-entry');
	await entry.waitFor({ timeout: T });
	const text = await entry.textContent();
	assert.match(text, /asker/);
	assert.match(text, /bash: curl https:\/\/example\.com/);
	assert.match(text, /asked by the e2e test/);
	await entry.getByRole('button', { name: 'Approve' }).click();
	await poll(async () => (await page.getByTestId('approvals-count').count()) === 0, { timeout: T, what: 'the badge to clear' });
	await poll(async () => (await block.getAttribute('data-status')) === 'approved', { timeout: T, what: 'the chat block to show the answer' });
	assert.match(await block.getByTestId('approval-answer').textContent(), /approved by admin/);
	const list = await call('GET', `/sessions/${sessionId}/approvals`);
	assert.equal(list.data.length, 1);
	assert.equal(list.data[0].status, 'approved');
	await page.keyboard.press('Escape');

	// The audit shows the command and the agent-API call.
	await page.getByRole('tab', { name: 'Audit' }).click();
	await page.locator('[data-testid=audit-row][data-source=api]', { hasText: 'request_approval' }).waitFor({ timeout: T });
	await page.locator('[data-testid=audit-row][data-source=command]').first().waitFor({ timeout: T });
	await page.getByRole('tab', { name: 'Chat' }).click();

	// A memory the agent keeps is on the Memory page, and deleted there.
	await send(`/cmd bash agentapi.sh POST /api/v1/memories '{"key":"e2e key","text":"learned in the e2e test"}'`);
	await poll(async () => (await call('GET', '/memories')).data.length === 1, { timeout: T, what: 'the memory to be stored' });
	await page.getByRole('link', { name: 'Memory' }).click();
	await page.getByRole('heading', { name: 'Memory' }).waitFor({ timeout: T });
	const item = page.getByTestId('memory-item');
	await item.filter({ hasText: 'learned in the e2e test' }).waitFor({ timeout: T });
	await item.getByRole('button', { name: 'Delete e2e key' }).click();
	// it asks first (issue 27.8)
	const confirm = page.getByRole('dialog', { name: 'Delete memory' });
	await confirm.waitFor({ timeout: T });
	await confirm.getByRole('button', { name: 'Delete', exact: true }).click();
	await poll(async () => (await item.count()) === 0, { timeout: T, what: 'the memory to go from the page' });
	assert.equal((await call('GET', '/memories')).data.length, 0);
});
