// Signing in and out, as this browser remembers it (the cookie itself is HttpOnly).
import { api } from './api';
import { save } from './prefs';

/** SIGNED_IN is '1' once this browser was signed in, 'out' after Sign out. */
export const SIGNED_IN = 'filepath:signed-in';

/**
 * signOut ends this browser's sign-in on the server (POST /api/v1/logout) and reloads the app,
 * which then shows the signed-out page. A failure is thrown and the browser stays signed in.
 */
export async function signOut(reload: () => void = () => window.location.assign('/')): Promise<void> {
	await api.logout();
	save(SIGNED_IN, 'out');
	reload();
}
