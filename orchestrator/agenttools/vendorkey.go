package agenttools

import (
	"context"
	"net/http"

	"github.com/filepath-dev/filepath/orchestrator"
)

// VendorKey is the answer of GET /api/v1/vendor-key: the key the caller's
// agent needs on its vendor's service (Amp's, Cursor's).
type VendorKey struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// vendorKey answers a node's adapter its vendor key, read from the secret
// store at each call (a rotated key is used at the next start), so the
// value is never in the container's configuration. Audited by name only.
func (s *Server) vendorKey(_ http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
	ctx := r.Context()
	v, err := audited(s, ctx, c, "vendor_key", nil, func() (VendorKey, error) {
		if s.cfg.VendorKey == nil {
			return VendorKey{}, orchestrator.Errorf(orchestrator.ENotFound, "this server gives no vendor keys")
		}
		return s.readVendorKey(ctx, c)
	}, func(k VendorKey) any { return map[string]string{"name": k.Name} })
	return http.StatusOK, v, err
}

func (s *Server) readVendorKey(ctx context.Context, c orchestrator.Caller) (VendorKey, error) {
	name, value, err := s.cfg.VendorKey(ctx, c.SessionID, c.NodeID)
	return VendorKey{Name: name, Value: value}, err
}
