package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// EnvVendorKey names the vendor key the CLI needs (AMP_API_KEY,
// CURSOR_API_KEY). filepath sets only the name: the value is read from the
// agent API with the node's token, so it is never in the container's
// configuration (docker inspect).
const EnvVendorKey = "FILEPATH_VENDOR_KEY"

// FetchVendorKey reads the vendor key cfg's node needs from the agent API
// (GET /api/v1/vendor-key) and returns cfg.Env with name=value added for
// the CLI; cfg unchanged when the environment names no key.
func FetchVendorKey(ctx context.Context, cfg Config) ([]string, error) {
	name, ok := Lookup(cfg.Env, EnvVendorKey)
	if !ok || name == "" {
		return cfg.Env, nil
	}
	if cfg.APIURL == "" || cfg.APIKey == "" {
		return nil, fmt.Errorf("%s=%s is set but FILEPATH_API_URL or FILEPATH_API_KEY is not: the key is read from the agent API", EnvVendorKey, name)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.APIURL, "/")+"/api/v1/vendor-key", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s from the agent API: %w", name, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		json.Unmarshal(body, &e)
		if e.Error.Message == "" {
			e.Error.Message = strings.TrimSpace(string(body))
		}
		return nil, fmt.Errorf("read %s from the agent API: %s: %s", name, res.Status, e.Error.Message)
	}
	var k struct{ Name, Value string }
	if err := json.Unmarshal(body, &k); err != nil || k.Value == "" {
		return nil, fmt.Errorf("read %s from the agent API: the answer holds no key", name)
	}
	if k.Name != name {
		return nil, fmt.Errorf("read %s from the agent API: it answered %s", name, k.Name)
	}
	return append(append([]string(nil), cfg.Env...), name+"="+k.Value), nil
}
