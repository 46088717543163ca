import { render, screen } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import SignedOut from './SignedOut.svelte';

describe('SignedOut', () => {
	const cases = [
		{ name: 'never signed in', expired: false, title: 'You are not signed in' },
		{ name: 'cookie no longer accepted', expired: true, title: 'Your session has expired' }
	];
	for (const c of cases) {
		it(c.name, () => {
			render(SignedOut, { expired: c.expired });
			expect(screen.getByRole('heading', { name: c.title })).toBeTruthy();
			expect(screen.getByText('filepath serve')).toBeTruthy();
			expect(screen.getByText('filepath user login NAME')).toBeTruthy();
		});
	}
});
