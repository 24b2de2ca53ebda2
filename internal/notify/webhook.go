package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Webhook posts each message as JSON to a Slack-compatible incoming webhook.
type Webhook struct {
	URL string
	// Client sends the posts; nil uses one with a 10 s timeout.
	Client *http.Client
}

// Name is the webhook's scheme and host: an incoming webhook's path is its
// secret, so it is never shown.
func (h Webhook) Name() string {
	u, err := url.Parse(h.URL)
	if err != nil || u.Host == "" {
		return "webhook"
	}
	return "webhook " + u.Scheme + "://" + u.Host
}

// Deliver posts one message.
func (h Webhook) Deliver(ctx context.Context, m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(b))
	if err != nil {
		return Permanent(transportError("webhook", err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client(h.Client).Do(req)
	if err != nil {
		return transportError("webhook", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return classify(resp, "webhook")
}

func client(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{Timeout: 10 * time.Second}
	}
	return c
}
