import { cleanup, fireEvent, render, screen, within } from '@testing-library/svelte';
import { afterEach, describe, expect, it, vi } from 'vitest';
import SpawnModal, { AGENT_KEY, IMAGE_KEY, MODEL_KEY } from './SpawnModal.svelte';
import { ApiError } from '$lib/api';
import type { AgentInfo } from '$lib/types';

// shelley reaches its model through OpenRouter (the model list's ids); claude-code and codex
// through their own providers (their own ids); custom names none unless the user gives one.
const defaults: Record<string, [string, string]> = {
	shelley: ['anthropic/claude-sonnet-4', 'openrouter'],
	'claude-code': ['claude-sonnet-4-5', 'anthropic'],
	codex: ['gpt-5', 'openai'],
	custom: ['', '']
};
const agents: AgentInfo[] = ['shelley', 'claude-code', 'codex', 'custom'].map((t) => ({
	type: t,
	name: t,
	description: `${t} agent`,
	icon: '',
	default_model: defaults[t][0],
	image: '',
	provider: defaults[t][1],
	available: true
}));
const m = (id: string, name: string, tools = true) => ({ id, name, context_length: 1000, prompt_price: null, completion_price: null, tools });
const providers = [
	{ name: 'anthropic', models: [m('anthropic/claude-sonnet-4', 'Claude Sonnet 4'), m('anthropic/claude-opus-4', 'Claude Opus 4')] },
	{ name: 'openai', models: [m('openai/gpt-5', 'GPT-5'), m('openai/gpt-5-mini', 'GPT-5 mini')] },
	{ name: 'fake', models: [m('fake/no-tools', 'Fake: No Tools', false)] }
];
const parents = [
	{ id: 'root', name: 'root', depth: 0, status: 'running' },
	{ id: 'kid', name: 'kid', depth: 1, status: 'error' }
];

const modelOptions = () => within(screen.getByRole('listbox', { name: 'Models' })).getAllByRole('option');

function setup(extra: Record<string, unknown> = {}) {
	let n = 0;
	const seq = [0.0, 0.5, 0.5, 0.9]; // deterministic names: two different draws
	const props = {
		open: true,
		parents,
		parentId: 'root',
		loadAgents: vi.fn().mockResolvedValue(agents),
		loadModels: vi.fn().mockResolvedValue({ providers }),
		onspawn: vi.fn().mockResolvedValue(undefined),
		random: () => seq[n++ % seq.length],
		...extra
	};
	return { props, ...render(SpawnModal, props) };
}

describe('SpawnModal', () => {
	afterEach(() => localStorage.clear());

	it('opens, shows where it spawns, and closes with Cancel and Escape', async () => {
		const { rerender } = setup();
		expect(screen.getByRole('dialog', { name: 'Spawn agent' })).toBeTruthy();
		expect((screen.getByLabelText('Parent') as HTMLSelectElement).value).toBe('root');
		await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
		expect(screen.queryByRole('dialog')).toBeNull();
		await rerender({ open: true });
		expect(screen.getByRole('dialog')).toBeTruthy();
		await fireEvent.keyDown(window, { key: 'Escape' });
		expect(screen.queryByRole('dialog')).toBeNull();
	});

	it('auto-generates an adjective-number name and rerolls it', async () => {
		setup();
		const input = screen.getByLabelText('Name') as HTMLInputElement;
		expect(input.value).toMatch(/^[a-z]+-\d+$/);
		const first = input.value;
		await fireEvent.click(screen.getByRole('button', { name: 'New random name' }));
		expect(input.value).toMatch(/^[a-z]+-\d+$/);
		expect(input.value).not.toBe(first);
	});

	it('defaults to custom with a locally built image, pills in catalog order', async () => {
		const { props } = setup();
		const custom = await screen.findByRole('button', { name: 'custom' });
		const pills = screen.getByRole('group', { name: 'Agent type' }).querySelectorAll('button');
		expect([...pills].map((b) => b.textContent)).toEqual(['shelley', 'claude-code', 'codex', 'custom']);
		expect(custom.getAttribute('aria-pressed')).toBe('true');
		const img = screen.getByLabelText('Image') as HTMLInputElement;
		expect(img.value).toBe('filepath/byo-echo:latest');
		expect(img.placeholder).toBe('an image on this machine, e.g. filepath/byo-echo:latest');
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() =>
			expect(props.onspawn).toHaveBeenCalledWith(expect.objectContaining({ agent_type: 'custom', image: 'filepath/byo-echo:latest' }))
		);
	});

	it('highlights the chosen agent and uses its default model', async () => {
		setup();
		const codex = await screen.findByRole('button', { name: 'codex' });
		await fireEvent.click(codex);
		expect(codex.getAttribute('aria-pressed')).toBe('true');
		expect(screen.getByRole('button', { name: 'custom' }).getAttribute('aria-pressed')).toBe('false');
		expect((screen.getByLabelText('Model') as HTMLInputElement).value).toBe('gpt-5');
		await fireEvent.click(screen.getByRole('button', { name: 'shelley' }));
		expect(screen.getByLabelText('Model').textContent).toContain('Claude Sonnet 4');
	});

	it('filters the model dropdown, grouped by provider', async () => {
		setup();
		await fireEvent.click(await screen.findByRole('button', { name: 'shelley' }));
		await fireEvent.click(screen.getByLabelText('Model'));
		expect(screen.getByRole('group', { name: 'anthropic' })).toBeTruthy();
		expect(modelOptions()).toHaveLength(4);
		await fireEvent.input(screen.getByLabelText('Search models'), { target: { value: 'mini' } });
		const opts = modelOptions();
		expect(opts).toHaveLength(1);
		expect(opts[0].textContent).toContain('GPT-5 mini');
		expect(screen.queryByRole('group', { name: 'anthropic' })).toBeNull();
		await fireEvent.click(opts[0]);
		expect(screen.getByLabelText('Model').textContent).toContain('GPT-5 mini');
	});

	it('spawn returns {name, agent_type, model, parent_id}, remembers the agent (a default model is not remembered), and closes', async () => {
		const { props } = setup();
		await fireEvent.click(await screen.findByRole('button', { name: 'codex' }));
		const name = (screen.getByLabelText('Name') as HTMLInputElement).value;
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(props.onspawn).toHaveBeenCalled());
		expect(props.onspawn).toHaveBeenCalledWith({ name, agent_type: 'codex', model: 'gpt-5', parent_id: 'root' });
		await vi.waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
		expect(localStorage.getItem(AGENT_KEY)).toBe('codex');
		expect(localStorage.getItem(`${MODEL_KEY}:codex`)).toBeNull();
	});

	it('preselects the remembered agent and the model last chosen for it', async () => {
		localStorage.setItem(AGENT_KEY, 'shelley');
		localStorage.setItem(`${MODEL_KEY}:shelley`, 'openai/gpt-5-mini');
		setup();
		expect((await screen.findByRole('button', { name: 'shelley' })).getAttribute('aria-pressed')).toBe('true');
		await vi.waitFor(() => expect(screen.getByLabelText('Model').textContent).toContain('GPT-5 mini'));
	});

	it("issue 27.4: a model chosen for one agent never becomes another's; claude-code keeps its catalog model", async () => {
		const { props, rerender } = setup();
		await fireEvent.click(await screen.findByRole('button', { name: 'shelley' }));
		await fireEvent.click(screen.getByLabelText('Model'));
		await fireEvent.click(screen.getByRole('option', { name: /Claude Opus 4/ }));
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
		expect(props.onspawn).toHaveBeenLastCalledWith(expect.objectContaining({ agent_type: 'shelley', model: 'anthropic/claude-opus-4' }));
		await rerender({ open: true });
		await fireEvent.click(await screen.findByRole('button', { name: 'claude-code' }));
		expect((screen.getByLabelText('Model') as HTMLInputElement).value).toBe('claude-sonnet-4-5');
		await fireEvent.click(screen.getByRole('button', { name: 'custom' }));
		expect((screen.getByLabelText(/Model/) as HTMLInputElement).value).toBe('');
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(props.onspawn).toHaveBeenLastCalledWith(expect.objectContaining({ agent_type: 'custom', model: '' })));
	});

	it('issue 27.4: the model list offers no model without tools (the test entry fake/no-tools)', async () => {
		setup();
		await fireEvent.click(await screen.findByRole('button', { name: 'shelley' }));
		await fireEvent.click(screen.getByLabelText('Model'));
		expect(modelOptions()).toHaveLength(4);
		expect(screen.queryByText('fake/no-tools')).toBeNull();
		expect(screen.queryByRole('group', { name: 'fake' })).toBeNull();
	});

	it('issue 27.4: an agent that cannot run here is disabled, with the reason and the fix', async () => {
		localStorage.setItem(AGENT_KEY, 'codex');
		const list = agents.map((a) =>
			a.type === 'codex' ? { ...a, available: false, reason: 'this server has no openai key', fix: 'set FILEPATH_OPENAI_API_KEY where filepath serve runs, and restart it' } : a
		);
		const { props } = setup({ loadAgents: vi.fn().mockResolvedValue(list) });
		const codex = (await screen.findByRole('button', { name: 'codex' })) as HTMLButtonElement;
		expect(codex.disabled).toBe(true);
		expect(codex.title).toContain('this server has no openai key');
		// the remembered agent cannot run: custom is picked instead
		expect(screen.getByRole('button', { name: 'custom' }).getAttribute('aria-pressed')).toBe('true');
		const note = screen.getByTestId('unavailable');
		expect(note.textContent).toContain('codex cannot run here: this server has no openai key.');
		expect(note.textContent).toContain('set FILEPATH_OPENAI_API_KEY where filepath serve runs, and restart it');
		await fireEvent.click(codex);
		expect(codex.getAttribute('aria-pressed')).toBe('false');
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(props.onspawn).toHaveBeenCalledWith(expect.objectContaining({ agent_type: 'custom' })));
		cleanup();
		// agents missing the same thing are named on one line
		const same = agents.map((a) => (a.type === 'codex' || a.type === 'shelley' ? { ...a, available: false, reason: 'no key', fix: 'set it' } : a));
		setup({ loadAgents: vi.fn().mockResolvedValue(same) });
		await screen.findByRole('button', { name: 'custom' });
		const lines = screen.getByTestId('unavailable').querySelectorAll('li');
		expect([...lines].map((l) => l.textContent)).toEqual(['shelley, codex cannot run here: no key. set it.']);
	});

	it('issue 27.8: Escape in the model list closes the list, not the dialog', async () => {
		setup();
		await fireEvent.click(await screen.findByRole('button', { name: 'shelley' }));
		await fireEvent.click(screen.getByLabelText('Model'));
		const search = screen.getByLabelText('Search models');
		await fireEvent.keyDown(search, { key: 'Escape' });
		expect(screen.queryByRole('listbox')).toBeNull();
		expect(screen.getByRole('dialog', { name: 'Spawn agent' })).toBeTruthy();
		await fireEvent.keyDown(window, { key: 'Escape' });
		expect(screen.queryByRole('dialog')).toBeNull();
	});

	it('issue 27.7: the parent is the selected agent by default, or none: a top-level agent', async () => {
		const { props } = setup({ parentId: 'kid' });
		await screen.findByRole('button', { name: 'custom' });
		const sel = screen.getByLabelText('Parent') as HTMLSelectElement;
		expect(sel.value).toBe('kid');
		expect([...sel.options].map((o) => o.textContent!.trim())).toEqual(['None: a top-level agent', 'root', 'kid (error)']);
		expect(screen.getByTestId('parent-warning').textContent).toContain('kid is in error');
		await fireEvent.change(sel, { target: { value: '' } });
		expect(screen.queryByRole('radiogroup', { name: 'Workspace' })).toBeNull();
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(props.onspawn).toHaveBeenCalled());
		expect(props.onspawn.mock.calls[0][0].parent_id).toBeUndefined();
		expect(props.onspawn.mock.calls[0][0].workspace).toBeUndefined();
	});

	it('shows the image field only for custom, sends it, and remembers it', async () => {
		const { props, rerender } = setup();
		await fireEvent.click(await screen.findByRole('button', { name: 'codex' }));
		expect(screen.queryByLabelText('Image')).toBeNull();
		await fireEvent.click(screen.getByRole('button', { name: 'custom' }));
		const spawn = screen.getByRole('button', { name: 'Spawn' }) as HTMLButtonElement;
		await fireEvent.input(screen.getByLabelText('Image'), { target: { value: ' ' } });
		expect(spawn.disabled).toBe(true);
		await fireEvent.input(screen.getByLabelText('Image'), { target: { value: 'my-agent:1' } });
		await fireEvent.click(spawn);
		await vi.waitFor(() =>
			expect(props.onspawn).toHaveBeenCalledWith(expect.objectContaining({ agent_type: 'custom', image: 'my-agent:1' }))
		);
		await vi.waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
		expect(localStorage.getItem(IMAGE_KEY)).toBe('my-agent:1');
		await rerender({ open: true });
		expect((await screen.findByRole('button', { name: 'custom' })).getAttribute('aria-pressed')).toBe('true');
		expect((screen.getByLabelText('Image') as HTMLInputElement).value).toBe('my-agent:1');
	});

	it('stays open and shows the API error when spawning fails', async () => {
		setup({ onspawn: vi.fn().mockRejectedValue(new ApiError(422, 'invalid', 'name already used', 'name')) });
		await screen.findByRole('button', { name: 'codex' });
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		expect((await screen.findByRole('alert')).textContent).toContain('name already used');
		expect(screen.getByRole('dialog')).toBeTruthy();
	});

	it('has a readable state when the model list is unavailable and accepts a typed id', async () => {
		const { props } = setup({ loadModels: vi.fn().mockRejectedValue(new ApiError(503, 'unavailable', 'model catalog unreachable')) });
		await fireEvent.click(await screen.findByRole('button', { name: 'shelley' }));
		expect(await screen.findByText(/Model list unavailable \(model catalog unreachable\)/)).toBeTruthy();
		await fireEvent.input(screen.getByLabelText('Model'), { target: { value: 'openai/gpt-5' } });
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		await vi.waitFor(() => expect(props.onspawn).toHaveBeenCalledWith(expect.objectContaining({ model: 'openai/gpt-5' })));
	});

	it('spawns a child on a fork of its parent\'s workspace when Fork is chosen', async () => {
		const { props } = setup();
		await screen.findByRole('button', { name: 'custom' });
		const fork = screen.getByRole('radio', { name: 'Fork' });
		expect(screen.getByRole('radio', { name: 'Shared' }).getAttribute('aria-checked')).toBe('true');
		await fireEvent.click(fork);
		expect(fork.getAttribute('aria-checked')).toBe('true');
		expect(screen.getByText(/its own copy of root's workspace/)).toBeTruthy();
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		expect(props.onspawn).toHaveBeenCalledWith(expect.objectContaining({ workspace: 'fork' }));
	});

	it('sends no workspace for a shared child, and offers no choice at the root', async () => {
		const { props, unmount } = setup();
		await screen.findByRole('button', { name: 'custom' });
		await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
		expect(props.onspawn.mock.calls[0][0].workspace).toBeUndefined();
		unmount();
		setup({ parentId: null });
		await screen.findByRole('button', { name: 'custom' });
		expect(screen.queryByRole('radiogroup', { name: 'Workspace' })).toBeNull();
	});

	describe('vendor keys and every agent', () => {
		const catalog: AgentInfo[] = [
			...agents.slice(0, 3),
			{ type: 'cursor', name: 'Cursor', description: 'cursor agent', icon: '', default_model: 'claude-sonnet-4', image: '', provider: '', vendor_key: 'CURSOR_API_KEY', available: true },
			{ type: 'amp', name: 'Amp', description: 'amp agent', icon: '', default_model: 'claude-sonnet-4', image: '', provider: '', vendor_key: 'AMP_API_KEY', available: true },
			agents[3]
		];

		it('every agent pill picks its agent and spawns it', async () => {
			for (const a of catalog) {
				cleanup();
				const { props } = setup({
					loadAgents: vi.fn().mockResolvedValue(catalog),
					loadSecrets: vi.fn().mockResolvedValue(['AMP_API_KEY', 'CURSOR_API_KEY'])
				});
				const pill = await screen.findByRole('button', { name: a.type });
				await fireEvent.click(pill);
				expect(pill.getAttribute('aria-pressed')).toBe('true');
				await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
				await vi.waitFor(() => expect(props.onspawn).toHaveBeenCalledWith(expect.objectContaining({ agent_type: a.type })));
				await vi.waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
			}
		});

		it('asks for the vendor key an agent needs, sets it before the spawn, and says usage is not metered', async () => {
			const order: string[] = [];
			const onsecret = vi.fn(async (name: string) => order.push('secret ' + name));
			const { props } = setup({
				loadAgents: vi.fn().mockResolvedValue(catalog),
				loadSecrets: vi.fn().mockResolvedValue([]),
				onsecret,
				onspawn: vi.fn(async (req: { agent_type: string }) => order.push('spawn ' + req.agent_type))
			});
			await fireEvent.click(await screen.findByRole('button', { name: 'amp' }));
			expect(screen.getByTestId('unmetered').textContent).toContain('usage not metered by filepath');
			const key = screen.getByLabelText('AMP_API_KEY') as HTMLInputElement;
			expect(key.type).toBe('password');
			const spawn = screen.getByRole('button', { name: 'Spawn' }) as HTMLButtonElement;
			expect(spawn.disabled).toBe(true);
			await fireEvent.input(key, { target: { value: ' sgamp_key ' } });
			expect(spawn.disabled).toBe(false);
			await fireEvent.click(spawn);
			await vi.waitFor(() => expect(order).toEqual(['secret AMP_API_KEY', 'spawn amp']));
			expect(onsecret).toHaveBeenCalledWith('AMP_API_KEY', 'sgamp_key');
			expect(props.onspawn).toHaveBeenCalledWith(expect.not.objectContaining({ AMP_API_KEY: expect.anything() }));
			expect(JSON.stringify((props.onspawn as ReturnType<typeof vi.fn>).mock.calls)).not.toContain('sgamp_key');
		});

		it('does not ask again when the session holds the key', async () => {
			const onsecret = vi.fn();
			const { props } = setup({
				loadAgents: vi.fn().mockResolvedValue(catalog),
				loadSecrets: vi.fn().mockResolvedValue(['CURSOR_API_KEY']),
				onsecret
			});
			await fireEvent.click(await screen.findByRole('button', { name: 'cursor' }));
			await vi.waitFor(() => expect(screen.getByText(/Your CURSOR_API_KEY is set/)).toBeTruthy());
			expect(screen.queryByLabelText('CURSOR_API_KEY')).toBeNull();
			expect(screen.getByTestId('unmetered').textContent).toContain('Cursor runs on its own service');
			await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
			await vi.waitFor(() => expect(props.onspawn).toHaveBeenCalledWith(expect.objectContaining({ agent_type: 'cursor' })));
			expect(onsecret).not.toHaveBeenCalled();
		});

		it('keeps the modal open and does not spawn when the key cannot be set', async () => {
			const { props } = setup({
				loadAgents: vi.fn().mockResolvedValue(catalog),
				onsecret: vi.fn().mockRejectedValue(new ApiError(503, 'unavailable', 'this server has no secrets key'))
			});
			await fireEvent.click(await screen.findByRole('button', { name: 'amp' }));
			await fireEvent.input(screen.getByLabelText('AMP_API_KEY'), { target: { value: 'k' } });
			await fireEvent.click(screen.getByRole('button', { name: 'Spawn' }));
			expect((await screen.findByRole('alert')).textContent).toContain('no secrets key');
			expect(props.onspawn).not.toHaveBeenCalled();
			expect(screen.getByRole('dialog')).toBeTruthy();
		});

		it('metered agents say nothing about vendor keys', async () => {
			setup({ loadAgents: vi.fn().mockResolvedValue(catalog) });
			await fireEvent.click(await screen.findByRole('button', { name: 'claude-code' }));
			expect(screen.queryByTestId('unmetered')).toBeNull();
		});
	});

	it('says when the model list is offline (the bundled one)', async () => {
		setup({ loadModels: vi.fn().mockResolvedValue({ providers, offline: true, note: 'OpenRouter unreachable: the bundled list' }) });
		await fireEvent.click(await screen.findByRole('button', { name: 'shelley' }));
		expect((await screen.findByTestId('models-offline')).textContent).toContain('OpenRouter unreachable: the bundled list');
		await fireEvent.click(screen.getByLabelText('Model'));
		expect(screen.getByRole('group', { name: 'openai' })).toBeTruthy();
	});

	it('shows no offline note for the live list', async () => {
		setup();
		await screen.findByRole('button', { name: 'codex' });
		expect(screen.queryByTestId('models-offline')).toBeNull();
	});
});
