// formatTokens shows a token count short: 950, 1.2k, 34k, 1.5M, 12M.
export function formatTokens(n: number): string {
	if (n >= 1_000_000) return (n / 1_000_000).toFixed(n >= 10_000_000 ? 0 : 1) + 'M';
	if (n >= 1000) return (n / 1000).toFixed(n >= 10_000 ? 0 : 1) + 'k';
	return String(n);
}
