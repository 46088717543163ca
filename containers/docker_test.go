package containers

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/client"
)

// TestDockerHardening checks the defaults are visible in docker inspect.
func TestDockerHardening(t *testing.T) {
	d, session, ctx := dockerSession(t)
	ws := t.TempDir()
	id, err := d.Create(ctx, Spec{SessionID: session, NodeID: "n1", Image: testImage, WorkspaceDir: ws,
		ReadOnlyRootfs: true, Env: map[string]string{"FILEPATH_TASK": "echo hi", "FILEPATH_AGENT_ID": "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	hc := c.HostConfig
	lim := DefaultLimits()
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"cap drop all", len(hc.CapDrop) == 1 && hc.CapDrop[0] == "ALL", hc.CapDrop},
		{"no new privileges", len(hc.SecurityOpt) == 1 && strings.HasPrefix(hc.SecurityOpt[0], "no-new-privileges"), hc.SecurityOpt},
		{"pids limit", hc.PidsLimit != nil && *hc.PidsLimit == lim.PidsLimit, hc.PidsLimit},
		{"memory", hc.Memory == lim.MemoryBytes, hc.Memory},
		{"cpus", hc.NanoCPUs == lim.NanoCPUs, hc.NanoCPUs},
		{"network: its sandbox's", hc.NetworkMode.IsContainer() && hc.NetworkMode.ConnectedContainer() == c.Config.Labels[LabelNetns], hc.NetworkMode},
		{"read-only rootfs", hc.ReadonlyRootfs && hc.Tmpfs["/tmp"] != "", hc.Tmpfs},
		{"no privileged", !hc.Privileged, hc.Privileged},
		{"json-file bounded", hc.LogConfig.Type == "json-file" && hc.LogConfig.Config["max-size"] == "32m" && hc.LogConfig.Config["max-file"] == "4", hc.LogConfig},
		{"init", hc.Init != nil && *hc.Init, hc.Init},
		{"stdin open", c.Config.OpenStdin && !c.Config.StdinOnce && !c.Config.Tty, c.Config},
		{"workspace bind", len(hc.Mounts) == 1 && hc.Mounts[0].Source == ws && hc.Mounts[0].Target == "/workspace", hc.Mounts},
		{"workdir", c.Config.WorkingDir == "/workspace", c.Config.WorkingDir},
		{"labels", c.Config.Labels[LabelManaged] == "true" && c.Config.Labels[LabelSession] == session && c.Config.Labels[LabelNode] == "n1", c.Config.Labels},
		{"env", strings.HasPrefix(strings.Join(c.Config.Env, ","), "FILEPATH_AGENT_ID=n1,FILEPATH_TASK=echo hi"), c.Config.Env},
		{"no docker socket", !strings.Contains(strings.Join(hc.Binds, ","), "docker.sock"), hc.Binds},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %+v", c.name, c.got)
		}
	}

	sb, err := cli.ContainerInspect(ctx, c.Config.Labels[LabelNetns])
	if err != nil {
		t.Fatalf("the container's network sandbox: %v", err)
	}
	shc := sb.HostConfig
	for _, c := range []struct {
		name string
		ok   bool
		got  any
	}{
		{"running", sb.State.Running, sb.State},
		{"network none by default", shc.NetworkMode == "none", shc.NetworkMode},
		{"cap drop all", len(shc.CapDrop) == 1 && shc.CapDrop[0] == "ALL", shc.CapDrop},
		{"no new privileges", len(shc.SecurityOpt) == 1 && strings.HasPrefix(shc.SecurityOpt[0], "no-new-privileges"), shc.SecurityOpt},
		{"read-only rootfs", shc.ReadonlyRootfs, shc.ReadonlyRootfs},
		{"small", shc.Memory == 16<<20 && shc.PidsLimit != nil && *shc.PidsLimit == 4, shc.Resources},
		{"no mounts", len(shc.Mounts) == 0 && len(shc.Binds) == 0, shc.Mounts},
		{"not managed, labelled", sb.Config.Labels[LabelManaged] == "" && sb.Config.Labels[LabelSandbox] == "true" && sb.Config.Labels[LabelSession] == session, sb.Config.Labels},
	} {
		if !c.ok {
			t.Errorf("sandbox: %s: got %+v", c.name, c.got)
		}
	}
}

func TestDockerErrors(t *testing.T) {
	d := requireDocker(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		spec     Spec
		wantCode string
		wantMsg  string
	}{
		{name: "image missing", spec: Spec{SessionID: "s", NodeID: "n", Image: "filepath/no-such-image:latest"},
			wantCode: CodeUnavailable, wantMsg: `image "filepath/no-such-image:latest" is not on this machine: build it with docker build (make images builds the test and tutorial agents), or spawn a custom agent with an image you have`},
		{name: "image required", spec: Spec{SessionID: "s", NodeID: "n"}, wantCode: CodeInvalid, wantMsg: "image is required"},
		{name: "node required", spec: Spec{SessionID: "s", Image: testImage}, wantCode: CodeInvalid, wantMsg: "node id is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Create(ctx, tt.spec)
			if CodeOf(err) != tt.wantCode || err.Error() != tt.wantMsg {
				t.Fatalf("err = %v (%s), want %s %q", err, CodeOf(err), tt.wantCode, tt.wantMsg)
			}
		})
	}
	t.Run("engine not reachable", func(t *testing.T) {
		_, err := NewDocker(ctx, DockerConfig{Host: "unix:///nonexistent/docker.sock"})
		if CodeOf(err) != CodeUnavailable || !strings.Contains(err.Error(), "docker engine not reachable at unix:///nonexistent/docker.sock") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestDockerHasImage: the runner asks which agent images are on the
// machine, to tell the spawn dialog which agents can run.
func TestDockerHasImage(t *testing.T) {
	d := requireDocker(t)
	ctx := context.Background()
	if ok, err := d.HasImage(ctx, testImage); err != nil || !ok {
		t.Fatalf("HasImage(%s) = %v, %v", testImage, ok, err)
	}
	if ok, err := d.HasImage(ctx, "filepath/no-such-image:never"); err != nil || ok {
		t.Fatalf("HasImage(missing) = %v, %v", ok, err)
	}
}
