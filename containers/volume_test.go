package containers

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/volume"
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
	d := requireDocker(t)
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

// TestListVolumesAndVolumeInUse: a state volume carries the labels of the
// spec that made it (the instance's too) and ListVolumes finds it by them; a
// volume made otherwise, without labels, is never listed; removing a volume
// a container (even an exited one) uses is CodeConflict and keeps it.
func TestListVolumesAndVolumeInUse(t *testing.T) {
	ctx := context.Background()
	for _, h := range shellRuntimes(t) {
		t.Run(h.name, func(t *testing.T) {
			tag := newID()
			vol := "filepath-test-state-" + tag
			t.Cleanup(func() { h.rt.RemoveVolume(context.Background(), vol) })
			spec := h.spec(t.TempDir(), `echo hi > "$FILEPATH_STATE_DIR/x"`)
			spec.StateVolume = vol
			spec.Env = map[string]string{EnvStateDir: "/home/agent/.state"}
			spec.Labels = map[string]string{"filepath.test": tag}
			id, err := h.rt.Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.rt.Remove(context.Background(), id) })
			if err := h.rt.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
			if code, err := h.rt.Wait(ctx, id); err != nil || code != 0 {
				t.Fatalf("wait: %d, %v", code, err)
			}
			vols, err := h.rt.ListVolumes(ctx, map[string]string{"filepath.test": tag})
			if err != nil {
				t.Fatal(err)
			}
			if len(vols) != 1 || vols[0].Name != vol || vols[0].NodeID != spec.NodeID || vols[0].SessionID != spec.SessionID ||
				vols[0].Labels[LabelManaged] != "true" {
				t.Fatalf("ListVolumes = %+v, want %s of node %s", vols, vol, spec.NodeID)
			}
			if d, ok := h.rt.(*Docker); ok && vols[0].Labels[LabelInstance] != d.cfg.Instance {
				t.Errorf("the volume's instance label is %q, want %q", vols[0].Labels[LabelInstance], d.cfg.Instance)
			}
			if vols, err := h.rt.ListVolumes(ctx, map[string]string{"filepath.test": "other-" + tag}); err != nil || len(vols) != 0 {
				t.Fatalf("ListVolumes of another label = %+v, %v", vols, err)
			}

			err = h.rt.RemoveVolume(ctx, vol)
			if CodeOf(err) != CodeConflict {
				t.Fatalf("removing a volume an exited container uses: %v, want a conflict", err)
			}
			if vols, _ := h.rt.ListVolumes(ctx, map[string]string{"filepath.test": tag}); len(vols) != 1 {
				t.Fatalf("the refused removal took the volume: %+v", vols)
			}
			if err := h.rt.Remove(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := h.rt.RemoveVolume(ctx, vol); err != nil {
				t.Fatal(err)
			}
			if vols, err := h.rt.ListVolumes(ctx, map[string]string{"filepath.test": tag}); err != nil || len(vols) != 0 {
				t.Fatalf("after RemoveVolume ListVolumes = %+v, %v", vols, err)
			}

			// A volume without labels is not one this runtime lists.
			bare := "filepath-test-state-bare-" + tag
			switch rt := h.rt.(type) {
			case *Docker:
				if _, err := rt.cli.VolumeCreate(ctx, volume.CreateOptions{Name: bare}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rt.RemoveVolume(context.Background(), bare) })
			case *Process:
				if err := os.MkdirAll(rt.volumeDir(bare), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			all, err := h.rt.ListVolumes(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range all {
				if v.Name == bare {
					t.Fatalf("ListVolumes lists %s, which has no labels", bare)
				}
				if v.Labels[LabelManaged] != "true" {
					t.Fatalf("ListVolumes lists %+v, not a managed volume", v)
				}
			}
		})
	}
}

// TestListVolumesOfOneInstance: a Docker runtime with an Instance lists only
// the volumes of that instance, so two orchestrators on one engine never see
// each other's.
func TestListVolumesOfOneInstance(t *testing.T) {
	d := requireDocker(t)
	ctx := context.Background()
	other, err := NewDocker(ctx, DockerConfig{Instance: "containers-test-other-" + newID()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tag := newID()
	vol := "filepath-test-state-" + tag
	t.Cleanup(func() { other.RemoveVolume(context.Background(), vol) })
	spec := Spec{SessionID: "test-vol-" + tag, NodeID: "n", Image: shellImage, Entrypoint: []string{"true"}, Network: "none",
		StateVolume: vol, Env: map[string]string{EnvStateDir: "/s"}, Labels: map[string]string{"filepath.test": tag}}
	id, err := other.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if vols, err := other.ListVolumes(ctx, map[string]string{"filepath.test": tag}); err != nil || len(vols) != 1 {
		t.Fatalf("its own instance lists %+v, %v", vols, err)
	}
	if vols, err := d.ListVolumes(ctx, map[string]string{"filepath.test": tag}); err != nil || len(vols) != 0 {
		t.Fatalf("another instance lists %+v, %v", vols, err)
	}
}
