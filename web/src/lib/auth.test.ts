import { afterEach, describe, expect, it, vi } from 'vitest';
import { SIGNED_IN, signOut } from './auth';

describe('signOut', () => {
	afterEach(() => {
		vi.unstubAllGlobals();
		localStorage.clear();
	});

	it('posts /api/v1/logout, remembers it and reloads', async () => {
		const fetch = vi.fn().mockResolvedValue(new Response(null, { status: 204 }));
		vi.stubGlobal('fetch', fetch);
		localStorage.setItem(SIGNED_IN, '1');
		const reload = vi.fn();
		await signOut(reload);
		expect(fetch).toHaveBeenCalledTimes(1);
		expect(fetch.mock.calls[0][0]).toBe('/api/v1/logout');
		expect(fetch.mock.calls[0][1].method).toBe('POST');
		expect(localStorage.getItem(SIGNED_IN)).toBe('out');
		expect(reload).toHaveBeenCalled();
	});

	it('a failed logout throws and leaves the browser signed in', async () => {
		vi.stubGlobal('fetch', vi.fn().mockResolvedValue(new Response(JSON.stringify({ error: { code: 'not_found', message: 'no route' } }), { status: 404 })));
		localStorage.setItem(SIGNED_IN, '1');
		const reload = vi.fn();
		await expect(signOut(reload)).rejects.toThrow('no route');
		expect(localStorage.getItem(SIGNED_IN)).toBe('1');
		expect(reload).not.toHaveBeenCalled();
	});
});
