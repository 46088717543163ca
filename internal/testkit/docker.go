package testkit

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RemoveContainers removes (with force) every Docker container labelled
// label ("key=value"): the containers of a session, which outlive the
// orchestrator that started them.
func RemoveContainers(t testing.TB, label string) {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+label).Output()
	if err != nil {
		t.Errorf("docker ps --filter label=%s: %v", label, err)
		return
	}
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		if out, err := exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).CombinedOutput(); err != nil {
			t.Errorf("docker rm -f %v: %v %s", ids, err, out)
		}
	}
}

//go:embed probe.sh
var probe []byte

// WriteProbe writes probe.sh into dir (an agent's workspace):
// `bash probe.sh PATH [TOKEN [once]]` GETs $FILEPATH_API_URL$PATH from
// inside the agent's container and prints "STATUS BODY", or "refused".
func WriteProbe(t testing.TB, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "probe.sh"), probe, 0o755); err != nil {
		t.Fatal(err)
	}
}

// NoHostListener fails the test when a TCP socket of this (the host's)
// network namespace listens on port.
func NoHostListener(t testing.TB, port int) {
	t.Helper()
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// sl local_address rem_address st ...; st 0A is LISTEN
			if len(fs) > 3 && fs[3] == "0A" && strings.HasSuffix(fs[1], fmt.Sprintf(":%04X", port)) {
				t.Fatalf("%s: something listens on port %d on the host: %s", f, port, line)
			}
		}
	}
}
