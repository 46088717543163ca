package approval

import "testing"

func TestReason(t *testing.T) {
	tests := []struct {
		cmd  string
		asks bool
	}{
		{"go test ./...", false},
		{"ls -la && cat README.md | grep x > /tmp/out 2>/dev/null", false},
		{"/usr/bin/env python3 x.py", false},
		{"cat /workspace/a /tmp/b", false},
		{"git status && git commit -m 'curl is mentioned'", false},
		{"echo hi > out.txt", false},
		{"curl -s https://example.com", true},
		{"python3 -c 'import urllib.request as u; u.urlopen(\"http://x\")'", true},
		{"cd src; wget http://example.com/x", true},
		{"cat /etc/passwd", true},
		{"echo x >/etc/motd", true},
		{"cp a ~/b", true},
		{"ls $HOME", true},
		{"git push origin main", true},
		{"git -C . fetch", true},
		{"git clone repo", true},
		{"git remote add o x", true},
		{"npm install left-pad", true},
		{"pip install requests", true},
		{"go install golang.org/x/tools/cmd/goimports@latest", true},
		{"apt-get install -y jq", true},
		{"sudo ssh host", true},
		{"tar xf a.tar --directory=/opt", true},
	}
	for _, tt := range tests {
		if got := Reason(tt.cmd); (got != "") != tt.asks {
			t.Errorf("Reason(%q) = %q, want asks=%v", tt.cmd, got, tt.asks)
		}
	}
}
