// End-to-end, review: a real agent (byo-echo) commits a file with git in its /workspace and then
// changes it; the Changes tab shows the commit and the uncommitted diff (following the agent's
// write live), a diff is collapsed and expanded, two lines are selected and commented on, and the
// agent receives the comment quoting them. The real binary, Docker, headless Chromium.
//   cd web && npm run e2e
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { api, containersOf, launch, poll, removeDir, requirements, startServer, tempDir } from './lib.mjs';

const T = 30_000;
const IMAGE = 'filepath/byo-echo:latest';
const req = await requirements({ image: IMAGE });

test('changes, a diff and a comment to the agent against the real binary and a real agent', { skip: req.skip, timeout: 300_000 }, async (t) => {
	if (req.__fail) assert.fail(`CI=true and the end-to-end test cannot run: ${req.__fail}`);
	const dataDir = await tempDir('fp-e2e-changes-');
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
	a = await launch({ width: 1280, height: 900 });
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
	await page.locator('#ns-name').fill('e2e-changes');
	await page.getByRole('button', { name: 'Create and spawn agent' }).click();
	await page.waitForURL(/\/session\/[^/?]+/, { timeout: T });
	sessionId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]);

	const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
	await dlg.locator('#spawn-name').fill('dev');
	await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'custom', exact: true }).click();
	await dlg.locator('#spawn-image').fill(IMAGE);
	await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
	await dlg.waitFor({ state: 'detached', timeout: T });

	// The agent writes a file and commits it with git, in its container.
	await send("/cmd printf 'one\\ntwo\\nthree\\n' > notes.txt");
	await chat('command').filter({ hasText: 'notes.txt' }).first().waitFor({ timeout: 60_000 });
	await send('/commit');
	await chat('commits').waitFor({ timeout: T });

	// The Changes tab: the commit, nothing uncommitted yet.
	await page.getByRole('tab', { name: 'Changes' }).click();
	const changes = page.getByTestId('changes');
	await changes.getByTestId('commit').filter({ hasText: 'byo-echo: snapshot' }).waitFor({ timeout: T });
	await changes.getByText('The working tree is as HEAD has it.').waitFor({ timeout: T });

	// The agent changes the file while the tab is open: the diff appears without a reload.
	await page.getByRole('tab', { name: 'Chat' }).click();
	await send("/cmd printf 'one\\nTWO\\nthree\\nfour\\n' > notes.txt");
	await chat('command').filter({ hasText: 'four' }).first().waitFor({ timeout: T });
	await page.getByRole('tab', { name: 'Changes' }).click();
	const unc = changes.getByRole('region', { name: 'Uncommitted changes' });
	const file = unc.locator('[data-testid=diff-file][data-path="notes.txt"]');
	await file.waitFor({ timeout: T });
	await page.getByRole('tab', { name: 'Chat' }).click();
	await send("/cmd printf 'one\\nTWO\\nthree\\nfour\\nfive\\n' > notes.txt");
	await page.getByRole('tab', { name: 'Changes' }).click();
	await poll(async () => ((await file.getByTestId('patch').textContent()) ?? '').includes('five'), { timeout: T, what: 'the diff to follow the write' });

	// Collapse and expand the file, then comment on two of its lines.
	await file.locator('button.head').click();
	await poll(async () => (await file.getByTestId('patch').count()) === 0, { timeout: T, what: 'the diff to collapse' });
	await file.locator('button.head').click();
	await file.getByTestId('patch').waitFor({ timeout: T });
	await file.getByLabel('Select line 4').nth(1).click();
	await file.getByLabel('Select line 5').nth(1).click({ modifiers: ['Shift'] });
	await file.getByText('Comment on lines 4-5').waitFor({ timeout: T });
	await file.getByTestId('comment-body').fill('Why two more lines?');
	await file.getByRole('button', { name: 'Send to agent' }).click();
	await file.getByText('Sent your comment on lines 4-5 to the agent.').waitFor({ timeout: T });

	// The agent received the quote (byo-echo says it back), and the comment in the chat links back.
	await page.getByRole('tab', { name: 'Chat' }).click();
	const echoed = chat('text').filter({ hasText: 'Comment on notes.txt, lines 4-5' });
	await echoed.waitFor({ timeout: T });
	const said = await echoed.textContent();
	assert.ok(said.includes('> +four') && said.includes('> +five') && said.includes('Why two more lines?'), `the agent got: ${said}`);
	await chat('user').getByTestId('comment-link').click();
	await changes.waitFor({ timeout: T });
	await poll(async () => (await changes.locator('tr.mark').count()) === 2, { timeout: T, what: 'the commented lines to be marked' });
	await page.screenshot({ path: new URL('../../docs/screenshots/changes.png', import.meta.url).pathname });
	const errs = a.errors.filter((e) => e.startsWith('pageerror'));
	assert.deepEqual(errs, []);
});
