package run

import "strings"

// Env builds a CLI's environment from base: set entries replace what base
// has, defaults apply only where base has no value.
func Env(base []string, set, defaults map[string]string) []string {
	out := make([]string, 0, len(base)+len(set)+len(defaults))
	have := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok {
			continue
		}
		have[k] = true
		out = append(out, kv)
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	for k, v := range defaults {
		if _, ok := set[k]; !ok && !have[k] {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// Lookup returns the value of key in env.
func Lookup(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
