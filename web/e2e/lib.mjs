// Shared helpers of the end-to-end tests and the UI benchmark: what they need (Chromium, Docker,
// the binary, the agent image), starting and stopping the real server, launching headless
// Chromium, and small polling helpers. No fixed sleeps anywhere: every wait polls with a deadline.
import { spawn, execFile } from 'node:child_process';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { constants } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const run = promisify(execFile);

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = process.env.FILEPATH_BIN ?? path.join(REPO, 'bin/filepath');
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/lib/chromium/chromium';
export const AGENT_IMAGE = process.env.E2E_AGENT_IMAGE ?? 'filepath/testagent:latest';
export const CI = process.env.CI === 'true';

export const CHROME_ARGS = [
	'--no-sandbox',
	'--disable-gpu',
	'--disable-quic',
	'--no-first-run',
	'--disable-background-networking',
	'--disable-component-update',
	'--disable-sync'
];

/**
 * missing returns why the end-to-end run cannot happen here ('' when everything is present):
 * the Chromium executable, the built binary, a reachable Docker engine and (optionally) an image.
 * Callers fail on a reason when CI=true and skip otherwise.
 */
export async function missing({ docker = true, image = AGENT_IMAGE } = {}) {
	const reasons = [];
	try {
		await access(CHROMIUM, constants.X_OK);
	} catch {
		reasons.push(`no Chromium at ${CHROMIUM} (set CHROMIUM)`);
	}
	try {
		await access(BIN, constants.X_OK);
	} catch {
		reasons.push(`no binary at ${BIN}: run make build (or go build -o bin/filepath ./cmd/filepath after npm run build)`);
	}
	if (docker) {
		try {
			await run('docker', ['info', '--format', '{{.ServerVersion}}'], { timeout: 20_000 });
			if (image) {
				try {
					await run('docker', ['image', 'inspect', image], { timeout: 20_000 });
				} catch {
					reasons.push(`no image ${image}: run images/build.sh`);
				}
			}
		} catch (e) {
			reasons.push(`no Docker engine: ${String(e.stderr || e.message).trim().split('\n')[0]}`);
		}
	}
	return reasons.join('; ');
}

/** requirements returns node:test options: fail under CI=true, skip otherwise. */
export async function requirements(opts) {
	const why = await missing(opts);
	if (!why) return {};
	if (CI) return { __fail: why };
	return { skip: why };
}

/**
 * startServer runs `filepath serve --addr 127.0.0.1:0 --data DIR` and resolves once it printed its
 * login line and answers /healthz on that address. stop() ends it by PID (SIGTERM, then SIGKILL).
 */
export async function startServer(dataDir, { timeout = 30_000, env = {}, login = true } = {}) {
	const proc = spawn(BIN, ['serve', '--addr', '127.0.0.1:0', '--data', dataDir], {
		stdio: ['ignore', 'pipe', 'pipe'],
		env: { ...process.env, ...env }
	});
	let stdout = '';
	let stderr = '';
	let exited = null;
	proc.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
	proc.stderr.setEncoding('utf8').on('data', (d) => {
		stderr += d;
		if (stderr.length > 200_000) stderr = stderr.slice(-100_000);
	});
	const done = new Promise((resolve) => proc.on('exit', (code, sig) => resolve((exited = { code, sig }))));
	const killOnExit = () => {
		try {
			process.kill(proc.pid, 'SIGKILL');
		} catch {
			/* already gone */
		}
	};
	process.on('exit', killOnExit);

	const server = {
		pid: proc.pid,
		base: '',
		loginURL: '',
		get stdout() {
			return stdout;
		},
		get stderr() {
			return stderr;
		},
		async stop() {
			process.off('exit', killOnExit);
			if (exited) return exited;
			proc.kill('SIGTERM');
			const t = setTimeout(() => exited || proc.kill('SIGKILL'), 15_000);
			const r = await done;
			clearTimeout(t);
			return r;
		}
	};
	try {
		if (!login) {
			// a data dir that already has users: no login line; the address is in the log
			const m = await poll(
				() => {
					if (exited) {
						const e = new Error(`filepath serve exited (${JSON.stringify(exited)}); stderr:\n${stderr.slice(-3000)}`);
						e.fatal = true;
						throw e;
					}
					return stderr.match(/msg=listening addr=(127\.0\.0\.1:\d+)/);
				},
				{ timeout, what: 'the listening line on stderr' }
			);
			server.base = 'http://' + m[1];
			await poll(async () => ((await fetch(server.base + '/healthz').catch(() => null))?.ok ? true : null), { timeout, what: `${server.base}/healthz` });
			return server;
		}
		const line = await poll(
			() => {
				if (exited) {
					const e = new Error(`filepath serve exited (${JSON.stringify(exited)}) before printing its login line; stderr:\n${stderr.slice(-3000)}`);
					e.fatal = true;
					throw e;
				}
				return stdout.match(/^login: (http:\/\/127\.0\.0\.1:(\d+))\/login\?token=\S+$/m);
			},
			{ timeout, what: 'the login line on stdout' }
		);
		server.base = line[1];
		server.loginURL = line[0].slice('login: '.length);
		if (Number(line[2]) === 0) throw new Error(`the login line names port 0, not the bound port: ${line[0]}`);
		await poll(
			async () => {
				const r = await fetch(server.base + '/healthz').catch(() => null);
				return r?.ok ? true : null;
			},
			{ timeout, what: `${server.base}/healthz` }
		);
		return server;
	} catch (e) {
		await server.stop();
		throw e;
	}
}

/** poll calls fn until it returns a truthy value (returned) or the deadline passes (throws). */
export async function poll(fn, { timeout = 15_000, interval = 50, what = 'a condition' } = {}) {
	const end = Date.now() + timeout;
	let last;
	for (;;) {
		try {
			const v = await fn();
			if (v) return v;
		} catch (e) {
			if (e?.fatal) throw e;
			last = e;
		}
		if (Date.now() > end) throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
		await new Promise((r) => setTimeout(r, interval));
	}
}

/** launch starts headless Chromium with its own profile directory (removed by close()). */
export async function launch({ width = 1280, height = 800, ...rest } = {}) {
	const dir = await mkdtemp(path.join(os.tmpdir(), 'fp-e2e-chrome-'));
	const context = await chromium.launchPersistentContext(dir, {
		executablePath: CHROMIUM,
		headless: true,
		args: CHROME_ARGS,
		viewport: { width, height },
		...rest
	});
	const errors = [];
	context.on('page', (p) => watch(p, errors));
	for (const p of context.pages()) watch(p, errors);
	return {
		context,
		errors,
		page: context.pages()[0] ?? (await context.newPage()),
		async close() {
			await context.close().catch(() => {});
			await rm(dir, { recursive: true, force: true }).catch(() => {});
		}
	};
}

function watch(page, errors) {
	page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
	page.on('console', (m) => {
		if (m.type() === 'error') errors.push(`console.error: ${m.text()}`);
	});
}

/** api calls the server's REST API with the cookies of a browser context. */
export async function api(context, base, method, p, body) {
	const cookies = await context.cookies(base);
	const res = await fetch(base + '/api/v1' + p, {
		method,
		headers: {
			Cookie: cookies.map((c) => `${c.name}=${c.value}`).join('; '),
			Origin: base,
			...(body !== undefined ? { 'Content-Type': 'application/json' } : {})
		},
		body: body !== undefined ? JSON.stringify(body) : undefined
	});
	const text = await res.text();
	if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
	return text ? JSON.parse(text) : undefined;
}

/**
 * e2eRun is the state of one end-to-end test, with its cleanup registered on t: a temp data
 * directory, the served binary (start), headless browsers (launch; the first one calls the API),
 * the session under test (sessionId), and the step that failed (failed). After the test it logs
 * the server's stderr if a step failed and the browsers' errors, deletes the session and waits for
 * its containers to go, closes the browsers, stops the server and removes the directory.
 */
export async function e2eRun(t, prefix) {
	const run = {
		dataDir: await tempDir(prefix),
		server: undefined,
		browsers: [],
		sessionId: '',
		failed: '',
		async start(opts) {
			run.server = await startServer(run.dataDir, opts);
			return run.server;
		},
		async launch(opts) {
			const br = await launch(opts);
			run.browsers.push(br);
			return br;
		},
		api: (method, p, body) => api(run.browsers[0].context, run.server.base, method, p, body)
	};
	t.after(async () => {
		if (run.failed && run.server) t.diagnostic(`server stderr (tail):\n${run.server.stderr.slice(-4000)}`);
		for (const br of run.browsers) if (br.errors.length) t.diagnostic(`browser errors:\n${br.errors.join('\n')}`);
		if (run.sessionId && run.server && run.browsers.length) {
			try {
				await run.api('DELETE', `/sessions/${run.sessionId}`);
				await poll(async () => (await containersOf(run.sessionId)).length === 0, { timeout: 30_000, what: 'the session containers to be removed' });
			} catch (e) {
				t.diagnostic(`cleanup: ${e.message}`);
			}
		}
		for (const br of run.browsers) await br.close();
		await run.server?.stop();
		await removeDir(run.dataDir);
	});
	return run;
}

/** sendMessage sends text from the chat's message box and waits until it is sent. */
export async function sendMessage(page, text, timeout = 30_000) {
	const box = page.getByRole('textbox', { name: 'Message' });
	await box.fill(text);
	await box.press('Enter');
	await poll(async () => (await box.inputValue()) === '', { timeout, what: 'the message to be sent' });
}

/**
 * newSession creates a session from the dashboard's New session modal (name, optional health
 * checks) and returns its id; the spawn dialog opens next.
 */
export async function newSession(page, name, { checks, timeout = 30_000 } = {}) {
	await page.getByRole('button', { name: 'New session' }).first().click();
	await page.locator('#ns-name').fill(name);
	if (checks) await page.getByLabel(/Health checks/).fill(checks);
	await page.getByRole('button', { name: 'Create and spawn agent' }).click();
	await page.waitForURL(/\/session\/[^/?]+/, { timeout });
	return decodeURIComponent(new URL(page.url()).pathname.split('/')[2]);
}

/** spawnCustom spawns a custom agent of image, named name, in the open Spawn agent dialog. */
export async function spawnCustom(page, name, image, timeout = 30_000) {
	const dlg = page.getByRole('dialog', { name: 'Spawn agent' });
	await dlg.locator('#spawn-name').fill(name);
	await dlg.getByRole('group', { name: 'Agent type' }).getByRole('button', { name: 'custom', exact: true }).click();
	await dlg.locator('#spawn-image').fill(image);
	await dlg.getByRole('button', { name: 'Spawn', exact: true }).click();
	await dlg.waitFor({ state: 'detached', timeout });
}

/** agentContainersOf lists the ids of a session's agent containers: not the sandboxes whose
 * network namespace each agent runs in (containersOf lists both). */
export async function agentContainersOf(sessionId) {
	const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=filepath.session=${sessionId}`, '--filter', 'label=filepath.managed=true']);
	return stdout.split('\n').filter(Boolean);
}

/** containersOf lists the ids of Docker containers labelled with a filepath session (agents and
 * their sandboxes). */
export async function containersOf(sessionId) {
	const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=filepath.session=${sessionId}`]);
	return stdout.split('\n').filter(Boolean);
}

export async function userLogin(dataDir, base, name = 'admin') {
	const { stdout } = await run(BIN, ['user', 'login', name, '--data', dataDir, '--url', base], { timeout: 20_000 });
	return stdout.trim();
}

export async function tempDir(prefix) {
	return mkdtemp(path.join(os.tmpdir(), prefix));
}

/**
 * removeDir removes a temp directory of this run. The server keeps `<data>/mnt` bind-mounted onto
 * itself (shared propagation for the FUSE workspaces) after it stops, so mounts under dir are
 * detached first (deepest first); only paths inside dir are touched.
 */
export async function removeDir(dir) {
	const abs = path.resolve(dir) + '/';
	let mounts = [];
	try {
		mounts = (await readFile('/proc/self/mountinfo', 'utf8'))
			.split('\n')
			.map((l) => l.split(' ')[4])
			.filter((m) => m && m.startsWith(abs))
			.sort((x, y) => y.length - x.length);
	} catch {
		/* not Linux */
	}
	for (const m of mounts) await run('umount', ['-l', m]).catch(() => {});
	await rm(dir, { recursive: true, force: true }).catch(() => {});
}

/** GO is the go command that builds the tests' helper programs (GO, else Go's usual place, else PATH). */
export const GO = process.env.GO ?? (await access('/usr/local/go/bin/go', constants.X_OK).then(() => '/usr/local/go/bin/go', () => 'go'));

/** buildPrograms builds the module's commands pkgs (e.g. ./internal/cmd/fakellm) into dir. */
export async function buildPrograms(dir, ...pkgs) {
	await run(GO, ['build', '-o', dir + '/', ...pkgs], { cwd: REPO, timeout: 600_000 });
}

/**
 * startProgram runs bin with args and resolves once it printed its URL (the first line on stdout,
 * as internal/cmd/fakellm and fakeforge do); stop() ends it by PID.
 */
export async function startProgram(bin, args, { timeout = 30_000 } = {}) {
	const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
	let stdout = '';
	let stderr = '';
	let exited = null;
	proc.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
	proc.stderr.setEncoding('utf8').on('data', (d) => (stderr = (stderr + d).slice(-20_000)));
	const done = new Promise((resolve) => proc.on('exit', (code, sig) => resolve((exited = { code, sig }))));
	const killOnExit = () => {
		try {
			process.kill(proc.pid, 'SIGKILL');
		} catch {
			/* already gone */
		}
	};
	process.on('exit', killOnExit);
	const prog = {
		url: '',
		get stderr() {
			return stderr;
		},
		async stop() {
			process.off('exit', killOnExit);
			if (!exited) proc.kill('SIGTERM');
			return done;
		}
	};
	try {
		prog.url = (
			await poll(
				() => {
					if (exited) {
						const e = new Error(`${bin} exited (${JSON.stringify(exited)}): ${stderr.slice(-2000)}`);
						e.fatal = true;
						throw e;
					}
					return stdout.match(/^(http:\/\/127\.0\.0\.1:\d+)\s*$/m);
				},
				{ timeout, what: `${path.basename(bin)}'s URL on stdout` }
			)
		)[1];
		return prog;
	} catch (e) {
		await prog.stop();
		throw e;
	}
}
