// End-to-end, review and ship (issue 21): a session cloned from a real git http-backend on
// loopback (internal/cmd/fakeforge, which also plays GitHub's pull-request API), shelley against
// the scripted fake LLM upstream (internal/cmd/fakellm) commits a file; the user opens the node's
// Changes, expands the diff, comments on two lines (the agent gets the quote: the upstream's next
// request holds it, and its answer says so in the chat), adds a GitHub token in Settings, pushes
// (the branch lands on the server), opens a pull request and follows its link in the tree; a
// second push and pull request update the same one, and the tree keeps one link. The real binary,
// Docker, headless Chromium.
//   cd web && npm run e2e
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildPrograms, e2eRun, poll, requirements, sendMessage, startProgram } from './lib.mjs';

const T = 30_000;
const SHELLEY = 'filepath/agent-shelley:latest';
const TOKEN = 'ghp_e2e-ship-TOKEN';
const run = promisify(execFile);
const req = await requirements({ image: SHELLEY });

// What the fake upstream answers shelley, in order; then "fakellm heard: <the last user message>".
const SCRIPT = [
	{
		text: 'Writing the notes.',
		tool_calls: [
			{
				name: 'bash',
				arguments: JSON.stringify({ command: "printf 'one\\ntwo\\nthree\\n' > notes.txt && git add notes.txt && git commit -qm 'notes: three lines' && git log --oneline" })
			}
		],
		usage: { input: 900, output: 40 }
	},
	{ text: 'Committed notes.txt.', usage: { input: 1000, output: 10 } }
];

test('review and ship: changes, a comment, a secret, a push and a pull request, with Chromium', { skip: req.skip, timeout: 600_000 }, async (t) => {
	if (req.__fail) assert.fail(`CI=true and the end-to-end test cannot run: ${req.__fail}`);
	const e = await e2eRun(t, 'fp-e2e-ship-');
	const bin = path.join(e.dataDir, 'bin');
	await buildPrograms(bin, './internal/cmd/fakellm', './internal/cmd/fakeforge');
	const script = path.join(e.dataDir, 'script.json');
	await writeFile(script, JSON.stringify(SCRIPT));
	const llm = await startProgram(path.join(bin, 'fakellm'), ['--script', script]);
	t.after(() => llm.stop());
	const forgeDir = path.join(e.dataDir, 'forge');
	const forge = await startProgram(path.join(bin, 'fakeforge'), ['--dir', forgeDir, '--token', TOKEN]);
	t.after(() => forge.stop());
	const forgeHost = forge.url.slice('http://'.length);
	const serverGit = (...args) => run('git', ['--git-dir', path.join(forgeDir, 'o/r.git'), ...args]).then((r) => r.stdout.trim());
	const pulls = async () => (await fetch(forge.url + '/_/pulls')).json();

	await e.start({
		env: { FILEPATH_OPENROUTER_API_KEY: 'offline', FILEPATH_OPENROUTER_BASE_URL: llm.url + '/v1', FILEPATH_GIT_ALLOW_PRIVATE: 'true' }
	});
	const br = await e.launch({ width: 1280, height: 860 });
	const page = br.page;
	const chat = (kind) => page.locator(`[data-testid=chat-scroll] .item[data-kind=${kind}]`);
	const treeRow = (name) => page.locator('[role=treeitem] > .row').filter({ has: page.locator('.name', { hasText: new RegExp(`^${name}$`) }) });
	const step = (name, fn) =>
		t.test(name, e.failed ? { skip: `an earlier step failed: ${e.failed}` } : {}, async () => {
			try {
				await fn();
			} catch (err) {
				e.failed = name;
				const shot = path.join(os.tmpdir(), 'fp-e2e-ship-failed.png');
				await page.screenshot({ path: shot }).then(() => t.diagnostic(`screenshot of the failure: ${shot}`), () => {});
				if (e.sessionId) {
					const dev = (await e.api('GET', `/sessions/${e.sessionId}/tree`)).data.find((n) => n.name === 'dev');
					const recs = dev ? await e.api('GET', `/sessions/${e.sessionId}/nodes/${dev.id}/messages?limit=500`).catch((x) => ({ error: String(x) })) : {};
					t.diagnostic(`dev's records: ${JSON.stringify(recs).slice(-6000)}`);
				}
				throw err;
			}
		});

	await step('a session cloned from the git server, shelley commits a file', async () => {
		await page.goto(e.server.loginURL);
		await page.waitForURL(e.server.base + '/', { timeout: T });
		await page.getByRole('button', { name: 'New session' }).first().click();
		await page.locator('#ns-name').fill('e2e-ship');
		await page.locator('#ns-git').fill(forge.url + '/o/r.git');
		await page.getByRole('button', { name: 'Create and spawn agent' }).click();
		await page.waitForURL(/\/session\/[^/?]+/, { timeout: T });
		e.sessionId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]);
		const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
		await dlg.locator('#spawn-name').fill('dev');
		await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'shelley', exact: true }).click();
		await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
		await dlg.waitFor({ state: 'detached', timeout: T });
		await sendMessage(page, 'Write three lines to notes.txt and commit them.', T);
		await chat('text').filter({ hasText: 'Committed notes.txt.' }).waitFor({ timeout: 120_000 });
		await chat('commits').waitFor({ timeout: T });
	});

	let changes;
	await step("the node's Changes: the commit since the clone, its diff expanded; the base field fits its placeholder", async () => {
		await page.getByRole('tab', { name: 'Changes' }).click();
		changes = page.getByTestId('changes');
		await changes.getByTestId('commit').filter({ hasText: 'notes: three lines' }).waitFor({ timeout: T });
		const file = changes.getByRole('region', { name: 'Commits' }).locator('[data-testid=diff-file][data-path="notes.txt"]');
		await file.waitFor({ timeout: T });
		if ((await file.locator('button.head').getAttribute('aria-expanded')) !== 'true') await file.locator('button.head').click();
		await file.getByTestId('patch').waitFor({ timeout: T });
		assert.match(await file.getByTestId('patch').textContent(), /two/);
		// At 1280 px the base ref field shows all of "branch, tag or commit".
		const fits = await changes.getByLabel('Base ref').evaluate((el) => {
			const cs = getComputedStyle(el);
			const ctx = document.createElement('canvas').getContext('2d');
			ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
			const room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
			return { text: ctx.measureText(el.placeholder).width, room };
		});
		assert.ok(fits.text <= fits.room, `the placeholder needs ${fits.text} px, the field has ${fits.room}`);
	});

	await step('two lines selected and commented on: the agent gets the quote', async () => {
		const file = changes.getByRole('region', { name: 'Commits' }).locator('[data-testid=diff-file][data-path="notes.txt"]');
		await file.getByLabel('Select line 2').nth(1).click();
		await file.getByLabel('Select line 3').nth(1).click({ modifiers: ['Shift'] });
		await file.getByText('Comment on lines 2-3').waitFor({ timeout: T });
		await file.getByTestId('comment-body').fill('Number them, please.');
		await file.getByRole('button', { name: 'Send to agent' }).click();
		await file.getByText('Sent your comment on lines 2-3 to the agent.').waitFor({ timeout: T });
		await page.getByRole('tab', { name: 'Chat' }).click();
		// The fake upstream answers with the last user message it was sent: the quote reached the model.
		const heard = chat('text').filter({ hasText: 'fakellm heard:' }).filter({ hasText: 'notes.txt' });
		await heard.waitFor({ timeout: 60_000 });
		const said = await heard.textContent();
		assert.ok(said.includes('lines 2-3') && said.includes('> +two') && said.includes('> +three') && said.includes('Number them, please.'), `the model was sent: ${said}`);
	});

	await step('a GitHub token added in Settings (the key in the top bar); its value never shown', async () => {
		await page.getByRole('link', { name: 'Settings' }).click();
		await page.waitForURL(/\/settings$/, { timeout: T });
		await page.getByText('No secrets yet').waitFor({ timeout: T });
		await page.getByRole('button', { name: 'Add secret' }).click();
		const dlg = page.getByRole('dialog', { name: 'Add a secret' });
		await dlg.getByLabel('Kind').selectOption('github_token');
		await dlg.getByLabel('Name', { exact: true }).fill('forge');
		await dlg.getByLabel(/^Host/).fill(forgeHost);
		await dlg.getByLabel(/^Value/).fill(TOKEN);
		await dlg.getByRole('button', { name: 'Add', exact: true }).click();
		await dlg.waitFor({ state: 'detached', timeout: T });
		const row = page.locator('[data-testid=secret][data-name=forge]');
		await row.waitFor({ timeout: T });
		assert.match(await row.textContent(), /GitHub token/);
		assert.ok((await row.textContent()).includes(forgeHost));
		assert.ok(!(await page.content()).includes(TOKEN), 'the page holds the token');
		await page.screenshot({ path: new URL('../../docs/screenshots/settings.png', import.meta.url).pathname });
		const listed = await e.api('GET', '/secrets');
		assert.ok(!JSON.stringify(listed).includes(TOKEN), 'the API answered the token');
	});

	let pushedCommit = '';
	await step("push: the node's branch lands on the server with the token from Settings", async () => {
		await page.goto(`${e.server.base}/session/${e.sessionId}`);
		await poll(async () => (await page.locator('section.panel h1.name').textContent()) === 'dev', { timeout: T, what: 'dev in the panel header' });
		await page.getByRole('button', { name: 'Push', exact: true }).click();
		const dlg = page.getByRole('dialog', { name: "Push dev's commits" });
		assert.equal(await dlg.locator('#push-branch').inputValue(), 'filepath/dev');
		await dlg.getByRole('button', { name: 'Push', exact: true }).click();
		const done = dlg.getByTestId('pushed');
		await done.waitFor({ timeout: 60_000 });
		assert.match(await done.textContent(), /Created\s+filepath\/dev/);
		pushedCommit = await serverGit('rev-parse', 'refs/heads/filepath/dev');
		assert.ok((await done.textContent()).includes(pushedCommit.slice(0, 12)), `the dialog says ${await done.textContent()}, the server has ${pushedCommit}`);
		assert.equal(await serverGit('log', '-1', '--format=%s', 'refs/heads/filepath/dev'), 'notes: three lines');
		assert.equal(await serverGit('show', 'refs/heads/filepath/dev:notes.txt'), 'one\ntwo\nthree');
	});

	await step('a pull request on the forge, its link on the node in the tree', async () => {
		const dlg = page.getByRole('dialog', { name: "Push dev's commits" });
		await dlg.locator('#pr-api').fill(forge.url + '/api/v3');
		await dlg.getByRole('button', { name: 'Open pull request' }).click();
		const pr = dlg.getByTestId('pr');
		await pr.waitFor({ timeout: T });
		assert.match(await pr.textContent(), new RegExp(`Opened\\s+${forge.url}/o/r/pull/1`));
		const [got] = await pulls();
		assert.equal(got.head, 'filepath/dev');
		assert.equal(got.base, 'main');
		assert.equal(got.title, 'notes: three lines');
		assert.match(got.body, /notes: three lines/);
		await dlg.getByRole('button', { name: 'Close' }).click();
		const link = treeRow('dev').getByTestId('pr-link');
		await link.waitFor({ timeout: T });
		assert.equal(await link.textContent(), 'PR #1');
		assert.equal(await link.getAttribute('href'), `${forge.url}/o/r/pull/1`);
		const [tab] = await Promise.all([br.context.waitForEvent('page', { timeout: T }), link.click()]);
		await tab.getByRole('heading', { name: 'notes: three lines #1' }).waitFor({ timeout: T });
		await tab.close();
		const node = (await e.api('GET', `/sessions/${e.sessionId}/tree`)).data.find((n) => n.name === 'dev');
		assert.deepEqual(node.pull_request, { forge: 'github', url: `${forge.url}/o/r/pull/1`, number: 1, branch: 'filepath/dev', base: 'main' });
	});

	await step('a second push and pull request update the same one: one link in the tree', async () => {
		await page.getByRole('button', { name: 'Push', exact: true }).click();
		const dlg = page.getByRole('dialog', { name: "Push dev's commits" });
		await dlg.getByRole('button', { name: 'Push', exact: true }).click();
		await dlg.getByTestId('pushed').filter({ hasText: 'Already up to date' }).waitFor({ timeout: 60_000 });
		await dlg.locator('#pr-title').fill('Three numbered notes');
		await dlg.locator('#pr-api').fill(forge.url + '/api/v3');
		await dlg.getByRole('button', { name: 'Open pull request' }).click();
		await dlg.getByTestId('pr').filter({ hasText: `Updated ${forge.url}/o/r/pull/1` }).waitFor({ timeout: T });
		const all = await pulls();
		assert.equal(all.length, 1);
		assert.equal(all[0].title, 'Three numbered notes');
		await dlg.getByRole('button', { name: 'Close' }).click();
		assert.equal(await page.getByTestId('pr-link').count(), 1);
		assert.equal(await treeRow('dev').getByTestId('pr-link').textContent(), 'PR #1');
	});

	await step('screenshot: the tree with the pull request, the commented lines (from the chat)', async () => {
		await page.getByRole('tab', { name: 'Chat' }).click();
		await chat('user').getByTestId('comment-link').click();
		await poll(async () => (await page.getByTestId('changes').locator('tr.mark').count()) === 2, { timeout: T, what: 'the commented lines to be marked' });
		await page.screenshot({ path: new URL('../../docs/screenshots/ship.png', import.meta.url).pathname });
		assert.deepEqual(br.errors.filter((x) => x.startsWith('pageerror')), []);
	});
});
