// formatCost shows US dollars short: $0.004, $0.12, $3.40, $120.
export function formatCost(usd: number): string {
	if (usd >= 100) return '$' + usd.toFixed(0);
	if (usd >= 0.1) return '$' + usd.toFixed(2);
	return '$' + usd.toPrecision(1);
}

// formatTokens shows a token count short: 950, 1.2k, 34k, 1.5M, 12M.
export function formatTokens(n: number): string {
	if (n >= 1_000_000) return (n / 1_000_000).toFixed(n >= 10_000_000 ? 0 : 1) + 'M';
	if (n >= 1000) return (n / 1000).toFixed(n >= 10_000 ? 0 : 1) + 'k';
	return String(n);
}
