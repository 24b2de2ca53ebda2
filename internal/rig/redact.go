package rig

import (
	"bytes"
	"encoding/json"

	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/transport"
)

// redactedError is an error whose message went through the redactor; its
// chain is kept, so callers still tell a phase error or an interruption.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func redactError(red *transport.Redactor, err error) error {
	if err == nil {
		return nil
	}
	if msg := red.String(err.Error()); msg != err.Error() {
		return &redactedError{msg: msg, err: err}
	}
	return err
}

// redactSummary is sum with every secret redacted from its text: it is
// read back from its JSON through the redactor, only when that holds a
// secret.
func redactSummary(red *transport.Redactor, sum report.Summary) report.Summary {
	b, err := json.Marshal(sum)
	if err != nil {
		return sum
	}
	rb := red.Bytes(b)
	if bytes.Equal(rb, b) {
		return sum
	}
	var out report.Summary
	if json.Unmarshal(rb, &out) != nil {
		// never print what could not be cleaned: keep the error alone
		return report.Summary{Version: sum.Version, RunDir: sum.RunDir, Error: red.String(sum.Error)}
	}
	return out
}
