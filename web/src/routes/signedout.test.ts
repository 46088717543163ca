import { render, screen } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import SignedOut from './SignedOut.svelte';

describe('SignedOut', () => {
	const cases = [
		{ name: 'never signed in', reason: 'signed-out', title: 'You are not signed in' },
		{ name: 'cookie no longer accepted', reason: 'expired', title: 'Your session has expired' },
		{ name: 'signed out with the button', reason: 'left', title: 'You signed out' }
	];
	for (const c of cases) {
		it(c.name, () => {
			render(SignedOut, { reason: c.reason as 'expired' | 'left' | 'signed-out' });
			expect(screen.getByRole('heading', { name: c.title })).toBeTruthy();
			expect(screen.getByText('filepath serve')).toBeTruthy();
			expect(screen.getByText('filepath user login NAME')).toBeTruthy();
		});
	}
});
