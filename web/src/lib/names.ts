// Auto-generated names: adjective-number, e.g. "quiet-42".
const ADJECTIVES = [
	'amber', 'bold', 'brave', 'bright', 'brisk', 'calm', 'clever', 'cosmic', 'crisp', 'daring',
	'deft', 'eager', 'fast', 'fierce', 'gentle', 'glad', 'golden', 'humble', 'keen', 'kind',
	'lively', 'lucid', 'lucky', 'mellow', 'merry', 'nimble', 'noble', 'plucky', 'polite', 'proud',
	'quick', 'quiet', 'rapid', 'sharp', 'shy', 'silent', 'sleek', 'smart', 'snappy', 'solid',
	'steady', 'stoic', 'sunny', 'swift', 'tidy', 'vivid', 'warm', 'wise', 'witty', 'zesty'
];

export function randomName(rnd: () => number = Math.random): string {
	const adj = ADJECTIVES[Math.floor(rnd() * ADJECTIVES.length) % ADJECTIVES.length];
	const num = 1 + Math.floor(rnd() * 99);
	return `${adj}-${num}`;
}
