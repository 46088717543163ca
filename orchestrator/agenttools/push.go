package agenttools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/protocol"
)

// The approval kinds of an agent's request_push and request_pull_request.
const (
	KindPush        = "push"
	KindPullRequest = "pull_request"
)

// Shipper pushes a node's commits from the host; ship.Nodes implements it.
type Shipper interface {
	// Plan is what a push would send now (its commit pins it).
	Plan(ctx context.Context, userID, sessionID, nodeID string, req ship.NodePush) (ship.Plan, error)
	Push(ctx context.Context, userID, sessionID, nodeID string, req ship.NodePush) (ship.PushResult, error)
	OpenPullRequest(ctx context.Context, userID, sessionID, nodeID string, req ship.NodePullRequest) (ship.PullRequest, error)
}

var _ Shipper = (*ship.Nodes)(nil)

// PushRequest is request_push's input: an agent asks the person to push
// its commits.
type PushRequest struct {
	Branch    string `json:"branch,omitempty" jsonschema:"the remote branch (default filepath/<your node name>)"`
	RemoteURL string `json:"remote_url,omitempty" jsonschema:"where to push (default the session's git URL)"`
	Reason    string `json:"reason,omitempty" jsonschema:"what the commits do, for the person who approves"`
	// Credential names the secret to push with; the person approving
	// may choose another.
	Credential string `json:"credential,omitempty" jsonschema:"the name of the person's secret to push with (an SSH key or HTTPS credential), if they told you which; default: the one for the remote's host. The person approving may choose another"`
}

// Pushed is request_push's answer once the person answered: the push's
// result, or why nothing was pushed.
type Pushed struct {
	Approval collab.Approval  `json:"approval"`
	Result   *ship.PushResult `json:"result,omitempty"`
	// PullRequest is a request_pull_request's result.
	PullRequest *ship.PullRequest `json:"pull_request,omitempty"`
}

// PullRequestAsk is request_pull_request's input: an agent asks the person
// to open a pull request of its pushed branch.
type PullRequestAsk struct {
	Branch    string `json:"branch,omitempty" jsonschema:"the pushed branch (default filepath/<your node name>)"`
	Base      string `json:"base,omitempty" jsonschema:"the branch to merge into (default the repository's default branch)"`
	Title     string `json:"title" jsonschema:"the pull request's title"`
	Body      string `json:"body,omitempty" jsonschema:"its description: what changed and why, how it was tested"`
	RemoteURL string `json:"remote_url,omitempty" jsonschema:"the repository (default the session's git URL)"`
}

// RequestPullRequest asks the person to approve opening a pull request of
// the caller's pushed branch with the title and body shown.
func (s *Server) RequestPullRequest(ctx context.Context, c orchestrator.Caller, in PullRequestAsk) (collab.Approval, error) {
	if s.cfg.Ship == nil {
		return collab.Approval{}, orchestrator.Errorf(orchestrator.EUnavailable, "this server does not open pull requests")
	}
	if strings.TrimSpace(in.Title) == "" {
		return collab.Approval{}, orchestrator.FieldErrorf("title", "a pull request needs a title")
	}
	payload, err := json.Marshal(ship.NodePullRequest{RemoteURL: in.RemoteURL, Branch: in.Branch, Base: in.Base, Title: cutText(in.Title, 256), Body: cutText(in.Body, 6000)})
	if err != nil {
		return collab.Approval{}, err
	}
	branch := in.Branch
	if branch == "" {
		branch = "your branch (filepath/<node name>)"
	}
	detail := cutText(fmt.Sprintf("Open a pull request of %s.\n\nTitle: %s\n\n%s", branch, in.Title, in.Body), collab.MaxApprovalDetail)
	a, created, err := s.collab.RequestApproval(ctx, c.SessionID, c.NodeID, collab.NewApproval{
		Action: "open a pull request: " + cutText(in.Title, 200), Detail: detail, Kind: KindPullRequest, Timeout: s.cfg.ApprovalTimeout, Payload: string(payload)})
	if err == nil && created {
		s.nudge()
	}
	return a, err
}

// RequestPush asks the person supervising the session to approve a push of
// the caller's commits as they are now: the approval shows the branch, the
// remote and the commits, and pins the commit.
func (s *Server) RequestPush(ctx context.Context, c orchestrator.Caller, in PushRequest) (collab.Approval, error) {
	if s.cfg.Ship == nil {
		return collab.Approval{}, orchestrator.Errorf(orchestrator.EUnavailable, "this server does not push")
	}
	in.Credential = strings.TrimSpace(in.Credential)
	plan, err := s.cfg.Ship.Plan(ctx, c.UserID, c.SessionID, c.NodeID, ship.NodePush{RemoteURL: in.RemoteURL, Branch: in.Branch, Credential: in.Credential})
	if err != nil {
		return collab.Approval{}, err
	}
	payload, err := json.Marshal(ship.NodePush{RemoteURL: in.RemoteURL, Branch: plan.Branch, Ref: plan.Commit, Credential: in.Credential})
	if err != nil {
		return collab.Approval{}, err
	}
	detail := fmt.Sprintf("Push %s to branch %s of %s.\n", plan.Commit[:12], plan.Branch, plan.RemoteURL)
	switch {
	case in.Credential != "":
		detail += fmt.Sprintf("With the credential %s (the agent's choice; you may choose another).\n", plan.Credential)
	case plan.Credential != "":
		detail += fmt.Sprintf("With the credential %s (the one for the remote's host).\n", plan.Credential)
	default:
		detail += "No credential of yours fits this remote yet: add one in Settings before approving, or choose one.\n"
	}
	if plan.UntrustedHost != "" {
		detail += fmt.Sprintf("The SSH host %s is not trusted yet: check and trust its key in the node's Push dialog before approving, or the push fails.\n", plan.UntrustedHost)
	}
	if r := strings.TrimSpace(in.Reason); r != "" {
		detail += "\n" + cutText(r, 2000) + "\n"
	}
	detail += "\nCommits (newest first):\n" + strings.Join(plan.Commits, "\n")
	a, created, err := s.collab.RequestApproval(ctx, c.SessionID, c.NodeID, collab.NewApproval{
		Action: fmt.Sprintf("push %s to %s", plan.Commit[:7], plan.Branch), Detail: cutText(detail, collab.MaxApprovalDetail),
		Kind: KindPush, Timeout: s.cfg.ApprovalTimeout, Payload: string(payload)})
	if err == nil && created {
		s.nudge()
	}
	return a, err
}

// PushApproved waits (at most wait) for the answer to the caller's push
// request id; approved, the orchestrator pushes the commit the request
// pinned, as the session's owner, and answers the result. Pending after
// wait: the approval alone. Asking again after a push pushes again (the
// same commit: up to date).
func (s *Server) PushApproved(ctx context.Context, c orchestrator.Caller, id string, wait time.Duration) (Pushed, error) {
	a, err := s.Approval(ctx, c, id, wait)
	if err != nil {
		return Pushed{}, err
	}
	if (a.Kind != KindPush && a.Kind != KindPullRequest) || a.Payload == "" {
		return Pushed{Approval: a}, orchestrator.FieldErrorf("id", "approval %s is not a push or pull request", id)
	}
	switch a.Status {
	case protocol.ApprovalPending:
		return Pushed{Approval: a}, nil
	case protocol.ApprovalDenied:
		if a.Kind == KindPullRequest {
			return Pushed{Approval: a}, orchestrator.Errorf(orchestrator.EForbidden, "the pull request was denied (by %s): none was opened", a.AnsweredBy)
		}
		return Pushed{Approval: a}, orchestrator.Errorf(orchestrator.EForbidden, "the push was denied (by %s): nothing was pushed", a.AnsweredBy)
	}
	if a.Kind == KindPullRequest {
		var req ship.NodePullRequest
		if err := json.Unmarshal([]byte(a.Payload), &req); err != nil {
			return Pushed{Approval: a}, fmt.Errorf("approval %s: %w", id, err)
		}
		pr, err := s.cfg.Ship.OpenPullRequest(ctx, c.UserID, c.SessionID, c.NodeID, req)
		if err != nil {
			return Pushed{Approval: a}, err
		}
		return Pushed{Approval: a, PullRequest: &pr}, nil
	}
	var req ship.NodePush
	if err := json.Unmarshal([]byte(a.Payload), &req); err != nil {
		return Pushed{Approval: a}, fmt.Errorf("approval %s: %w", id, err)
	}
	res, err := s.cfg.Ship.Push(ctx, c.UserID, c.SessionID, c.NodeID, req)
	if orchestrator.ErrorField(err) == "trust_host_key" {
		// The person approved, but nobody can confirm a host key here.
		return Pushed{Approval: a}, &orchestrator.Error{Code: orchestrator.EPreconditionFailed, Field: "trust_host_key",
			Message: "nothing was pushed: the remote is an SSH host nobody has trusted yet. The person must trust it in the node's Push dialog in filepath (it shows the host's key to check); then ask to push again. The server said: " + err.Error()}
	}
	if err != nil {
		return Pushed{Approval: a}, err
	}
	return Pushed{Approval: a, Result: &res}, nil
}

func (s *Server) requestPush(ctx context.Context, c orchestrator.Caller, in PushRequest) (collab.Approval, error) {
	return audited(s, ctx, c, "request_push", map[string]string{"branch": in.Branch, "remote_url": in.RemoteURL, "credential": in.Credential},
		func() (collab.Approval, error) { return s.RequestPush(ctx, c, in) },
		func(a collab.Approval) any { return map[string]string{"id": a.ID, "status": a.Status} })
}

func (s *Server) requestPullRequest(ctx context.Context, c orchestrator.Caller, in PullRequestAsk) (collab.Approval, error) {
	return audited(s, ctx, c, "request_pull_request", map[string]string{"branch": in.Branch, "title": cutText(in.Title, auditText)},
		func() (collab.Approval, error) { return s.RequestPullRequest(ctx, c, in) },
		func(a collab.Approval) any { return map[string]string{"id": a.ID, "status": a.Status} })
}

func (s *Server) pushApproved(ctx context.Context, c orchestrator.Caller, id string, wait time.Duration) (Pushed, error) {
	return audited(s, ctx, c, "push_result", map[string]any{"id": id, "wait_seconds": wait.Seconds()},
		func() (Pushed, error) { return s.PushApproved(ctx, c, id, wait) },
		func(p Pushed) any {
			out := map[string]string{"status": p.Approval.Status}
			if p.Result != nil {
				out["commit"], out["branch"], out["push"] = p.Result.Commit, p.Result.Branch, p.Result.Status
			}
			if p.PullRequest != nil {
				out["pull_request"] = p.PullRequest.URL
			}
			return out
		})
}
