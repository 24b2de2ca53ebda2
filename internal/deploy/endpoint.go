package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Serving checks once that endpoint answers GET /v1/models and lists model.
// The error says what was seen instead.
func Serving(ctx context.Context, client *http.Client, endpoint, model string) error {
	url := strings.TrimRight(endpoint, "/") + "/v1/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("endpoint %q: %v", endpoint, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("GET %s: reading the answer: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("GET %s: not an OpenAI model list: %v", url, err)
	}
	ids := make([]string, len(list.Data))
	for i, m := range list.Data {
		if m.ID == model {
			return nil
		}
		ids[i] = m.ID
	}
	return fmt.Errorf("GET %s lists %v, not model %q", url, ids, model)
}

// WaitServing polls Serving every poll until it succeeds or ctx is done; the
// error then carries the last thing seen.
func WaitServing(ctx context.Context, client *http.Client, endpoint, model string, poll time.Duration) error {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	var last error
	for {
		err := Serving(ctx, client, endpoint, model)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err // keep the last answer, not the probe the deadline cut
		}
		if err := sleep(ctx, poll); err != nil {
			return fmt.Errorf("endpoint not serving (%s): %w", why(err), last)
		}
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// why words a context error for a person: a deadline is a timeout, a
// cancellation an interrupt.
func why(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return "interrupted"
}
