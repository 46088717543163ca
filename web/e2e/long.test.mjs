// End-to-end, the long loop: a session created with a health check in the new-session modal, a
// real test agent container whose commit links back to its command, and a handoff that starts
// the node's next generation in the same chat (the continuation divider, the generation in the
// header). The real binary, Docker, headless Chromium.
//   cd web && npm run e2e
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AGENT_IMAGE, api, containersOf, launch, poll, removeDir, requirements, startServer, tempDir } from './lib.mjs';

const T = 30_000;
const req = await requirements();

test('handoff, checks and commit links against the real binary and a real agent', { skip: req.skip, timeout: 300_000 }, async (t) => {
	if (req.__fail) assert.fail(`CI=true and the end-to-end test cannot run: ${req.__fail}`);
	const dataDir = await tempDir('fp-e2e-long-');
	let server;
	let a;
	let sessionId = '';
	t.after(async () => {
		if (a?.errors.length) t.diagnostic(`browser errors:\n${a.errors.join('\n')}`);
		if (sessionId && server && a) {
			try {
				await api(a.context, server.base, 'DELETE', `/sessions/${sessionId}`);
				await poll(async () => (await containersOf(sessionId)).length === 0, { timeout: T, what: 'the session containers to be removed' });
			} catch (e) {
				t.diagnostic(`cleanup: ${e.message}`);
			}
		}
		await a?.close();
		await server?.stop();
		await removeDir(dataDir);
	});

	server = await startServer(dataDir);
	a = await launch({ width: 1280, height: 800 });
	const page = a.page;
	const chat = (kind) => page.locator(`[data-testid=chat-scroll] .item[data-kind=${kind}]`);
	async function send(text) {
		const box = page.getByRole('textbox', { name: 'Message' });
		await box.fill(text);
		await box.press('Enter');
		await poll(async () => (await box.inputValue()) === '', { timeout: T, what: 'the message to be sent' });
	}

	await page.goto(server.loginURL);
	await page.getByRole('heading', { name: 'Sessions' }).waitFor({ timeout: T });
	await page.getByRole('button', { name: 'New session' }).first().click();
	await page.locator('#ns-name').fill('e2e-long');
	await page.getByLabel(/Health checks/).fill('test -d /workspace');
	await page.getByRole('button', { name: 'Create and spawn agent' }).click();
	await page.waitForURL(/\/session\/[^/?]+/, { timeout: T });
	sessionId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]);
	const sess = await api(a.context, server.base, 'GET', `/sessions/${sessionId}`);
	assert.deepEqual(sess.checks, [{ command: 'test -d /workspace' }]);

	const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
	await dlg.locator('#spawn-name').fill('lead');
	await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'custom', exact: true }).click();
	await dlg.locator('#spawn-image').fill(AGENT_IMAGE);
	await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
	await dlg.waitFor({ state: 'detached', timeout: T });

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
