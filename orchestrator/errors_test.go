package orchestrator_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
)

// TestContainersErrorCodes: containers cannot import the orchestrator, so it
// spells the codes itself; they must be the orchestrator's, and its errors
// must map like *orchestrator.Error (through wrapping) to code, field and
// message.
func TestContainersErrorCodes(t *testing.T) {
	for _, c := range []struct{ containers, orchestrator string }{
		{containers.CodeInvalid, orchestrator.EInvalid},
		{containers.CodeNotFound, orchestrator.ENotFound},
		{containers.CodeConflict, orchestrator.EConflict},
		{containers.CodeUnavailable, orchestrator.EUnavailable},
	} {
		if c.containers != c.orchestrator {
			t.Errorf("containers code %q, orchestrator code %q", c.containers, c.orchestrator)
		}
	}
	err := fmt.Errorf("spawn node n1: %w", &containers.Error{Code: containers.CodeUnavailable, Field: "image", Message: `image "x" is not on this machine`})
	if got := orchestrator.ErrorCode(err); got != orchestrator.EUnavailable {
		t.Errorf("code %q, want %q", got, orchestrator.EUnavailable)
	}
	if got := orchestrator.ErrorField(err); got != "image" {
		t.Errorf("field %q, want image", got)
	}
	if got := orchestrator.ErrorMessage(err); got != `image "x" is not on this machine` {
		t.Errorf("message %q", got)
	}
	if got := orchestrator.ErrorCode(errors.New("disk on fire")); got != orchestrator.EInternal {
		t.Errorf("plain error: code %q, want internal", got)
	}
	if got := orchestrator.ErrorMessage(errors.New("disk on fire")); got != "internal error" {
		t.Errorf("plain error: message %q leaks", got)
	}
}
