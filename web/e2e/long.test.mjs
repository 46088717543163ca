// End-to-end, the long loop: a session created with a health check in the new-session modal, a
// real test agent container whose commit links back to its command, and a handoff that starts
// the node's next generation in the same chat (the continuation divider, the generation in the
// header). The real binary, Docker, headless Chromium.
//   cd web && npm run e2e
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AGENT_IMAGE, containersOf, e2eRun, newSession, poll, requirements, sendMessage, spawnCustom } from './lib.mjs';

const T = 30_000;
const req = await requirements();

test('handoff, checks and commit links against the real binary and a real agent', { skip: req.skip, timeout: 300_000 }, async (t) => {
	if (req.__fail) assert.fail(`CI=true and the end-to-end test cannot run: ${req.__fail}`);
	const run = await e2eRun(t, 'fp-e2e-long-');
	const server = await run.start();
	const a = await run.launch({ width: 1280, height: 800 });
	const page = a.page;
	const chat = (kind) => page.locator(`[data-testid=chat-scroll] .item[data-kind=${kind}]`);
	const send = (text) => sendMessage(page, text, T);

	await page.goto(server.loginURL);
	await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: T });
	const sessionId = (run.sessionId = await newSession(page, 'e2e-long', { checks: 'test -d /workspace', timeout: T }));
	const sess = await run.api('GET', `/sessions/${sessionId}`);
	assert.deepEqual(sess.checks, [{ command: 'test -d /workspace' }]);
	await spawnCustom(page, 'lead', AGENT_IMAGE, T);

	// The session's check ran before the agent (in the agent's own image: the test agent's has no
	// shell, so it could not run; the block says so).
	const check = page.locator('[data-testid=check]').filter({ hasText: 'test -d /workspace' });
	await check.waitFor({ timeout: T });
	assert.equal(await check.getAttribute('data-result'), 'failed');

	// A commit made during a command takes you back to the command.
	await send('command; commit; echo committed');
	await chat('text').filter({ hasText: 'committed' }).waitFor({ timeout: T });
	const link = chat('commits').getByTestId('commit-link');
	await link.waitFor({ timeout: T });
	await link.click();
	await poll(async () => (await chat('command').first().getAttribute('class'))?.includes('flash'), { timeout: T, what: 'the command block to light up' });

	// A handoff: the same chat goes on after a divider, with the next generation.
	await send('handoff the parser is half done');
	await page.getByTestId('continuation').waitFor({ timeout: 60_000 });
	assert.equal((await page.getByTestId('continuation').textContent()).trim(), 'continuation 1');
	await poll(async () => (await page.getByTestId('generation').textContent())?.trim() === 'generation 2', { timeout: T, what: 'generation 2 in the header' });
	const items = await page.locator('[data-testid=chat-scroll] .item').evaluateAll((els) => els.map((e) => e.dataset.kind));
	const handoff = items.indexOf('handoff');
	const divider = items.indexOf('continuation');
	assert.ok(handoff >= 0 && handoff < divider, `the handoff before the divider: ${items.join(' ')}`);
	assert.ok(items.indexOf('commits') < handoff, 'the first generation stays in the chat');
	await poll(async () => {
		const kinds = await page.locator('[data-testid=chat-scroll] .item').evaluateAll((els) => els.map((e) => e.dataset.kind));
		return kinds.lastIndexOf('text') > kinds.indexOf('continuation');
	}, { timeout: T, what: 'the second generation to speak after the divider' });
	assert.equal((await containersOf(sessionId)).length >= 1, true);
	const errs = a.errors.filter((e) => e.startsWith('pageerror'));
	assert.deepEqual(errs, []);
});
