package containers

import (
	"context"
	"strings"
	"testing"
)

// TestStateVolumeOutlivesTheContainer: what an agent writes to its state
// volume is there for the next container of the node, until RemoveVolume;
// a spec whose image and environment name no FILEPATH_STATE_DIR gets none.
func TestStateVolumeOutlivesTheContainer(t *testing.T) {
	ctx := context.Background()
	for _, h := range shellRuntimes(t) {
		t.Run(h.name, func(t *testing.T) {
			vol := "filepath-test-state-" + newID()
			t.Cleanup(func() { h.rt.RemoveVolume(context.Background(), vol) })
			run := func() string {
				t.Helper()
				spec := h.spec(t.TempDir(), `cat "$FILEPATH_STATE_DIR/runs" 2>/dev/null; echo run >> "$FILEPATH_STATE_DIR/runs"`)
				spec.StateVolume = vol
				spec.Env = map[string]string{EnvStateDir: "/home/agent/.state"}
				res, err := Run(ctx, h.rt, spec, RunOptions{})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("run: %v, %+v", err, res)
				}
				return strings.TrimSpace(res.Output)
			}
			if got := run(); got != "" {
				t.Fatalf("a new volume holds %q", got)
			}
			if got := run(); got != "run" {
				t.Fatalf("the second container reads %q, want what the first wrote", got)
			}
			if got := run(); got != "run\nrun" {
				t.Fatalf("the third container reads %q", got)
			}
			if err := h.rt.RemoveVolume(ctx, vol); err != nil {
				t.Fatal(err)
			}
			if err := h.rt.RemoveVolume(ctx, vol); err != nil {
				t.Fatalf("removing a removed volume: %v", err)
			}
			if got := run(); got != "" {
				t.Fatalf("after RemoveVolume the volume holds %q", got)
			}
		})
	}
}

func TestStateVolumeNeedsAStateDir(t *testing.T) {
	d := dockerRuntime(t)
	if d == nil {
		return
	}
	ctx := context.Background()
	vol := "filepath-test-state-" + newID()
	t.Cleanup(func() { d.RemoveVolume(context.Background(), vol) })
	spec := Spec{SessionID: "test-vol-" + newID(), NodeID: "n", Image: shellImage, Entrypoint: []string{"true"}, Network: "none", StateVolume: vol}
	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove(ctx, id)
	if _, err := d.cli.VolumeInspect(ctx, vol); err == nil {
		t.Error("an image without FILEPATH_STATE_DIR got a state volume")
	}
	spec.StateVolume = "../x"
	if _, err := d.Create(ctx, spec); FieldOf(err) != "state_volume" {
		t.Errorf("a bad volume name: %v", err)
	}
}

func TestStateDirFromSpecThenImage(t *testing.T) {
	for _, tt := range []struct {
		name  string
		env   map[string]string
		image []string
		want  string
	}{
		{"image", nil, []string{"PATH=/bin", "FILEPATH_STATE_DIR=/home/agent/.state"}, "/home/agent/.state"},
		{"spec wins", map[string]string{"FILEPATH_STATE_DIR": "/s"}, []string{"FILEPATH_STATE_DIR=/home/agent/.state"}, "/s"},
		{"none", map[string]string{"FILEPATH_TASK": "x"}, []string{"FILEPATH_STATE_DIRX=/y"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := stateDir(tt.env, tt.image); got != tt.want {
				t.Errorf("stateDir = %q, want %q", got, tt.want)
			}
		})
	}
}
