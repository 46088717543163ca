import { afterEach, describe, expect, it, vi } from 'vitest';
import { api, ApiError, errorMessage, onUnauthorized, streamURL } from './api';

function respond(status: number, body: string, type = 'application/json') {
	return vi.fn().mockResolvedValue(new Response(status === 204 ? null : body, { status, headers: { 'content-type': type } }));
}

describe('api', () => {
	afterEach(() => {
		vi.unstubAllGlobals();
		onUnauthorized(undefined);
	});

	it('decodes JSON and unwraps {data}', async () => {
		const f = respond(200, JSON.stringify({ data: [{ id: 's1' }] }));
		vi.stubGlobal('fetch', f);
		expect(await api.sessions()).toEqual([{ id: 's1' }]);
		expect(f.mock.calls[0][0]).toBe('/api/v1/sessions');
		expect(f.mock.calls[0][1].credentials).toBe('same-origin');
	});

	it('sends JSON bodies', async () => {
		const f = respond(201, JSON.stringify({ id: 'n1' }));
		vi.stubGlobal('fetch', f);
		await api.createNode('s 1', { name: 'a', agent_type: 'pi', model: 'm', parent_id: 'p' });
		expect(f.mock.calls[0][0]).toBe('/api/v1/sessions/s%201/nodes');
		expect(f.mock.calls[0][1].method).toBe('POST');
		expect(JSON.parse(f.mock.calls[0][1].body)).toEqual({ name: 'a', agent_type: 'pi', model: 'm', parent_id: 'p' });
	});

	const errors = [
		{ name: 'coded error', status: 422, body: '{"error":{"code":"invalid","message":"name is required","field":"name"}}', code: 'invalid', msg: 'name is required (name)' },
		{ name: 'plain text', status: 502, body: 'bad gateway', code: 'http_502', msg: '502 Bad Gateway: bad gateway' },
		{ name: 'empty', status: 500, body: '', code: 'http_500', msg: '500 Internal Server Error' }
	];
	for (const e of errors) {
		it(`turns a ${e.name} into an ApiError`, async () => {
			vi.stubGlobal('fetch', vi.fn().mockResolvedValue(new Response(e.body, { status: e.status, statusText: e.status === 502 ? 'Bad Gateway' : 'Internal Server Error' })));
			const err = await api.session('x').catch((x) => x);
			expect(err).toBeInstanceOf(ApiError);
			expect(err.status).toBe(e.status);
			expect(err.code).toBe(e.code);
			expect(errorMessage(err)).toBe(e.msg);
		});
	}

	it('a 401 notifies the unauthorized handler', async () => {
		const seen = vi.fn();
		onUnauthorized(seen);
		vi.stubGlobal('fetch', respond(401, '{"error":{"code":"unauthorized","message":"sign in required"}}'));
		await expect(api.me()).rejects.toThrow('sign in required');
		expect(seen).toHaveBeenCalledOnce();
	});

	it('a network failure is a readable error', async () => {
		vi.stubGlobal('fetch', vi.fn().mockRejectedValue(new TypeError('Failed to fetch')));
		await expect(api.me()).rejects.toThrow(/cannot reach the filepath server/);
	});

	it('204 is undefined; logs are text', async () => {
		vi.stubGlobal('fetch', respond(204, ''));
		expect(await api.deleteSession('s')).toBeUndefined();
		vi.stubGlobal('fetch', respond(200, 'line\n', 'text/plain'));
		expect(await api.logs('s', 'n')).toBe('line\n');
	});

	it('builds ws and wss stream URLs', () => {
		expect(streamURL('s1', 7, { protocol: 'http:', host: 'h:1' } as Location)).toBe('ws://h:1/api/v1/sessions/s1/stream?after=7');
		expect(streamURL('s1', 0, { protocol: 'https:', host: 'h' } as Location)).toBe('wss://h/api/v1/sessions/s1/stream?after=0');
	});
});
